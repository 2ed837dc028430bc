"""Insert files with the ACID columns spliced in (``orc_acid._insert_file``): the file reads
as the one pyarrow writes from the whole event table -- values, type tree, statistics of
the file, of every stripe and of every row group, encodings, Hive's metadata -- for every
codec, over several stripes and row groups, with nested columns and nulls; and ORC C++
(pyorc) seeks through its row index to any row. (The Java ORC library reads the same
files with a search argument in ``test_external_readers``.)"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pytest

import orc_acid
from orc_acid import writer as W
from orc_acid._insert_file import encode_insert_file
from orc_acid._orc_footer import ColumnStats, EncodedPiece
from orc_acid._orc_tail import OrcTail, decompress, parse_fields
from tests.support.requirements import require_module

WRITE_ID = 7
BUCKET = orc_acid.encode_bucket(3, 2)
# stripes as small as the writer makes them (it checks the stripe size after each batch of
# 4096 rows), row groups of 1000 rows: the last group of a stripe is short, runs of 512
# values cross groups
OPTS = dict(stripe_size=1, batch_size=4096, row_index_stride=1000,
            compression_block_size=64 * 1024)


@functools.lru_cache(maxsize=None)
def mixed_rows(n: int) -> pa.Table:
    rng = np.random.default_rng(45)
    ids = np.arange(n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "qty": pa.array(rng.integers(-5, 5, n, dtype=np.int32), mask=ids % 7 == 0),
        "name": pa.array(np.char.add("n", (ids % 97).astype(str)), mask=ids % 11 == 0),
        "price": pa.array((ids % 1000).astype(np.int32)).cast(pa.decimal128(12, 2)),
        "day": pa.array((ids % 30).astype(np.int32)).cast(pa.date32()),
        "tags": pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
                                         pa.array(np.arange(2 * n, dtype=np.int32) % 5),
                                         mask=pa.array(ids % 13 == 0)),
        "pt": pa.StructArray.from_arrays(
            [pa.array(ids.astype(np.float64)),
             pa.array(np.full(n, "y"), mask=ids % 2 == 1)], names=["x", "y"]),
    })


def reference(rows: pa.Table, codec: str, start: int) -> bytes:
    """The file as pyarrow writes it from the whole event table, in one stripe."""
    events = W.insert_events(rows, WRITE_ID, BUCKET, start, rows.schema)
    opts = W.WriterOptions(compression=codec, **{**OPTS, "stripe_size": 64 << 20})
    return W.encode_orc(events, opts).to_pybytes()


def spliced(rows: pa.Table, codec: str, start: int) -> bytes:
    parts, _ = encode_insert_file(rows, WRITE_ID, BUCKET, start, compression=codec, **OPTS)
    return b"".join(bytes(p) for p in parts)


def stripe_parts(data: bytes, piece: EncodedPiece):
    """Per stripe: (encodings, {column: per-row-group statistics})."""
    out = []
    for s in piece.stripes:
        foot = decompress(data[s.offset + s.index_length + s.data_length:
                               s.offset + s.length], piece.compression)
        off, groups, encodings = s.offset, {}, []
        for num, _, val, _ in parse_fields(foot):
            if num == 2:
                encodings.append(val)
            if num != 1:
                continue
            st = {n: v for n, _, v, _ in parse_fields(val)}
            if st.get(1) == 6:                     # ROW_INDEX
                index = decompress(data[off:off + st[3]], piece.compression)
                groups[st[2]] = [[ColumnStats.parse(v) for n2, _, v, _ in parse_fields(e)
                                  if n2 == 2] for _, _, e, _ in parse_fields(index)]
            off += st.get(3, 0)
        out.append((encodings, groups))
    return out


@pytest.mark.parametrize("codec", ["zlib", "snappy", "zstd", "lz4", "uncompressed"])
def test_spliced_file_is_what_pyarrow_writes_from_the_events(codec):
    rows = mixed_rows(40_001)
    start = 40
    ours = spliced(rows, codec, start)
    ref = reference(rows, codec, start)
    a, b = po.ORCFile(pa.BufferReader(ref)), po.ORCFile(pa.BufferReader(ours))
    assert b.nstripes > 2
    assert b.read().equals(a.read())
    pa_, pb_ = EncodedPiece.parse(ref), EncodedPiece.parse(ours)
    assert pb_.types_raw == pa_.types_raw
    assert pb_.stats == pa_.stats                              # file statistics
    assert pb_.footer_extra_raw == pa_.footer_extra_raw         # stride, writer, version
    # each stripe: encodings, statistics and row group statistics of every column as in
    # the events of its rows written alone
    at, ends = 0, []
    for s, s_stats, parts in zip(pb_.stripes, pb_.stripe_stats_raw, stripe_parts(ours, pb_)):
        alone = reference(rows.slice(at, s.rows), codec, start + at)
        pk = EncodedPiece.parse(alone)
        assert [ColumnStats.parse(v) for _, _, v, _ in parse_fields(s_stats)] == \
            [ColumnStats.parse(v) for _, _, v, _ in parse_fields(pk.stripe_stats_raw[0])]
        assert parts == stripe_parts(alone, pk)[0]
        # the ACID columns cost a few bytes per row group, compressed as the rest
        assert s.length < pk.stripes[0].length * 1.01 + 512
        at += s.rows
        ends.append(start + at - 1)
    assert at == rows.num_rows
    assert b.metadata == {
        b"hive.acid.key.index": "".join(f"{WRITE_ID},{BUCKET},{e};" for e in ends).encode(),
        b"hive.acid.stats": b"40001,0,0", b"hive.acid.version": b"2"}


def test_statistics_sum_left_out_when_it_overflows():
    big = (1 << 62) + 5                            # n * write id overflows int64
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    parts, _ = encode_insert_file(rows, big, BUCKET, 0, compression="zlib", **OPTS)
    piece = EncodedPiece.parse(b"".join(bytes(p) for p in parts))
    orig = piece.stats[2]                          # originalTransaction
    assert (orig.n, orig.lo, orig.hi, orig.total) == (3, big, big, None)
    assert piece.stats[4].total == 3               # rowId 0 + 1 + 2


def test_pyorc_seeks_to_any_row_through_the_row_index(tmp_path):
    """ORC C++ (pyorc) seeks with the row index positions of every column: a row group's
    first row, rows inside a 512-value run and across runs, a stripe's last row."""
    pyorc = require_module("pyorc")
    rows = mixed_rows(40_001)
    [path] = orc_acid.write_delta(str(tmp_path), WRITE_ID, 2, 3, rows,
                                  options=orc_acid.WriterOptions(compression="zlib", **OPTS))
    counts = OrcTail(path).stripe_row_counts()
    assert len(counts) > 2
    starts = np.cumsum([0] + counts[:-1]).tolist()
    seeks = [s + d for s in starts for d in (0, 511, 512, 999, 1000, 2100)] + \
        [s - 1 for s in starts[1:]] + [rows.num_rows - 1]
    names = rows.column("name").to_pylist()
    with open(path, "rb") as fh:
        r = pyorc.Reader(fh)
        for row in seeks:
            r.seek(row)
            got = next(r)
            assert got[:5] == (0, WRITE_ID, BUCKET, row, WRITE_ID), row
            assert (got[5][0], got[5][2]) == (row, names[row])


def test_write_delta_and_base_publish_the_spliced_file(tmp_path):
    rows = mixed_rows(2_500)
    opts = orc_acid.WriterOptions(compression="snappy", **OPTS)
    [d] = orc_acid.write_delta(str(tmp_path / "d"), WRITE_ID, 2, 3, rows, options=opts)
    [b] = orc_acid.write_base(str(tmp_path / "b"), WRITE_ID, 3, rows, statement_id=2,
                              options=opts)
    for p in (d, b):
        with open(p, "rb") as fh:
            assert fh.read() == spliced(rows, "snappy", 0)
        assert OrcTail(p).user_metadata()["hive.acid.stats"] == b"2500,0,0"
    got = orc_acid.read_table(str(tmp_path / "d"), f"default.t:{WRITE_ID}:9223372036854775807::",
                              with_row_id=True)
    assert got.drop_columns(["ROW__ID"]).equals(rows)
    assert got.column("ROW__ID").to_pylist()[-1] == {"writeid": WRITE_ID, "bucketid": BUCKET,
                                                     "rowid": 2499}
