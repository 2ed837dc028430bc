"""Streaming ACID bucket files: one ORC file that grows by appends, readable after each flush.

Hive's streaming ingest (``OrcRecordUpdater`` with a transaction batch) writes all the
transactions of a batch into one ``delta_MIN_MAX/bucket_N`` (no statement id) and makes each
commit readable by writing an *intermediate footer* and appending the file length at that
moment to ``bucket_N_flush_length`` (8-byte big-endian lengths; the side file starts with a
0). A reader truncates the bucket file at the last recorded length: that prefix is a complete
ORC file. When the batch ends the writer closes the file (its last footer is at the end) and
deletes the side file. The resulting file looks like::

    "ORC" | stripes of flush 1 | tail 1 | stripes of flush 2 | tail 2 | ...

where tail k = stripe statistics + footer + postscript + 1 byte, and footer k lists *all*
stripes written so far (older tails are dead bytes between stripes, as in Hive's files, see
``streaming.orc`` of the Hive fixtures: stripe 2 starts at 410, after stripe 1's tail).

How, with pyarrow (whose ORC writer cannot write intermediate footers): each flush encodes
the new events with pyarrow into an in-memory ORC file (same compression, stripe size,
buffer size), and :class:`StreamingBucketWriter` copies only that file's stripe bytes to the
end of the bucket file -- stripes are relocatable, nothing inside them is an absolute offset
-- then writes a new tail of its own: the stripe statistics of every stripe so far (copied
from the in-memory files), a footer with every stripe's information (offsets moved), the
type tree, the merged file column statistics, and Hive's ``hive.acid.key.index`` (one
``originalTransaction,bucket,rowId;`` per stripe), ``hive.acid.stats`` and
``hive.acid.version`` metadata; then a postscript. The footer and stripe statistics are
written as uncompressed ("original") chunks of the file's compression codec, which every ORC
reader accepts for any codec.

File column statistics are merged per column: row counts, hasNull, bytes on disk, and
min/max/sum for integer, floating point, string (exact or as lower/upper bounds), boolean,
date, binary, decimal, timestamp and collection columns (the result equals what the ORC
writer computes for the same rows written at once; a sum that overflows is left out, as ORC
writers do). An unknown statistics kind is dropped on merging (statistics are optional).

Events are insert events (streaming is insert-only): originalTransaction = currentTransaction
= the write id, bucket = BucketCodec V1(bucket id, statement 0), rowId restarting at 0 for
each write id (as ``OrcRecordUpdater.insert`` does).

Durability order per flush: stripes + tail are written and fsync'ed, then the new length is
appended to the side file and fsync'ed; only after that may the caller commit the
transaction. Rows of a transaction that is aborted before its flush never reach the file
(:meth:`StreamingBucketWriter.discard`); rows already spilled to disk (large transactions,
see ``max_buffered_rows``) stay there and are filtered out by readers through their write id.
"""

from __future__ import annotations

import os
import struct
from decimal import Decimal
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc

from ._orc_tail import OrcTailError, _decompress, _enc_varint, _fields
from .layout import (encode_bucket, format_bucket_file, format_delta, side_file_for,
                     MAX_BUCKET_ID)
from .writer import (WriterOptions, _DEFAULT_OPTIONS, _as_schema, _as_table,
                     _ensure_dir_with_version, _insert_events, _local)
from .layout import ORC_ACID_VERSION

__all__ = ["StreamingBucketWriter", "read_flush_lengths", "last_flush_length"]

_HEADER = b"ORC"


# -- protobuf encoding helpers ---------------------------------------------------------------

def _key(num: int, wt: int) -> bytes:
    return _enc_varint((num << 3) | wt)


def _pb_varint(num: int, v: int) -> bytes:
    return _key(num, 0) + _enc_varint(v)


def _pb_bytes(num: int, b: bytes) -> bytes:
    return _key(num, 2) + _enc_varint(len(b)) + b


def _zz_enc(v: int) -> int:
    return (v << 1) if v >= 0 else ((-v) << 1) - 1


