"""hive_acid on S3 (moto's S3 server, started by the suite): the same pipeline -- append,
overwrite, delete, update, merge, snapshot reads -- on an s3a:// database and on a local
one gives the same results; Spark's executors read and write through pyarrow's S3 file
system, configured from the session's ``spark.hadoop.fs.s3a.*`` keys."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

pytestmark = [pytest.mark.spark]

SCHEMA = "id INT, qty BIGINT, name STRING, p STRING"


@pytest.fixture(scope="module")
def s3_hms(moto_s3):
    """A metastore whose hive-site.xml has the S3A keys (it creates and drops the
    directories of s3a:// databases, tables and partitions)."""
    from tests.support.servers import InProcessServer
    root = tempfile.mkdtemp(prefix="hive-acid-s3-hms-")
    server = InProcessServer(os.path.join(root, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{root}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(root, "warehouse"),
        **moto_s3.options()})
    yield server
    server.stop()


@pytest.fixture
def s3_session(acid_spark, acid_hms, s3_hms, moto_s3):
    """The suite's Spark session, registered on the S3 metastore with the S3A keys set on
    the session; back on the suite's metastore afterwards."""
    from spark import hive_acid as H
    for k, v in moto_s3.options().items():
        acid_spark.conf.set(f"spark.hadoop.{k}", v)
    H.register(acid_spark, s3_hms.uri)
    yield acid_spark
    for k in moto_s3.options():
        acid_spark.conf.unset(f"spark.hadoop.{k}")
    H.register(acid_spark, acid_hms.uri)


def rows(df):
    return sorted(tuple(r) for r in df.collect())


def pipeline(spark, table: str) -> dict:
    """Every hive_acid write and read; what each step reads back."""
    from pyspark.sql import functions as F
    from spark import hive_acid as H
    seen = {}
    H.create_table(spark, table, SCHEMA, partition_by=["p"])
    data = [(i, i * 7 % 101, f"n{i}", "abc"[i % 3]) for i in range(300)]
    spark.createDataFrame(data, SCHEMA).repartition(2).write.format("hive_acid") \
        .mode("append").save(table)
    seen["append"] = rows(spark.read.format("hive_acid").load(table))
    more = spark.createDataFrame([(i, i, f"m{i}", "d") for i in range(1000, 1100)], SCHEMA)
    more.write.format("hive_acid").mode("append").save(table)
    H.delete(spark, table, "qty < 10 OR name = 'n77'")
    seen["delete"] = rows(spark.read.format("hive_acid").load(table))
    H.update(spark, table, set={"qty": "qty * 2", "name": "upper(name)"},
             condition="p = 'b' AND id % 3 = 0")
    seen["update"] = rows(spark.read.format("hive_acid").load(table))
    src = spark.createDataFrame([(i, i + 1, "d" if i % 7 == 0 else "u")
                                 for i in range(250, 330)], "id INT, qty BIGINT, op STRING")
    H.merge(spark, table, src, on="t.id = s.id", when_matched_delete="s.op = 'd'",
            when_matched_update={"qty": "s.qty"},
            when_not_matched_insert={"id": "s.id", "qty": "s.qty", "name": "'new'", "p": "'c'"})
    seen["merge"] = rows(spark.read.format("hive_acid").load(table))
    # an aborted transaction's rows are never visible
    with pytest.raises(RuntimeError, match="boom"):
        with H.transaction(spark) as tx:
            tx.append(table, spark.createDataFrame([(9999, 1, "x", "a")], SCHEMA))
            raise RuntimeError("boom")
    seen["after_abort"] = rows(spark.read.format("hive_acid").load(table))
    with H.snapshot(spark, table, with_row_id=False) as df:
        seen["snapshot"] = rows(df)
        seen["snapshot_agg"] = rows(df.groupBy("p").agg(F.sum("qty")))
    # overwrite of one partition (static: the others stay)
    over = spark.createDataFrame([(5000, 5, "o", "a")], SCHEMA)
    over.write.format("hive_acid").mode("overwrite").option("partitionOverwriteMode",
                                                             "dynamic").save(table)
    seen["overwrite"] = rows(spark.read.format("hive_acid").load(table))
    return seen


def test_pipeline_on_s3_equals_local(s3_session, s3_hms, moto_s3, s3_bucket):
    import orc_acid
    from orc_acid.fs import filesystem_for
    from hms_txn.clients.acid import metastore as M
    from spark import hive_acid as H
    spark = s3_session
    H.create_database(spark, "on_s3", location=f"s3a://{s3_bucket}/warehouse/on_s3.db")
    H.create_database(spark, "on_disk")
    on_s3 = pipeline(spark, "on_s3.t")
    on_disk = pipeline(spark, "on_disk.t")
    assert on_s3 == on_disk
    assert len(on_s3["merge"]) > 300 and 9999 not in [r[0] for r in on_s3["after_abort"]]
    fs, _ = filesystem_for(f"s3a://{s3_bucket}", moto_s3.options())
    ms = M.MetastoreConnection(s3_hms.uri)
    ms.fs_options = moto_s3.options()
    try:
        info = M.table_info(ms, "on_s3.t")
        assert info.uri == f"s3a://{s3_bucket}/warehouse/on_s3.db/t" and info.fs is not None
        # the snapshot() fast path fell back to the Python data source and said why
        snap = H.snapshot(spark, "on_s3.t")
        with snap:
            assert snap.native is False and "hadoop-aws" in snap.fallback_reason
        # listing cost of a scan: each table partition listed once (by the driver's plan;
        # the executors open only the files they were given), counted by the S3 server
        parts = M.list_partitions(ms, info)
        mark = moto_s3.mark()
        assert rows(spark.read.format("hive_acid").load("on_s3.t")) == on_s3["overwrite"]
        time.sleep(0.5)                 # the server logs a request after answering it
        assert moto_s3.requests_since(mark)["LIST"] == len(parts) == 4
        # orc_acid reads the committed result from the bucket
        txns = M.valid_txn_list(ms)
        wids = M.valid_write_ids(ms, ["on_s3.t"], txns)["on_s3.t"]
        got = []
        for name, values, loc in M.list_partitions(ms, info):
            tb = orc_acid.read_table(loc, wids, valid_txns=txns, filesystem=fs)
            got += [(i, q, n, values[0]) for i, q, n in zip(*(tb.column(c).to_pylist()
                                                              for c in ("id", "qty", "name")))]
        assert sorted(got) == on_s3["overwrite"]
        # nothing of the aborted transaction stays in the bucket
        names = orc_acid.list_table_dir(info.location, fs)
        assert not [n for n in names if "/." in n or n.startswith(".")]
    finally:
        ms.close()
    # drop table with data: the objects are gone
    H.drop_table(spark, "on_s3.t")
    assert fs.get_file_info(f"{s3_bucket}/warehouse/on_s3.db/t").type.name == "NotFound"
