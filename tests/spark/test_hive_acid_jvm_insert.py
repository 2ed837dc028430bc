"""hive_acid.insert through the JVM insert writer (spark/jvm/AcidOrcSink.java, issue 44's
append): the files it writes hold what the Python writer (orc_acid) writes for the same rows
-- the same ORC schema, ACID columns, ROW__IDs, footer metadata Hive reads
(hive.acid.key.index, hive.acid.stats, hive.acid.version), directory marker -- for every
type, append and overwrite; deletes and updates find its rows; a failed job commits
nothing and leaves no file; where it does not apply (partitioned, bucketed tables, the
setting off), the Python writer writes. Against the metastore server and the one Spark
session of conftest."""

from __future__ import annotations

import datetime
import logging
import os

import pyarrow.orc as po
import pytest

from hms_txn.clients.acid import metastore as M
from tests.spark.test_hive_acid_read import (ALL_TYPES, all_types_rows, canon, python_source,
                                             rows)

pytestmark = [pytest.mark.spark]

JVM_WRITER = "spark.hive_acid.jvmWriter"
TYPES = ALL_TYPES + ", c CHAR(3), vc VARCHAR(5)"
DF_TYPES = ALL_TYPES + ", c STRING, vc STRING"     # Spark has no CHAR rows


def typed_rows(n):
    return [r + (None if i % 5 == 1 else f"c{i % 10}", f"v{i}"[:5])
            for i, r in enumerate(all_types_rows(n))]


class python_writer:
    """The Python writer (orc_acid in Spark's Python workers) for the block."""

    def __init__(self, spark):
        self.spark = spark

    def __enter__(self):
        self.spark.conf.set(JVM_WRITER, "false")

    def __exit__(self, *exc):
        self.spark.conf.unset(JVM_WRITER)


def partition_names(ms, table):
    db, name = table.split(".")
    return sorted(ms.get_partition_names(db, name, -1))


def data_files(ms, table):
    """{path relative to the table: ORCFile} of every file under the table's location."""
    root = M.table_info(ms, table).location
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            out[os.path.relpath(os.path.join(d, n), root)] = os.path.join(d, n)
    return out


def describe(path):
    """What a reader of the file sees besides the rows: schema, rows, ACID metadata."""
    f = po.ORCFile(path)
    meta = {k.decode(): v.decode() for k, v in f.metadata.items()}
    return {"schema": str(f.schema), "rows": f.nrows, "version": f.file_version,
            "compression": f.compression, "writer": f.writer,
            "key_index": meta.get("hive.acid.key.index"), "stats": meta.get("hive.acid.stats"),
            "acid_version": meta.get("hive.acid.version")}


def file_rows(path):
    """The ``row`` structs of the file's events, in file order, comparable (NaN == NaN, a
    map's entries in any order)."""
    return [canon(tuple(r.values())) for r in po.ORCFile(path).read(columns=["row"])
            .column(0).to_pylist(maps_as_pydicts="strict")]


def events(path):
    """The ACID columns of every event of the file, in file order."""
    t = po.ORCFile(path).read(columns=["operation", "originalTransaction", "bucket", "rowId",
                                       "currentTransaction"])
    return list(zip(*[t.column(i).to_pylist() for i in range(5)]))


