"""hive_acid.read / hive_acid.sql (the easy path, issue 44): the JVM reader returns exactly
what the Python data source returns for the same snapshot -- every Spark type the writer
writes, partitioned and not, with and without deletes and updates, filters that skip ORC
row groups, ROW__ID, original files (read through the Python data source) -- and its read
lock lasts as long as the DataFrame (or one derived from it) is used. Against the metastore
server and the one Spark session of conftest."""

from __future__ import annotations

import datetime
import decimal
import gc
import logging
import os
import time

import pyarrow as pa
import pytest

from hms_txn.clients.acid import metastore as M

pytestmark = [pytest.mark.spark]

DEADLINE_S = 60.0

ALL_TYPES = ("id INT, b TINYINT, sh SMALLINT, l BIGINT, f FLOAT, dbl DOUBLE, ok BOOLEAN, "
             "dec DECIMAL(20,4), s STRING, bin BINARY, dt DATE, arr ARRAY<INT>, "
             "m MAP<STRING,BIGINT>, st STRUCT<x:INT,y:STRING,z:ARRAY<DOUBLE>>")


def canon(v):
    """A value as a comparable, hashable key: floats by their repr (NaN equals NaN, -0.0
    differs from 0.0), maps as sorted pairs, rows as tuples."""
    if isinstance(v, float):
        return ("f", repr(v))
    if isinstance(v, dict):
        return ("m", tuple(sorted((canon(k), canon(x)) for k, x in v.items())))
    if isinstance(v, (list, tuple)):            # Row is a tuple
        return tuple(canon(x) for x in v)
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def rows(df):
    return sorted((canon(tuple(r)) for r in df.collect()), key=repr)


def reader_of(df) -> str:
    """"jvm" when hive_acid's JVM reader scans, "python" for the Python data source."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    if "BatchScan" in plan and "hive_acid " in plan and "PythonDataSource" not in plan:
        return "jvm"
    return "python" if "Python" in plan else plan


def scanned_rows(df) -> int:
    """Rows the (executed) JVM reader's scans of ``df`` handed to Spark."""
    total = 0
    it = df._jdf.queryExecution().executedPlan().collectLeaves().iterator()
    while it.hasNext():
        leaf = it.next()
        if leaf.getClass().getSimpleName() == "BatchScanExec":
            total += leaf.metrics().apply("numOutputRows").value()
    return total


def python_source(spark, table):
    return spark.read.format("hive_acid").load(table)


def same_as_python_source(spark, ms, table, expect="jvm", **kw):
    """hive_acid.read == the Python data source, both at the same snapshot (nothing commits
    in between: the table's ValidWriteIdList is checked unchanged) -> the rows."""
    from spark import hive_acid as H
    before = M.valid_write_ids(ms, [table], M.valid_txn_list(ms))
    df = H.read(spark, table, **kw)
    got = rows(df)
    assert reader_of(df) == expect
    want = python_source(spark, table)
    if kw.get("with_row_id"):
        want = spark.read.format("hive_acid").option("withRowId", "true").load(table)
    if kw.get("columns"):
        want = want.select(*(["ROW__ID"] if kw.get("with_row_id") else []), *kw["columns"])
    assert rows(want) == got
    assert M.valid_write_ids(ms, [table], M.valid_txn_list(ms)) == before
    return got


def all_types_rows(n, start=0):
    out = []
    for i in range(start, start + n):
        odd = i % 2 == 1
        out.append((
            i, (i % 256) - 128, -32768 if i % 7 == 0 else i * 3, (1 << 62) + i if odd else -i,
            [float("nan"), -0.0, float("inf"), 1.5][i % 4] if i % 5 else None,
            [float("-inf"), 0.0, 2.25e300, -1e-300][i % 4], None if i % 6 == 0 else odd,
            decimal.Decimal(f"{i}.{i % 10000:04d}") if i % 3 else None,
            ["", "ü€𝄞", f"s{i}", None][i % 4], bytes([i % 256, 0, 255]) if i % 4 else None,
            datetime.date(1970, 1, 1) + datetime.timedelta(days=i * 37 - 5000),
            [] if i % 3 == 0 else [i, None, -i], None if i % 5 == 0 else {f"k{i}": i, "z": None},
            None if i % 7 == 3 else (i, None if odd else f"y{i}", [0.5, None] if odd else [])))
    return out


