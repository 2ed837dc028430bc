"""The README's example pipeline (examples/pipeline.py) runs end to end."""

from __future__ import annotations

import importlib.util
import os

import pytest

pytestmark = [pytest.mark.spark]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_example():
    path = os.path.join(REPO, "examples", "pipeline.py")
    spec = importlib.util.spec_from_file_location("hive_acid_example_pipeline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_pipeline(acid_spark):
    pipeline = _load_example()
    summary = pipeline.run(acid_spark, db="pipeline_test", hours=2, seed=3)
    assert summary["orders"] > 0 and len(summary["erased"]) == 3
    assert summary["report"]


def test_readme_documents_the_pipeline():
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    assert "examples/pipeline.py" in readme
