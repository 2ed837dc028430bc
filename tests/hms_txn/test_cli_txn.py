"""`hms-txn show-transactions`, `show-locks` and `abort-txns` against a running server."""

from __future__ import annotations

import json
import subprocess
import sys

from hms_txn.cli import main
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T


def run(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_cli_txn_commands(hms, client, capsys):
    t1, t2, t3 = client.open_txns(T.OpenTxnRequest(num_txns=3, user="carol", hostname="hostc",
                                                   agentInfo="etl-job")).txn_ids
    client.abort_txn(T.AbortTxnRequest(txnid=t2))
    client.lock(T.LockRequest(component=[T.LockComponent(
        type=3, level=2, dbname="sales", tablename="orders")], txnid=t1, user="carol",
        hostname="hostc"))
    client.lock(T.LockRequest(component=[T.LockComponent(
        type=1, level=3, dbname="sales", tablename="orders", partitionname="d=1")],
        user="dave", hostname="hostd"))
    client.lock(T.LockRequest(component=[T.LockComponent(type=1, level=1, dbname="hr")],
                              user="erin", hostname="hoste"))
    uri = hms.uri

    out = run(capsys, "show-transactions", "--uri", uri)
    lines = out.splitlines()
    assert lines[0].split() == ["TXNID", "STATE", "STARTED", "LAST", "HEARTBEAT", "USER",
                                "HOST", "AGENT"]
    body = [l.split() for l in lines[2:] if l.strip() and not l.startswith("3 transaction")]
    assert [(r[0], r[1]) for r in body] == [(str(t1), "OPEN"), (str(t2), "ABORTED"),
                                            (str(t3), "OPEN")]
    assert "carol" in out and "etl-job" in out and "high water mark 3" in out

    data = json.loads(run(capsys, "show-transactions", "--uri", uri, "--json"))
    assert data["txn_high_water_mark"] == 3
    assert [(t["txnid"], t["state"], t["user"], t["hostname"]) for t in data["transactions"]] \
        == [(t1, "OPEN", "carol", "hostc"), (t2, "ABORTED", "carol", "hostc"),
            (t3, "OPEN", "carol", "hostc")]

    out = run(capsys, "show-locks", "--uri", uri)
    assert "EXCLUSIVE" in out and "SHARED_READ" in out and "3 lock(s)" in out
    data = json.loads(run(capsys, "show-locks", "sales.orders", "--uri", uri, "--json"))
    assert sorted((l["lockid"], l["state"], l["type"], l["partname"]) for l in data["locks"]) \
        == [(1, "ACQUIRED", "EXCLUSIVE", None), (2, "WAITING", "SHARED_READ", "d=1")]
    assert data["locks"][1]["blockedByExtId"] == 1
    data = json.loads(run(capsys, "show-locks", "hr", "--uri", uri, "--json"))
    assert [(l["dbname"], l["user"]) for l in data["locks"]] == [("hr", "erin")]

    # an id not aborted: exit 1 (tests/hms_txn/test_cli_edges.py has each case)
    assert main(["abort-txns", str(t1), str(t2), "99", "--uri", uri, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["results"] == [
        {"txnid": t1, "result": "aborted"}, {"txnid": t2, "result": "already aborted"},
        {"txnid": 99, "result": "unknown", "reason": "No such transaction txnid:99"}]
    # the aborted transaction's lock is released
    data = json.loads(run(capsys, "show-locks", "--uri", uri, "--json"))
    assert all(l["txnid"] != t1 for l in data["locks"])

    # the installed entry point, as a user runs it
    proc = subprocess.run([sys.executable, "-m", "hms_txn.cli", "abort-txns", str(t3),
                           "--uri", uri], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["TXNID", "RESULT"]
    assert lines[2].split() == [str(t3), "aborted"]


def test_cli_unreachable_server(capsys):
    proc = subprocess.run([sys.executable, "-m", "hms_txn.cli", "show-locks", "--uri",
                           "thrift://127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "cannot connect to thrift://127.0.0.1:1" in proc.stderr
