"""Differential test: one sequence of transaction and lock calls, in the Hive 2.3 dialect
(the fields a Hive 2.3 client sends, operationType set), against our server and against
the Java metastore 2.3 that ships in PySpark's jars; outcomes must match exactly: returned
ids, states, lock listings, and the exceptions raised with their messages.

The Java metastore takes 30-60 s to start, so one instance serves the whole module; the
sequence runs on it once, on its fresh database (the outcomes name absolute ids), and each
backend of ours (SQLite, and PostgreSQL, where every transaction call is one function's
statement) is held to those outcomes.
"""

from __future__ import annotations

import shutil

import pytest

from tests.support.requirements import require, require_module

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.support.postgres import free_port
from tests.support.servers import connect

pytestmark = pytest.mark.javahms

SR, SW, EX = 1, 2, 3
DB, TABLE, PART = 1, 2, 3
SELECT, INSERT, UPDATE = 1, 2, 3

@pytest.fixture(scope="module")
def java_hms(tmp_path_factory):
    require(shutil.which("java") is not None, "java is not installed")
    require_module("pyspark")
    from hms_bench.javahms import start_java_metastore
    server = start_java_metastore(free_port(), str(tmp_path_factory.mktemp("javahms")))
    yield server
    server.stop()


def _hive2(obj):
    """Drop the fields a Hive 2.3 client does not have (they default to set values here)."""
    for name in ("txn_type", "zeroWaitReadEnabled", "exclusiveCTAS", "locklessReadsEnabled",
                 "exclWriteEnabled"):
        if hasattr(obj, name):
            setattr(obj, name, None)
    return obj


def comp(ltype, table=None, part=None, op=SELECT, db="default", acid=True):
    level = PART if part else TABLE if table else DB
    return T.LockComponent(type=ltype, level=level, dbname=db, tablename=table,
                           partitionname=part, operationType=op, isTransactional=acid)


