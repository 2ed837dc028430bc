"""Table and partition locations hive_acid can use: local paths (``file:`` URIs or absolute
paths) and the schemes of ``orc_acid.fs`` (``s3a://``, ``abfs://``, ``gs://``, ``hdfs://``
where libhdfs is). Anything else is refused with a declared error: taken as a path,
``hdfs://nn/w/t`` once named a directory under the worker's working directory, and writes
"succeeded" there, invisible to every other engine."""

from __future__ import annotations

import os

import pytest

from hms_txn.clients.acid.metastore import HiveAcidError, table_path


def local_path(location, what="the table"):
    fs, path = table_path(None, location, what)
    assert fs is None
    return path


@pytest.mark.parametrize("location, path", [
    ("/w/t", "/w/t"),
    ("file:/w/t", "/w/t"),
    ("file:///w/t", "/w/t"),
    ("file://localhost/w/t", "/w/t"),
    ("file:/w/t/p=a%2Fb", "/w/t/p=a%2Fb"),      # escapes are part of the name on disk
])
def test_local_locations_are_paths(location, path):
    assert local_path(location) == path


def test_object_store_locations_are_paths_of_their_file_system():
    import pyarrow.fs as pafs
    fs, path = table_path(None, "s3a://bucket/w/t/p=a%2Fb", "table db.t")
    assert isinstance(fs, pafs.S3FileSystem) and path == "bucket/w/t/p=a%2Fb"


@pytest.mark.parametrize("location, message", [
    ("hdfs://nn:8020/w/t", "HDFS needs libhdfs"),
    ("ftp://h/w/t", "no file system for scheme"),
    ("file://otherhost/w/t", "no file system for scheme"),
    ("w/t", "not an absolute path"),
    ("", "has no location"),
    (None, "has no location"),
])
def test_other_locations_are_refused(location, message):
    with pytest.raises(HiveAcidError, match=message):
        local_path(location, "table db.t")


@pytest.mark.spark
def test_a_table_on_hdfs_without_libhdfs_is_refused_before_anything_starts(acid_spark, ms, tname):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT")
    db, name = tname.split(".")
    t = ms.get_table_acid_aware(db, name)
    t.tableName = name + "_hdfs"
    t.sd.location = "hdfs://nn:8020/warehouse/" + t.tableName
    ms.create_table(t)
    hdfs_table = f"{db}.{t.tableName}"
    hwm = ms.get_open_txns().txn_high_water_mark
    df = acid_spark.createDataFrame([(1,)], "id INT")
    with pytest.raises(Exception, match="HDFS needs libhdfs"):
        df.write.format("hive_acid").mode("append").save(hdfs_table)
    with pytest.raises(HiveAcidError, match="HDFS needs libhdfs"):
        H.insert(acid_spark, hdfs_table, df)
    with pytest.raises(Exception, match="HDFS needs libhdfs"):
        acid_spark.read.format("hive_acid").load(hdfs_table).collect()
    # the old reading of the location wrote delta_1_1_0/bucket_00001 under ./hdfs:/nn:8020/
    assert not os.path.exists("hdfs:")
    # a transaction opened on the way was aborted; none is left open
    resp = ms.get_open_txns()
    aborted = {x for i, x in enumerate(resp.open_txns)
               if resp.abortedBits[i // 8] >> (i % 8) & 1}
    assert {x for x in resp.open_txns if x > hwm} <= aborted


def _tree(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, files in os.walk(root) for f in files if not f.startswith("."))


@pytest.mark.spark
def test_partition_directories_are_named_as_hive_names_them(acid_spark, ms, tname):
    """Escaped as Hive's FileUtils.escapePathName (the metastore's partition names too):
    ':' and '/' and '*' escaped, non-ASCII kept, an empty value the default partition."""
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT, p STRING", partition_by=["p"])
    values = ["2024-01-01 10:00/x", "São Paulo", "a*b", "", None]
    df = acid_spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id INT, p STRING")
    df.write.format("hive_acid").mode("append").save(tname)
    db, name = tname.split(".")
    loc = local_path(ms.get_table_acid_aware(db, name).sd.location)
    expected = ["p=2024-01-01 10%3A00%2Fx", "p=São Paulo", "p=a%2Ab",
                "p=__HIVE_DEFAULT_PARTITION__"]
    assert sorted(os.listdir(loc)) == sorted(expected)
    assert sorted(ms.get_partition_names(db, name, -1)) == sorted(expected)
    for p in expected:
        part = ms.get_partition_by_name(db, name, p)
        assert local_path(part.sd.location) == os.path.join(loc, p)
    got = sorted((r.id, r.p) for r in acid_spark.read.format("hive_acid").load(tname).collect())
    # Hive's rule: an empty partition value is the default partition, read back as NULL
    assert got == [(0, "2024-01-01 10:00/x"), (1, "São Paulo"), (2, "a*b"), (3, None),
                   (4, None)]


@pytest.mark.spark
def test_a_write_to_a_partition_registered_elsewhere_is_refused(acid_spark, ms, tname,
                                                               tmp_path):
    from spark import hive_acid as H
    from hms_txn.clients.acid.metastore import T
    H.create_table(acid_spark, tname, "id INT, p STRING", partition_by=["p"])
    H.insert(acid_spark, tname, acid_spark.createDataFrame([(1, "a")], "id INT, p STRING"))
    db, name = tname.split(".")
    table = ms.get_table_acid_aware(db, name)
    loc = local_path(table.sd.location)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sd = table.sd
    sd.location = "file:" + str(elsewhere)
    ms.add_partition(T.Partition(dbName=db, tableName=name, values=["b"], sd=sd))
    before = _tree(loc)
    df = acid_spark.createDataFrame([(2, "b"), (3, "a")], "id INT, p STRING")
    with pytest.raises(Exception, match=r"partition p=b of .* is at .*elsewhere, not at"):
        df.write.format("hive_acid").mode("append").save(tname)
    with pytest.raises(HiveAcidError, match=r"partition p=b of .* is at .*elsewhere"):
        H.insert(acid_spark, tname, df)
    assert _tree(loc) == before                        # the refused writes left nothing
    assert os.listdir(elsewhere) == []
    assert sorted((r.id, r.p) for r in acid_spark.read.format("hive_acid").load(tname)
                  .collect()) == [(1, "a")]
