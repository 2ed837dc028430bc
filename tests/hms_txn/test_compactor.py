"""Automatic compaction end to end: real Thrift clients write ACID data the way an engine does
(open_txns -> allocate_table_write_ids -> lock -> orc_acid write -> commit_txn), the server's
Initiator / Worker / Cleaner threads compact it, readers check rows before, during and after.
"""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pyarrow as pa
import pytest

import orc_acid
from hms_txn.service.compactor.cleaner import Cleaner
from hms_txn.service.compactor.initiator import Initiator
from hms_txn.service.compactor.worker import Worker
from hms_txn.store.schema import completed_txn_components, txn_components, txns
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from orc_acid.layout import encode_bucket
from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList
from tests.hms_txn.test_catalog import local, make_table
from tests.support.servers import ServerProcess

SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string())])
SHARED_READ, SHARED_WRITE, EXCLUSIVE = 1, 2, 3
TABLE_LEVEL, PARTITION_LEVEL = 2, 3
OP_SELECT, OP_INSERT, OP_UPDATE, OP_DELETE = 1, 2, 3, 4
MINOR, MAJOR = 1, 2
READ_ONLY = 2
ACID = {"transactional": "true"}

# fast compactor threads for tests
FAST = {
    "hive.compactor.initiator.on": "true", "hive.compactor.check.interval": "200ms",
    "hive.compactor.worker.threads": "1", "hive.compactor.worker.sleep.time": "50ms",
    "hive.compactor.cleaner.on": "true", "hive.compactor.cleaner.run.interval": "50ms",
}


