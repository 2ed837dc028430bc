"""hive_acid data source: reads, appends, overwrites, layout, snapshot isolation, aborts,
heartbeats and timeouts, against a metastore server this suite starts (see conftest)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow.orc as po
import pytest

from hms_txn.clients.acid import metastore as M

pytestmark = [pytest.mark.spark]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rows(df):
    return sorted(tuple(r) for r in df.collect())


def table_dirs(location):
    return sorted(e for e in os.listdir(location) if not e.startswith((".", "_")))


def snapshot_wids(ms, table):
    txns = M.valid_txn_list(ms)
    return txns, M.valid_write_ids(ms, [table], txns)[table]


def test_register_and_schema(acid_spark, tname):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, name STRING, amount DECIMAL(10,2), ts TIMESTAMP,"
                   " d DATE, tags ARRAY<STRING>, p STRING", partition_by=["p"])
    df = acid_spark.read.format("hive_acid").load(tname)
    assert [f.name for f in df.schema.fields] == ["id", "name", "amount", "ts", "d", "tags", "p"]
    assert df.count() == 0
    ms = M.MetastoreConnection(acid_spark.conf.get("spark.hadoop.hive.metastore.uris"))
    t = ms.get_table_acid_aware(*tname.split("."))
    assert t.parameters["transactional"] == "true"
    assert t.parameters["transactional_properties"] == "default"
    assert t.sd.inputFormat == M.ORC_INPUT and t.sd.outputFormat == M.ORC_OUTPUT
    assert t.sd.serdeInfo.serializationLib == M.ORC_SERDE
    assert [c.name for c in t.partitionKeys] == ["p"]
    ms.close()


def test_created_table_uses_the_session_orc_codec(acid_spark, tname, ms):
    """A table created from Spark gets Spark's ORC codec (snappy by default) as
    ``orc.compress``, the files it writes use it, and an explicit property wins."""
    from spark import hive_acid as H
    db, name = tname.split(".")

    def codec_of_written_file(table):
        acid_spark.createDataFrame([(1,)], "id INT").coalesce(1) \
            .write.format("hive_acid").mode("append").save(table)
        info = M.table_info(ms, table)
        delta = next(d for d in table_dirs(info.location) if d.startswith("delta_"))
        bucket = next(f for f in os.listdir(os.path.join(info.location, delta))
                      if f.startswith("bucket_"))
        return po.ORCFile(os.path.join(info.location, delta, bucket)).compression

    H.create_table(acid_spark, tname, "id INT")
    assert ms.get_table_acid_aware(db, name).parameters["orc.compress"] == "SNAPPY"
    assert codec_of_written_file(tname) == "SNAPPY"

    previous = acid_spark.conf.get("spark.sql.orc.compression.codec")
    acid_spark.conf.set("spark.sql.orc.compression.codec", "zlib")
    try:
        H.create_table(acid_spark, tname + "_z", "id INT")
        H.create_table(acid_spark, tname + "_n", "id INT", properties={"orc.compress": "NONE"})
    finally:
        acid_spark.conf.set("spark.sql.orc.compression.codec", previous)
    assert ms.get_table_acid_aware(db, name + "_z").parameters["orc.compress"] == "ZLIB"
    assert codec_of_written_file(tname + "_z") == "ZLIB"
    assert ms.get_table_acid_aware(db, name + "_n").parameters["orc.compress"] == "NONE"
    assert codec_of_written_file(tname + "_n") == "UNCOMPRESSED"


def test_append_read_and_hive_layout(acid_spark, tname, ms):
    import orc_acid
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, v STRING, p STRING", partition_by=["p"])
    data = [(i, f"v{i}", "a" if i % 3 else "b") for i in range(40)]
    df = acid_spark.createDataFrame(data, "id INT, v STRING, p STRING").repartition(2)
    df.write.format("hive_acid").mode("append").save(tname)
    got = acid_spark.read.format("hive_acid").load(tname)
    assert rows(got) == sorted(data)
    # partition pruning: only p=b's buckets are planned
    assert got.where("p = 'b'").rdd.getNumPartitions() <= 2
    assert rows(got.where("p = 'b'")) == sorted(r for r in data if r[2] == "b")
    # layout as Hive writes it
    info = M.table_info(ms, tname)
    assert sorted(n for n, _, _ in M.list_partitions(ms, info)) == ["p=a", "p=b"]
    txns, wids = snapshot_wids(ms, tname)
    for part in ("a", "b"):
        pdir = os.path.join(info.location, f"p={part}")
        assert table_dirs(pdir) == ["delta_0000001_0000001_0000"]
        ddir = os.path.join(pdir, "delta_0000001_0000001_0000")
        with open(os.path.join(ddir, "_orc_acid_version"), "rb") as f:
            assert f.read() == b"2"
        files = sorted(e for e in os.listdir(ddir) if not e.startswith("_"))
        assert files and all(f.startswith("bucket_0000") for f in files)
        for name in files:
            f = po.ORCFile(os.path.join(ddir, name))
            ev = f.read()
            assert ev.schema.names == ["operation", "originalTransaction", "bucket", "rowId",
                                       "currentTransaction", "row"]
            n = ev.num_rows
            writer = int(name.split("_")[1])
            assert set(ev.column("operation").to_pylist()) == {0}
            assert set(ev.column("originalTransaction").to_pylist()) == {1}
            assert set(ev.column("currentTransaction").to_pylist()) == {1}
            assert set(ev.column("bucket").to_pylist()) == {orc_acid.encode_bucket(writer, 0)}
            assert ev.column("rowId").to_pylist() == list(range(n))
            md = f.metadata
            assert md[b"hive.acid.version"] == b"2"
            assert md[b"hive.acid.stats"] == f"{n},0,0".encode()
            assert md[b"hive.acid.key.index"] == \
                f"1,{orc_acid.encode_bucket(writer, 0)},{n - 1};".encode()
        # orc_acid reads back the same rows
        t = orc_acid.read_table(pdir, wids, valid_txns=txns)
        assert sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist())) == \
            sorted((i, v) for i, v, p in data if p == part)


def test_overwrite_and_projection(acid_spark, tname, ms):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, v STRING")
    acid_spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING") \
        .write.format("hive_acid").mode("append").save(tname)
    acid_spark.createDataFrame([(3, "c")], "id INT, v STRING").coalesce(1) \
        .write.format("hive_acid").mode("overwrite").save(tname)
    assert rows(acid_spark.read.format("hive_acid").load(tname)) == [(3, "c")]
    info = M.table_info(ms, tname)
    assert "base_0000002" in table_dirs(info.location)
    assert os.listdir(os.path.join(info.location, "base_0000002")) == ["_orc_acid_version",
                                                                       "bucket_00000"] or \
        sorted(os.listdir(os.path.join(info.location, "base_0000002"))) == \
        ["_orc_acid_version", "bucket_00000"]
    # projection: a user schema or the columns option
    assert rows(acid_spark.read.format("hive_acid").schema("v STRING").load(tname)) == [("c",)]
    assert rows(acid_spark.read.format("hive_acid").option("columns", "v").load(tname)) == \
        [("c",)]
    # an empty overwrite empties the table
    acid_spark.createDataFrame([], "id INT, v STRING") \
        .write.format("hive_acid").mode("overwrite").save(tname)
    assert acid_spark.read.format("hive_acid").load(tname).count() == 0


def test_projection_of_partition_columns_only(acid_spark, tname):
    """No data column read (only the row counts of the stripes) still yields every row,
    deleted ones excluded."""
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, p STRING", partition_by=["p"])
    acid_spark.createDataFrame([(1, "a"), (2, "a"), (3, "b")], "id INT, p STRING") \
        .write.format("hive_acid").mode("append").save(tname)
    H.delete(acid_spark, tname, "id = 2")
    assert rows(acid_spark.read.format("hive_acid").option("columns", "p").load(tname)) == \
        [("a",), ("b",)]


def test_snapshot_isolation_reader_started_before_commit(acid_spark, tname, ms, monkeypatch):
    """A scan planned before a writer commits does not see the commit, although its tasks
    read the files afterwards; one started after does. The scan holds a SHARED_READ lock from
    planning until its input partitions report completion."""
    from spark import hive_acid as H
    from spark._session import driver_for
    H.create_table(acid_spark, tname, "id INT, v STRING")
    acid_spark.createDataFrame([(i, "old") for i in range(10)], "id INT, v STRING") \
        .coalesce(1).write.format("hive_acid").mode("append").save(tname)
    # Hold the reader between planning (snapshot and lock taken) and its tasks, inside the
    # driver's own RPC endpoint: the gate is then exactly where it must be whatever Spark's
    # task pipelining does (a gate downstream of the scan raced with the scan finishing).
    # Only the first plan is held; the writers below plan their own reads freely.
    driver = driver_for(acid_spark)
    planned, go = threading.Event(), threading.Event()
    real_plan_read = driver.rpc_plan_read

    def gated_plan_read(*args):
        out = real_plan_read(*args)
        if not planned.is_set():
            planned.set()
            go.wait(120)
        return out

    monkeypatch.setattr(driver, "rpc_plan_read", gated_plan_read)
    result = {}

    def reader():
        try:
            result["rows"] = rows(acid_spark.read.format("hive_acid").load(tname))
        except Exception as e:  # pragma: no cover - reported below
            result["error"] = e

    th = threading.Thread(target=reader)
    th.start()
    try:
        assert planned.wait(120), result
        db, t = tname.split(".")
        from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
        locks = ms.show_locks(T.ShowLocksRequest(dbname=db, tablename=t)).locks or []
        assert [(lk.type, lk.state) for lk in locks] == [(M.SHARED_READ, M.ACQUIRED)]
        # a writer commits between the scan's planning and its reading: an append, a delete
        acid_spark.createDataFrame([(100, "new")], "id INT, v STRING").coalesce(1) \
            .write.format("hive_acid").mode("append").save(tname)
        H.delete(acid_spark, tname, "id < 5")
    finally:
        go.set()
        th.join(120)
    assert "error" not in result, result.get("error")
    assert result["rows"] == [(i, "old") for i in range(10)]
    after = rows(acid_spark.read.format("hive_acid").load(tname))
    assert after == [(i, "old") for i in range(5, 10)] + [(100, "new")]
    # the scan's lock is released once every input partition reported completion
    deadline = time.time() + 30
    while ms.show_locks(T.ShowLocksRequest(dbname=db, tablename=t)).locks:
        assert time.time() < deadline
        time.sleep(0.1)


def _txn_states(ms):
    info = ms.get_open_txns_info()
    return {t.id: t.state for t in info.open_txns}


def test_aborted_write_leaves_no_rows_and_no_files(acid_spark, tname, ms):
    from pyspark.sql import functions as F
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, p STRING", partition_by=["p"])
    acid_spark.createDataFrame([(1, "x")], "id INT, p STRING") \
        .write.format("hive_acid").mode("append").save(tname)
    info = M.table_info(ms, tname)
    before = sorted(os.walk(info.location))
    hwm = ms.get_open_txns().txn_high_water_mark
    bad = acid_spark.range(0, 20, numPartitions=2).select(
        F.expr("CASE WHEN id = 17 THEN CAST(raise_error('boom') AS INT) ELSE CAST(id AS INT)"
               " END").alias("id"),
        F.expr("CASE WHEN id % 2 = 0 THEN 'even' ELSE 'x' END").alias("p"))
    with pytest.raises(Exception, match="boom"):
        bad.write.format("hive_acid").mode("append").save(tname)
    assert rows(acid_spark.read.format("hive_acid").load(tname)) == [(1, "x")]
    assert sorted(os.walk(info.location)) == before          # no files, no new directories
    assert [n for n, _, _ in M.list_partitions(ms, info)] == ["p=x"]
    states = _txn_states(ms)
    new = [t for t in states if t > hwm]
    assert new and all(states[t] == 2 for t in new)          # ABORTED


def test_heartbeat_keeps_long_write_alive(acid_spark, tname):
    """A write job running longer than hive.txn.timeout commits: the driver heartbeats."""
    from pyspark.sql import functions as F
    from spark import hive_acid as H
    from tests.spark.conftest import ACID_TXN_TIMEOUT_S
    H.create_table(acid_spark, tname, "id INT")

    @F.udf("int")
    def slow(x):
        import time as _t
        _t.sleep(ACID_TXN_TIMEOUT_S + 3)
        return x

    acid_spark.createDataFrame([(7,)], "id INT").coalesce(1).select(slow("id").alias("id")) \
        .write.format("hive_acid").mode("append").save(tname)
    assert rows(acid_spark.read.format("hive_acid").load(tname)) == [(7,)]


SPECULATIVE_SESSION = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {repo!r})
    from pyspark.sql import SparkSession
    from spark import hive_acid
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.speculation", "true")
             .config("spark.hadoop.hive.metastore.uris", {uri!r}).getOrCreate())
    hive_acid.register(spark)
    out = {{}}
    df = spark.createDataFrame([(2,)], "id INT")
    for name, write in [
            ("data source", lambda: df.write.format("hive_acid").mode("append").save({table!r})),
            ("insert", lambda: hive_acid.insert(spark, {table!r}, df)),
            ("delete", lambda: hive_acid.delete(spark, {table!r}, "id = 1"))]:
        try:
            write()
            out[name] = "wrote"
        except Exception as e:      # the data source's error comes wrapped by Spark
            out[name] = type(e).__name__ + ": " + str(e)
    out["rows"] = sorted(r.id for r in spark.read.format("hive_acid").load({table!r}).collect())
    print("RESULT " + json.dumps(out))
""")


