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
reader accepts for any codec. (The statistics and the in-memory file's parts are
``orc_acid._orc_footer``; the protobuf and chunk encoding ``orc_acid._orc_tail``.)

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

File systems: the protocol needs to flush and extend an open file that readers read a prefix
of, with fsync -- the local disk (or a POSIX mount). Object stores have no append, no flush
of a partial object and no fsync: :class:`StreamingBucketWriter` refuses such locations with
a :class:`~orc_acid.layout.LayoutError` saying so (``orc_acid.fs``); write whole files there
(``orc_acid.writer``: one file per transaction, visible with its commit).
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ._orc_footer import ORC_HEADER, ColumnStats, EncodedPiece
from ._orc_tail import (OrcTailError, StripeInfo, original_chunks, pb_bytes, pb_varint,
                        postscript_with, user_metadata_item)
from .layout import (MAX_BUCKET_ID, ORC_ACID_VERSION, LayoutError, encode_bucket, format_bucket_file,
                     format_delta, location_path, require_local_path, side_file_for)
from .table_files import flush_lengths
from .writer import (DEFAULT_OPTIONS, WriterOptions, as_row_schema, as_table, encode_orc,
                     ensure_acid_dir, insert_events)

__all__ = ["StreamingBucketWriter", "read_flush_lengths", "last_flush_length"]

# the codecs whose chunk headers and "original" chunks this writer produces
_COMPRESSION_KINDS = {"none": 0, "uncompressed": 0, "zlib": 1, "zstd": 5}


def read_flush_lengths(side_path: str) -> List[int]:
    """All lengths recorded in a ``_flush_length`` side file (a torn last entry is ignored)."""
    with open(require_local_path(side_path), "rb") as fh:
        return flush_lengths(fh.read())


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
        self.options = options or DEFAULT_OPTIONS
        if str(self.options.compression).lower() not in _COMPRESSION_KINDS:
            raise ValueError(f"streaming files support compression "
                             f"{sorted(_COMPRESSION_KINDS)}, not {self.options.compression!r}")
        self.row_schema = as_row_schema(row_schema)
        self.min_write_id, self.max_write_id = min_write_id, max_write_id
        self.bucket_id = bucket_id
        self.bucket_property = encode_bucket(bucket_id, 0)
        self.max_buffered_rows = max(1, int(max_buffered_rows))
        self.do_fsync = fsync
        if location_path(table_dir) is None:
            raise LayoutError(
                f"{table_dir}: a streaming file needs a file system that can flush and extend "
                f"an open file (the _flush_length side-file protocol); object stores and other "
                f"non-local locations cannot -- write whole files (orc_acid.write_delta)")
        self.delta_dir = os.path.join(require_local_path(table_dir),
                                      format_delta(min_write_id, max_write_id))
        self.path = os.path.join(self.delta_dir, format_bucket_file(bucket_id))
        self.side_path = os.path.join(self.delta_dir, side_file_for(format_bucket_file(bucket_id)))
        ensure_acid_dir(self.delta_dir)
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
        self._stripes: List[Tuple[StripeInfo, int]] = []   # (stripe, shift)
        self._stripe_stats: List[bytes] = []
        self._key_index: List[str] = []
        self._stats: Optional[List[ColumnStats]] = None
        self._types: Optional[bytes] = None
        self._first: Optional[EncodedPiece] = None
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
        data = as_table(data)
        n = data.num_rows
        if n == 0:
            return 0
        start = self._next_row_id.get(write_id, 0)
        events = insert_events(data, write_id, self.bucket_property, start, self.row_schema)
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

    def _encode(self, events: pa.Table) -> EncodedPiece:
        return EncodedPiece.parse(encode_orc(events, self.options).to_pybytes())

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
            self._fh.write(ORC_HEADER)
            self._pos = len(ORC_HEADER)
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
        meta_c = original_chunks(b"".join(self._stripe_stats), comp, block)
        rows = sum(s.rows for s, _ in self._stripes)
        footer = bytearray()
        footer += pb_varint(1, len(ORC_HEADER))
        footer += pb_varint(2, self._pos)                 # content length
        for s, shift in self._stripes:
            footer += pb_bytes(3, s.encode(shift))
        footer += self._types
        for name, value in (("hive.acid.key.index", "".join(self._key_index).encode()),
                            ("hive.acid.stats", f"{self._inserts},0,0".encode()),
                            ("hive.acid.version", str(ORC_ACID_VERSION).encode())):
            footer += pb_bytes(5, user_metadata_item(name, value))
        footer += pb_varint(6, rows)
        for st in self._stats:
            footer += pb_bytes(7, st.encode())
        footer += first.footer_extra_raw
        footer_c = original_chunks(bytes(footer), comp, block)
        # field 7 (stripeStatisticsLength, optional) would be stale: left out
        ps = postscript_with(first.ps_fields, {1: len(footer_c), 5: len(meta_c), 7: None},
                             self.path)
        return meta_c + footer_c + ps + bytes((len(ps),))
