"""The appendable streaming bucket writer (orc_acid.streaming_writer): intermediate footers, the
``_flush_length`` side file, and readers that only read what was flushed."""

from __future__ import annotations

import datetime
import io
import os
from decimal import Decimal

import pyarrow as pa
import pyarrow.orc as po
import pyorc
import pytest

import orc_acid
from orc_acid._orc_tail import OrcTail
from orc_acid.streaming_writer import StreamingBucketWriter, read_flush_lengths

MAX = "9223372036854775807"
ALL = f"default.t:100:{MAX}::"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(lo, hi, tag="r"):
    return pa.table({"id": list(range(lo, hi)), "name": [f"{tag}{i}" for i in range(lo, hi)]},
                    schema=SCHEMA)


def prefix_reads(path, length):
    """The file truncated at ``length`` read by ORC C++ (pyarrow) and by pyorc."""
    with open(path, "rb") as fh:
        data = fh.read(length)
    a = po.ORCFile(pa.BufferReader(data))
    b = pyorc.Reader(io.BytesIO(data), struct_repr=pyorc.StructRepr.DICT)
    return a, b


def test_every_flushed_length_is_a_complete_orc_file(tmp_path):
    w = StreamingBucketWriter(str(tmp_path), 5, 9, 0, SCHEMA)
    assert read_flush_lengths(w.side_path) == [0]          # Hive starts the side file with 0
    expected = []
    for k, wid in enumerate(range(5, 10)):
        data = rows(k * 10, k * 10 + 3 + k)
        w.write(wid, data)
        expected += [(wid, i, r["id"]) for i, r in enumerate(data.to_pylist())]
        length = w.flush()
        assert read_flush_lengths(w.side_path)[-1] == length == os.path.getsize(w.path)
    lengths = read_flush_lengths(w.side_path)
    assert lengths == w.flush_lengths and lengths == sorted(set(lengths))
    total = 0
    for k, length in enumerate(lengths[1:]):
        a, b = prefix_reads(w.path, length)
        assert a.nstripes == k + 1 and a.nrows == sum(3 + j for j in range(k + 1))
        t = a.read()
        got = [(r["currentTransaction"], r["rowId"], r["row"]["id"]) for r in t.to_pylist()]
        assert got == expected[:a.nrows]
        assert [(r["currentTransaction"], r["rowId"], r["row"]["id"]) for r in b] == got
        total = a.nrows
        md = b.user_metadata
        assert md["hive.acid.stats"] == f"{a.nrows},0,0".encode()
        assert md["hive.acid.version"] == b"2"
        # one key-index entry per stripe: the stripe's last (originalTransaction, bucket, rowId)
        assert md["hive.acid.key.index"] == "".join(
            f"{5 + j},536870912,{2 + j};" for j in range(k + 1)).encode()
        # file statistics cover everything flushed so far
        st = b[7].statistics     # row.id (0 root, 1-5 ACID columns, 6 row)
        assert st["number_of_values"] == a.nrows and st["minimum"] == 0
        assert st["maximum"] == max(e[2] for e in expected[:a.nrows])
        assert st["sum"] == sum(e[2] for e in expected[:a.nrows])
    assert w.flush() == lengths[-1]                          # nothing new: no new footer
    path = w.close()
    assert path == w.path and not os.path.exists(w.side_path)
    f = po.ORCFile(path)                                     # the closed file, read whole
    assert f.nrows == total == len(expected) and f.nstripes == 5
    assert sorted(os.listdir(w.delta_dir)) == ["_orc_acid_version", "bucket_00000"]
    assert os.path.basename(w.delta_dir) == "delta_0000005_0000009"


