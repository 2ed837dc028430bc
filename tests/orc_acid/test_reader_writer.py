"""Writer + reader round trips, file-level checks of what we write, bad input."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
import pytest

import orc_acid
from orc_acid.reader import AcidSchemaError, OrcAcidError
from orc_acid.valid_ids import ValidIdListError

MAX = "9223372036854775807"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(n, start=0, tag="r"):
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "name": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def ids_of(t):
    return sorted(t.column("id").to_pylist())


def all_valid(hwm):
    return f"default.t:{hwm}:{MAX}::"


def test_insert_files_and_footer(tmp_path):
    paths = orc_acid.write_delta(str(tmp_path), 5, 0, 3, rows(10))
    assert paths == [str(tmp_path / "delta_0000005_0000005_0000" / "bucket_00003")]
    assert (tmp_path / "delta_0000005_0000005_0000" / "_orc_acid_version").read_bytes() == b"2"
    f = po.ORCFile(paths[0])
    assert f.schema.names == ["operation", "originalTransaction", "bucket", "rowId",
                              "currentTransaction", "row"]
    assert [str(t) for t in f.schema.types[:5]] == ["int32", "int64", "int32", "int64", "int64"]
    assert f.schema.field("row").type == pa.struct(list(SCHEMA))
    md = f.metadata
    assert md[b"hive.acid.key.index"] == b"5,537067520,9;"          # V1(3, 0) = 537067520
    assert md[b"hive.acid.stats"] == b"10,0,0"
    assert md[b"hive.acid.version"] == b"2"
    t = f.read()
    assert t.column("operation").to_pylist() == [0] * 10
    assert t.column("rowId").to_pylist() == list(range(10))
    assert set(t.column("bucket").to_pylist()) == {537067520}
    assert set(t.column("originalTransaction").to_pylist()) == {5}
    assert set(t.column("currentTransaction").to_pylist()) == {5}
    assert not [n for n in os.listdir(tmp_path / "delta_0000005_0000005_0000")
                if n.startswith(".")]   # no temp files left behind


def test_key_index_has_one_entry_per_stripe(tmp_path):
    n = 300_000
    hexes = np.random.default_rng(1).bytes(n * 4).hex()
    big = pa.table({"id": np.arange(n, dtype=np.int64),
                    "name": pa.array([hexes[i * 8:i * 8 + 8] for i in range(n)])}, schema=SCHEMA)
    opts = orc_acid.WriterOptions(stripe_size=1 << 20)
    [p] = orc_acid.write_delta(str(tmp_path), 1, 0, 0, big, options=opts)
    f = po.ORCFile(p)
    assert f.nstripes > 1
    entries = f.metadata[b"hive.acid.key.index"].decode().split(";")
    assert entries[-1] == "" and len(entries) - 1 == f.nstripes
    last = 0
    for i, e in enumerate(entries[:-1]):
        stripe = f.read_stripe(i, columns=["rowId"])
        last += stripe.num_rows
        assert e == f"1,536870912,{last - 1}"


def test_empty_insert_writes_no_file(tmp_path):
    assert orc_acid.write_delta(str(tmp_path), 1, 0, 0, rows(0)) == []
    assert not any(p.name.startswith("delta") and any(p.iterdir()) for p in tmp_path.iterdir())


def test_same_write_bucket_statement_twice_is_refused(tmp_path):
    orc_acid.write_delta(str(tmp_path), 1, 0, 0, rows(3))
    with pytest.raises(FileExistsError):
        orc_acid.write_delta(str(tmp_path), 1, 0, 0, rows(3))
    orc_acid.write_delta(str(tmp_path), 1, 1, 0, rows(3, 10))   # other statement: fine
    t = orc_acid.read_table(str(tmp_path), all_valid(1), with_row_id=True)
    assert t.num_rows == 6
    assert len(set(map(lambda r: tuple(r.values()), t.column("ROW__ID").to_pylist()))) == 6


def test_insert_delete_update_round_trip(tmp_path):
    d = str(tmp_path)
    orc_acid.write_delta(d, 1, 0, 0, rows(5))
    orc_acid.write_delta(d, 2, 0, 1, rows(5, 100))
    t = orc_acid.read_table(d, all_valid(2), with_row_id=True)
    assert ids_of(t) == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
    # delete ids 1 and 101 (rows of two buckets)
    victims = t.filter(pc.is_in(t.column("id"), pa.array([1, 101])))
    paths = orc_acid.write_delete_delta(d, 3, 0, victims.select(["ROW__ID"]), row_schema=SCHEMA)
    assert [os.path.basename(p) for p in paths] == ["bucket_00000", "bucket_00001"]
    f = po.ORCFile(paths[0])
    assert f.metadata[b"hive.acid.stats"] == b"0,0,1"
    ev = f.read().to_pylist()
    assert ev == [{"operation": 2, "originalTransaction": 1, "bucket": 536870912, "rowId": 1,
                   "currentTransaction": 3, "row": None}]
    assert ids_of(orc_acid.read_table(d, all_valid(3))) == [0, 2, 3, 4, 100, 102, 103, 104]
    assert ids_of(orc_acid.read_table(d, "default.t:3:3:3:")) == ids_of(t)   # delete open
    # update id 2 -> name changed: delete + insert under the next statement id
    t = orc_acid.read_table(d, all_valid(3), with_row_id=True)
    old = t.filter(pc.equal(t.column("id"), 2))
    new = pa.table({"id": [2], "name": ["changed"]}, schema=SCHEMA)
    paths = orc_acid.write_update(d, 4, 0, 0, old.select(["ROW__ID"]), new)
    assert [os.path.relpath(p, d) for p in paths] == [
        "delete_delta_0000004_0000004_0000/bucket_00000",
        "delta_0000004_0000004_0001/bucket_00000"]
    t4 = orc_acid.read_table(d, all_valid(4), with_row_id=True)
    assert ids_of(t4) == [0, 2, 3, 4, 100, 102, 103, 104]
    row2 = t4.filter(pc.equal(t4.column("id"), 2)).to_pylist()[0]
    assert row2["name"] == "changed"
    assert row2["ROW__ID"] == {"writeid": 4, "bucketid": 536870913, "rowid": 0}
    # aborted update: old row visible
    t4a = orc_acid.read_table(d, f"default.t:4:{MAX}::4")
    assert t4a.filter(pc.equal(t4a.column("id"), 2)).column("name").to_pylist() == ["r2"]


def test_delete_events_sorted_and_grouped_by_decoded_bucket(tmp_path):
    ids = pa.table({"originalTransaction": [7, 2, 2, 5, 2],
                    "bucket": [536870912, 536936448, 536870913, 536870912, 536870912],
                    "rowId": [0, 4, 9, 3, 8]})
    paths = orc_acid.write_delete_delta(str(tmp_path), 9, 2, ids, row_schema=SCHEMA)
    assert [os.path.relpath(p, tmp_path) for p in paths] == [
        "delete_delta_0000009_0000009_0002/bucket_00000",
        "delete_delta_0000009_0000009_0002/bucket_00001"]
    b0 = po.ORCFile(paths[0]).read()
    keys = list(zip(b0.column("originalTransaction").to_pylist(), b0.column("bucket").to_pylist(),
                    b0.column("rowId").to_pylist()))
    assert keys == [(2, 536870912, 8), (2, 536870913, 9), (5, 536870912, 3), (7, 536870912, 0)]
    assert po.ORCFile(paths[0]).metadata[b"hive.acid.key.index"] == b"7,536870912,0;"
    assert po.ORCFile(paths[1]).read().column("rowId").to_pylist() == [4]


def test_open_and_aborted_write_ids(tmp_path):
    d = str(tmp_path)
    for w in range(1, 6):
        orc_acid.write_delta(d, w, 0, 0, rows(2, w * 10))
    assert ids_of(orc_acid.read_table(d, "default.t:5:2:2,4:3")) == [10, 11, 50, 51]
    assert ids_of(orc_acid.read_table(d, "default.t:3:2:2:")) == [10, 11, 30, 31]
    assert ids_of(orc_acid.read_table(d, "default.t:0:" + MAX + "::")) == []


def _streaming_delta(d, lo, hi, per_write=3):
    """A delta spanning several write ids, written as one file like Hive Streaming does."""
    from orc_acid.writer import acid_schema, write_acid_file
    parts = []
    for w in range(lo, hi + 1):
        data = rows(per_write, w * 100)
        n = data.num_rows
        parts.append(pa.Table.from_arrays([
            pa.array(np.zeros(n, np.int32)), pa.array(np.full(n, w, np.int64)),
            pa.array(np.full(n, 536870912, np.int32)), pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.full(n, w, np.int64)),
            pa.StructArray.from_arrays([c.combine_chunks() for c in data.columns],
                                       fields=list(SCHEMA))],
            schema=acid_schema(SCHEMA)))
    events = pa.concat_tables(parts)
    write_acid_file(os.path.join(d, orc_acid.format_delta(lo, hi), "bucket_00000"), events,
                    inserts=events.num_rows)


def test_streaming_multi_write_id_delta(tmp_path):
    d = str(tmp_path)
    _streaming_delta(d, 1, 4)
    assert ids_of(orc_acid.read_table(d, all_valid(4))) == [100, 101, 102, 200, 201, 202,
                                                           300, 301, 302, 400, 401, 402]
    # 2 aborted, 4 open
    assert ids_of(orc_acid.read_table(d, "default.t:4:4:4:2")) == [100, 101, 102, 300, 301, 302]
    # delete one row of write 3 in a delete delta
    orc_acid.write_delete_delta(d, 5, 0, pa.table({"originalTransaction": [3], "bucket":
                                                   [536870912], "rowId": [1]}), row_schema=SCHEMA)
    assert ids_of(orc_acid.read_table(d, "default.t:5:4:4:2")) == [100, 101, 102, 300, 302]


def test_insert_overwrite_base(tmp_path):
    d = str(tmp_path)
    orc_acid.write_delta(d, 1, 0, 0, rows(3))
    paths = orc_acid.write_base(d, 2, 0, rows(2, 50))
    assert os.path.relpath(paths[0], d) == "base_0000002/bucket_00000"
    assert (tmp_path / "base_0000002" / "_orc_acid_version").read_bytes() == b"2"
    orc_acid.write_delta(d, 3, 0, 0, rows(1, 90))
    assert ids_of(orc_acid.read_table(d, all_valid(3))) == [50, 51, 90]
    assert ids_of(orc_acid.read_table(d, "default.t:3:2:2:")) == [0, 1, 2, 90]     # IOW open
    assert ids_of(orc_acid.read_table(d, f"default.t:3:{MAX}::2")) == [0, 1, 2, 90]  # aborted
    # an empty overwrite empties the table
    assert orc_acid.write_base(d, 4, 0, rows(0)) == []
    assert ids_of(orc_acid.read_table(d, all_valid(4))) == []


def test_projection_row_id_and_schema_mapping(tmp_path):
    d = str(tmp_path)
    # a file whose row fields are named _col0, _col1 (older writers)
    positional = pa.schema([("_col0", pa.int64()), ("_col1", pa.string())])
    orc_acid.write_delta(d, 1, 0, 0, rows(3), row_schema=positional)
    orc_acid.write_delta(d, 2, 0, 0, rows(2, 10))
    t = orc_acid.read_table(d, all_valid(2))
    assert t.column_names == ["id", "name"]               # names from the named file
    assert ids_of(t) == [0, 1, 2, 10, 11]
    t = orc_acid.read_table(d, all_valid(2), columns=["name"], with_row_id=True)
    assert t.column_names == ["ROW__ID", "name"]
    assert t.schema.field("ROW__ID").type == orc_acid.ROW_ID_TYPE
    wider = pa.schema([("key", pa.int64()), ("label", pa.string()), ("extra", pa.int32())])
    t = orc_acid.read_table(d, all_valid(2), schema=wider)
    assert t.schema == wider
    assert t.column("extra").null_count == 5
    t = orc_acid.read_table(d, all_valid(2), columns=[], row_ids=True)
    assert t.column_names == ["ROW__ID"] and t.num_rows == 5
    with pytest.raises(KeyError):
        orc_acid.read_table(d, all_valid(2), columns=["nope"])


def test_splits_read_the_same_rows(tmp_path):
    d = str(tmp_path)
    for w in range(1, 4):
        for b in range(3):
            orc_acid.write_delta(d, w, 0, b, rows(4, w * 100 + b * 10))
    t = orc_acid.read_table(d, all_valid(3), with_row_id=True)
    victims = t.filter(pc.equal(pc.bit_wise_and(t.column("id"), 1), 1))
    orc_acid.write_delete_delta(d, 4, 0, victims.select(["ROW__ID"]), row_schema=SCHEMA)
    splits = orc_acid.plan_splits(d, all_valid(4))
    assert [s.bucket_id for s in splits] == [0, 1, 2]
    assert all(len(s.delete_files) == 1 and s.delete_files[0].bucket_id == s.bucket_id
               for s in splits)
    schema = orc_acid.infer_row_schema(d, splits)
    parts = [orc_acid.read_split(s, schema=schema, with_row_id=True) for s in splits]
    via_splits = pa.concat_tables(parts)
    whole = orc_acid.read_table(d, all_valid(4), with_row_id=True)
    assert via_splits.sort_by("id").equals(whole.sort_by("id"))
    assert all(i % 2 == 0 for i in ids_of(whole)) and whole.num_rows == 18
    batches = list(orc_acid.iter_batches(d, all_valid(4)))
    assert sum(b.num_rows for b in batches) == 18
    import pickle
    assert pickle.loads(pickle.dumps(splits[0])) == splits[0]


def test_original_files_with_deltas_and_base(tmp_path):
    d = str(tmp_path)
    po.write_table(rows(4), os.path.join(d, "000000_0"))
    po.write_table(rows(3, 10), os.path.join(d, "000000_0_copy_1"))
    orc_acid.write_delta(d, 10000001, 0, 0, rows(1, 99))
    t = orc_acid.read_table(d, all_valid(10000001), with_row_id=True)
    assert ids_of(t) == [0, 1, 2, 3, 10, 11, 12, 99]
    rid = {r["id"]: r["ROW__ID"] for r in t.to_pylist()}
    assert rid[10] == {"writeid": 0, "bucketid": 536870912, "rowid": 4}
    assert (tmp_path / "delta_10000001_10000001_0000").is_dir()
    orc_acid.write_base(d, 10000002, 0, rows(1, 7))
    assert ids_of(orc_acid.read_table(d, all_valid(10000002))) == [7]


def test_insert_only_tables(tmp_path):
    d = str(tmp_path)
    orc_acid.write_insert_only(d, 1, rows(3))
    orc_acid.write_insert_only(d, 2, rows(2, 10), file_format="parquet")
    orc_acid.write_insert_only(d, 3, rows(2, 20))
    t = orc_acid.read_table(d, "default.t:3:3:3:", insert_only=True)
    assert ids_of(t) == [0, 1, 2, 10, 11]
    orc_acid.write_insert_only(d, 4, rows(1, 40), overwrite=True)
    assert ids_of(orc_acid.read_table(d, all_valid(4), insert_only=True)) == [40]
    with pytest.raises(ValueError):
        orc_acid.read_table(d, all_valid(4), insert_only=True, with_row_id=True)


# -- bad input --------------------------------------------------------------------------------

def test_not_orc_file_names_the_path(tmp_path):
    bad = tmp_path / "delta_0000001_0000001_0000"
    bad.mkdir()
    (bad / "bucket_00000").write_bytes(b"this is not an orc file at all" * 10)
    with pytest.raises(OrcAcidError) as ei:
        orc_acid.read_table(str(tmp_path), all_valid(1), schema=SCHEMA)
    assert "bucket_00000" in str(ei.value)


def test_truncated_file_names_the_path(tmp_path):
    [p] = orc_acid.write_delta(str(tmp_path), 1, 0, 0, rows(1000))
    data = open(p, "rb").read()
    os.chmod(p, 0o644)
    with open(p, "wb") as fh:
        fh.write(data[: len(data) // 2])
    with pytest.raises(OrcAcidError) as ei:
        orc_acid.read_table(str(tmp_path), all_valid(1))
    assert p in str(ei.value)


def test_wrong_schema_in_acid_dir(tmp_path):
    dd = tmp_path / "delta_0000001_0000001_0000"
    dd.mkdir()
    po.write_table(rows(2), str(dd / "bucket_00000"))
    with pytest.raises(AcidSchemaError) as ei:
        orc_acid.read_table(str(tmp_path), all_valid(1), schema=SCHEMA)
    assert "bucket_00000" in str(ei.value)


def test_bad_write_id_list_names_the_string(tmp_path):
    orc_acid.write_delta(str(tmp_path), 1, 0, 0, rows(1))
    with pytest.raises(ValidIdListError) as ei:
        orc_acid.read_table(str(tmp_path), "default.t:one:two::")
    assert "default.t:one:two::" in str(ei.value)


def test_missing_table_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        orc_acid.read_table(str(tmp_path / "nope"), all_valid(1))


def test_hash_join_fallback_gives_the_same_rows(tmp_path, monkeypatch):
    from orc_acid.event_filters import DeleteSet
    d = str(tmp_path)
    _streaming_delta(d, 1, 6)
    t = orc_acid.read_table(d, all_valid(6), with_row_id=True)
    victims = t.filter(pc.is_in(t.column("id"), pa.array([100, 202, 301, 302, 600])))
    orc_acid.write_delete_delta(d, 7, 0, victims.select(["ROW__ID"]), row_schema=SCHEMA)
    fast = orc_acid.read_table(d, all_valid(7), with_row_id=True)
    monkeypatch.setattr(DeleteSet, "MAX_GROUPS_PER_FILE", 0)
    slow = orc_acid.read_table(d, all_valid(7), with_row_id=True)
    assert fast.equals(slow)
    assert ids_of(fast) == [101, 102, 200, 201, 300, 400, 401, 402, 500, 501, 502, 601, 602]


def test_delete_key_groups_for_engines_applying_deletes(tmp_path):
    """delete_key_groups: the snapshot's valid delete events, per (originalTransaction,
    bucket) with sorted rowIds -- including events of two delete deltas for the same pair,
    written out of key order, and without those of an aborted write."""
    d = str(tmp_path)
    orc_acid.write_delta(d, 1, 0, 0, rows(10))
    orc_acid.write_delta(d, 2, 0, 1, rows(5, start=100))
    t = orc_acid.read_table(d, all_valid(2), with_row_id=True)

    def victims(ids):
        return t.filter(pc.is_in(t.column("id"), pa.array(ids))).select(["ROW__ID"])
    orc_acid.write_delete_delta(d, 3, 0, victims([7, 2, 101]), row_schema=SCHEMA)
    orc_acid.write_delete_delta(d, 4, 0, victims([0, 9]), row_schema=SCHEMA)
    orc_acid.write_delete_delta(d, 5, 0, victims([5]), row_schema=SCHEMA)     # aborted
    wids = f"default.t:5:{MAX}::5"
    splits = orc_acid.plan_splits(d, wids)
    files = list({f.path: f for sp in splits for f in sp.delete_files}.values())
    groups = orc_acid.delete_key_groups(d, wids, files)
    by_id = {r["id"]: r["ROW__ID"] for r in t.to_pylist()}
    want = {}
    for i in (7, 2, 101, 0, 9):
        rid = by_id[i]
        want.setdefault((rid["writeid"], rid["bucketid"]), []).append(rid["rowid"])
    assert {k: v.tolist() for k, v in groups.items()} == \
        {k: sorted(v) for k, v in want.items()}
    assert ids_of(orc_acid.read_table(d, wids)) == [1, 3, 4, 5, 6, 8, 100, 102, 103, 104]


def test_streaming_side_file_limits_the_read(tmp_path):
    """A streaming writer's bucket file may be longer than its last flush (data after the
    flushed footer); the ``_flush_length`` side file says how much of it is readable."""
    d = str(tmp_path)
    [p] = orc_acid.write_delta(d, 1, 0, 0, rows(5))
    os.rename(os.path.dirname(p), os.path.join(d, "delta_0000001_0000002"))
    p = os.path.join(d, "delta_0000001_0000002", "bucket_00000")
    size = os.path.getsize(p)
    os.chmod(p, 0o644)
    with open(p, "ab") as fh:
        fh.write(b"\x00partial stripe being written\x01" * 50)
    with pytest.raises(OrcAcidError):
        orc_acid.read_table(d, all_valid(2), schema=SCHEMA)
    with open(p + "_flush_length", "wb") as fh:
        fh.write((size // 2).to_bytes(8, "big") + size.to_bytes(8, "big"))
    assert ids_of(orc_acid.read_table(d, all_valid(2))) == [0, 1, 2, 3, 4]


# -- stripe-by-stripe reading, delete masks, footers of every codec ---------------------------

@pytest.mark.parametrize("codec", ["uncompressed", "zlib", "snappy", "lz4", "zstd"])
def test_key_index_and_stripe_counts_for_every_codec(tmp_path, codec):
    """The footer is decompressed to find the stripe row counts of the key index (SNAPPY,
    LZ4 and ZSTD included, never by reading the stripes back)."""
    from orc_acid import writer as W
    from orc_acid._orc_tail import OrcTail
    n = 300_000
    hexes = np.random.default_rng(2).bytes(n * 8).hex()
    big = pa.table({"id": np.arange(n, dtype=np.int64),
                    "name": pa.array([hexes[i * 16:i * 16 + 16] for i in range(n)])},
                   schema=SCHEMA)
    opts = orc_acid.WriterOptions(compression=codec, stripe_size=1 << 20)
    [p] = orc_acid.write_delta(str(tmp_path), 1, 0, 0, big, options=opts)
    f = po.ORCFile(p)
    assert f.nstripes > 1
    counts = [f.read_stripe(i, columns=["rowId"]).num_rows for i in range(f.nstripes)]
    assert OrcTail(p).stripe_row_counts() == counts
    ends = np.cumsum(counts) - 1
    assert f.metadata[b"hive.acid.key.index"].decode() == "".join(
        f"1,536870912,{e};" for e in ends)
    with open(p, "rb") as fh:
        assert W._stripe_rows(fh.read()) == counts


def test_iter_split_streams_stripes_and_matches_read_split(tmp_path):
    d = str(tmp_path)
    n = 250_000
    hexes = np.random.default_rng(3).bytes(n * 8).hex()
    big = pa.table({"id": np.arange(n, dtype=np.int64),
                    "name": pa.array([hexes[i * 16:i * 16 + 16] for i in range(n)])},
                   schema=SCHEMA)
    opts = orc_acid.WriterOptions(stripe_size=1 << 19)
    [p] = orc_acid.write_delta(d, 1, 0, 0, big, options=opts)
    nstripes = po.ORCFile(p).nstripes
    assert nstripes > 2
    t = orc_acid.read_table(d, all_valid(1), with_row_id=True)
    # deleted: every 7th row, and a run crossing the first stripe boundary
    first = po.ORCFile(p).read_stripe(0, columns=["rowId"]).num_rows
    ids = t.column("id").to_numpy()
    victims = t.filter(pa.array((ids % 7 == 0) | ((ids >= first - 3) & (ids < first + 3))))
    orc_acid.write_delete_delta(d, 2, 0, victims.select(["ROW__ID"]), row_schema=SCHEMA)
    [sp] = orc_acid.plan_splits(d, all_valid(2))
    chunks = list(orc_acid.iter_split(sp, schema=SCHEMA, with_row_id=True))
    assert len(chunks) == nstripes
    whole = orc_acid.read_split(sp, schema=SCHEMA, with_row_id=True)
    assert pa.concat_tables(chunks).equals(whole)
    gone = set(victims.column("id").to_pylist())
    assert ids_of(whole) == [i for i in range(n) if i not in gone]
    assert list(orc_acid.iter_split(sp, schema=SCHEMA, columns=[])) != []
    # count only (no column read): the row count survives (concat_tables of zero-column
    # tables would give 0 rows)
    assert orc_acid.read_split(sp, schema=SCHEMA, columns=[]).num_rows == n - len(gone)
    assert orc_acid.read_table(d, all_valid(2), columns=[]).num_rows == n - len(gone)


def test_delete_mask_with_and_without_consecutive_row_ids():
    from orc_acid.event_filters import DeleteSet as _DeleteSet
    dels = np.array([3, 5, 6, 10, 11, 40], dtype=np.int64)
    consecutive = np.arange(4, 12, dtype=np.int64)            # 4..11
    assert _DeleteSet._hits(consecutive, dels).tolist() == [
        r in {5, 6, 10, 11} for r in range(4, 12)]
    gaps = np.array([3, 4, 6, 7, 8, 9, 10, 40], dtype=np.int64)  # same length and span
    assert _DeleteSet._hits(gaps, dels).tolist() == [r in set(dels.tolist()) for r in gaps]
    beyond = np.arange(41, 45, dtype=np.int64)
    assert not _DeleteSet._hits(beyond, dels).any()