def _zz_dec(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _pb_sint(num: int, v: int) -> bytes:
    return _pb_varint(num, _zz_enc(v))


def _pb_double(num: int, v: float) -> bytes:
    return _key(num, 1) + struct.pack("<d", v)


def _original_chunks(payload: bytes, compression: int, block_size: int) -> bytes:
    """A compressed ORC stream made of uncompressed ("original") chunks."""
    if compression == 0:
        return bytes(payload)
    out = bytearray()
    step = max(1, min(block_size, (1 << 23) - 1))
    for i in range(0, len(payload), step):
        chunk = payload[i:i + step]
        h = (len(chunk) << 1) | 1
        out += bytes((h & 0xFF, (h >> 8) & 0xFF, (h >> 16) & 0xFF)) + chunk
    return bytes(out)


# -- column statistics -----------------------------------------------------------------------

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass
class _ColStats:
    """One ORC ColumnStatistics message, parsed as far as merging needs."""
    n: int = 0
    has_null: bool = False
    bytes_on_disk: Optional[int] = None
    kind: Optional[str] = None          # int|double|string|bucket|date|binary|decimal|
                                        # timestamp|collection|other
    lo: object = None                   # min (exact) or lower bound
    hi: object = None
    lo_exact: bool = True
    hi_exact: bool = True
    total: Optional[object] = None      # sum
    counts: Optional[List[int]] = None  # bucket (boolean) true counts
    other: Optional[Tuple[int, bytes]] = None   # an unmerged sub-message, kept verbatim

    @classmethod
    def parse(cls, msg: bytes) -> "_ColStats":
        s = cls()
        for num, wt, val, raw in _fields(msg):
            if num == 1 and wt == 0:
                s.n = val
            elif num == 10 and wt == 0:
                s.has_null = bool(val)
            elif num == 11 and wt == 0:
                s.bytes_on_disk = val
            elif num == 2 and wt == 2:
                s.kind = "int"
                for n2, w2, v2, _ in _fields(val):
                    if n2 == 1:
                        s.lo = _zz_dec(v2)
                    elif n2 == 2:
                        s.hi = _zz_dec(v2)
                    elif n2 == 3:
                        s.total = _zz_dec(v2)
            elif num == 3 and wt == 2:
                s.kind = "double"
                for n2, w2, v2, _ in _fields(val):
                    if w2 != 1:
                        continue
                    d = struct.unpack("<d", v2)[0]
                    if n2 == 1:
                        s.lo = d
                    elif n2 == 2:
                        s.hi = d
                    elif n2 == 3:
                        s.total = d
            elif num == 4 and wt == 2:
                s.kind = "string"
                for n2, w2, v2, _ in _fields(val):
                    if n2 == 1:
                        s.lo, s.lo_exact = bytes(v2), True
                    elif n2 == 2:
                        s.hi, s.hi_exact = bytes(v2), True
                    elif n2 == 3:
                        s.total = _zz_dec(v2)
                    elif n2 == 4 and s.lo is None:
                        s.lo, s.lo_exact = bytes(v2), False
                    elif n2 == 5 and s.hi is None:
                        s.hi, s.hi_exact = bytes(v2), False
            elif num == 5 and wt == 2:
                s.kind = "bucket"
                counts: List[int] = []
                for n2, w2, v2, _ in _fields(val):
                    if n2 == 1 and w2 == 0:
                        counts.append(v2)
                    elif n2 == 1 and w2 == 2:
                        pos = 0
                        from ._orc_tail import _varint
                        while pos < len(v2):
                            c, pos = _varint(v2, pos)
                            counts.append(c)
                s.counts = counts
            elif num == 7 and wt == 2:
                s.kind = "date"
                for n2, w2, v2, _ in _fields(val):
                    if n2 == 1:
                        s.lo = _zz_dec(v2)
                    elif n2 == 2:
                        s.hi = _zz_dec(v2)
            elif num == 8 and wt == 2:
                s.kind = "binary"
                for n2, w2, v2, _ in _fields(val):
                    if n2 == 1:
                        s.total = _zz_dec(v2)
            elif num == 6 and wt == 2:
                s.kind = "decimal"
                for n2, w2, v2, _ in _fields(val):
                    d = Decimal(bytes(v2).decode("ascii"))
                    if n2 == 1:
                        s.lo = d
                    elif n2 == 2:
                        s.hi = d
                    elif n2 == 3:
                        s.total = d
            elif num == 9 and wt == 2:
                s.kind = "timestamp"
                v = {n2: v2 for n2, w2, v2, _ in _fields(val)}
                # (utc millis, nanos field, local millis); nanos fields hold nanos+1, 0 = none
                if 3 in v:
                    s.lo = (_zz_dec(v[3]), v.get(5, 0), _zz_dec(v[1]) if 1 in v else None)
                if 4 in v:
                    s.hi = (_zz_dec(v[4]), v.get(6, 0), _zz_dec(v[2]) if 2 in v else None)
            elif num == 12 and wt == 2:
                s.kind = "collection"
                v = {n2: v2 for n2, w2, v2, _ in _fields(val)}
                s.lo, s.hi, s.total = v.get(1), v.get(2), v.get(3)
            elif wt == 2:
                s.kind = "other"
                s.other = (num, bytes(val))
        return s

    def merge(self, o: "_ColStats") -> "_ColStats":
        r = _ColStats(n=self.n + o.n, has_null=self.has_null or o.has_null)
        if self.bytes_on_disk is not None and o.bytes_on_disk is not None:
            r.bytes_on_disk = self.bytes_on_disk + o.bytes_on_disk
        kinds = {k for k in (self.kind, o.kind) if k is not None}
        if len(kinds) != 1:
            return r                     # no type-specific part (or mismatched): counts only
        r.kind = kinds.pop()
        a, b = self, o
        if r.kind == "other":
            return r                     # not merged: dropped (statistics are optional)
        if r.kind == "bucket":
            ca, cb = a.counts or [], b.counts or []
            ln = max(len(ca), len(cb))
            r.counts = [(ca[i] if i < len(ca) else 0) + (cb[i] if i < len(cb) else 0)
                        for i in range(ln)]
            return r
        # min / max (absent in a part without values)
        los = [(p.lo, p.lo_exact) for p in (a, b) if p.lo is not None]
        his = [(p.hi, p.hi_exact) for p in (a, b) if p.hi is not None]
        if los:
            v = min(x for x, _ in los)
            r.lo, r.lo_exact = v, all(e for x, e in los if x == v)
        if his:
            v = max(x for x, _ in his)
            r.hi, r.hi_exact = v, all(e for x, e in his if x == v)
        if r.kind in ("int", "double", "string", "binary", "decimal", "collection"):
            parts = []
            ok = True
            for p in (a, b):
                if p.total is not None:
                    parts.append(p.total)
                elif p.n > 0:
                    ok = False
            if ok:
                t = sum(parts) if parts else 0
                if r.kind in ("int", "string", "binary") and not _INT64_MIN <= t <= _INT64_MAX:
                    t = None             # overflow: ORC writers drop the sum too
                if r.kind == "decimal" and len(t.as_tuple().digits) > 38:
                    t = None
                r.total = t
        return r

    def encode(self) -> bytes:
        out = bytearray(_pb_varint(1, self.n))
        if self.kind == "int":
            sub = bytearray()
            if self.lo is not None:
                sub += _pb_sint(1, self.lo)
            if self.hi is not None:
                sub += _pb_sint(2, self.hi)
            if self.total is not None:
                sub += _pb_sint(3, self.total)
            out += _pb_bytes(2, bytes(sub))
        elif self.kind == "double":
            sub = bytearray()
            if self.lo is not None:
                sub += _pb_double(1, self.lo)
            if self.hi is not None:
                sub += _pb_double(2, self.hi)
            if self.total is not None:
                sub += _pb_double(3, self.total)
            out += _pb_bytes(3, bytes(sub))
        elif self.kind == "string":
            sub = bytearray()
            if self.lo is not None:
                sub += _pb_bytes(1 if self.lo_exact else 4, self.lo)
            if self.hi is not None:
                sub += _pb_bytes(2 if self.hi_exact else 5, self.hi)
            if self.total is not None:
                sub += _pb_sint(3, self.total)
            out += _pb_bytes(4, bytes(sub))
        elif self.kind == "bucket":
            packed = b"".join(_enc_varint(c) for c in (self.counts or []))
            out += _pb_bytes(5, _pb_bytes(1, packed) if packed else b"")
        elif self.kind == "date":
            sub = bytearray()
            if self.lo is not None:
                sub += _pb_sint(1, self.lo)
            if self.hi is not None:
                sub += _pb_sint(2, self.hi)
            out += _pb_bytes(7, bytes(sub))
        elif self.kind == "binary":
            sub = _pb_sint(1, self.total) if self.total is not None else b""
            out += _pb_bytes(8, sub)
        elif self.kind == "decimal":
            sub = bytearray()
            for num, v in ((1, self.lo), (2, self.hi), (3, self.total)):
                if v is not None:
                    sub += _pb_bytes(num, format(v, "f").encode("ascii"))
            out += _pb_bytes(6, bytes(sub))
        elif self.kind == "timestamp":
            sub = bytearray()
            if self.lo is not None:
                utc, nanos, local = self.lo
                if local is not None:
                    sub += _pb_sint(1, local)
                sub += _pb_sint(3, utc)
                if nanos:
                    sub += _pb_varint(5, nanos)
            if self.hi is not None:
                utc, nanos, local = self.hi
                if local is not None:
                    sub += _pb_sint(2, local)
                sub += _pb_sint(4, utc)
                if nanos:
                    sub += _pb_varint(6, nanos)
            out += _pb_bytes(9, bytes(sub))
        elif self.kind == "collection":
            sub = bytearray()
            for num, v in ((1, self.lo), (2, self.hi), (3, self.total)):
                if v is not None:
                    sub += _pb_varint(num, v)
            out += _pb_bytes(12, bytes(sub))
        elif self.kind == "other" and self.other is not None:
            out += _pb_bytes(*self.other)
        out += _pb_varint(10, int(self.has_null))
        if self.bytes_on_disk is not None:
            out += _pb_varint(11, self.bytes_on_disk)
        return bytes(out)


# -- an in-memory ORC file produced by pyarrow -----------------------------------------------

@dataclass
class _Stripe:
    offset: int
    index_length: int
    data_length: int
    footer_length: int
    rows: int

    @property
    def length(self) -> int:
        return self.index_length + self.data_length + self.footer_length

    def encode(self, shift: int) -> bytes:
        return (_pb_varint(1, self.offset + shift) + _pb_varint(2, self.index_length)
                + _pb_varint(3, self.data_length) + _pb_varint(4, self.footer_length)
                + _pb_varint(5, self.rows))


@dataclass
class _Piece:
    """The parts of a complete in-memory ORC file the appending writer reuses."""
    data: bytes
    stripes: List[_Stripe]
    types_raw: bytes                       # footer field-4 entries, verbatim
    stats: List[_ColStats]
    stripe_stats_raw: List[bytes]          # Metadata field-1 entries, verbatim
    footer_extra_raw: bytes                # rowIndexStride, writer, calendar, softwareVersion
    ps_fields: list
    compression: int
    block_size: int

    @classmethod
    def parse(cls, data: bytes) -> "_Piece":
        if len(data) < 4 or data[:3] != _HEADER:
            raise OrcTailError("not an ORC file")
        ps_len = data[-1]
        ps_end = len(data) - 1
        ps_fields = _fields(data[ps_end - ps_len:ps_end])
        vals = {n: v for n, _, v, _ in ps_fields}
        if vals.get(8000) != b"ORC":
            raise OrcTailError("no ORC magic in the postscript")
        footer_len = vals.get(1, 0)
        meta_len = vals.get(5, 0)
        compression = vals.get(2, 0)
        block_size = vals.get(3, 256 * 1024)
        footer_end = ps_end - ps_len
        footer = _decompress(data[footer_end - footer_len:footer_end], compression)
        meta_start = footer_end - footer_len - meta_len
        meta = _decompress(data[meta_start:meta_start + meta_len], compression)
        stripes, types, stats, extra = [], bytearray(), [], bytearray()
        for num, wt, val, raw in _fields(footer):
            if num == 3:
                v = {n2: v2 for n2, _, v2, _ in _fields(val)}
                stripes.append(_Stripe(v.get(1, 0), v.get(2, 0), v.get(3, 0), v.get(4, 0),
                                       v.get(5, 0)))
            elif num == 4:
                types += raw
            elif num == 7:
                stats.append(_ColStats.parse(val))
            elif num in (8, 9, 11, 12):
                extra += raw
            elif num == 10:
                raise OrcTailError("encrypted ORC files are not supported")
        stripe_stats = [raw for num, _, _, raw in _fields(meta) if num == 1]
        return cls(data, stripes, bytes(types), stats, stripe_stats, bytes(extra), ps_fields,
                   compression, block_size)


_COMPRESSION_KINDS = {"none": 0, "uncompressed": 0, "zlib": 1, "zstd": 5}


def read_flush_lengths(side_path: str) -> List[int]:
    """All lengths recorded in a ``_flush_length`` side file (a torn last entry is ignored)."""
    with open(_local(side_path), "rb") as fh:
        data = fh.read()
    n = len(data) // 8
    return [int.from_bytes(data[i * 8:(i + 1) * 8], "big", signed=True) for i in range(n)]


def last_flush_length(side_path: str) -> Optional[int]:
    lengths = read_flush_lengths(side_path)
    return lengths[-1] if lengths else None


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class StreamingBucketWriter:
    """Append-only writer of one streaming ``delta_MIN_MAX/bucket_N`` with intermediate
    footers and its ``bucket_N_flush_length`` side file.

    ``w = StreamingBucketWriter(table_dir, min_write_id, max_write_id, bucket_id, row_schema)``
    then per transaction ``w.write(write_id, data)`` (any number of times), ``w.flush()``
    (returns the readable length, recorded in the side file) before committing it, or
    ``w.discard(write_id)`` when it aborts; ``w.close()`` at the end of the batch.

    ``row_schema``: the table columns (pyarrow schema); ``data`` columns map by position.
    ``max_buffered_rows``: rows kept in memory before they are encoded and appended as
    stripes ahead of the next flush (bounded memory for large transactions).
    """

    def __init__(self, table_dir: str, min_write_id: int, max_write_id: int, bucket_id: int,
                 row_schema, *, options: Optional[WriterOptions] = None,
                 max_buffered_rows: int = 1_000_000, fsync: bool = True):
        if not 1 <= min_write_id <= max_write_id:
            raise ValueError(f"bad write id range {min_write_id}..{max_write_id}")
        if not 0 <= bucket_id <= MAX_BUCKET_ID:
            raise ValueError(f"bucket id {bucket_id} outside 0..{MAX_BUCKET_ID}")
        self.options = options or _DEFAULT_OPTIONS
        if str(self.options.compression).lower() not in _COMPRESSION_KINDS:
            raise ValueError(f"streaming files support compression "
                             f"{sorted(_COMPRESSION_KINDS)}, not {self.options.compression!r}")
        self.row_schema = _as_schema(row_schema)
        self.min_write_id, self.max_write_id = min_write_id, max_write_id
        self.bucket_id = bucket_id
        self.bucket_property = encode_bucket(bucket_id, 0)
        self.max_buffered_rows = max(1, int(max_buffered_rows))
        self.do_fsync = fsync
        self.delta_dir = os.path.join(_local(table_dir), format_delta(min_write_id, max_write_id))
        self.path = os.path.join(self.delta_dir, format_bucket_file(bucket_id))
        self.side_path = os.path.join(self.delta_dir, side_file_for(format_bucket_file(bucket_id)))
        _ensure_dir_with_version(self.delta_dir)
        # Hive: the side file is created first (exclusively) holding a 0 length
        self._side = open(self.side_path, "xb")
        self._side.write((0).to_bytes(8, "big"))
        self._sync(self._side)
        self._fh = None                           # the bucket file, opened on first append
        self._pos = 0                             # bytes written to the bucket file
        self._flushed = 0                         # last recorded length
        self.flush_lengths: List[int] = [0]
        self._buffer: List[Tuple[int, pa.Table]] = []
        self._buffered_rows = 0
        self._next_row_id: Dict[int, int] = {}
        self._last_write_id = 0
        # everything written so far (stripes appended, committed by a tail or not)
        self._stripes: List[Tuple[_Stripe, int]] = []   # (stripe, shift)
        self._stripe_stats: List[bytes] = []
        self._key_index: List[str] = []
        self._stats: Optional[List[_ColStats]] = None
        self._types: Optional[bytes] = None
        self._first: Optional[_Piece] = None
        self._inserts = 0
        # state as of the last flush (what a reader may see)
        self._closed = False
        self.rows_flushed = 0

    # -- public ---------------------------------------------------------------------------

    def write(self, write_id: int, data) -> int:
        """Buffer ``data`` (table columns) as insert events of ``write_id``; -> rows."""
        self._check_open()
        if not self.min_write_id <= write_id <= self.max_write_id:
            raise ValueError(f"write id {write_id} outside this file's range "
                             f"{self.min_write_id}..{self.max_write_id}")
        data = _as_table(data)
        n = data.num_rows
        if n == 0:
            return 0
        start = self._next_row_id.get(write_id, 0)
        events = _insert_events(data, write_id, self.bucket_property, start, self.row_schema)
        self._next_row_id[write_id] = start + n
        self._last_write_id = write_id
        self._buffer.append((write_id, events))
        self._buffered_rows += n
        if self._buffered_rows >= self.max_buffered_rows:
            self._spill()
        return n

    def discard(self, write_id: int) -> int:
        """Drop the still-buffered rows of ``write_id`` (its transaction aborted); -> rows."""
        keep = [(w, t) for w, t in self._buffer if w != write_id]
        dropped = sum(t.num_rows for w, t in self._buffer if w == write_id)
        self._buffer = keep
        self._buffered_rows -= dropped
        return dropped

    def flush(self) -> int:
        """Make everything written so far readable: append the buffered rows as stripes,
        write a footer covering all stripes, fsync, record the length in the side file.
        -> the readable length (unchanged when nothing was written since the last flush)."""
        self._check_open()
        self._spill()
        if self._pos == self._flushed or not self._stripes:
            return self._flushed
        tail = self._tail()
        self._fh.write(tail)
        self._fh.flush()
        self._sync(self._fh)
        self._pos += len(tail)
        self._side.write(self._pos.to_bytes(8, "big"))
        self._side.flush()
        self._sync(self._side)
        self._flushed = self._pos
        self.flush_lengths.append(self._pos)
        self.rows_flushed = self._inserts
        return self._pos

    @property
    def flushed_length(self) -> int:
        return self._flushed

    @property
    def buffered_rows(self) -> int:
        return self._buffered_rows

    def close(self) -> Optional[str]:
        """End the file: drop unflushed rows (their transactions did not commit), cut the
        file at its last footer, delete the side file. -> the bucket file path, or None
        when no row was ever flushed (no file is left behind, as in Hive)."""
        if self._closed:
            return self.path if self._flushed else None
        self._closed = True
        self._buffer.clear()
        self._buffered_rows = 0
        result = None
        if self._fh is not None:
            if self._pos != self._flushed:
                self._fh.truncate(self._flushed)
                self._sync(self._fh)
            self._fh.close()
            self._fh = None
            if self._flushed == 0:
                os.unlink(self.path)
            else:
                result = self.path
        self._side.close()
        os.unlink(self.side_path)
        if self.do_fsync:
            _fsync_dir(self.delta_dir)
        return result

    def abandon(self) -> None:
        """Stop without tidying up (what a crash leaves): the side file stays, so readers
        keep reading only the flushed prefix."""
        self._closed = True
        if self._fh is not None:
            self._fh.close()
        self._side.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise ValueError(f"{self.path}: streaming writer is closed")

    def _sync(self, fh) -> None:
        if self.do_fsync:
            fh.flush()
            os.fsync(fh.fileno())

    def _encode(self, events: pa.Table) -> _Piece:
        opts = self.options
        sink = pa.BufferOutputStream()
        orc.write_table(events, sink, compression=opts.compression,
                        stripe_size=opts.stripe_size,
                        compression_block_size=opts.compression_block_size,
                        row_index_stride=opts.row_index_stride,
                        batch_size=opts.batch_size, padding_tolerance=0.0)
        return _Piece.parse(sink.getvalue().to_pybytes())

    def _spill(self) -> None:
        """Encode the buffered events and append their stripes (no footer yet)."""
        if not self._buffer:
            return
        events = pa.concat_tables([t for _, t in self._buffer])
        self._buffer = []
        self._buffered_rows = 0
        piece = self._encode(events)
        counts = [s.rows for s in piece.stripes]
        if sum(counts) != events.num_rows:
            raise OrcTailError(f"stripe row counts {counts} do not add up to {events.num_rows}")
        if self._first is None:
            self._first = piece
            self._types = piece.types_raw
        elif piece.types_raw != self._types or piece.compression != self._first.compression:
            raise OrcTailError("encoded stripes do not match the file's types/compression")
        if self._fh is None:
            self._fh = open(self.path, "xb")
            self._fh.write(_HEADER)
            self._pos = len(_HEADER)
        start = piece.stripes[0].offset
        end = piece.stripes[-1].offset + piece.stripes[-1].length
        shift = self._pos - start
        self._fh.write(piece.data[start:end])
        self._fh.flush()
        self._pos += end - start
        self._stripes.extend((s, shift) for s in piece.stripes)
        self._stripe_stats.extend(piece.stripe_stats_raw)
        ends = np.cumsum(np.asarray(counts, dtype=np.int64)) - 1
        ends = ends[np.asarray(counts) > 0]
        idx = pa.array(ends)
        o = events.column("originalTransaction").take(idx).to_pylist()
        b = events.column("bucket").take(idx).to_pylist()
        r = events.column("rowId").take(idx).to_pylist()
        self._key_index.extend(f"{x},{y},{z};" for x, y, z in zip(o, b, r))
        if self._stats is None:
            self._stats = list(piece.stats)
        else:
            self._stats = [a.merge(c) for a, c in zip(self._stats, piece.stats)]
        self._inserts += events.num_rows

    def _tail(self) -> bytes:
        first = self._first
        comp, block = first.compression, first.block_size
        meta = b"".join(self._stripe_stats)
        meta_c = _original_chunks(meta, comp, block)
        content_length = self._pos
        rows = sum(s.rows for s, _ in self._stripes)
        footer = bytearray()
        footer += _pb_varint(1, len(_HEADER))
        footer += _pb_varint(2, content_length)
        for s, shift in self._stripes:
            footer += _pb_bytes(3, s.encode(shift))
        footer += self._types
        for name, value in (("hive.acid.key.index", "".join(self._key_index).encode()),
                            ("hive.acid.stats", f"{self._inserts},0,0".encode()),
                            ("hive.acid.version", str(ORC_ACID_VERSION).encode())):
            footer += _pb_bytes(5, _pb_bytes(1, name.encode()) + _pb_bytes(2, value))
        footer += _pb_varint(6, rows)
        for st in self._stats:
            footer += _pb_bytes(7, st.encode())
        footer += first.footer_extra_raw
        footer_c = _original_chunks(bytes(footer), comp, block)
        ps = bytearray()
        for num, wt, val, raw in first.ps_fields:
            if num == 1:
                ps += _pb_varint(1, len(footer_c))
            elif num == 5:
                ps += _pb_varint(5, len(meta_c))
            elif num == 7:
                continue
            else:
                ps += raw
        if not any(num == 1 for num, *_ in first.ps_fields):
            ps = bytearray(_pb_varint(1, len(footer_c))) + ps
        if not any(num == 5 for num, *_ in first.ps_fields):
            ps += _pb_varint(5, len(meta_c))
        if len(ps) > 255:
            raise OrcTailError("postscript would exceed 255 bytes")
        return meta_c + footer_c + bytes(ps) + bytes((len(ps),))
