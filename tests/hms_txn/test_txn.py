"""Transactions over a real Thrift client, on SQLite and PostgreSQL.

open/commit/abort with Hive's exceptions and idempotency, snapshots (get_open_txns*),
heartbeats, the open-transaction limit with its 90% hysteresis, READ_ONLY transactions,
write-write conflict detection, and the notification events each change writes.
"""

from __future__ import annotations

import json

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.domain.events import notifications
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table

# LockType / LockLevel / DataOperationType / TxnState numbers
SR, SW, EX, XW = 1, 2, 3, 4
DB, TABLE, PART = 1, 2, 3
SELECT, INSERT, UPDATE, DELETE = 1, 2, 3, 4
COMMITTED, ABORTED, OPEN = 1, 2, 3
ACQUIRED, WAITING = 1, 2


def open_txns(client, n=1, **kw):
    rq = T.OpenTxnRequest(num_txns=n, user=kw.pop("user", "alice"),
                          hostname=kw.pop("hostname", "host1"), **kw)
    return client.open_txns(rq).txn_ids


def lock(client, txn, *comps, user="alice"):
    return client.lock(T.LockRequest(component=list(comps), txnid=txn, user=user,
                                     hostname="host1"))


def comp(ltype, db="default", table=None, part=None, op=None, **kw):
    level = PART if part else TABLE if table else DB
    c = T.LockComponent(type=ltype, level=level, dbname=db, tablename=table,
                        partitionname=part, **kw)
    if op is not None:
        c.operationType = op
    return c


def events(hms, after=0, types=None):
    with hms.ms.store.read() as conn:
        evs = notifications.next_events(conn, after)
    return [(e.event_type, json.loads(e.message), e) for e in evs
            if types is None or e.event_type in types]


def last_event_id(hms):
    with hms.ms.store.read() as conn:
        return notifications.current_event_id(conn)


