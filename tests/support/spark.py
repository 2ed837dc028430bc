"""Run ``tests/spark/spark_sql_scenario.py`` in its own interpreter and read its results.

Each run is one fresh local Spark session (a JVM), so a test pays Spark's start-up once
per run. ``run_scenario`` optionally pauses the script between its two phases and calls
``on_pause`` there (the test restarts the metastore in that window).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from typing import Any, Callable

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(__file__)), "spark", "spark_sql_scenario.py")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ScenarioFailed(AssertionError):
    pass


def _tail(path: str, lines: int = 60) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def run_scenario(uri: str, workdir: str, *, on_pause: Callable[[], None] | None = None,
                 timeout: float = 300.0, extra_logs: tuple[str, ...] = (),
                 script: str = SCENARIO) -> list[dict[str, Any]]:
    """Run the scenario against ``uri``; Spark's warehouse is ``workdir/spark-wh``.
    ``script`` is another script taking the same arguments (``URI WAREHOUSE OUT_JSON``).

    Returns the statements' results (see the script's docstring). On failure raises
    ``ScenarioFailed`` with the tail of Spark's log and of ``extra_logs``.
    """
    os.makedirs(workdir, exist_ok=True)
    warehouse = os.path.join(workdir, "spark-wh")
    out_json = os.path.join(workdir, "results.json")
    log_path = os.path.join(workdir, "spark.log")
    argv = [sys.executable, script, uri, warehouse, out_json]
    if on_pause is not None:
        argv.append("--pause")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p))
    deadline = time.monotonic() + timeout

    def fail(why: str) -> ScenarioFailed:
        logs = "".join(f"\n--- {p} (tail)\n{_tail(p)}" for p in (log_path, *extra_logs))
        return ScenarioFailed(f"Spark scenario against {uri}: {why}{logs}")

    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                cwd=workdir, env=env)
        try:
            buffer = b""
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise fail(f"no result within {timeout:.0f} s")
                ready, _, _ = select.select([proc.stdout], [], [], min(remaining, 5.0))
                if not ready:
                    continue
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip() == b"PAUSED":
                        if on_pause is None:
                            raise fail("paused without --pause")
                        on_pause()
                        proc.stdin.write(b"go\n")
                        proc.stdin.flush()
            code = proc.wait(max(1.0, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    if code != 0:
        raise fail(f"the script exited with {code}")
    with open(out_json) as f:
        return json.load(f)


# --------------------------------------------------------------------------- normalising

_DDL_TIME = re.compile(r"(transient_lastDdlTime[=,]\s*'?)\d+")


def normalize(results: list[dict[str, Any]], workdir: str) -> list[dict[str, Any]]:
    """What may legitimately differ between two metastores, replaced by placeholders.

    Only three things: paths (each run has its own warehouse directory, so locations
    differ by their prefix), ``transient_lastDdlTime`` values and "Created Time" (wall
    clock). Everything else (names, types, properties, partitions, statistics, rows) must
    be identical.
    """
    prefixes = sorted({os.path.abspath(workdir), os.path.realpath(workdir)}, key=len, reverse=True)

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for prefix in prefixes:
                value = value.replace(prefix, "<WORKDIR>")
            return _DDL_TIME.sub(r"\1<TIME>", value)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    out = []
    for item in results:
        rows = []
        for row in item["rows"]:
            row = scrub(row)
            if row and row[0] == "transient_lastDdlTime":
                row = [row[0], "<TIME>", *row[2:]]
            if row and row[0] == "Created Time" and len(row) > 1:
                row = [row[0], "<TIME>", *row[2:]]
            rows.append(row)
        out.append({**item, "rows": rows})
    return out


def rows_of(results: list[dict[str, Any]], phase: str, sql_prefix: str) -> list[list[Any]]:
    """Rows of the first statement of ``phase`` that starts with ``sql_prefix``."""
    for item in results:
        if item["phase"] == phase and item["sql"].startswith(sql_prefix):
            return item["rows"]
    raise KeyError(f"no statement of phase {phase} starts with {sql_prefix!r}")