def test_writes_are_refused_when_speculation_is_on(acid_spark, acid_hms, tname, tmp_path):
    """Speculative attempts of a task would write the same file; a killed one can remove the
    committed file. Reads stay allowed."""
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT")
    acid_spark.createDataFrame([(1,)], "id INT").write.format("hive_acid").mode("append") \
        .save(tname)
    script = tmp_path / "job.py"
    script.write_text(SPECULATIVE_SESSION.format(repo=REPO, uri=acid_hms.uri, table=tname))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"), timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    out = json.loads(lines[0][len("RESULT "):])
    for name in ("data source", "insert", "delete"):
        assert "hive_acid writes need spark.speculation=false" in out[name], out
    assert out["insert"].startswith("HiveAcidError") and out["delete"].startswith("HiveAcidError")
    assert out["rows"] == [1]
    assert rows(acid_spark.read.format("hive_acid").load(tname)) == [(1,)]


KILLED_JOB = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {repo!r})
    from pyspark.sql import SparkSession, functions as F
    from spark import hive_acid
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.hadoop.hive.metastore.uris", {uri!r}).getOrCreate())
    hive_acid.register(spark)
    marker = {marker!r}

    @F.udf("int")
    def hang(x):
        open(marker, "w").close()
        time.sleep(600)
        return x

    spark.createDataFrame([(1,)], "id INT").select(hang("id").alias("id")) \\
        .write.format("hive_acid").mode("append").save({table!r})
""")


def test_killed_job_transaction_aborted_by_timeout(acid_spark, acid_hms, tname, ms, tmp_path):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT")
    marker = str(tmp_path / "writing")
    script = tmp_path / "job.py"
    script.write_text(KILLED_JOB.format(repo=REPO, uri=acid_hms.uri, marker=marker,
                                        table=tname))
    hwm = ms.get_open_txns().txn_high_water_mark
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "job.log", "wb"), env=env,
                            start_new_session=True)
    try:
        deadline = time.time() + 180
        while not os.path.exists(marker):
            assert proc.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.time() < deadline
            time.sleep(0.2)
        states = _txn_states(ms)
        mine = [t for t in states if t > hwm and states[t] == 3]   # OPEN
        assert len(mine) == 1, states
        time.sleep(2)   # still open while the driver lives and heartbeats
        assert _txn_states(ms)[mine[0]] == 3
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    deadline = time.time() + 60
    while _txn_states(ms).get(mine[0]) != 2:
        assert time.time() < deadline, _txn_states(ms)
        time.sleep(0.5)
    assert acid_spark.read.format("hive_acid").load(tname).count() == 0
