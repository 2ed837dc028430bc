"""Independent checks of the files we write: pyorc (ORC C++ via its own bindings), Spark's ORC
data source, and the Java ORC library Hive uses (through Spark's JVM)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import orc_acid
from tests.support.requirements import require_module

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
ACID_TYPE_STRING = ("struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
                    "currentTransaction:bigint,row:struct<id:bigint,name:string,score:double>>")


def _tables(tmp_path):
    d = str(tmp_path / "t")
    data = pa.table({"id": [1, 2, 3], "name": ["a", None, "c"], "score": [0.5, 1.5, None]},
                    schema=SCHEMA)
    [ins] = orc_acid.write_delta(d, 7, 0, 2, data)
    [dele] = orc_acid.write_delete_delta(d, 8, 0, pa.table({
        "originalTransaction": [7], "bucket": [orc_acid.encode_bucket(2, 0)], "rowId": [1]}),
        row_schema=SCHEMA)
    return d, ins, dele


def _pyorc_check(path, expected_rows, expected_md):
    pyorc = require_module("pyorc")
    with open(path, "rb") as fh:
        r = pyorc.Reader(fh)
        assert str(r.schema) == ACID_TYPE_STRING
        assert list(r) == expected_rows
        md = {k: bytes(v) for k, v in r.user_metadata.items()}
        assert md == expected_md


def test_pyorc_sees_acid_schema_values_and_metadata(tmp_path):
    d, ins, dele = _tables(tmp_path)
    b = orc_acid.encode_bucket(2, 0)
    _pyorc_check(ins, [(0, 7, b, 0, 7, (1, "a", 0.5)), (0, 7, b, 1, 7, (2, None, 1.5)),
                       (0, 7, b, 2, 7, (3, "c", None))],
                 {"hive.acid.key.index": f"7,{b},2;".encode(), "hive.acid.stats": b"3,0,0",
                  "hive.acid.version": b"2"})
    _pyorc_check(dele, [(2, 7, b, 1, 8, None)],
                 {"hive.acid.key.index": f"7,{b},1;".encode(), "hive.acid.stats": b"0,0,1",
                  "hive.acid.version": b"2"})


@pytest.fixture(scope="module")
def spark():
    pyspark_sql = require_module("pyspark.sql")
    session = (pyspark_sql.SparkSession.builder.master("local[1]").appName("orc_acid-compat")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1").getOrCreate())
    yield session
    session.stop()


@pytest.mark.spark
def test_spark_and_java_orc_read_our_files(spark, tmp_path):
    d, ins, dele = _tables(tmp_path)
    b = orc_acid.encode_bucket(2, 0)
    df = spark.read.orc(ins)
    assert df.schema.simpleString() == ACID_TYPE_STRING
    got = [tuple(r[:5]) + (tuple(r[5]) if r[5] is not None else None,) for r in df.collect()]
    assert got == [(0, 7, b, 0, 7, (1, "a", 0.5)), (0, 7, b, 1, 7, (2, None, 1.5)),
                   (0, 7, b, 2, 7, (3, "c", None))]
    ddf = spark.read.orc(dele)
    assert ddf.schema.simpleString() == ACID_TYPE_STRING
    assert [tuple(r) for r in ddf.collect()] == [(2, 7, b, 1, 8, None)]
    # the Java ORC library (what Hive's readers use) sees the footer metadata and stripes
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    utf8 = jvm.java.nio.charset.StandardCharsets.UTF_8
    for path, md in [(ins, {"hive.acid.key.index": f"7,{b},2;", "hive.acid.stats": "3,0,0",
                            "hive.acid.version": "2"}),
                     (dele, {"hive.acid.key.index": f"7,{b},1;", "hive.acid.stats": "0,0,1",
                             "hive.acid.version": "2"})]:
        reader = jvm.org.apache.orc.OrcFile.createReader(
            jvm.org.apache.hadoop.fs.Path(path), jvm.org.apache.orc.OrcFile.readerOptions(conf))
        assert reader.getSchema().toString() == ACID_TYPE_STRING
        keys = sorted(reader.getMetadataKeys())
        assert keys == sorted(md)
        for k in keys:
            assert utf8.decode(reader.getMetadataValue(k)).toString() == md[k]
        assert reader.getStripes().size() == 1
    # and our reader agrees with what Spark saw
    assert orc_acid.read_table(d, "default.t:8:9223372036854775807::").column("id").to_pylist() \
        == [1, 3]