def bits(aborted_bits: bytes, n: int) -> list[bool]:
    return [bool(aborted_bits[i // 8] >> (i % 8) & 1) if i // 8 < len(aborted_bits) else False
            for i in range(n)]


def test_open_commit_abort_and_exceptions(hms, client):
    ids = open_txns(client, 3, agentInfo="agent-x")
    assert ids == [1, 2, 3]
    assert open_txns(client) == [4]

    info = {t.id: t for t in client.get_open_txns_info().open_txns}
    assert set(info) == {1, 2, 3, 4}
    assert (info[1].user, info[1].hostname, info[1].agentInfo) == ("alice", "host1", "agent-x")
    assert info[1].state == OPEN and info[4].agentInfo == "Unknown"

    client.commit_txn(T.CommitTxnRequest(txnid=1))
    client.commit_txn(T.CommitTxnRequest(txnid=1))          # idempotent
    client.abort_txn(T.AbortTxnRequest(txnid=2))
    client.abort_txn(T.AbortTxnRequest(txnid=2))            # idempotent

    with pytest.raises(T.TxnAbortedException) as e:
        client.commit_txn(T.CommitTxnRequest(txnid=2))
    assert e.value.message == "Transaction txnid:2 already aborted"
    with pytest.raises(T.NoSuchTxnException) as e:
        client.commit_txn(T.CommitTxnRequest(txnid=99))
    assert e.value.message == "No such transaction txnid:99"
    with pytest.raises(T.NoSuchTxnException) as e:
        client.abort_txn(T.AbortTxnRequest(txnid=1))
    assert e.value.message == "Transaction txnid:1 is already committed."
    with pytest.raises(T.NoSuchTxnException) as e:
        client.abort_txn(T.AbortTxnRequest(txnid=77))
    assert e.value.message == "No such transaction txnid:77"

    # abort_txns is best effort: committed/unknown ids are skipped silently
    client.abort_txns(T.AbortTxnsRequest(txn_ids=[1, 3, 55]))
    info = {t.id: t.state for t in client.get_open_txns_info().open_txns}
    assert info == {2: ABORTED, 3: ABORTED, 4: OPEN}

    with pytest.raises(TApplicationException, match="Invalid input for number of txns: 0"):
        open_txns(client, 0)


def test_open_batch_cap_and_max_open_hysteresis(hms_factory):
    hms = hms_factory({"hive.txn.max.open.batch": "5", "hive.max.open.txns": "10"})
    client = hms.client()
    assert len(open_txns(client, 8)) == 5                   # capped at the batch size
    assert len(open_txns(client, 5)) == 5                   # now 10 open
    with pytest.raises(TApplicationException) as e:
        open_txns(client)
    assert ("Maximum allowed number of open transactions (10) has been reached. "
            "Current number of open transactions: 10") in e.value.message
    client.abort_txn(T.AbortTxnRequest(txnid=1))            # 9 open: not below 90% of 10
    with pytest.raises(TApplicationException, match="Maximum allowed number"):
        open_txns(client)
    client.commit_txn(T.CommitTxnRequest(txnid=2))          # 8 open: below 9, accepted again
    assert open_txns(client) == [11]                        # 9 open, flag cleared: still ok
    assert open_txns(client) == [12]                        # 10 open
    with pytest.raises(TApplicationException):
        open_txns(client)
    client.close()


def test_get_open_txns_snapshot(client):
    assert client.get_open_txns() == T.GetOpenTxnsResponse(
        txn_high_water_mark=0, open_txns=[], min_open_txn=None, abortedBits=b"")
    open_txns(client, 12)
    for t in (1, 3, 12):
        client.commit_txn(T.CommitTxnRequest(txnid=t))
    for t in (2, 4, 11):
        client.abort_txn(T.AbortTxnRequest(txnid=t))
    r = client.get_open_txns()
    assert r.txn_high_water_mark == 12
    assert r.open_txns == [2, 4, 5, 6, 7, 8, 9, 10, 11]
    assert r.min_open_txn == 5
    assert bits(r.abortedBits, len(r.open_txns)) == [True, True] + [False] * 6 + [True]
    assert r.abortedBits == bytes([0b00000011, 0b00000001])

    # READ_ONLY transactions are left out of snapshots by default (4.x), and the request
    # variant excludes what it is told to
    ro = open_txns(client, 1, txn_type=2)[0]
    assert ro not in client.get_open_txns().open_txns
    assert ro in client.get_open_txns_req(T.GetOpenTxnsRequest(excludeTxnTypes=[])).open_txns
    assert ro not in client.get_open_txns_req(
        T.GetOpenTxnsRequest(excludeTxnTypes=[2])).open_txns
    assert client.get_open_txns().txn_high_water_mark == ro


def test_heartbeats(client):
    t1, t2, t3 = open_txns(client, 3)
    before = {t.id: t for t in client.get_open_txns_info().open_txns}[t1]
    client.heartbeat(T.HeartbeatRequest(txnid=t1))
    after = {t.id: t for t in client.get_open_txns_info().open_txns}[t1]
    assert after.heartbeatCount == before.heartbeatCount + 1
    assert after.lastHeartbeatTime >= before.lastHeartbeatTime

    client.abort_txn(T.AbortTxnRequest(txnid=t2))
    client.commit_txn(T.CommitTxnRequest(txnid=t3))
    with pytest.raises(T.TxnAbortedException, match="txnid:2 already aborted"):
        client.heartbeat(T.HeartbeatRequest(txnid=t2))
    with pytest.raises(T.NoSuchTxnException, match="txnid:3 is already committed"):
        client.heartbeat(T.HeartbeatRequest(txnid=t3))
    with pytest.raises(T.NoSuchTxnException, match="No such transaction txnid:40"):
        client.heartbeat(T.HeartbeatRequest(txnid=40))

    # txn-less lock heartbeat
    lk = lock(client, None, comp(SR, table="t"))
    client.heartbeat(T.HeartbeatRequest(lockid=lk.lockid))
    shown = client.show_locks(T.ShowLocksRequest()).locks[0]
    assert shown.heartbeatCount == 1 and shown.lastheartbeat > 0
    with pytest.raises(T.NoSuchLockException, match="lockid:999"):
        client.heartbeat(T.HeartbeatRequest(lockid=999))

    r = client.heartbeat_txn_range(T.HeartbeatTxnRangeRequest(min=1, max=5))
    assert r.aborted == {t2}
    assert r.nosuch == {t3, 4, 5}
    assert client.heartbeat_txn_range(T.HeartbeatTxnRangeRequest(min=5, max=1)) == \
        T.HeartbeatTxnRangeResponse(aborted=set(), nosuch=set())


def test_locks_released_at_commit_and_abort(client):
    t1, t2 = open_txns(client, 2)
    assert lock(client, t1, comp(EX, table="a")).state == ACQUIRED
    assert lock(client, t2, comp(EX, table="b")).state == ACQUIRED
    w1 = lock(client, None, comp(SR, table="a"))
    w2 = lock(client, None, comp(SR, table="b"))
    assert (w1.state, w2.state) == (WAITING, WAITING)
    client.commit_txn(T.CommitTxnRequest(txnid=t1))
    client.abort_txn(T.AbortTxnRequest(txnid=t2))
    assert client.check_lock(T.CheckLockRequest(lockid=w1.lockid)).state == ACQUIRED
    assert client.check_lock(T.CheckLockRequest(lockid=w2.lockid)).state == ACQUIRED
    assert {e.txnid for e in client.show_locks(T.ShowLocksRequest()).locks} == {0}


def commit3x(txn):
    """A commit as a Hive 3.x client sends it: without the 4.x exclWriteEnabled field."""
    rq = T.CommitTxnRequest(txnid=txn)
    rq.exclWriteEnabled = None
    return rq


def _update_lock(client, txn, table, part=None, op=UPDATE, **kw):
    return lock(client, txn, comp(SW, table=table, part=part, op=op, isTransactional=True,
                                  **kw))


def test_write_write_conflict(hms, client):
    t1, t2, t3, t4 = open_txns(client, 4)
    for t in (t1, t2, t3, t4):
        client.allocate_table_write_ids(
            T.AllocateTableWriteIdsRequest(dbName="default", tableName="t", txnIds=[t]))
    assert _update_lock(client, t1, "t").state == ACQUIRED
    assert _update_lock(client, t2, "t", op=DELETE).state == ACQUIRED   # SW+SW compatible
    assert _update_lock(client, t3, "t", op=INSERT).state == ACQUIRED
    assert _update_lock(client, t4, "other").state == ACQUIRED
    client.commit_txn(commit3x(t1))
    assert client.get_latest_txnid_in_conflict(t2) == t1
    assert client.get_latest_txnid_in_conflict(t4) == 0
    mark = last_event_id(hms)
    with pytest.raises(T.TxnAbortedException) as e:
        client.commit_txn(commit3x(t2))          # a 3.x client: no exclWriteEnabled field
    msg = e.value.message
    assert msg.startswith(f"Aborting [txnid:{t2},") and f"committed by [txnid:{t1}," in msg
    assert "default/t" in msg
    states = {t.id: t.state for t in client.get_open_txns_info().open_txns}
    assert states[t2] == ABORTED
    assert [t for t, _, _ in events(hms, mark)] == ["ABORT_TXN"]
    assert not client.show_locks(T.ShowLocksRequest(txnid=t2)).locks
    client.commit_txn(commit3x(t3))                                   # inserts never conflict
    client.commit_txn(commit3x(t4))                                   # other table

    # same partition conflicts, a different partition does not; a 4.x client that says
    # EXCL_WRITE serialized its writers (exclWriteEnabled=true) skips the check
    a, b, c, d = open_txns(client, 4)
    _update_lock(client, a, "p", part="k=1")
    _update_lock(client, b, "p", part="k=2")
    _update_lock(client, c, "p", part="k=1")
    _update_lock(client, d, "p", part="k=1")
    client.commit_txn(T.CommitTxnRequest(txnid=a, exclWriteEnabled=False))
    client.commit_txn(T.CommitTxnRequest(txnid=b, exclWriteEnabled=False))
    client.commit_txn(T.CommitTxnRequest(txnid=d, exclWriteEnabled=True))
    with pytest.raises(T.TxnAbortedException, match=f"txnid:{c}.*default/p/k=1"):
        client.commit_txn(T.CommitTxnRequest(txnid=c, exclWriteEnabled=False))

    # a component of a non-ACID table (isTransactional=false sent) is not tracked
    e1, e2 = open_txns(client, 2)
    _update_lock(client, e1, "plain")
    lock(client, e2, comp(SW, table="plain", op=UPDATE, isTransactional=False))
    client.commit_txn(commit3x(e1))
    client.commit_txn(commit3x(e2))

    # an old client that does not send isTransactional at all is tracked (Hive's rule)
    f1, f2 = open_txns(client, 2)
    for f in (f1, f2):
        c = comp(SW, table="old", op=UPDATE)
        c.isTransactional = None                 # not on the wire
        lock(client, f, c)
    client.commit_txn(commit3x(f1))
    with pytest.raises(T.TxnAbortedException, match=f"txnid:{f2}.*default/old"):
        client.commit_txn(commit3x(f2))


def test_read_only_transactions(hms, client):
    ro = open_txns(client, 1, txn_type=2)[0]
    assert _update_lock(client, ro, "t").state == ACQUIRED
    with pytest.raises(T.MetaException, match="read-only"):
        client.allocate_table_write_ids(
            T.AllocateTableWriteIdsRequest(dbName="default", tableName="t", txnIds=[ro]))
    client.commit_txn(T.CommitTxnRequest(txnid=ro))
    from hms_txn.store.schema import completed_txn_components, write_set
    with hms.ms.store.read() as conn:
        assert not conn.execute(completed_txn_components.select()).all()
        assert not conn.execute(write_set.select()).all()


def test_repl_fields_accepted_and_ignored(client, caplog):
    caplog.set_level("INFO", logger="hms_txn")
    ids = open_txns(client, 2, replPolicy="db.*", replSrcTxnIds=[100, 101])
    assert len(ids) == 2
    client.commit_txn(T.CommitTxnRequest(txnid=ids[0], replPolicy="db.*"))
    client.abort_txn(T.AbortTxnRequest(txnid=ids[1], replPolicy="db.*"))
    assert "accepted and ignored" in caplog.text


def test_events_are_written_with_each_change(hms, client):
    client.create_table(make_table("default", "t", keys=[("k", "string")],
                                   params={"transactional": "true"}))
    client.add_partition(T.Partition(dbName="default", tableName="t", values=["1"]))
    part_loc = client.get_partition("default", "t", ["1"]).sd.location
    mark = last_event_id(hms)
    t1, t2 = open_txns(client, 2)
    wid = client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
        dbName="default", tableName="t", txnIds=[t1])).txnToWriteIds[0].writeId
    # a repeated allocation returns the same id and writes no event
    client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
        dbName="default", tableName="t", txnIds=[t1]))
    client.commit_txn(T.CommitTxnRequest(txnid=t1, writeEventInfos=[
        T.WriteEventInfo(writeId=wid, database="default", table="t",
                         files="delta_1_1/bucket_0]delta_1_1/bucket_1", partition="k=1")]))
    client.abort_txn(T.AbortTxnRequest(txnid=t2))
    # failures write nothing
    with pytest.raises(T.TxnAbortedException):
        client.commit_txn(T.CommitTxnRequest(txnid=t2))
    # READ_ONLY transactions write no events (TxnHandler: no OPEN/COMMIT/ABORT_TXN for them)
    r1, r2 = open_txns(client, 2, txn_type=T.TxnType.READ_ONLY)
    client.commit_txn(T.CommitTxnRequest(txnid=r1))
    client.abort_txn(T.AbortTxnRequest(txnid=r2))
    evs = events(hms, mark)
    # Hive 4 keeps ACID writes out of the log (no ACID_WRITE_EVENT rows)
    assert [t for t, _, _ in evs] == ["OPEN_TXN", "ALLOC_WRITE_ID_EVENT", "COMMIT_TXN",
                                      "ABORT_TXN"]
    msgs = {t: m for t, m, _ in evs}
    # JSONOpenTxnMessage from the from/to constructor: txnIds null, readers expand the range
    assert msgs["OPEN_TXN"]["txnIds"] is None
    assert (msgs["OPEN_TXN"]["fromTxnId"], msgs["OPEN_TXN"]["toTxnId"]) == (t1, t2)
    alloc = msgs["ALLOC_WRITE_ID_EVENT"]
    assert (alloc["dbName"], alloc["tableName"], alloc["txnIdList"], alloc["writeIdList"]) == \
        ("default", "t", [t1], [wid])
    commit = msgs["COMMIT_TXN"]
    assert commit["txnid"] == t1
    assert all(commit[k] is None for k in ("writeIds", "databases", "tables", "partitions",
                                           "tableObjs", "partitionObjs", "files"))
    assert msgs["ABORT_TXN"]["txnid"] == t2
    ids = [e.event_id for _, _, e in evs]
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    # DbNotificationListener leaves the columns of transaction events NULL, but names the
    # table of ALLOC_WRITE_ID_EVENT
    assert [(e.cat_name, e.db_name, e.tbl_name) for _, _, e in evs] == [
        (None, None, None), (None, "default", "t"), (None, None, None), (None, None, None)]
    # the commit's writeEventInfos are its write notifications (hive.metastore.dml.events)
    (info,) = client.get_all_write_event_info(T.GetAllWriteEventInfoRequest(txnId=t1))
    assert (info.writeId, info.database, info.table, info.partition) == (wid, "default", "t", "k=1")
    assert info.files == (f"{part_loc}/delta_1_1/bucket_0###delta_1_1]"
                          f"{part_loc}/delta_1_1/bucket_1###delta_1_1")
    assert json.loads(info.partitionObj)["1"]["lst"] == ["str", 1, "1"]
    assert client.get_all_write_event_info(T.GetAllWriteEventInfoRequest(txnId=t2)) == []


def test_commit_writes_unrecorded_without_dml_events(hms_factory):
    """hive.metastore.dml.events=false: a commit's writeEventInfos are not recorded (Hive
    records HiveServer2's writes only with the setting on), and get_config_value says so."""
    with hms_factory({"hive.metastore.dml.events": "false"}).client() as c:
        c.create_table(make_table("default", "t", params={"transactional": "true"}))
        (txn,) = open_txns(c)
        wid = c.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
            dbName="default", tableName="t", txnIds=[txn])).txnToWriteIds[0].writeId
        c.commit_txn(T.CommitTxnRequest(txnid=txn, writeEventInfos=[
            T.WriteEventInfo(writeId=wid, database="default", table="t", files="f")]))
        assert c.get_all_write_event_info(T.GetAllWriteEventInfoRequest(txnId=txn)) == []
        assert c.get_config_value("hive.metastore.dml.events", "") == "false"