def test_every_type_partitioned_and_not_with_deletes_and_updates(acid_spark, tname, ms):
    from spark import hive_acid as H
    flat, part = tname, tname + "_p"
    H.create_table(acid_spark, flat, ALL_TYPES)
    H.create_table(acid_spark, part, ALL_TYPES + ", p STRING, q INT", partition_by=["p", "q"])
    data = acid_spark.createDataFrame(all_types_rows(60), ALL_TYPES).repartition(2)
    data.write.format("hive_acid").mode("append").save(flat)        # two buckets
    data.selectExpr("*", "CASE WHEN id % 3 = 0 THEN NULL ELSE CAST(id % 2 AS STRING) END AS p",
                    "id % 2 AS q").write.format("hive_acid").mode("append").save(part)
    assert len(same_as_python_source(acid_spark, ms, flat)) == 60
    H.delete(acid_spark, part, "id % 4 = 1")
    H.delete(acid_spark, flat, "id % 4 = 1")
    H.update(acid_spark, flat, {"s": "concat(coalesce(s, ''), '!')", "arr": "array(id)"},
             "id % 5 = 2")
    got = same_as_python_source(acid_spark, ms, flat)
    assert len(got) == 45 and not [r for r in got if r[0] % 4 == 1]
    assert len(same_as_python_source(acid_spark, ms, part)) == 45
    # projection, ROW__ID, partition pruning by a partition filter
    same_as_python_source(acid_spark, ms, part, columns=["st", "q", "m"])
    same_as_python_source(acid_spark, ms, flat, with_row_id=True, columns=["id", "dec"])
    df = H.read(acid_spark, part, partition_filter="q = 1")
    assert rows(df) == rows(python_source(acid_spark, part).where("q = 1"))


def test_row_group_skipping_and_pieces_with_deletes(acid_spark, tname, ms):
    """Filters pushed as an ORC search argument skip row groups (10,000 rows each) of files
    with deletes (their rows found by row number after the skip); files cut into byte
    ranges (a tiny maxPartitionBytes) read the same."""
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id BIGINT, v STRING")
    acid_spark.range(0, 30000, numPartitions=2).selectExpr("id", "CAST(id * 7 AS STRING) v") \
        .write.format("hive_acid").mode("append").save(tname)
    H.delete(acid_spark, tname, "id % 97 = 3 OR (id BETWEEN 10000 AND 10100)")
    # bucket 1 holds ids 15000-29999: its first row group matches nothing and is skipped
    cond = "id < 3000 OR id BETWEEN 9990 AND 10200 OR id > 27000"
    query = H.read(acid_spark, tname).where(cond)
    got = rows(query)
    assert got == rows(python_source(acid_spark, tname).where(cond))
    assert scanned_rows(query) <= 20000          # a row group of 10,000 rows was skipped
    assert len(got) == sum(1 for i in range(30000) if (i < 3000 or 9990 <= i <= 10200 or
                                                        i > 27000) and i % 97 != 3
                           and not 10000 <= i <= 10100)
    acid_spark.conf.set("spark.sql.files.maxPartitionBytes", "8192")
    try:
        df = H.read(acid_spark, tname)
        assert df.rdd.getNumPartitions() > 2
        assert rows(df) == rows(python_source(acid_spark, tname))
    finally:
        acid_spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_original_files_and_timestamps_read_as_the_python_source(acid_spark, tname, ms):
    """What the JVM reader does not read (pre-ACID files, timestamps) hive_acid.read reads
    through the Python data source at the same snapshot."""
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, v STRING")
    acid_spark.createDataFrame([(10, "x")], "id INT, v STRING").coalesce(1) \
        .write.format("hive_acid").mode("append").save(tname)
    import pyarrow.orc as po
    po.write_table(pa.table({"id": pa.array([20, 21], pa.int32()), "v": ["o1", "o2"]}),
                   os.path.join(M.table_info(ms, tname).location, "000000_0"))
    H.delete(acid_spark, tname, "id = 21")
    assert same_as_python_source(acid_spark, ms, tname, expect="python") == \
        [(10, "x"), (20, "o1")]
    tt = tname + "_t"
    H.create_table(acid_spark, tt, "id INT, ts TIMESTAMP")
    acid_spark.createDataFrame([(1, datetime.datetime(2024, 2, 29, 12, 30, 1, 5))],
                               "id INT, ts TIMESTAMP").write.format("hive_acid") \
        .mode("append").save(tt)
    assert len(same_as_python_source(acid_spark, ms, tt, expect="python")) == 1