def test_merged_statistics_match_a_one_shot_file(tmp_path):
    schema = pa.schema([("i", pa.int32()), ("s", pa.string()), ("d", pa.float64()),
                        ("b", pa.bool_()), ("dt", pa.date32()), ("bin", pa.binary()),
                        ("dec", pa.decimal128(10, 2)), ("ts", pa.timestamp("ns")),
                        ("l", pa.list_(pa.int64()))])
    parts = []
    for k in range(3):
        parts.append(pa.table({
            "i": [k * 7 - 5, None, k],
            "s": [f"s{k}", None if k == 1 else "zz", "a" * (k + 1)],
            "d": [k / 3, -k * 2.5, None],
            "b": [k % 2 == 0, True, None],
            "dt": [datetime.date(2020, 1, 1 + k), None, datetime.date(2019, 5, 5)],
            "bin": [b"x" * k, None, b"yy"],
            "dec": [Decimal("1.25") * k, None, Decimal("-3.50")],
            "ts": [datetime.datetime(2021, 1, 1, k), None, None],
            "l": [[1] * k, None, [k, k]],
        }, schema=schema))
    w = StreamingBucketWriter(str(tmp_path / "s"), 1, 3, 2, schema)
    for k, p in enumerate(parts):
        w.write(k + 1, p)
        w.flush()
    streamed = pyorc.Reader(open(w.close(), "rb"))
    one = orc_acid.write_delta(str(tmp_path / "o"), 1, 0, 2, pa.concat_tables(parts))[0]
    oneshot = pyorc.Reader(open(one, "rb"))
    assert len(streamed) == len(oneshot) == 9
    for col in range(1, 17):
        a, b = dict(streamed[col].statistics), dict(oneshot[col].statistics)
        if col in (1, 2, 4, 5):      # ACID ids: the streamed ones really differ
            assert a["number_of_values"] == b["number_of_values"]
            continue
        assert a == b, (col, a, b)    # the merged stats are what the ORC writer computes


def test_hive_fixture_layout(tmp_path, hive_fixtures_dir):
    """Write what Hive wrote into streaming.orc and compare the layouts."""
    hive = str(hive_fixtures_dir / "streaming.orc")
    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    w = StreamingBucketWriter(str(tmp_path), 1, 2, 0, schema)
    w.write(1, pa.table({"a": ["a1", "a3"], "b": ["b2", "b4"]}))
    first = w.flush()
    w.write(2, pa.table({"a": ["a5", "a7"], "b": ["b6", "b8"]}))
    w.flush()
    ours = w.close()
    assert os.path.relpath(ours, str(tmp_path)) == "delta_0000001_0000002/bucket_00000"
    ht, ot = OrcTail(hive), OrcTail(ours)
    assert ot.user_metadata() == ht.user_metadata() == {
        "hive.acid.key.index": b"1,536870912,1;2,536870912,1;",
        "hive.acid.stats": b"4,0,0", "hive.acid.version": b"2"}
    assert ot.stripe_row_counts() == ht.stripe_row_counts() == [2, 2]
    hf, of = po.ORCFile(hive), po.ORCFile(ours)
    assert of.schema == hf.schema                      # names and types of the event schema
    assert of.read().to_pylist() == hf.read().to_pylist()

    def stripe_offsets(tail):
        from orc_acid._orc_tail import parse_fields as _fields
        out = []
        for num, _, val, _ in tail.footer_fields():
            if num == 3:
                v = {n: x for n, _, x, _ in _fields(val)}
                out.append((v[1], v.get(2, 0) + v[3] + v[4]))
        return out

    # both: stripe 2 starts after stripe 1's intermediate tail (dead bytes in between)
    for tail, second_start in ((ht, 410), (ot, first)):
        (o1, l1), (o2, _) = stripe_offsets(tail)
        assert o1 == 3 and o2 == second_start > o1 + l1
    # the prefix at the intermediate length is the one-transaction file, in both
    for path, length in ((hive, 410), (ours, first)):
        with open(path, "rb") as fh:
            f = po.ORCFile(pa.BufferReader(fh.read(length)))
        assert f.nrows == 2 and f.metadata[b"hive.acid.key.index"] == b"1,536870912,1;"
    # the same snapshot answers as the Hive file (see test_hive_fixtures)
    for wids, n in (("default.s:2:1:1,2:", 0), ("default.s:1:" + MAX + "::", 2),
                    ("default.s:2:1:1:", 2), ("default.s:2:" + MAX + "::", 4)):
        assert orc_acid.read_table(str(tmp_path), wids).num_rows == n


def test_reader_reads_only_the_flushed_prefix_of_a_file_being_written(tmp_path):
    w = StreamingBucketWriter(str(tmp_path), 1, 4, 0, SCHEMA, max_buffered_rows=10)
    # nothing flushed: the side file holds only 0 -> no rows, no error
    w.write(1, rows(0, 5))
    assert orc_acid.read_table(str(tmp_path), ALL).num_rows == 0
    w.flush()
    # write id 2: 25 rows, partly spilled to disk as stripes (buffer limit 10), not flushed
    for lo in (100, 110, 120):
        w.write(2, rows(lo, min(lo + 10, 125)))
    assert os.path.getsize(w.path) > w.flushed_length
    t = orc_acid.read_table(str(tmp_path), ALL)
    assert sorted(t.column("id").to_pylist()) == list(range(5))
    w.flush()
    t = orc_acid.read_table(str(tmp_path), ALL)
    assert t.num_rows == 30
    # per-row write-id validity inside the one delta: 2 open, then 2 aborted
    assert orc_acid.read_table(str(tmp_path), "default.t:4:2:2,3,4:").num_rows == 5
    assert orc_acid.read_table(str(tmp_path), f"default.t:4:{MAX}::2").num_rows == 5
    # several stripes for write id 2; one key-index entry each
    with open(w.path, "rb") as fh:
        f = po.ORCFile(pa.BufferReader(fh.read(w.flushed_length)))
    assert f.nstripes >= 3
    assert f.metadata[b"hive.acid.key.index"].count(b";") == f.nstripes
    w.close()
    assert orc_acid.read_table(str(tmp_path), ALL).num_rows == 30