def run_sequence(client) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []

    def step(name, fn):
        try:
            value = fn()
        except T.TApplicationException as err:  # pragma: no cover - reported as a mismatch
            value = ("TApplicationException", err.message)
        except Exception as err:  # noqa: BLE001 - the outcome is what we compare
            value = (type(err).__name__, getattr(err, "message", str(err)))
        out.append((name, value))
        return value

    def open_txns(n):
        rq = _hive2(T.OpenTxnRequest(num_txns=n, user="hive", hostname="host1",
                                     agentInfo="diff"))
        return client.open_txns(rq).txn_ids

    def lock(txn, *comps):
        rq = _hive2(T.LockRequest(component=list(comps), txnid=txn, user="hive",
                                  hostname="host1", agentInfo="diff"))
        r = client.lock(rq)
        return (r.lockid, r.state)

    def commit(txn):
        return client.commit_txn(_hive2(T.CommitTxnRequest(txnid=txn)))

    def check(lock_id):
        r = client.check_lock(T.CheckLockRequest(lockid=lock_id))
        return (r.lockid, r.state)

    def show(**kw):
        locks = client.show_locks(T.ShowLocksRequest(**kw)).locks
        return sorted((e.lockid, e.dbname, e.tablename, e.partname, e.state, e.type,
                       e.txnid or 0, e.user, e.hostname) for e in locks)

    def txn_states():
        r = client.get_open_txns_info()
        return (r.txn_high_water_mark, [(t.id, t.state, t.user, t.hostname)
                                        for t in r.open_txns])

    t1, t2, t3 = step("open 3", lambda: open_txns(3))
    step("open 2 more", lambda: open_txns(2))
    step("lock t1 update t", lambda: lock(t1, comp(SW, "t", op=UPDATE)))
    step("lock t2 read t", lambda: lock(t2, comp(SR, "t", op=SELECT)))
    step("lock t3 exclusive t", lambda: lock(t3, comp(EX, "t", op=UPDATE)))
    step("lock t2 read db", lambda: lock(t2, comp(SR, op=SELECT)))
    step("lock t3 insert p part", lambda: lock(t3, comp(SR, "p", "k=1", op=INSERT)))
    x1 = step("txn-less exclusive x", lambda: lock(None, comp(EX, "x", acid=False)))[0]
    x2 = step("txn-less read x", lambda: lock(None, comp(SR, "x", acid=False)))[0]
    x3 = step("txn-less read y", lambda: lock(None, comp(SR, "y", acid=False)))[0]
    step("check waiting x", lambda: check(x2))
    step("show all", lambda: show())
    step("show db filter", lambda: show(dbname="default"))
    step("show table filter", lambda: show(dbname="default", tablename="x"))
    step("heartbeat t1", lambda: client.heartbeat(T.HeartbeatRequest(txnid=t1)))
    step("heartbeat txn-less lock", lambda: client.heartbeat(T.HeartbeatRequest(lockid=x3)))
    step("heartbeat both", lambda: client.heartbeat(T.HeartbeatRequest(lockid=x1, txnid=t2)))
    step("heartbeat unknown txn", lambda: client.heartbeat(T.HeartbeatRequest(txnid=999)))
    step("heartbeat unknown lock", lambda: client.heartbeat(T.HeartbeatRequest(lockid=999)))
    step("unlock acquired txn lock", lambda: client.unlock(T.UnlockRequest(lockid=1)))
    step("unlock txn-less", lambda: client.unlock(T.UnlockRequest(lockid=x1)))
    step("check x2 after unlock", lambda: check(x2))
    step("unlock missing", lambda: client.unlock(T.UnlockRequest(lockid=555)))
    step("check missing", lambda: check(555))
    step("txn states", txn_states)
    step("commit t1", lambda: commit(t1))
    step("commit t1 again", lambda: commit(t1))
    step("check t3 exclusive after t1", lambda: check(3))
    step("abort t2", lambda: client.abort_txn(T.AbortTxnRequest(txnid=t2)))
    step("abort t2 again", lambda: client.abort_txn(T.AbortTxnRequest(txnid=t2)))
    step("commit aborted t2", lambda: commit(t2))
    step("heartbeat aborted t2", lambda: client.heartbeat(T.HeartbeatRequest(txnid=t2)))
    step("check t3 exclusive after t2", lambda: check(3))
    step("abort committed t1", lambda: client.abort_txn(T.AbortTxnRequest(txnid=t1)))
    step("abort unknown", lambda: client.abort_txn(T.AbortTxnRequest(txnid=888)))
    step("commit unknown", lambda: commit(888))
    step("lock on aborted txn", lambda: lock(t2, comp(SR, "z")))
    step("lock on unknown txn", lambda: lock(777, comp(SR, "z")))
    step("heartbeat committed txn", lambda: client.heartbeat(T.HeartbeatRequest(txnid=t1)))
    step("heartbeat range", lambda: (lambda r: (sorted(r.aborted), sorted(r.nosuch)))(
        client.heartbeat_txn_range(T.HeartbeatTxnRangeRequest(min=1, max=7))))
    step("abort_txns batch", lambda: client.abort_txns(T.AbortTxnsRequest(txn_ids=[4, 5])))
    step("txn states at end", txn_states)
    step("show at end", lambda: show())
    # write-write conflict: t7 started before t6 committed an update of the same table
    t6, t7 = step("open 2 writers", lambda: open_txns(2))
    step("t6 update w", lambda: lock(t6, comp(SW, "w", op=UPDATE)))
    step("commit t6", lambda: commit(t6))
    step("t7 update w", lambda: lock(t7, comp(SW, "w", op=UPDATE)))
    step("commit t7 conflicts", lambda: commit(t7))
    step("t7 aborted", lambda: [s for s in txn_states()[1] if s[0] == t7])
    # inserts never conflict
    t8, t9 = step("open 2 inserters", lambda: open_txns(2))
    step("t8 insert w", lambda: lock(t8, comp(SR, "w", op=INSERT)))
    step("commit t8", lambda: commit(t8))
    step("t9 insert w", lambda: lock(t9, comp(SR, "w", op=INSERT)))
    step("commit t9", lambda: commit(t9))
    step("final states", txn_states)
    return out


