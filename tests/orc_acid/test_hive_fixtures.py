"""ORC files written by Hive itself (see shared/fixtures/hive-written/README.md)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.orc as po
import pytest

import orc_acid

MAX = "9223372036854775807"


@pytest.mark.parametrize("wids, expected", [
    ("default.streaming:2:1:1,2:", []),                         # neither committed
    ("default.streaming:0:" + MAX + "::", []),                   # nothing committed yet
    ("default.streaming:1:" + MAX + "::", [("a1", "b2"), ("a3", "b4")]),  # only write id 1
    ("default.streaming:2:2:2:", [("a1", "b2"), ("a3", "b4")]),  # 2 still open
    ("default.streaming:2:" + MAX + "::2", [("a1", "b2"), ("a3", "b4")]),  # 2 aborted
    ("default.streaming:2:1:1:", [("a5", "b6"), ("a7", "b8")]),  # 1 open, 2 committed
    ("default.streaming:2:" + MAX + "::", [("a1", "b2"), ("a3", "b4"), ("a5", "b6"),
                                           ("a7", "b8")]),
])
def test_streaming_delta_at_each_snapshot(place_fixture, wids, expected):
    table = place_fixture("streaming.orc", "delta_0000001_0000002/bucket_00000")
    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    t = orc_acid.read_table(str(table), wids, schema=schema)
    assert t.schema == schema
    assert orc_acid.read_table(str(table), wids).num_rows == len(expected)
    assert [(r["a"], r["b"]) for r in t.to_pylist()] == expected


def test_streaming_row_ids_and_footer(place_fixture, hive_fixtures_dir):
    table = place_fixture("streaming.orc", "delta_0000001_0000002/bucket_00000")
    t = orc_acid.read_table(str(table), f"default.streaming:2:{MAX}::", with_row_id=True)
    assert [r["ROW__ID"] for r in t.to_pylist()] == [
        {"writeid": 1, "bucketid": 536870912, "rowid": 0},
        {"writeid": 1, "bucketid": 536870912, "rowid": 1},
        {"writeid": 2, "bucketid": 536870912, "rowid": 0},
        {"writeid": 2, "bucketid": 536870912, "rowid": 1}]
    md = po.ORCFile(str(hive_fixtures_dir / "streaming.orc")).metadata
    assert md[b"hive.acid.key.index"] == b"1,536870912,1;2,536870912,1;"
    assert md[b"hive.acid.stats"] == b"4,0,0" and md[b"hive.acid.version"] == b"2"


def test_streaming_delete_of_a_hive_row(place_fixture, tmp_path):
    table = place_fixture("streaming.orc", "delta_0000001_0000002/bucket_00000")
    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    orc_acid.write_delete_delta(str(table), 3, 0, pa.table({
        "originalTransaction": [2], "bucket": [536870912], "rowId": [0]}), row_schema=schema)
    t = orc_acid.read_table(str(table), f"default.streaming:3:{MAX}::")
    assert t.column("a").to_pylist() == ["a1", "a3", "a7"]
    t = orc_acid.read_table(str(table), "default.streaming:3:3:3:")   # delete not committed
    assert t.num_rows == 4


def test_lower_case_acid_names_without_acid_metadata(place_fixture):
    table = place_fixture("full_acid_schema_but_no_acid_version.orc",
                          "delta_0000001_0000003/bucket_00000")
    t = orc_acid.read_table(str(table), f"default.t:3:{MAX}::")
    assert t.num_rows == 3
    assert sorted(t.column("i").to_pylist()) == [1, 2, 3]
    t = orc_acid.read_table(str(table), f"default.t:3:{MAX}::", with_row_id=True,
                            columns=[])
    assert [r["ROW__ID"]["writeid"] for r in t.to_pylist()] == [1, 2, 3]
    assert orc_acid.read_table(str(table), "default.t:3:2:2:").column("i").to_pylist() == [1, 3]


def test_alltypes_as_original_file(place_fixture):
    table = place_fixture("alltypes_non_acid.orc", "000000_0")
    t = orc_acid.read_table(str(table), f"default.alltypes:0:{MAX}::", with_row_id=True)
    assert t.num_rows == 7300
    rid = t.column("ROW__ID").combine_chunks()
    assert set(rid.field("writeid").to_pylist()) == {0}
    assert set(rid.field("bucketid").to_pylist()) == {536870912}
    assert rid.field("rowid").to_pylist() == list(range(7300))
    assert t.column_names[1:4] == ["id", "bool_col", "tinyint_col"]
    raw = po.ORCFile(str(table / "000000_0")).read()
    assert t.drop_columns(["ROW__ID"]).equals(raw.replace_schema_metadata(None))


def test_alltypes_original_with_copies_and_delete(place_fixture):
    table = place_fixture("alltypes_non_acid.orc", "000000_0")
    place_fixture("alltypes_non_acid.orc", "000000_0_copy_1")
    place_fixture("alltypes_non_acid.orc", "000001_0")
    t = orc_acid.read_table(str(table), f"default.alltypes:0:{MAX}::", with_row_id=True,
                            columns=["id"])
    rid = t.column("ROW__ID").combine_chunks()
    b0 = [r for r, b in zip(rid.field("rowid").to_pylist(), rid.field("bucketid").to_pylist())
          if b == 536870912]
    b1 = [r for r, b in zip(rid.field("rowid").to_pylist(), rid.field("bucketid").to_pylist())
          if b == 536936448]
    assert b0 == list(range(14600))          # the copy continues the numbering of bucket 0
    assert b1 == list(range(7300))
    # delete rows 7300 (first of the copy) and 5 of bucket 1 in write id 1
    schema = po.ORCFile(str(table / "000000_0")).schema
    orc_acid.write_delete_delta(str(table), 1, 0, pa.table({
        "writeid": [0, 0], "bucketid": [536870912, 536936448], "rowid": [7300, 5]}),
        row_schema=schema)
    t2 = orc_acid.read_table(str(table), f"default.alltypes:1:{MAX}::", with_row_id=True,
                             columns=["id"])
    assert t2.num_rows == 3 * 7300 - 2
    rid2 = t2.column("ROW__ID").combine_chunks()
    pairs = set(zip(rid2.field("bucketid").to_pylist(), rid2.field("rowid").to_pylist()))
    assert (536870912, 7300) not in pairs and (536936448, 5) not in pairs
    assert (536870912, 7299) in pairs and (536936448, 6) in pairs
