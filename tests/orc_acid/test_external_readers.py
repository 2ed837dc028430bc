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


@pytest.mark.spark
@pytest.mark.parametrize("codec", ["zlib", "snappy"])
def test_java_orc_seeks_with_the_row_index_of_spliced_acid_columns(spark, tmp_path, codec):
    """The ACID columns of an insert are encoded by ``orc_acid._insert_file``, not by the
    ORC writer: Java's ORC reader (Hive's) takes their statistics for the file, its stripes
    and its row groups, and with a search argument on rowId reads only the matching row
    group -- seeking every column, ours and pyarrow's, to its row index positions."""
    n, stride, write_id = 30_000, 1000, 9
    data = pa.table({"id": pa.array(range(n), pa.int64()),
                     "name": [f"n{i % 97}" for i in range(n)],
                     "score": pa.array([i / 4 for i in range(n)], pa.float64())}, schema=SCHEMA)
    opts = orc_acid.WriterOptions(compression=codec, stripe_size=1, batch_size=4096,
                                  row_index_stride=stride)
    [path] = orc_acid.write_delta(str(tmp_path), write_id, 0, 1, data, options=opts)
    jvm = spark._jvm
    reader = jvm.org.apache.orc.OrcFile.createReader(
        jvm.org.apache.hadoop.fs.Path(path),
        jvm.org.apache.orc.OrcFile.readerOptions(spark._jsc.hadoopConfiguration()))
    stats = reader.getStatistics()              # column ids: 2 originalTransaction, 4 rowId
    assert (stats[2].getMinimum(), stats[2].getMaximum(), stats[2].getSum()) == \
        (write_id, write_id, write_id * n)
    assert (stats[4].getMinimum(), stats[4].getMaximum(), stats[4].getSum(),
            stats[4].getNumberOfValues()) == (0, n - 1, n * (n - 1) // 2, n)
    stripes = reader.getStripeStatistics()
    assert stripes.size() == reader.getStripes().size() > 2
    counts = [s.getNumberOfRows() for s in reader.getStripes()]
    first = 0
    for k, rows in enumerate(counts):
        row_id = stripes.get(k).getColumnStatistics()[4]
        assert (row_id.getMinimum(), row_id.getMaximum()) == (first, first + rows - 1)
        first += rows
    # the row groups' statistics as Java reads them from the third stripe's row index
    rows = reader.rows()
    index = rows.readRowIndex(2, None, None).getRowGroupIndex()[4]       # rowId
    start = counts[0] + counts[1]
    groups = [(start + g, min(stride, counts[2] - g)) for g in range(0, counts[2], stride)]
    assert index.getEntryCount() == len(groups)
    for k, (lo, size) in enumerate(groups):
        st = index.getEntry(k).getStatistics()
        assert (st.getNumberOfValues(), st.getIntStatistics().getMinimum(),
                st.getIntStatistics().getMaximum()) == (size, lo, lo + size - 1)
    # seeking to a row inside a row group and inside a 512-value run of the third stripe:
    # every column (ours and pyarrow's) positioned by its row index entry
    from py4j.java_gateway import get_field
    batch = reader.getSchema().createRowBatch(1024)
    for target in (start + 2 * stride + 321, start + stride, counts[0] - 1, n - 1):
        rows.seekToRow(target)
        assert rows.nextBatch(batch)
        cols = get_field(batch, "cols")
        fields = get_field(cols[5], "fields")
        assert get_field(cols[3], "vector")[0] == target                # rowId
        assert get_field(cols[1], "vector")[0] == write_id              # originalTransaction
        assert get_field(fields[0], "vector")[0] == target              # row.id
        assert get_field(fields[2], "vector")[0] == target / 4          # row.score
    rows.close()
