"""Table and partition locations hive_acid can use: local paths only (``file:`` URIs or
absolute paths). Any other scheme is refused with a declared error: taken as a path,
``hdfs://nn/w/t`` named a directory under the worker's working directory, and writes
"succeeded" there, invisible to every other engine."""

from __future__ import annotations

import os

import pytest

from spark._metastore import HiveAcidError, local_path


@pytest.mark.parametrize("location, path", [
    ("/w/t", "/w/t"),
    ("file:/w/t", "/w/t"),
    ("file:///w/t", "/w/t"),
    ("file://localhost/w/t", "/w/t"),
    ("file:/w/t/p=a%2Fb", "/w/t/p=a%2Fb"),      # escapes are part of the name on disk
])
def test_local_locations_are_paths(location, path):
    assert local_path(location) == path


@pytest.mark.parametrize("location, message", [
    ("hdfs://nn:8020/w/t", "local paths only"),
    ("s3a://bucket/w/t", "local paths only"),
    ("file://otherhost/w/t", "local paths only"),
    ("w/t", "not an absolute path"),
    ("", "has no location"),
    (None, "has no location"),
])
def test_other_locations_are_refused(location, message):
    with pytest.raises(HiveAcidError, match=message):
        local_path(location, "table db.t")


@pytest.mark.spark
def test_a_table_on_hdfs_is_refused_before_anything_starts(acid_spark, ms, tname):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT")
    db, name = tname.split(".")
    t = ms.get_table(db, name)
    t.tableName = name + "_hdfs"
    t.sd.location = "hdfs://nn:8020/warehouse/" + t.tableName
    ms.create_table(t)
    hdfs_table = f"{db}.{t.tableName}"
    hwm = ms.get_open_txns().txn_high_water_mark
    df = acid_spark.createDataFrame([(1,)], "id INT")
    with pytest.raises(Exception, match="local paths only"):
        df.write.format("hive_acid").mode("append").save(hdfs_table)
    with pytest.raises(HiveAcidError, match="local paths only"):
        H.insert(acid_spark, hdfs_table, df)
    with pytest.raises(Exception, match="local paths only"):
        acid_spark.read.format("hive_acid").load(hdfs_table).collect()
    # the old reading of the location wrote delta_1_1_0/bucket_00001 under ./hdfs:/nn:8020/
    assert not os.path.exists("hdfs:")
    # a transaction opened on the way was aborted; none is left open
    resp = ms.get_open_txns()
    aborted = {x for i, x in enumerate(resp.open_txns)
               if resp.abortedBits[i // 8] >> (i % 8) & 1}
    assert {x for x in resp.open_txns if x > hwm} <= aborted
