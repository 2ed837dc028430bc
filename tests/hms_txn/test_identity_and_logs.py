"""Who a transaction belongs to when clients authenticate, and the structured log records
of transaction calls (issue 9)."""

from __future__ import annotations

import io
import json
import logging
import os
import time

import pytest

from hms_txn.common import logs
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_security import SASL_CONF, sasl_client
from tests.support.servers import ServerProcess


def _open(client, claimed_user: str) -> int:
    return client.open_txns(t.OpenTxnRequest(num_txns=1, user=claimed_user,
                                             hostname="h")).txn_ids[0]


def _table_lock(txnid: int | None, claimed_user: str, table: str = "tbl") -> t.LockRequest:
    return t.LockRequest(component=[t.LockComponent(
        type=t.LockType.SHARED_READ, level=t.LockLevel.TABLE, dbname="default",
        tablename=table, operationType=t.DataOperationType.SELECT)],
        txnid=txnid, user=claimed_user, hostname="h")


def test_authenticated_user_is_recorded_not_the_claimed_one(hms_factory):
    hms = hms_factory(SASL_CONF)
    client = sasl_client(hms.port, "alice", "s3cret")
    try:
        client.create_table(make_table("default", "tbl"))
        txn = _open(client, "mallory")
        infos = {i.id: i for i in client.get_open_txns_info().open_txns}
        assert infos[txn].user == "alice"
        in_txn = client.lock(_table_lock(txn, "mallory"))
        txnless = client.lock(_table_lock(None, "mallory"))
        shown = {lk.lockid: lk for lk in client.show_locks(t.ShowLocksRequest()).locks}
        assert shown[in_txn.lockid].user == "alice"
        assert shown[txnless.lockid].user == "alice"
        client.unlock(t.UnlockRequest(lockid=txnless.lockid))
        client.commit_txn(t.CommitTxnRequest(txnid=txn))
    finally:
        client.close()


def test_without_sasl_the_client_claimed_user_is_recorded(client):
    client.create_table(make_table("default", "tbl"))
    txn = _open(client, "carol")
    assert {i.id: i.user for i in client.get_open_txns_info().open_txns}[txn] == "carol"
    lock = client.lock(_table_lock(txn, "carol"))
    assert [lk.user for lk in client.show_locks(t.ShowLocksRequest()).locks
            if lk.lockid == lock.lockid] == ["carol"]
    client.abort_txn(t.AbortTxnRequest(txnid=txn))


@pytest.fixture
def json_log():
    """Root logger → JSON lines in a buffer, as ``hms-txn --log-format json`` configures it."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logs.JsonFormatter())
    handler.addFilter(logs.ContextFilter())
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(previous)


def test_every_txn_call_logs_a_record_with_its_ids(hms_factory, json_log):
    hms = hms_factory(SASL_CONF)
    client = sasl_client(hms.port, "alice", "s3cret")
    try:
        client.create_table(make_table("default", "tbl"))
        txn = _open(client, "mallory")
        lock = client.lock(_table_lock(txn, "mallory"))
        client.check_lock(t.CheckLockRequest(lockid=lock.lockid, txnid=txn))
        client.heartbeat(t.HeartbeatRequest(txnid=txn))
        # A domain-level record emitted inside the call carries the call's txn id too.
        client.commit_txn(t.CommitTxnRequest(txnid=txn, replLastIdInfo=t.ReplLastIdInfo(
            database="default", lastReplId=1)))
        other = _open(client, "alice")
        with pytest.raises(t.NoSuchTxnException):
            client.commit_txn(t.CommitTxnRequest(txnid=other + 1000))
        client.abort_txns(t.AbortTxnsRequest(txn_ids=[other]))
    finally:
        client.close()

    records = [r for r in json_log() if r.get("method")]
    calls = [(r["method"], r.get("txnid"), r.get("lockid"), r["user"], r["msg"].split(" ")[1])
             for r in records if r["logger"] == "hms_txn.txn_calls"]
    assert calls == [
        ("open_txns", txn, None, "alice", "ok"),
        ("lock", txn, lock.lockid, "alice", "ok"),
        ("check_lock", txn, lock.lockid, "alice", "ok"),
        ("heartbeat", txn, None, "alice", "ok"),
        ("commit_txn", txn, None, "alice", "ok"),
        ("open_txns", other, None, "alice", "ok"),
        ("commit_txn", other + 1000, None, "alice", "NoSuchTxnException:"),
        ("abort_txns", [other], None, "alice", "ok"),
    ]
    repl = [r for r in records if "replLastIdInfo" in r["msg"]]
    assert repl and repl[0]["txnid"] == txn and repl[0]["method"] == "commit_txn"
    assert all(r["level"] in ("INFO", "DEBUG", "WARNING") and r["ts"].endswith("Z")
               for r in records)


def test_text_format_appends_the_context():
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logs.TextFormatter())
    handler.addFilter(logs.ContextFilter())
    logger = logging.getLogger("hms_txn.test_text_format")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with logs.bound(method="abort_txns", txnid=[4, 5]):
            logger.warning("aborting")
        logger.warning("outside")
    finally:
        logger.removeHandler(handler)
    first, second = buffer.getvalue().splitlines()
    assert first.endswith("aborting [method=abort_txns txnid=4,5]")
    assert second.endswith("outside")


def test_serve_writes_json_logs_when_configured(tmp_path):
    server = ServerProcess(str(tmp_path), {"hms_txn.log.format": "json"})
    try:
        client = server.client()
        txn = _open(client, "dave")
        client.commit_txn(t.CommitTxnRequest(txnid=txn))
        client.close()
    finally:
        server.stop()
    deadline = time.monotonic() + 30
    while True:
        with open(server.log_path) as f:
            lines = [json.loads(line) for line in f if line.startswith("{")]
        commits = [r for r in lines if r.get("method") == "commit_txn"]
        if commits or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert commits and commits[0]["txnid"] == txn and commits[0]["level"] == "INFO"
    assert os.path.getsize(server.log_path) > 0
