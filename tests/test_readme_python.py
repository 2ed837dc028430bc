"""The README's "Python without Spark" examples, run exactly as written (only the metastore's
address is this test's server) in one interpreter namespace, in order."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tempfile
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Python without Spark"
ADDRESS = "thrift://127.0.0.1:9083"


def python_blocks() -> list[str]:
    text = README.read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", len(SECTION))]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_python_examples_run_as_written():
    from tests.support.servers import InProcessServer
    blocks = python_blocks()
    assert len(blocks) == 5 and all(ADDRESS not in b for b in blocks[1:])
    assert "to_pandas()" in blocks[2] and "duckdb.sql" in blocks[3] and "ms.stream" in blocks[4]
    root = tempfile.mkdtemp(prefix="readme-python-")
    server = InProcessServer(os.path.join(root, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{root}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(root, "warehouse")})
    try:
        namespace: dict = {}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for block in blocks:
                exec(compile(block.replace(ADDRESS, server.uri), "README.md", "exec"),
                     namespace)
        printed = out.getvalue().splitlines()
        assert printed == [
            "[{'id': 1, 'qty': 5}, {'id': 2, 'qty': 8}]",
            "[('2024-05-01', 13), ('2024-05-02', 1)]",
            "3",
        ]
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
