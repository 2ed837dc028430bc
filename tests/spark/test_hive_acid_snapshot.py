"""hive_acid.snapshot(): the JVM scan path (hive_acid's JVM reader; Spark's own ORC reader
with the snapshot applied by Spark filters and a delete bitmap or an anti join) returns
exactly the rows of the Python data source and of orc_acid.read_table; falls back where it
cannot; holds its lock for the block only. Against the metastore server and Spark session
of conftest (no mocks)."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pyarrow as pa
import pytest

import orc_acid
from hms_txn.clients.acid import metastore as M
from spark import _native as N
from spark import _native_stock as K

pytestmark = [pytest.mark.spark]


def srt(xs):
    return sorted(xs, key=repr)


def rows(df):
    return srt(tuple(r) for r in df.collect())


def orc_rows(ms, table, txns, wids, columns=None):
    """orc_acid.read_table over every partition at the given snapshot, partition values
    appended (integer partition columns as ints)."""
    info = M.table_info(ms, table)
    if info.partition_keys:
        targets = [(loc, values) for _, values, loc in M.list_partitions(ms, info)]
    else:
        targets = [(info.location, [])]
    out = []
    for loc, values in targets:
        t = orc_acid.read_table(loc, wids, valid_txns=txns, columns=columns)
        ints = ("tinyint", "smallint", "int", "bigint")
        typed = tuple(None if v == "__HIVE_DEFAULT_PARTITION__" else
                      int(v) if t in ints else v
                      for v, (_, t) in zip(values, info.partition_keys))
        for r in t.to_pylist():
            out.append(tuple(r.values()) + typed)
    return srt(out)


@contextlib.contextmanager
def spark_orc_reader(spark):
    """hive_acid's JVM reader off: the JVM path reads with Spark's own ORC reader."""
    spark.conf.set(N.JVM_READER_CONF, "false")
    try:
        yield
    finally:
        spark.conf.unset(N.JVM_READER_CONF)


def check_all_paths(spark, ms, table, expect_native=True, **kw):
    """Native snapshot (JVM reader; Spark's ORC reader with a delete bitmap, with an anti
    join) == Python data source at the same snapshot == orc_acid; -> rows."""
    from spark import hive_acid as H
    snap = H.snapshot(spark, table, **kw)
    with snap as df:
        got = rows(df)
        assert snap.native is expect_native, snap.fallback_reason
        if snap.native:
            assert snap.reader == "jvm"
            with spark_orc_reader(spark), H.snapshot(spark, table, **kw) as stock:
                assert rows(stock) == got
            # the same snapshot with the deletes applied by Spark's anti join (the path of
            # delete sets too large to read on the driver)
            bound, N.MAX_DELETES = N.MAX_DELETES, -1
            try:
                with H.snapshot(spark, table, **kw) as joined:
                    assert rows(joined) == got
            finally:
                N.MAX_DELETES = bound
        with H.snapshot(spark, table, native=False, **kw) as py:
            assert rows(py) == got
        if not kw:
            assert orc_rows(ms, table, snap.txns, snap.write_ids) == got
            assert rows(spark.read.format("hive_acid").load(table)) == got
    return got


@contextlib.contextmanager
def heartbeating(ms, txn_id):
    """Heartbeat an open transaction (of the test's own) in the background."""
    import threading
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    from hms_txn.clients.acid import metastore as MM
    stop = threading.Event()
    conn = MM.MetastoreConnection(ms.uri)

    def beat():
        while not stop.wait(1.0):
            conn.heartbeat(T.HeartbeatRequest(txnid=txn_id))
    t = threading.Thread(target=beat, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        conn.close()


def test_delete_bitmap_filter_matches_the_delete_set(acid_spark):
    """The bitmap filter drops exactly the rows whose (originalTransaction, bucket, rowId)
    is in the delete set: several pairs, rows outside a pair's range, rows of pairs with no
    deletes, rowIds far beyond 2^31 * 64; and the bounds that send a partition to the join."""
    rng = np.random.default_rng(7)
    big = 10 ** 12
    groups = {
        (1, 536870912): np.unique(rng.integers(0, 5000, 400)),
        (1, 536936448): np.array([0, 63, 64, 4999], dtype=np.int64),
        (7, 536870912): np.array([big, big + 1, big + 130], dtype=np.int64),
        (9, 537001984): np.array([3], dtype=np.int64),
    }
    bm = K.delete_bitmap(groups)
    assert bm is not None and len(bm.pairs) == 4
    pairs = [(o, b) for o in (1, 7, 9, 11) for b in (536870912, 536936448, 537001984)]
    data = [(o, b, r) for o, b in pairs for r in list(range(0, 5200, 3)) + [63, 64, 4999]] + \
           [(7, 536870912, big + d) for d in range(-70, 200)]
    df = acid_spark.createDataFrame(data, "originalTransaction BIGINT, bucket INT, rowId BIGINT")
    got = sorted(tuple(r) for r in df.where(K.not_deleted(acid_spark, bm)).collect())
    deleted = {(o, b, int(r)) for (o, b), rs in groups.items() for r in rs}
    want = sorted(r for r in data if r not in deleted)
    assert len(want) < len(data) and got == want

    assert K.delete_bitmap({}) is None
    assert K.delete_bitmap({(1, k): np.array([k]) for k in range(K.BITMAP_MAX_PAIRS + 1)}) \
        is None
    assert K.delete_bitmap({(1, 0): np.array([0, 64 * K.BITMAP_MAX_WORDS])}) is None
    assert K.delete_bitmap({(1, 0): np.array([0, 64 * K.BITMAP_MAX_WORDS - 1])}) is not None
    assert K.delete_bitmap({(1, 0): np.array([0, 64 * 9])}, max_words=10) is not None
    assert K.delete_bitmap({(1, 0): np.array([0, 64 * 10])}, max_words=10) is None


def test_appends_aborted_open_deletes_updates(acid_spark, tname, ms):
    """Several appends, an aborted write, a write still open, a multi-write-id delta with an
    aborted and an open id inside its range, deletes and updates."""
    from pyspark.sql import functions as F
    from spark import hive_acid as H
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    H.create_table(acid_spark, tname, "id INT, v STRING, amount DECIMAL(10,2), d DATE")
    schema = "id INT, v STRING, amount DECIMAL(10,2), d DATE"
    for k in range(3):
        acid_spark.createDataFrame(
            [(k * 100 + i, f"v{k}-{i}", None, None) for i in range(20)], schema) \
            .repartition(2).write.format("hive_acid").mode("append").save(tname)
    bad = acid_spark.range(0, 10, numPartitions=2).select(
        F.expr("CASE WHEN id = 7 THEN CAST(raise_error('boom') AS INT) ELSE CAST(id AS INT)"
               " END").alias("id"), F.lit("bad").alias("v"),
        F.lit(None).cast("decimal(10,2)").alias("amount"), F.lit(None).cast("date").alias("d"))
    with pytest.raises(Exception, match="boom"):
        bad.write.format("hive_acid").mode("append").save(tname)
    base = check_all_paths(acid_spark, ms, tname)
    assert len(base) == 60

    # one delta spanning three write ids (as Hive streaming writes them): the first
    # committed, the second aborted, the third open at snapshot time
    info = M.table_info(ms, tname)
    txns = [ms.open_txns(T.OpenTxnRequest(num_txns=1, user="t", hostname="h")).txn_ids[0]
            for _ in range(3)]
    wids = [w.writeId for w in sorted(ms.allocate_table_write_ids(
        T.AllocateTableWriteIdsRequest(dbName=info.db, tableName=info.name,
                                       txnIds=txns)).txnToWriteIds, key=lambda w: w.txnId)]
    from orc_acid.writer import insert_events as _insert_events, write_acid_file
    row_schema = pa.schema([("id", pa.int32()), ("v", pa.string()),
                            ("amount", pa.decimal128(10, 2)), ("d", pa.date32())])
    events = pa.concat_tables([_insert_events(pa.table(
        {"id": pa.array([1000 * (j + 1) + i for i in range(5)], pa.int32()),
         "v": [f"s{j}"] * 5, "amount": pa.array([None] * 5, pa.decimal128(10, 2)),
         "d": pa.array([None] * 5, pa.date32())}), w, orc_acid.encode_bucket(0, 0), 0,
        row_schema) for j, w in enumerate(wids)])
    write_acid_file(os.path.join(info.location, f"delta_{wids[0]:07d}_{wids[2]:07d}",
                                 "bucket_00000"), events, inserts=15)
    ms.commit_txn(T.CommitTxnRequest(txnid=txns[0]))
    ms.abort_txn(T.AbortTxnRequest(txnid=txns[1]))
    # the third stays open while every path reads (heartbeated: the checks take longer
    # than hive.txn.timeout on a loaded machine)
    with heartbeating(ms, txns[2]):
        got = check_all_paths(acid_spark, ms, tname)
    assert sorted(r[0] for r in got if r[1] and r[1].startswith("s")) == \
        [1000 + i for i in range(5)]
    ms.commit_txn(T.CommitTxnRequest(txnid=txns[2]))
    got = check_all_paths(acid_spark, ms, tname)
    assert sorted(r[0] for r in got if r[1] and r[1].startswith("s")) == \
        [1000 + i for i in range(5)] + [3000 + i for i in range(5)]

    # deletes and updates (delete deltas + new row versions)
    H.delete(acid_spark, tname, "id % 3 = 0")
    H.update(acid_spark, tname, {"v": "concat(v, '!')", "amount": "1.25",
                                 "d": "DATE'2024-02-29'"}, "id % 5 = 1")
    got = check_all_paths(acid_spark, ms, tname)
    assert not [r for r in got if r[0] % 3 == 0]
    assert all(r[1].endswith("!") and str(r[2]) == "1.25" for r in got if r[0] % 5 == 1)
    # projection and ROW__ID
    check_all_paths(acid_spark, ms, tname, columns=["v", "id"])
    with_ids = check_all_paths(acid_spark, ms, tname, with_row_id=True)
    assert len({r[0] for r in with_ids}) == len(got)


def test_overwrite_base_and_compaction(acid_spark, acid_hms, tname, ms):
    from spark import hive_acid as H
    from hms_txn.service.compactor.worker import Worker
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    H.create_table(acid_spark, tname, "id BIGINT, s STRING")
    acid_spark.createDataFrame([(i, "old") for i in range(30)], "id BIGINT, s STRING") \
        .write.format("hive_acid").mode("append").save(tname)
    acid_spark.createDataFrame([(i, "new") for i in range(10)], "id BIGINT, s STRING") \
        .repartition(2).write.format("hive_acid").mode("overwrite").save(tname)
    acid_spark.createDataFrame([(i, "more") for i in range(10, 15)], "id BIGINT, s STRING") \
        .write.format("hive_acid").mode("append").save(tname)
    H.delete(acid_spark, tname, "id IN (2, 12)")
    expected = srt([(i, "new") for i in range(10) if i != 2] +
                      [(i, "more") for i in range(10, 15) if i != 12])
    assert check_all_paths(acid_spark, ms, tname) == expected
    # major compaction (the server's own worker): base_N_vT with the live rows only
    db, name = tname.split(".")
    assert ms.compact2(T.CompactionRequest(dbname=db, tablename=name, type=2)).accepted
    assert Worker(acid_hms.ms.config, acid_hms.ms.units, acid_hms.ms.txns).run_once()
    info = M.table_info(ms, tname)
    assert any(d.startswith("base_") and "_v" in d for d in os.listdir(info.location))
    assert check_all_paths(acid_spark, ms, tname) == expected


def test_partitioned_pruning_projection_and_bucketed(acid_spark, tname, ms):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, v STRING, day STRING, n INT",
                   partition_by=["day", "n"])
    data = [(i, f"v{i}", f"2024-01-0{i % 3 + 1}", i % 2) for i in range(60)]
    acid_spark.createDataFrame(data, "id INT, v STRING, day STRING, n INT").repartition(2) \
        .write.format("hive_acid").mode("append").save(tname)
    H.delete(acid_spark, tname, "id % 7 = 0")
    got = check_all_paths(acid_spark, ms, tname)
    assert got == srt(r for r in data if r[0] % 7)
    # the query's bitmap budget spent by the first partition(s): the others use the join
    budget, K.BITMAP_MAX_WORDS_PER_QUERY = K.BITMAP_MAX_WORDS_PER_QUERY, 3
    try:
        with spark_orc_reader(acid_spark), H.snapshot(acid_spark, tname) as df:
            plan = df._jdf.queryExecution().optimizedPlan().toString()
            assert "LeftAnti" in plan and "UnsafeArrayData" in plan, plan
            assert rows(df) == got
    finally:
        K.BITMAP_MAX_WORDS_PER_QUERY = budget
    want = srt((r[0], 1) for r in data if r[0] % 7 and r[2] == "2024-01-02" and r[3] == 1)
    with H.snapshot(acid_spark, tname) as df:
        pruned = df.where("day = '2024-01-02' AND n = 1").select("id", "n")
        assert rows(pruned) == want
        # the optimizer drops the union branches of the other partitions: the JVM reader's
        # scan of one partition is left, which applies its delete events itself
        plan = pruned._jdf.queryExecution().optimizedPlan().toString()
        assert plan.count("RelationV2") == 1 and "Join" not in plan, plan
        assert "Filter" not in plan.replace("Filter (", "") or "element_at" not in plan, plan
    with spark_orc_reader(acid_spark), H.snapshot(acid_spark, tname) as df:
        pruned = df.where("day = '2024-01-02' AND n = 1").select("id", "n")
        assert rows(pruned) == want
        # the same with Spark's ORC reader: one scan, the bitmap filter (no join)
        plan = pruned._jdf.queryExecution().optimizedPlan().toString()
        assert plan.count("Relation") == 1 and "Join" not in plan, plan
        assert "element_at(org.apache.spark.sql.catalyst.expressions.UnsafeArrayData" in plan
    snap = H.snapshot(acid_spark, tname, columns=["v", "day"], partition_filter="n = 0")
    with snap as df:
        assert snap.native
        assert df.columns == ["v", "day"]
        assert rows(df) == srt((r[1], r[2]) for r in data if r[0] % 7 and r[3] == 0)
        assert df.rdd.getNumPartitions() <= 3 * 2
    check_all_paths(acid_spark, ms, tname, columns=["v", "day"], partition_filter="n = 0")
    with pytest.raises(H.HiveAcidError, match="partition"):
        with H.snapshot(acid_spark, tname, partition_filter="id = 1"):
            pass

    bt = tname + "_b"
    H.create_table(acid_spark, bt, "id INT, v STRING", buckets=4, bucket_by=["id"])
    H.insert(acid_spark, bt, acid_spark.createDataFrame([(i, f"b{i}") for i in range(40)],
                                                        "id INT, v STRING"))
    H.update(acid_spark, bt, {"v": "'u'"}, "id < 10")
    H.delete(acid_spark, bt, "id >= 35")
    got = check_all_paths(acid_spark, ms, bt)
    assert got == srt([(i, "u") for i in range(10)] + [(i, f"b{i}") for i in range(10, 35)])


def test_fallbacks_return_correct_rows(acid_spark, tname, ms):
    from spark import hive_acid as H
    # insert-only table
    H.create_table(acid_spark, tname, "id INT, v STRING", insert_only=True)
    H.insert(acid_spark, tname, acid_spark.createDataFrame([(1, "a"), (2, "b")],
                                                           "id INT, v STRING"))
    snap = H.snapshot(acid_spark, tname)
    with snap as df:
        assert not snap.native and "insert-only" in snap.fallback_reason
        assert rows(df) == [(1, "a"), (2, "b")]
    # original (pre-ACID) files next to ACID deltas
    ot = tname + "_o"
    H.create_table(acid_spark, ot, "id INT, v STRING")
    acid_spark.createDataFrame([(10, "x")], "id INT, v STRING").coalesce(1) \
        .write.format("hive_acid").mode("append").save(ot)
    info = M.table_info(ms, ot)
    import pyarrow.orc as po
    po.write_table(pa.table({"id": pa.array([20, 21], pa.int32()), "v": ["o1", "o2"]}),
                   os.path.join(info.location, "000000_0"))
    got = check_all_paths(acid_spark, ms, ot, expect_native=False)
    assert got == [(10, "x"), (20, "o1"), (21, "o2")]
    # a file whose row struct does not match the table (a column added later)
    at = tname + "_a"
    H.create_table(acid_spark, at, "id INT")
    acid_spark.createDataFrame([(1,)], "id INT").coalesce(1) \
        .write.format("hive_acid").mode("append").save(at)
    db, name = at.split(".")
    t = ms.get_table_acid_aware(db, name)
    t.sd.cols.append(__import__("hms_txn.wire.thrift_gen.hive_metastore.ttypes",
                                fromlist=["FieldSchema"]).FieldSchema("w", "string", ""))
    ms.alter_table(db, name, t)
    snap = H.snapshot(acid_spark, at)
    with snap as df:
        assert not snap.native and "row struct" in snap.fallback_reason
        assert rows(df) == [(1, None)]
    # timestamps are left to the Python path
    tt = tname + "_t"
    H.create_table(acid_spark, tt, "id INT, ts TIMESTAMP")
    snap = H.snapshot(acid_spark, tt)
    with snap as df:
        assert not snap.native and "timestamp" in snap.fallback_reason
        assert df.count() == 0


def _locks(ms, table):
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    db, name = table.split(".")
    return [(lk.type, lk.state, lk.txnid) for lk in
            ms.show_locks(T.ShowLocksRequest(dbname=db, tablename=name)).locks or []]


def test_snapshot_is_stable_and_lock_held_for_the_block(acid_spark, acid_hms, tname, ms):
    """A writer committing inside the block is not seen in it; the SHARED_READ lock is held
    (and heartbeated past hive.txn.timeout) until the block exits; the Cleaner waits for it."""
    import time
    from spark import hive_acid as H
    from hms_txn.service.compactor.cleaner import Cleaner
    from hms_txn.service.compactor.worker import Worker
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    from tests.spark.conftest import ACID_TXN_TIMEOUT_S
    H.create_table(acid_spark, tname, "id INT, v STRING")
    for k in range(2):
        acid_spark.createDataFrame([(k * 10 + i, "old") for i in range(5)],
                                   "id INT, v STRING").coalesce(1) \
            .write.format("hive_acid").mode("append").save(tname)
    before = srt([(i, "old") for i in range(5)] + [(10 + i, "old") for i in range(5)])
    assert _locks(ms, tname) == []
    snap = H.snapshot(acid_spark, tname)
    with snap as df:
        assert snap.native
        assert _locks(ms, tname) == [(M.SHARED_READ, M.ACQUIRED, 0)]
        assert rows(df) == before
        # writers commit: an append, a delete, an update
        acid_spark.createDataFrame([(100, "new")], "id INT, v STRING").coalesce(1) \
            .write.format("hive_acid").mode("append").save(tname)
        H.delete(acid_spark, tname, "id < 3")
        H.update(acid_spark, tname, {"v": "'upd'"}, "id >= 10")
        assert rows(df) == before
        assert rows(df.where("id >= 3")) == [r for r in before if r[0] >= 3]
        # a major compaction commits meanwhile: its Cleaner must wait for this lock
        db, name = tname.split(".")
        assert ms.compact2(T.CompactionRequest(dbname=db, tablename=name, type=2)).accepted
        assert Worker(acid_hms.ms.config, acid_hms.ms.units, acid_hms.ms.txns).run_once()
        cleaner = Cleaner(acid_hms.ms.config, acid_hms.ms.units, acid_hms.ms.txns)
        waiting = cleaner.run_once()["waiting"]
        assert any("lock" in w for w in waiting.values()), waiting
        time.sleep(ACID_TXN_TIMEOUT_S + 2)      # heartbeated: not timed out
        assert _locks(ms, tname) == [(M.SHARED_READ, M.ACQUIRED, 0)]
        assert rows(df) == before
    assert _locks(ms, tname) == []
    assert cleaner.run_once()["cleaned"]
    after = srt([(i, "old") for i in range(3, 5)] + [(10 + i, "upd") for i in range(5)] +
                [(100, "upd")])
    assert check_all_paths(acid_spark, ms, tname) == after
    # an exception inside the block releases the lock too
    with pytest.raises(ZeroDivisionError):
        with H.snapshot(acid_spark, tname):
            assert _locks(ms, tname)
            1 / 0
    assert _locks(ms, tname) == []


def test_snapshot_inside_transaction(acid_spark, tname, ms):
    """Inside transaction(): the transaction's snapshot, no extra lock; natively for a table
    the transaction has not written, through the Python source (own uncommitted statements
    visible) for one it has."""
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT")
    other = tname + "_x"
    H.create_table(acid_spark, other, "id INT")
    acid_spark.createDataFrame([(1,), (2,)], "id INT").coalesce(1) \
        .write.format("hive_acid").mode("append").save(other)
    with H.transaction(acid_spark) as tx:
        H.insert(acid_spark, tname, acid_spark.createDataFrame([(7,)], "id INT"))
        # another session-less writer commits to `other` after the transaction's snapshot
        import threading
        th = threading.Thread(target=lambda: H.insert(
            acid_spark, other, acid_spark.createDataFrame([(3,)], "id INT")))
        th.start()
        th.join()
        snap_own = tx.snapshot(tname)
        with snap_own as df:
            assert not snap_own.native and "uncommitted" in snap_own.fallback_reason
            assert rows(df) == [(7,)]
        snap = H.snapshot(acid_spark, other)
        with snap as df:
            assert snap.native and snap.lock_id is None
            assert rows(df) == [(1,), (2,)]
    with H.snapshot(acid_spark, other) as df:
        assert rows(df) == [(1,), (2,), (3,)]
    with H.snapshot(acid_spark, tname) as df:
        assert rows(df) == [(7,)]