def test_aborted_rows_never_readable(tmp_path):
    w = StreamingBucketWriter(str(tmp_path), 1, 3, 0, SCHEMA, max_buffered_rows=4)
    w.write(1, rows(0, 3))
    w.flush()
    w.write(2, rows(10, 13))          # buffered, then aborted: never written
    assert w.discard(2) == 3
    w.write(2, rows(20, 30))          # spilled (> 4 rows), then aborted: on disk, filtered
    w.discard(2)
    w.write(3, rows(40, 42))
    w.flush()
    aborted_2 = f"default.t:3:{MAX}::2"
    t = orc_acid.read_table(str(tmp_path), aborted_2)
    assert sorted(t.column("id").to_pylist()) == [0, 1, 2, 40, 41]
    w.close()
    t = orc_acid.read_table(str(tmp_path), aborted_2)
    assert sorted(t.column("id").to_pylist()) == [0, 1, 2, 40, 41]


def test_close_without_flush_and_unflushed_tail(tmp_path):
    w = StreamingBucketWriter(str(tmp_path), 1, 2, 0, SCHEMA, max_buffered_rows=2)
    w.write(1, rows(0, 5))            # spilled, never flushed (transaction aborted)
    assert os.path.exists(w.path)
    assert w.close() is None          # no file left behind, side file gone
    assert sorted(os.listdir(w.delta_dir)) == ["_orc_acid_version"]
    w = StreamingBucketWriter(str(tmp_path), 3, 4, 0, SCHEMA, max_buffered_rows=2)
    w.write(3, rows(0, 3))
    length = w.flush()
    w.write(4, rows(10, 15))          # spilled after the last footer, then the batch ends
    w.close()                         # the file is cut at its last footer
    assert os.path.getsize(w.path) == length
    assert po.ORCFile(w.path).nrows == 3


def test_crash_leaves_a_readable_prefix(tmp_path):
    w = StreamingBucketWriter(str(tmp_path), 1, 3, 0, SCHEMA, max_buffered_rows=2)
    w.write(1, rows(0, 4))
    w.flush()
    w.write(2, rows(10, 14))          # spilled; then the process dies
    w.abandon()
    with open(w.path, "ab") as fh:    # plus a torn write
        fh.write(b"\x00garbage")
    with open(w.side_path, "ab") as fh:
        fh.write(b"\x00\x00\x00")     # torn length entry: ignored
    t = orc_acid.read_table(str(tmp_path), ALL)
    assert sorted(t.column("id").to_pylist()) == [0, 1, 2, 3]


def test_side_file_deleted_after_listing_reads_the_whole_file(tmp_path, monkeypatch):
    w = StreamingBucketWriter(str(tmp_path), 1, 2, 0, SCHEMA)
    w.write(1, rows(0, 3))
    w.flush()
    from orc_acid import reader
    real = reader.plan_splits

    def plan_then_close(*a, **kw):    # the writer closes between listing and reading
        splits = real(*a, **kw)
        w.close()
        return splits

    monkeypatch.setattr(reader, "plan_splits", plan_then_close)
    assert orc_acid.read_table(str(tmp_path), ALL).num_rows == 3


def test_writer_refuses_a_second_writer_and_bad_ids(tmp_path):
    w = StreamingBucketWriter(str(tmp_path), 1, 2, 0, SCHEMA)
    with pytest.raises(FileExistsError):
        StreamingBucketWriter(str(tmp_path), 1, 2, 0, SCHEMA)
    with pytest.raises(ValueError):
        w.write(3, rows(0, 1))
    w.close()
    with pytest.raises(ValueError):
        w.write(1, rows(0, 1))
    with pytest.raises(ValueError):
        StreamingBucketWriter(str(tmp_path), 2, 1, 0, SCHEMA)