def _locks(ms, table):
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    db, name = table.split(".")
    return [(lk.type, lk.state) for lk in
            ms.show_locks(T.ShowLocksRequest(dbname=db, tablename=name)).locks or []]


def _until(what, fn, deadline_s=DEADLINE_S):
    end = time.monotonic() + deadline_s
    while not fn():
        assert time.monotonic() < end, f"not within {deadline_s}s: {what}"
        time.sleep(0.1)


def test_the_lock_lasts_as_long_as_the_dataframe(acid_spark, tname, ms, monkeypatch):
    """read(): a SHARED_READ lock while the DataFrame or one derived from it is reachable
    (checked with the JVM's garbage collections forced), released when neither is; the
    same for hive_acid.sql queries (whose views are dropped); hive_acid.shutdown's driver
    close releases the rest."""
    from spark import _leases
    from spark import hive_acid as H
    from spark._session import registered_driver
    monkeypatch.setattr(_leases, "MIN_GC_INTERVAL_S", 0.0)
    H.create_table(acid_spark, tname, "id INT, v STRING")
    acid_spark.createDataFrame([(i, f"v{i}") for i in range(10)], "id INT, v STRING") \
        .write.format("hive_acid").mode("append").save(tname)
    d = registered_driver(acid_spark)
    held = [(M.SHARED_READ, M.ACQUIRED)]
    assert _locks(ms, tname) == []

    df = H.read(acid_spark, tname)
    assert _locks(ms, tname) == held
    derived = df.where("id > 4").selectExpr("sum(id) AS n")
    scan = [s for s in d.leases.held()]
    del df
    gc.collect()
    lease = d.leases._leases[scan[-1]]
    _until("the lease is orphaned", lambda: lease.orphan)
    for _ in range(3):          # the derived DataFrame keeps its plan: no forced GC ends it
        lease.due = 0
        d.leases.check()
        assert scan[-1] in d.leases.held()
    assert _locks(ms, tname) == held
    assert derived.collect()[0].n == 35
    del derived
    gc.collect()
    _until("the lock is released", lambda: _locks(ms, tname) == [])

    got = H.sql(acid_spark, f"SELECT count(*) AS n FROM {tname} WHERE id < 3")
    assert reader_of(got) == "jvm"
    assert not [t for t in acid_spark.catalog.listTables() if t.name.startswith("__hive_acid")]
    assert _locks(ms, tname) == held and got.collect()[0].n == 3
    del got
    gc.collect()
    _until("the lock of the sql() query is released", lambda: _locks(ms, tname) == [])

    kept = H.read(acid_spark, tname)
    assert _locks(ms, tname) == held
    d.leases.close()                # what hive_acid.shutdown() does to the driver's leases
    assert _locks(ms, tname) == [] and d.leases.held() == []
    assert kept.count() == 10       # readable while the files are there (no compaction)


def test_python_source_reads_say_how_to_read_fast(acid_spark, tname, caplog):
    """spark.read.format("hive_acid") warns, once per table, that hive_acid.read is the
    fast path."""
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT")
    with caplog.at_level(logging.WARNING, logger="spark.hive_acid"):
        python_source(acid_spark, tname).count()
        python_source(acid_spark, tname).count()
        H.read(acid_spark, tname).count()
    said = [r.getMessage() for r in caplog.records if "hive_acid.read(spark" in r.getMessage()]
    assert len(said) == 1 and tname in said[0], said