def written_both_ways(spark, ms, table, types, df_types, data, partitions=3,
                      partition_by=None):
    """``data`` inserted into ``table`` by the JVM writer and into ``table + "_py"`` by the
    Python writer; asserts that the files hold the same -> the rows read back."""
    from spark import hive_acid as H
    jvm, py = table, table + "_py"
    for t in (jvm, py):
        H.create_table(spark, t, types, properties={"orc.compress": "SNAPPY"},
                       partition_by=partition_by or ())
    df = spark.createDataFrame(data, df_types).repartition(partitions)
    H.insert(spark, jvm, df)
    with python_writer(spark):
        H.insert(spark, py, df)
    files_j, files_p = data_files(ms, jvm), data_files(ms, py)
    assert sorted(files_j) == sorted(files_p)
    if partition_by is None:
        d = "delta_0000001_0000001_0000/"
        assert sorted(files_j) == [d + "_orc_acid_version"] + [
            f"{d}bucket_{b:05d}" for b in range(partitions)]
    for name in files_j:
        if name.endswith("_orc_acid_version"):
            assert open(files_j[name], "rb").read() == open(files_p[name], "rb").read() == b"2"
            continue
        dj, dp = describe(files_j[name]), describe(files_p[name])
        assert dj["writer"] == "ORC_JAVA" and dp["writer"] != "ORC_JAVA"    # who wrote it
        for key in ("schema", "rows", "version", "compression", "key_index", "stats",
                    "acid_version"):
            assert dj[key] == dp[key], (name, key)
        n = dj["rows"]
        bucket = 1 << 29 | int(name[-5:]) << 16
        assert name.split("/")[-2] == "delta_0000001_0000001_0000"
        assert dj["key_index"] == f"1,{bucket},{n - 1};" and dj["stats"] == f"{n},0,0"
        assert events(files_j[name]) == events(files_p[name]) == \
            [(0, 1, bucket, i, 1) for i in range(n)]
        # the rows of each file, as ORC readers see them
        assert file_rows(files_j[name]) == file_rows(files_p[name]), name
    # the rows, as the Python reader and the JVM reader read them, with their ROW__IDs
    got = rows(python_source(spark, jvm))
    assert got == rows(python_source(spark, py)) and len(got) == len(data)
    if partition_by:
        assert partition_names(ms, jvm) == partition_names(ms, py)
    assert rows(H.read(spark, jvm, with_row_id=True)) == rows(H.read(spark, py, with_row_id=True))
    return got


def test_jvm_insert_writes_what_the_python_writer_writes(acid_spark, tname, ms):
    """Every type through Spark's ORC conversion (decimals, dates, nested types)."""
    written_both_ways(acid_spark, ms, tname, TYPES, DF_TYPES, typed_rows(90))


FLAT = ("id BIGINT, i INT, sh SMALLINT, b TINYINT, ok BOOLEAN, d DOUBLE, f FLOAT, s STRING, "
        "bin BINARY, c CHAR(3), vc VARCHAR(5)")
DF_FLAT = FLAT.replace("CHAR(3)", "STRING").replace("VARCHAR(5)", "STRING")


def test_flat_rows_copied_directly_write_the_same(acid_spark, tname, ms):
    """Tables of numbers, booleans, strings and binaries only: the rows are copied into the
    vectors directly (no OrcSerializer), nulls, NaN, -0.0, empty and multi-byte strings."""
    data = []
    for i in range(200):
        null = i % 7 == 3
        data.append((
            None if null else (1 << 62) - i, None if null else -i * 1000,
            None if i % 5 == 0 else i % 32768 - 16000, None if i % 6 == 0 else i % 256 - 128,
            None if i % 4 == 0 else i % 3 == 0,
            [float("nan"), -0.0, float("inf"), 1e300, None][i % 5],
            [float("-inf"), 0.0, 1.5, None][i % 4],
            [None, "", "ü€𝄞", f"value-{i}" * (i % 9)][i % 4],
            None if i % 3 == 0 else bytes([i % 256, 0, 255]) * (i % 4),
            None if i % 8 == 0 else f"c{i % 10}", f"v{i}"[:5]))
    got = written_both_ways(acid_spark, ms, tname, FLAT, DF_FLAT, data, partitions=2)
    assert sum(1 for r in got if r[0] is None) == sum(1 for i in range(200) if i % 7 == 3)