def rows(ids, tag="r"):
    ids = np.asarray(list(ids), dtype=np.int32)
    return pa.table({"id": ids, "name": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def random_rows(n, start=0, seed=1):
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int32)
    names = [rng.bytes(12).hex() for _ in range(n)]
    return pa.table({"id": ids, "name": names}, schema=SCHEMA)


class Engine:
    """What a query engine does around its writes and reads, over Thrift."""

    def __init__(self, client, db="default"):
        self.c = client
        self.db = db

    def create(self, name, params=None, keys=()):
        self.c.create_table(make_table(self.db, name, cols=(("id", "int"), ("name", "string")),
                                       keys=keys, params={**ACID, **(params or {})}))
        return local(self.c.get_table_acid_aware(self.db, name).sd.location)

    def location(self, name, part=None):
        if part is None:
            return local(self.c.get_table_acid_aware(self.db, name).sd.location)
        return local(self.c.get_partition_by_name(self.db, name, part).sd.location)

    def open(self, txn_type=None):
        return self.c.open_txns(T.OpenTxnRequest(num_txns=1, user="eng", hostname="h",
                                                 txn_type=txn_type)).txn_ids[0]

    def begin_write(self, table, op=OP_INSERT, part=None):
        txn = self.open()
        wid = self.c.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
            dbName=self.db, tableName=table, txnIds=[txn])).txnToWriteIds[0].writeId
        comp = T.LockComponent(type=SHARED_WRITE, level=PARTITION_LEVEL if part else TABLE_LEVEL,
                               dbname=self.db, tablename=table, partitionname=part,
                               operationType=op, isTransactional=True)
        lr = self.c.lock(T.LockRequest(component=[comp], txnid=txn, user="eng", hostname="h"))
        assert lr.state == 1, lr
        return txn, wid

    def commit(self, txn, table, wid, part=None):
        self.c.commit_txn(T.CommitTxnRequest(txnid=txn, writeEventInfos=[T.WriteEventInfo(
            writeId=wid, database=self.db, table=table, files="", partition=part)]))

    def insert(self, table, data, part=None, bucket=0):
        txn, wid = self.begin_write(table, OP_INSERT, part)
        orc_acid.write_delta(self.location(table, part), wid, 0, bucket, data)
        self.commit(txn, table, wid, part)
        return wid

    def overwrite(self, table, data):
        txn, wid = self.begin_write(table, OP_UPDATE)
        orc_acid.write_base(self.location(table), wid, 0, data)
        self.commit(txn, table, wid)
        return wid

    def delete(self, table, row_ids, part=None):
        txn, wid = self.begin_write(table, OP_DELETE, part)
        orc_acid.write_delete_delta(self.location(table, part), wid, 0, row_ids, row_schema=SCHEMA)
        self.commit(txn, table, wid, part)
        return wid

    def aborted_insert(self, table, data, part=None):
        txn, wid = self.begin_write(table, OP_INSERT, part)
        orc_acid.write_delta(self.location(table, part), wid, 0, 0, data)
        self.c.abort_txn(T.AbortTxnRequest(txnid=txn))
        return wid

    def snapshot(self, table, current=None):
        r = self.c.get_open_txns()
        aborted = {t for i, t in enumerate(r.open_txns)
                   if i // 8 < len(r.abortedBits) and r.abortedBits[i // 8] >> (i % 8) & 1}
        exc = [t for t in r.open_txns if t != current]
        vt = ValidTxnList(r.txn_high_water_mark, open_ids=[t for t in exc if t not in aborted],
                          aborted_ids=[t for t in exc if t in aborted])
        tw = self.c.get_valid_write_ids(T.GetValidWriteIdsRequest(
            fullTableNames=[f"{self.db}.{table}"], validTxnList=str(vt))).tblValidWriteIds[0]
        flags = [bool(tw.abortedBits[i // 8] >> (i % 8) & 1) if i // 8 < len(tw.abortedBits)
                 else False for i in range(len(tw.invalidWriteIds))]
        wl = ValidWriteIdList(tw.fullTableName, tw.writeIdHighWaterMark,
                              open_ids=[w for w, a in zip(tw.invalidWriteIds, flags) if not a],
                              aborted_ids=[w for w, a in zip(tw.invalidWriteIds, flags) if a],
                              min_open=tw.minOpenWriteId)
        return vt, wl

    def read(self, table, part=None, snap=None):
        vt, wl = snap or self.snapshot(table)
        t = orc_acid.read_table(self.location(table, part), wl, valid_txns=vt, with_row_id=True)
        return sorted(zip([tuple(r.values()) for r in t.column("ROW__ID").to_pylist()],
                          t.column("id").to_pylist(), t.column("name").to_pylist()))

    def reader(self, table):
        return Reader(self, table)

    def read_as_query(self, table):
        """Read as a query does, inside a READ_ONLY transaction holding a SHARED_READ lock:
        while the compactor may run, a bare read can find a delta the cleaner has just
        removed, and the cleaner only waits for readers it knows of."""
        r = self.reader(table)
        try:
            return r.read()
        finally:
            r.close()

    def compact(self, table, ctype=MAJOR, part=None):
        r = self.c.compact2(T.CompactionRequest(dbname=self.db, tablename=table,
                                                partitionname=part, type=ctype))
        assert r.accepted, r
        return r.id

    def compactions(self, table=None):
        return self.c.show_compact(T.ShowCompactRequest(tbName=table)).compacts or []

    def wait_state(self, cid, states, timeout=30):
        deadline = time.time() + timeout
        while True:
            got = [e for e in self.compactions() if e.id == cid]
            if got and got[0].state in states:
                return got[0]
            if time.time() > deadline:
                raise AssertionError(f"compaction {cid} not in {states}: {got}")
            time.sleep(0.05)


class Reader:
    """A query reading a snapshot: a READ_ONLY transaction holding a SHARED_READ lock."""

    def __init__(self, engine: Engine, table: str):
        self.e = engine
        self.table = table
        self.txn = engine.open(READ_ONLY)
        comp = T.LockComponent(type=SHARED_READ, level=TABLE_LEVEL, dbname=engine.db,
                               tablename=table, operationType=OP_SELECT, isTransactional=True)
        lr = engine.c.lock(T.LockRequest(component=[comp], txnid=self.txn, user="r",
                                         hostname="h"))
        assert lr.state == 1
        self.snap = engine.snapshot(table, current=self.txn)

    def read(self):
        return self.e.read(self.table, snap=self.snap)

    def close(self):
        self.e.c.commit_txn(T.CommitTxnRequest(txnid=self.txn))


def listing(path):
    return sorted(n for n in os.listdir(path) if not n.startswith("."))


def wait_until(pred, timeout=30, what="condition"):
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def more_runs(loop, n: int = 2) -> None:
    """Wait (to a deadline) until ``loop`` has completed ``n`` more runs, so at least one
    whole run saw the state as it is now (instead of sleeping a guessed time)."""
    start = loop.runs
    wait_until(lambda: loop.runs >= start + n, what=f"{n} more runs of {loop.name}")


COMPACTED = re.compile(r"(base|delta|delete_delta)_(\d{7})(?:_(\d{7}))?_v(\d{7})\Z")


# ------------------------------------------------------------------------------ automatic

def test_twelve_small_inserts_trigger_a_minor_compaction(hms_factory):
    hms = hms_factory(FAST)
    e = Engine(hms.client())
    loc = e.create("events")
    e.overwrite("events", random_rows(20000))              # base_1: a sizeable base
    expected = e.read("events")
    for i in range(12):
        e.insert("events", rows(range(100000 + 10 * i, 100000 + 10 * i + 3)))
    expected = e.read_as_query("events")      # the initiator may already be compacting
    assert len(expected) == 20000 + 36

    def settled():
        cs = e.compactions("events")
        return cs and all(c.state == "succeeded" for c in cs) and \
            not any(n.startswith("delta_") and "_v" not in n for n in listing(loc)
                    if int(n.split("_")[1]) <= max(c.hightestWriteId for c in cs))
    wait_until(settled, what="automatic compaction and cleaning")
    cs = e.compactions("events")
    assert {c.type for c in cs} == {MINOR}
    assert all(c.initiatorId and c.workerid and c.start and c.endTime and c.enqueueTime
               and c.txnId and c.commitTime and c.cleanerStart for c in cs)
    assert e.read("events") == expected
    names = listing(loc)
    hw = max(c.hightestWriteId for c in cs)
    compacted = [n for n in names if COMPACTED.match(n)]
    assert compacted and all(n.startswith("delta_") for n in compacted)
    last = max(cs, key=lambda c: c.id)
    assert f"delta_0000002_{hw:07d}_v{last.txnId:07d}" in names
    # nothing obsolete left: the base, one compacted delta, and deltas above its range
    assert names[0] == "base_0000001"
    rest = [n for n in names[1:] if not COMPACTED.match(n)]
    assert all(int(n.split("_")[1]) > hw for n in rest)
    assert len(names) == 2 + len(rest)


def test_delete_heavy_table_triggers_a_major_compaction(hms_factory):
    hms = hms_factory(FAST)
    e = Engine(hms.client())
    loc = e.create("accounts")
    e.overwrite("accounts", rows(range(3000)))
    doomed = pa.table({"originalTransaction": [1] * 2000, "bucket": [encode_bucket(0, 0)] * 2000,
                       "rowId": list(range(0, 4000, 2))[:1500] + list(range(1, 1000, 2))})
    e.delete("accounts", doomed)
    expected = e.read_as_query("accounts")    # the initiator may already be compacting
    assert len(expected) == 1000

    wait_until(lambda: [c.state for c in e.compactions("accounts")] == ["succeeded"],
               what="major compaction")
    (c,) = e.compactions("accounts")
    assert c.type == MAJOR and c.hightestWriteId == 2
    assert listing(loc) == [f"base_0000002_v{c.txnId:07d}"]
    assert e.read("accounts") == expected                     # ROW__IDs preserved


def test_no_auto_compaction_is_left_alone(hms_factory):
    hms = hms_factory(FAST)
    e = Engine(hms.client())
    quiet = e.create("quiet", params={"NO_AUTO_COMPACTION": "true"})
    e.create("busy", params={"compactorthreshold.hive.compactor.delta.num.threshold": "2"})
    for i in range(12):
        e.insert("quiet", rows([i]))
    for i in range(3):
        e.insert("busy", rows([i]))
    # the busy table (no base, 3 deltas > 2) gets a major compaction: the initiator did run
    wait_until(lambda: [c.state for c in e.compactions("busy")] == ["succeeded"],
               what="busy table compaction")
    runs = hms.ms.compactor.initiator.loop.runs
    wait_until(lambda: hms.ms.compactor.initiator.loop.runs >= runs + 3, what="more checks")
    assert e.compactions("quiet") == []
    assert len(listing(quiet)) == 12


# ----------------------------------------------------------------- reads and the cleaner

def test_reads_are_stable_and_the_cleaner_waits_for_readers(hms_factory):
    hms = hms_factory({**FAST, "hive.compactor.initiator.on": "false",
                       "hms_txn.compactor.worker.test.pause": "1s"})
    e = Engine(hms.client())
    loc = e.create("t")
    e.overwrite("t", rows(range(100)))
    for w in range(3):
        e.insert("t", rows(range(1000 * (w + 1), 1000 * (w + 1) + 5)))
    e.delete("t", pa.table({"originalTransaction": [1, 1], "bucket": [encode_bucket(0, 0)] * 2,
                            "rowId": [3, 4]}))
    before_dirs = listing(loc)
    expected = e.read("t")
    old_reader = e.reader("t")                      # started before the compaction
    lockless = e.c.lock(T.LockRequest(component=[T.LockComponent(
        type=SHARED_READ, level=TABLE_LEVEL, dbname="default", tablename="t",
        operationType=OP_SELECT)], user="old-engine", hostname="h"))   # a txn-less reader
    assert old_reader.read() == expected
    # meanwhile, fresh queries keep reading through the whole compaction and cleaning
    import threading
    stop, reads, bad = threading.Event(), [], []

    def churn():
        c2 = hms.client()
        e2 = Engine(c2)
        while not stop.is_set():
            r = e2.reader("t")
            got = r.read()
            r.close()
            (reads if got == expected else bad).append(1)
        c2.close()
    churner = threading.Thread(target=churn)
    churner.start()

    cid = e.compact("t", MAJOR)
    # during: the output exists under its final name but the compaction has not committed
    wait_until(lambda: any(COMPACTED.match(n) for n in listing(loc)), what="compaction output")
    assert e.compactions("t")[0].state == "working"
    assert e.read("t") == expected and old_reader.read() == expected
    # after the commit: new readers use the new base, the old reader its old files
    c = e.wait_state(cid, {"ready for cleaning"})
    new_base = f"base_0000005_v{c.txnId:07d}"
    vt, wl = e.snapshot("t")
    assert orc_acid.get_acid_state(loc, wl, vt).base.path == new_base
    assert e.read("t") == expected
    more_runs(hms.ms.compactor.cleaner.loop, 3)      # cleaner runs: it must wait
    assert e.compactions("t")[0].state == "ready for cleaning"
    assert set(before_dirs) <= set(listing(loc))
    assert old_reader.read() == expected
    old_reader.close()
    more_runs(hms.ms.compactor.cleaner.loop)         # still the txn-less lock
    assert e.compactions("t")[0].state == "ready for cleaning"
    assert old_reader.read() == expected
    e.c.unlock(T.UnlockRequest(lockid=lockless.lockid))
    e.wait_state(cid, {"succeeded"})
    assert listing(loc) == [new_base]
    assert e.read("t") == expected
    wait_until(lambda: len(reads) > 10 or bad, what="fresh reads")
    stop.set()
    churner.join(30)
    assert len(reads) > 10 and not bad


def test_cleaner_removes_exactly_the_obsolete_directories(hms_factory):
    hms = hms_factory({**FAST, "hive.compactor.initiator.on": "false"})
    e = Engine(hms.client())
    loc = e.create("t")
    e.overwrite("t", rows(range(10)))                                    # 1
    e.insert("t", rows(range(10, 15)))                                   # 2
    aborted = e.aborted_insert("t", rows(range(900, 905)))               # 3
    e.insert("t", rows(range(15, 20)))                                   # 4
    e.delete("t", pa.table({"originalTransaction": [2], "bucket": [encode_bucket(0, 0)],
                            "rowId": [0]}))                              # 5
    open_txn, open_wid = e.begin_write("t")                              # 6, stays open
    orc_acid.write_delta(loc, open_wid, 0, 0, rows(range(50, 53)))
    e.insert("t", rows(range(20, 22)))                                   # 7 (above the open one)
    assert (aborted, open_wid) == (3, 6)
    expected = e.read("t")
    store = hms.ms.store
    with store.read() as conn:
        aborted_txn = conn.execute(txn_components.select().where(
            txn_components.c.write_id == 3)).first().txn_id

    cid = e.compact("t", MINOR)
    c = e.wait_state(cid, {"ready for cleaning"})
    assert c.hightestWriteId == 5                     # never crosses the open write id 6
    out = [f"delta_0000002_0000005_v{c.txnId:07d}", f"delete_delta_0000002_0000005_v{c.txnId:07d}"]
    assert set(out) <= set(listing(loc))
    more_runs(hms.ms.compactor.cleaner.loop)
    assert e.compactions("t")[0].state == "ready for cleaning"   # the open writer is older
    e.commit(open_txn, "t", open_wid)
    e.wait_state(cid, {"succeeded"})
    assert listing(loc) == sorted(["base_0000001", *out, "delta_0000006_0000006_0000",
                                   "delta_0000007_0000007_0000"])
    assert e.read("t") == sorted(expected + [
        r for r in e.read("t") if r[1] in (50, 51, 52)])
    # bookkeeping the removed directories kept alive is gone; the rest stays
    with store.read() as conn:
        ctc = {r.write_id for r in conn.execute(completed_txn_components.select().where(
            completed_txn_components.c.tbl_name == "t"))}
        assert ctc == {6, 7}
        assert conn.execute(txns.select().where(txns.c.txn_id == aborted_txn)).first() is None
        assert conn.execute(txn_components.select().where(
            txn_components.c.txn_id == aborted_txn)).first() is None


# ---------------------------------------------------------------------------- crash safety

def test_killed_worker_request_is_retried_after_the_worker_timeout(tmp_path, db_overrides,
                                                                   hms_factory, monkeypatch):
    # the child must run this checkout's code, not whatever hms_txn is installed
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [repo] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    shared = {**db_overrides, "hive.metastore.warehouse.dir": str(tmp_path / "warehouse")}
    doomed = ServerProcess(str(tmp_path / "doomed"), {
        **shared, "hive.compactor.worker.threads": "1", "hive.compactor.worker.sleep.time": "50ms",
        "hms_txn.compactor.worker.test.pause": "60s"})
    try:
        e = Engine(doomed.client())
        loc = e.create("t")
        e.overwrite("t", rows(range(20)))
        for w in range(3):
            e.insert("t", rows(range(100 * (w + 1), 100 * (w + 1) + 4)))
        expected = e.read("t")
        cid = e.compact("t", MAJOR)
        wait_until(lambda: any(COMPACTED.match(n) for n in listing(loc)), what="dead output")
        (first,) = e.compactions("t")
        assert first.state == "working" and first.txnId
        e.c.close()
    finally:
        doomed.kill9()
    dead_output = [n for n in listing(loc) if COMPACTED.match(n)]
    assert dead_output == [f"base_0000004_v{first.txnId:07d}"]

    hms = hms_factory({**shared, **FAST, "hive.compactor.initiator.on": "false",
                       "hive.compactor.worker.timeout": "2s"})
    e = Engine(hms.client())
    assert e.read("t") == expected                     # the dead worker's output is invisible
    c = e.wait_state(cid, {"succeeded"}, timeout=30)
    assert c.txnId != first.txnId and c.workerid != first.workerid
    assert c.start - first.start >= 2000               # retried only after the worker timeout
    info = {t.id: t.state for t in e.c.get_open_txns_info().open_txns}
    assert info.get(first.txnId) == 2                  # the dead worker's txn: aborted
    assert listing(loc) == [f"base_0000004_v{c.txnId:07d}"]   # dead output cleaned as aborted
    assert e.read("t") == expected


# ------------------------------------------------- initiator rules, failures, history, CLI

@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_initiator_rules_failures_and_history(hms_factory):
    hms = hms_factory({"hive.compactor.initiator.failed.compacts.threshold": "2",
                       "hive.compactor.history.retention.failed": "3",
                       "hive.compactor.history.retention.succeeded": "1"})
    ms = hms.ms
    e = Engine(hms.client())
    init, worker, cleaner = (Initiator(ms.config, ms.units, ms.txns),
                             Worker(ms.config, ms.units, ms.txns),
                             Cleaner(ms.config, ms.units, ms.txns))
    # too many aborted transactions (table override) -> MAJOR
    e.create("ab", params={"compactorthreshold.hive.compactor.abortedtxn.threshold": "2"})
    e.insert("ab", rows([1]))
    for i in range(3):
        e.aborted_insert("ab", rows([100 + i]))
    got = init.run_once()
    assert [(o, t.name) for o, t, _ in got["requested"]] == [(("default", "ab", None), "MAJOR")]
    assert worker.run_once() and cleaner.run_once()["cleaned"]
    assert listing(e.location("ab")) == [n for n in listing(e.location("ab")) if n.startswith("base_")]
    assert e.read("ab") == [((1, encode_bucket(0, 0), 0), 1, "r1")]

    # a partitioned table: one request per partition, none for the table itself
    e.create("p", params={"compactorthreshold.hive.compactor.delta.num.threshold": "1"},
             keys=(("ds", "string"),))
    for ds in ("a", "b"):
        sd = e.c.get_table_acid_aware("default", "p").sd
        sd.location = None
        e.c.add_partition(T.Partition(dbName="default", tableName="p", values=[ds], sd=sd))
    part_loc = {ds: e.location("p", f"ds={ds}") for ds in "ab"}
    for ds in ("a", "a", "b"):
        e.insert("p", rows([ord(ds)]), part=f"ds={ds}")
    got = init.run_once()
    assert [o for o, _, _ in got["requested"]] == [("default", "p", "ds=a")]
    assert worker.run_once() and cleaner.run_once()["cleaned"]
    assert len(listing(part_loc["a"])) == 1 and len(listing(part_loc["b"])) == 1

    # failing compactions: after 2 in a row the initiator stops; a manual success resumes it
    loc = e.create("bad", params={"compactorthreshold.hive.compactor.delta.num.threshold": "1"})
    for i in range(2):
        e.insert("bad", rows([i]))
    junk = os.path.join(loc, "delta_0000001_0000001_0000", "bucket_00001")
    with open(junk, "wb") as fh:
        fh.write(b"not an orc file")
    for _ in range(2):
        e.insert("bad", rows([7]))                     # a new write: the initiator looks again
        assert [o[1] for o, _, _ in init.run_once()["requested"]] == ["bad"]
        worker.run_once()
    states = [c.state for c in e.compactions("bad")]
    assert states == ["failed", "failed"]
    assert "not a readable ORC file" in e.compactions("bad")[0].errorMessage
    e.insert("bad", rows([8]))
    assert init.run_once()["skipped"][("default", "bad", None)] == "too many failures"
    os.unlink(junk)
    e.compact("bad", MAJOR)                            # manual requests still run
    assert worker.run_once() and cleaner.run_once()["cleaned"]
    e.insert("bad", rows([9]))
    e.insert("bad", rows([10]))
    assert [o[1] for o, _, _ in init.run_once()["requested"]] == ["bad"]
    assert worker.run_once() and cleaner.run_once()["cleaned"]
    # history retention: 1 succeeded, failed ones up to 3
    assert [c.state for c in e.compactions("bad")] == ["failed", "failed", "succeeded"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_partition_with_escaped_characters_is_compacted_in_its_own_directory(hms_factory):
    """A partition value like "2024-01-01 10:00/x" is escaped in the partition's name and
    its directory (ds=2024-01-01 10%3A00%2Fx), as Hive does. The location is the directory's
    name as is: decoding the escapes named another directory (ds=2024-01-01 10:00/x), where
    add_partition created an empty one and the compactor looked for deltas in vain."""
    hms = hms_factory({})
    ms = hms.ms
    e = Engine(hms.client())
    init, worker, cleaner = (Initiator(ms.config, ms.units, ms.txns),
                             Worker(ms.config, ms.units, ms.txns),
                             Cleaner(ms.config, ms.units, ms.txns))
    loc = e.create("esc", params={"compactorthreshold.hive.compactor.delta.num.threshold": "1"},
                   keys=(("ds", "string"),))
    e.c.add_partition(T.Partition(dbName="default", tableName="esc",
                                  values=["2024-01-01 10:00/x"]))
    (name,) = e.c.get_partition_names("default", "esc", -1)
    assert name == "ds=2024-01-01 10%3A00%2Fx"
    part_dir = e.location("esc", name)
    assert part_dir == os.path.join(loc, name)
    assert listing(loc) == [name]                      # and no "ds=2024-01-01 10:00" tree
    for i in (1, 2):
        e.insert("esc", rows([i]), part=name)
    got = init.run_once()
    assert [o for o, _, _ in got["requested"]] == [("default", "esc", name)]
    assert worker.run_once() and cleaner.run_once()["cleaned"]
    (compacted,) = listing(part_dir)
    assert compacted.startswith("base_0000002")
    assert [i for _, i, _ in e.read("esc", name)] == [1, 2]
    e.c.drop_partition_by_name("default", "esc", name, True)
    assert listing(loc) == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_cli_compact_wait_and_show_compactions(hms_factory, capsys):
    from hms_txn.cli import main
    hms = hms_factory({**FAST, "hive.compactor.initiator.on": "false"})
    e = Engine(hms.client())
    loc = e.create("t")
    for i in range(3):
        e.insert("t", rows([i]))
    expected = e.read("t")
    assert main(["compact", "default.t", "--minor", "--wait", "--poll", "0.05",
                 "--uri", hms.uri]) == 0
    out = capsys.readouterr().out
    assert "MINOR compaction 1 of default.t: initiated" in out
    # The poller shows each state it saw, in order; a short state (ready for cleaning)
    # can pass between two polls.
    seen = re.findall(r"\] (initiated|working|ready for cleaning|succeeded)", out)
    order = ["initiated", "working", "ready for cleaning", "succeeded"]
    assert seen[-1] == "succeeded" and seen == sorted(seen, key=order.index)
    assert listing(loc) and all(COMPACTED.match(n) for n in listing(loc))
    assert e.read("t") == expected
    assert main(["compact", "t", "--minor", "--wait", "--poll", "0.05", "--uri", hms.uri]) == 1
    assert "refused: nothing to compact" in capsys.readouterr().out
    assert main(["show-compactions", "default.t", "--uri", hms.uri]) == 0
    out = capsys.readouterr().out
    assert "MINOR" in out and "succeeded" in out and "refused" in out and "2 compaction(s)" in out
    assert main(["show-compactions", "--json", "--uri", hms.uri]) == 0
    import json
    items = json.loads(capsys.readouterr().out)["compactions"]
    assert [(i["id"], i["state"], i["highestWriteId"]) for i in items] == \
        [(1, "succeeded", 3), (2, "refused", None)]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_cli_compact_wait_stops_where_the_configuration_can_reach(hms_factory, capsys):
    """Issue 30: with the default configuration (no Cleaner) --wait used to wait forever
    for 'succeeded'; it waits for 'ready for cleaning' and says why, and without a worker
    it does not wait at all."""
    from hms_txn.cli import main
    hms = hms_factory({**FAST, "hive.compactor.initiator.on": "false",
                       "hive.compactor.cleaner.on": "false"})
    e = Engine(hms.client())
    e.create("t")
    for i in range(3):
        e.insert("t", rows([i]))
    assert main(["compact", "t", "--minor", "--wait", "--poll", "0.05", "--uri", hms.uri]) == 0
    out = capsys.readouterr().out
    assert ("waiting until it is 'ready for cleaning' (the metastore runs no Cleaner, "
            "hive.compactor.cleaner.on=false: the compacted-away files stay until one runs)"
            ) in out
    assert "] ready for cleaning (highest write id 3" in out.splitlines()[-1]
    assert e.compactions("t")[0].state == "ready for cleaning"

    idle = hms_factory({"hive.compactor.worker.threads": "0"})
    e2 = Engine(idle.client())
    e2.create("u")
    e2.insert("u", rows([1]))
    assert main(["compact", "u", "--wait", "--uri", idle.uri]) == 0
    out = capsys.readouterr().out
    assert "MAJOR compaction 2 of default.u: initiated" in out       # (one database)
    assert ("waiting until it is 'initiated' (the metastore runs no compaction worker, "
            "hive.compactor.worker.threads=0: it stays queued until a worker runs it; not "
            "waiting)") in out


def test_compactor_keys_have_hives_defaults():
    from hms_txn.common.config import Config, ConfigError
    c = Config({})
    assert (c["hive.compactor.initiator.on"], c["hive.compactor.cleaner.on"],
            c["hive.compactor.worker.threads"]) == (False, False, 0)
    assert (c["hive.compactor.delta.num.threshold"], c["hive.compactor.delta.pct.threshold"],
            c["hive.compactor.abortedtxn.threshold"],
            c["hive.compactor.initiator.failed.compacts.threshold"]) == (10, 0.1, 1000, 2)
    assert (c["hive.compactor.check.interval"], c["hive.compactor.worker.timeout"],
            c["hive.compactor.cleaner.run.interval"]) == (300, 86400, 5)
    assert (c["hive.compactor.history.retention.succeeded"],
            c["hive.compactor.history.retention.failed"],
            c["hive.compactor.history.retention.attempted"]) == (3, 3, 2)
    assert Config({"metastore.compactor.worker.threads": "4"})["hive.compactor.worker.threads"] == 4
    assert Config({"hms_txn.compactor.engine": "spark"})["hms_txn.compactor.engine"] == "SPARK"
    with pytest.raises(ConfigError, match="expected one of LOCAL, SPARK"):
        Config({"hms_txn.compactor.engine": "tez"})
    # a SPARK worker without a master stops start-up, naming the key
    with pytest.raises(ConfigError, match="needs spark.master"):
        Worker(Config({"hms_txn.compactor.engine": "SPARK"}), None, None)


def test_compaction_benchmark_smoke(tmp_path):
    from hms_bench.compaction import run
    r = run(deltas=12, rows=200, repeat=1, workdir=str(tmp_path))
    assert r["dirs_before"] == 12
    assert r["minor"]["outputs"] == ["delta_0000001_0000012_v0000100",
                                     "delete_delta_0000001_0000012_v0000100"]
    assert r["major"]["outputs"] == ["base_0000012_v0000100"]
    for kind in ("minor", "major"):
        assert r[kind]["read_after"]["rows"] == r[kind]["read_after_cleaning"]["rows"] == \
            r["read_before"]["rows"]
