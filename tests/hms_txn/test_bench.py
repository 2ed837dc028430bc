"""`hms-txn bench --quick` runs end to end and writes sane results (not a timed assertion)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from hms_bench import results, runner
from hms_bench.cli import WORKLOAD_NAMES
from hms_bench.workload_set import ALL


def test_cli_lists_every_workload():
    assert set(WORKLOAD_NAMES) == set(ALL)


def test_quick_bench_writes_json_and_png(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, "-m", "hms_txn.cli", "bench", "--quick", "--no-java", "--backends", "sqlite",
         "--workloads", "open_commit,get_table", "--out", str(out),
         "--hiveconf", "hms_txn.connection.idle.timeout=600s"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["machine"]["nproc"] >= 1
    # the results name the code that produced them (this suite runs from a git checkout)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=os.path.dirname(runner.__file__))
    assert results["code"]["version"]
    if head.returncode == 0:
        assert results["code"]["git_commit"] == head.stdout.strip()
        assert isinstance(results["code"]["dirty"], bool)
    assert results["server_conf"] == {"hms_txn.connection.idle.timeout": "600s"}
    cells = results["cells"]
    seen = {(c["workload"], c["server"], c["clients"]) for c in cells}
    assert ("open_commit", "hms-sqlite", 1) in seen
    assert ("get_table", "hms-sqlite", 1) in seen
    assert ("get_table", "hms-sqlite-nocache", 1) in seen
    for c in cells:
        assert not c.get("error"), c
        assert c["errors"] == 0, c
        assert c["ops"] > 0 and c["ops_per_s"] > 0, c
        assert 0 < c["p50_ms"] <= c["p99_ms"] <= c["max_ms"], c
        assert not math.isnan(c["mean_ms"])
        assert c["server_rss_mb"] > 0
    # the table printed at the end carries every cell
    assert "open_commit" in proc.stdout and "hms-sqlite-nocache" in proc.stdout
    png = (out / "bench.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_rejects_unknown_workload(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "hms_txn.cli", "bench", "--quick", "--no-java", "--workloads", "nope",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown workload" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "hms_txn.cli", "bench", "--quick", "--no-java", "--hiveconf", "novalue",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "KEY=VALUE" in proc.stderr


def test_ratios_and_targets_from_cells():
    def cell(workload, server, clients, ops, p50):
        return {"workload": workload, "server": server, "clients": clients, "ops_per_s": ops,
                "p50_ms": p50, "p99_ms": p50 * 2}
    cells = [cell("open_commit", "java-derby", 1, 60, 16.0), cell("open_commit", "hms-sqlite", 1, 1500, 0.6),
             cell("get_table", "java-derby", 1, 1000, 1.0), cell("get_table", "hms-sqlite", 1, 6000, 0.1),
             cell("get_table", "hms-sqlite-nocache", 1, 1500, 0.5)]
    results.ratios(cells)
    assert cells[1]["vs_java"]["throughput"] == pytest.approx(25.0)
    targets = {(t["target"], t["server"]): t for t in results.evaluate_targets(cells, [], 120.0)}
    assert targets[("open_commit throughput x Java, 1 client(s)", "hms-sqlite")]["met"]
    assert targets[("get_table cached p50 x Java, 1 client", "hms-sqlite")]["measured"] == pytest.approx(10.0)
    assert targets[("get_table cached p50 x our uncached (issue 4)", "hms-sqlite")]["met"]
    assert targets[("server RSS < 300 MB, whole run (info)", "hms-*")]["met"]


def test_chart_of_a_run_without_one_client_cells(tmp_path):
    """`--clients 16` alone: the 1-client latency panel says it is empty instead of the
    whole chart failing."""
    cell = {"workload": "open_commit", "server": "hms-sqlite", "clients": 16, "p50_ms": 5.0,
            "p99_ms": 12.0, "ops_per_s": 2500.0}
    path = tmp_path / "bench.png"
    results.chart({"cells": [cell], "scale": []}, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_object_store_io_counts_requests_of_a_scan_and_a_compaction():
    """hms_bench.object_store_io on a small table: local vs S3 (moto) in one run; a scan
    lists the table once and reads each selected file with one HEAD and one GET."""
    from hms_bench import object_store_io
    r = object_store_io.run(20_000)
    assert r["local"]["scan_rows"] == r["s3"]["scan_rows"] > 20_000
    scan = r["s3"]["scan_requests"]
    assert scan["LIST"] == 1 and scan.get("PUT", 0) == 0 and scan.get("DELETE", 0) == 0
    assert scan["GET"] <= scan["HEAD"] + 1
    comp = r["s3"]["major_compaction_requests"]
    assert comp["PUT"] >= object_store_io.BUCKETS and comp.get("POST", 0) == 0
    assert r["s3_vs_local"]["scan"] > 0