def test_partitioned_tables_get_the_same_partitions_and_files(acid_spark, tname, ms):
    """Partition values with characters Hive escapes, empty and null (the default
    partition), several partition columns: the same directories, files and metastore
    partitions as the Python writer's; overwrites, static and dynamic."""
    from spark import hive_acid as H
    values = ["a", "b/c", "x=y:z", "", None, "ü %"]
    data = [(i, f"v{i}", values[i % len(values)], i % 3 - 1, i % 2 == 0) for i in range(120)]
    types = "id BIGINT, v STRING, p STRING, q INT, r BOOLEAN"
    got = written_both_ways(acid_spark, ms, tname, types, types, data, partitions=2,
                            partition_by=["p", "q", "r"])
    assert len(got) == 120
    names = partition_names(ms, tname)
    assert names == ["p=__HIVE_DEFAULT_PARTITION__/q=-1/r=false",     # the empty string
                     "p=__HIVE_DEFAULT_PARTITION__/q=0/r=true",       # null
                     "p=a/q=-1/r=true", "p=b%2Fc/q=0/r=false", "p=x%3Dy%3Az/q=1/r=true",
                     "p=ü %25/q=1/r=false"], names
    for name, path in data_files(ms, tname).items():
        if "bucket_" in name:
            assert describe(path)["writer"] == "ORC_JAVA", name
    # a dynamic overwrite replaces the partitions it writes, a static one all of them
    one = acid_spark.createDataFrame([(500, "new", "a", 0, True)], types)
    H.insert(acid_spark, tname, one, overwrite=True, dynamic_partition_overwrite=True)
    rows_now = {r.id for r in H.read(acid_spark, tname).collect()}
    gone = {i for i, _, p, q, r in data if (p, q, r) == ("a", 0, True)}
    assert rows_now == ({i for i in range(120)} - gone) | {500}
    H.insert(acid_spark, tname, one, overwrite=True)
    assert [r.id for r in H.read(acid_spark, tname).collect()] == [500]
    assert [r.id for r in python_source(acid_spark, tname).collect()] == [500]


def test_overwrite_deletes_updates_and_sql_on_jvm_written_files(acid_spark, tname, ms):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id BIGINT, v STRING")
    H.insert(acid_spark, tname, acid_spark.range(0, 1000, numPartitions=2)
             .selectExpr("id", "CAST(id AS STRING) v"))
    H.delete(acid_spark, tname, "id % 10 = 0")
    H.update(acid_spark, tname, {"v": "concat(v, '!')"}, "id < 5")
    H.sql(acid_spark, f"INSERT INTO {tname} VALUES (5000, 'x')")
    got = dict((r.id, r.v) for r in H.read(acid_spark, tname).collect())
    assert len(got) == 901 and got[3] == "3!" and got[5000] == "x" and 10 not in got
    assert got == dict((r.id, r.v) for r in python_source(acid_spark, tname).collect())
    H.insert(acid_spark, tname, acid_spark.createDataFrame([(7, "seven")], "id BIGINT, v STRING")
             .coalesce(1), overwrite=True)
    assert [tuple(r) for r in H.read(acid_spark, tname).collect()] == [(7, "seven")]
    files = data_files(ms, tname)
    base = sorted(f for f in files if f.startswith("base_"))
    assert base == ["base_0000005/_orc_acid_version", "base_0000005/bucket_00000"], files
    assert describe(files[base[1]])["writer"] == "ORC_JAVA"
    # an append of no rows writes nothing (no directory), as orc_acid's writer
    before = sorted(data_files(ms, tname))
    H.insert(acid_spark, tname, acid_spark.createDataFrame([], "id BIGINT, v STRING"))
    assert sorted(data_files(ms, tname)) == before
    # an overwrite with no rows still hides everything (its base directory exists)
    H.insert(acid_spark, tname, acid_spark.createDataFrame([], "id BIGINT, v STRING"),
             overwrite=True)
    assert H.read(acid_spark, tname).count() == 0
    assert python_source(acid_spark, tname).count() == 0


