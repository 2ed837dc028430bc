"""docs/architecture.md's diagram is the one scripts/architecture_diagram.py draws from the
code and the import contracts now: after an import between layers or packages appears or
goes, run ``python scripts/architecture_diagram.py`` and commit the page."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "architecture_diagram.py"


def _script():
    spec = importlib.util.spec_from_file_location("architecture_diagram", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_diagram_is_what_the_script_draws_now():
    script = _script()
    assert script.committed() == script.render(), (
        "docs/architecture.md's diagram is out of date: run "
        "`python scripts/architecture_diagram.py` and commit docs/architecture.md")


def test_every_layer_of_the_contract_is_a_node():
    script = _script()
    layers, others, _ = script.nodes_and_rules(script.config())
    diagram = script.render()
    for node in layers + others:
        assert f'{node.replace(".", "_")}["' in diagram