@pytest.fixture(scope="module")
def java_outcomes(java_hms):
    """The sequence's outcomes on the Java metastore, run once on its fresh database."""
    theirs = connect(java_hms.port)
    try:
        return run_sequence(theirs)
    finally:
        theirs.close()


def test_same_outcomes_as_java_metastore(java_outcomes, hms):
    ours = connect(hms.port)
    try:
        got = run_sequence(ours)
    finally:
        ours.close()
    want = java_outcomes
    mismatches = []
    for (name, mine), (_, java) in zip(got, want):
        if mine != java:
            mismatches.append(f"{name}: ours={mine!r} java={java!r}")
    assert not mismatches, "\n".join(mismatches)
    assert len(got) == len(want)


@pytest.fixture(scope="module")
def hive2_client_jvm():
    """A JVM with PySpark's jars (Hive 2.3's HiveMetaStoreClient), driven through py4j."""
    require(shutil.which("java") is not None, "java is not installed")
    from pyspark.java_gateway import launch_gateway
    gateway = launch_gateway()
    yield gateway.jvm
    gateway.shutdown()


def _java_client(jvm, uri):
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    conf.set("hive.metastore.uris", uri)
    return jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)


def test_hive2_java_client_reads_open_txns(hive2_client_jvm, hms_factory, java_hms,
                                           java_outcomes):
    """get_open_txns field 2 is set<i64> in Hive 2.3 and list<i64> from 3.0 on; the Java
    client does not tolerate the other type (it skips it, then fails on the missing
    required field). Our default is the 3.x+ shape; hms_txn.hive2.open.txns.as.set=true
    serves Hive 2.3 clients, and then their snapshot equals the Java metastore's.
    (``java_outcomes``: the sequence above ran on the Java metastore's fresh database
    before this test adds to it.)"""
    import py4j.protocol

    def prepare(client):
        ids = client.open_txns(T.OpenTxnRequest(num_txns=4, user="u", hostname="h")).txn_ids
        client.commit_txn(T.CommitTxnRequest(txnid=ids[0]))
        client.abort_txn(T.AbortTxnRequest(txnid=ids[2]))
        return ids

    # two servers on one database: the default shape and the Hive 2.x shape
    default, hive2 = hms_factory(), hms_factory({"hms_txn.hive2.open.txns.as.set": "true"})
    c = connect(default.port)
    prepare(c)
    c.close()

    with pytest.raises(py4j.protocol.Py4JJavaError, match="Required field 'open_txns' is unset"):
        _java_client(hive2_client_jvm, default.uri).getValidTxns()

    # Hive 2.3's ValidReadTxnList string: hwm:minOpen:exception:exception...; it lists the
    # aborted transactions as exceptions too (2.3 has no abortedBits)
    ours = _java_client(hive2_client_jvm, hive2.uri)
    assert ours.getValidTxns().writeToString() == "4:2:2:3:4"
    assert ours.getValidTxns(3).writeToString() == "4:2:2:4"   # 2.3 drops only its own txn
    ours.close()

    # the Java metastore answers its own client the same way for its own state
    java = connect(java_hms.port)
    prepare(java)
    info = java.get_open_txns_info()
    java.close()
    exceptions = [t.id for t in info.open_txns]
    opened = [t.id for t in info.open_txns if t.state == 3]
    theirs = _java_client(hive2_client_jvm, java_hms.uri)
    assert theirs.getValidTxns().writeToString() == ":".join(
        str(x) for x in [info.txn_high_water_mark, min(opened)] + exceptions)
    theirs.close()