def test_a_failed_jvm_insert_commits_nothing_and_leaves_no_file(acid_spark, tname, ms):
    from pyspark.sql import functions as F
    from pyspark.sql import types as S
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id BIGINT")
    H.insert(acid_spark, tname, acid_spark.range(0, 10, numPartitions=1))

    @F.udf(S.LongType())
    def boom(i):
        if i == 1500:
            raise ValueError("boom")
        return i

    bad = acid_spark.range(0, 2000, numPartitions=2).select(boom("id").alias("id"))
    with pytest.raises(Exception, match="boom"):
        H.insert(acid_spark, tname, bad)
    assert H.read(acid_spark, tname).count() == 10
    # the aborted statement's directory is gone: only the first insert's files remain
    assert sorted(data_files(ms, tname)) == ["delta_0000001_0000001_0000/_orc_acid_version",
                                              "delta_0000001_0000001_0000/bucket_00000"]
    H.insert(acid_spark, tname, acid_spark.range(10, 20, numPartitions=1))
    assert H.read(acid_spark, tname).count() == 20


def test_where_the_jvm_writer_does_not_apply_the_python_writer_writes(acid_spark, tname, ms):
    from spark import _jvm_insert
    from spark import hive_acid as H
    part, buck, tst = tname + "_p", tname + "_b", tname + "_t"
    H.create_table(acid_spark, part, "id INT, p DATE", partition_by=["p"])
    H.create_table(acid_spark, buck, "id INT", buckets=2, bucket_by=["id"])
    H.create_table(acid_spark, tst, "id INT, a ARRAY<TIMESTAMP>")
    for t, why in ((part, "partition column of type date"), (buck, "bucketed table"),
                   (tst, "timestamp column")):
        assert _jvm_insert.unsupported(acid_spark, M.table_info(ms, t)) == why
    days = [datetime.date(2024, 2, 29), datetime.date(1999, 1, 1)]
    H.insert(acid_spark, part, acid_spark.createDataFrame(list(zip([1, 2], days)),
                                                          "id INT, p DATE"))
    H.insert(acid_spark, buck, acid_spark.createDataFrame([(1,), (2,), (3,)], "id INT"))
    ts = datetime.datetime(2024, 2, 29, 12, 30, 1, 5)
    H.insert(acid_spark, tst, acid_spark.createDataFrame([(1, [ts, None])],
                                                         "id INT, a ARRAY<TIMESTAMP_NTZ>"))
    assert [tuple(r) for r in H.read(acid_spark, tst).collect()] == [(1, [ts, None])]
    for t in (part, buck, tst):
        for name, path in data_files(ms, t).items():
            if "bucket_" in name:
                assert describe(path)["writer"] != "ORC_JAVA", name
    assert sorted(tuple(r) for r in H.read(acid_spark, part).collect()) == \
        list(zip([1, 2], days))
    assert H.read(acid_spark, buck).count() == 3
    with python_writer(acid_spark):
        assert _jvm_insert.unsupported(acid_spark, M.table_info(ms, tname + "_p")) == \
            f"{JVM_WRITER}=false"


def test_python_source_writes_say_how_to_write_fast(acid_spark, tname, caplog):
    """df.write.format("hive_acid") warns, once per table, that hive_acid.insert writes the
    same files from the JVM -- where it would (not for a table partitioned by a date)."""
    from spark import hive_acid as H
    part, dated = tname + "_p", tname + "_d"
    H.create_table(acid_spark, tname, "id INT")
    H.create_table(acid_spark, part, "id INT, p INT", partition_by=["p"])
    H.create_table(acid_spark, dated, "id INT, p DATE", partition_by=["p"])
    one = acid_spark.createDataFrame([(1, 2)], "id INT, p INT")
    with caplog.at_level(logging.WARNING, logger="spark.hive_acid"):
        for _ in range(2):
            one.select("id").write.format("hive_acid").mode("append").save(tname)
            one.write.format("hive_acid").mode("append").save(part)
            one.selectExpr("id", "DATE'2024-02-29' AS p").write.format("hive_acid") \
                .mode("append").save(dated)
        H.insert(acid_spark, tname, one.select("id"))
    said = [r.getMessage() for r in caplog.records if "hive_acid.insert(spark" in r.getMessage()]
    assert len(said) == 2 and f"save('{tname}')" in said[0] and f"save('{part}')" in said[1], said
    assert H.read(acid_spark, tname).count() == 3 and H.read(acid_spark, part).count() == 2
