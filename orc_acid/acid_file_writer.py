"""One ACID event file written as its events arrive, in bounded memory.

``orc_acid.writer.write_acid_file`` encodes a whole table in memory; a compaction's output
can be larger than memory, so :class:`AcidFileWriter` feeds pyarrow's ORC writer as the
events come (it holds one stripe being encoded, flushed to disk as it fills) and keeps
only what the footer needs:

* the events go to the ORC writer in batches of exactly ``WriterOptions.batch_size`` rows
  (the last one shorter), the batches ``write_acid_file`` makes of the same table, so the
  file is byte for byte what ``write_acid_file`` writes for all the events at once;
* ORC writers end a stripe only after a whole batch, so the key of each batch's last row
  is kept (a few bytes per batch) and ``hive.acid.key.index`` (one key per stripe end) is
  built from those keys when the file is closed;
* the footer metadata is added by rewriting the file's tail in place (``_orc_tail``).

Where the file is encoded: local disk -- under a hidden temporary name in its directory
(``.bucket_N.<random>.tmp``), renamed over the final name when complete (replacing an
earlier file: compaction tasks are re-run after failures); other file systems -- in a local
spill file (``spill_dir``, default the system's temporary directory), then streamed to the
destination: a hidden temporary renamed over the final name where the file system renames
(HDFS), else one upload under the final name (object stores; an upload that fails part way
may leave a partial object there -- compaction output is invisible until its transaction
commits, and the failed task's re-run replaces it).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as orc

from . import fs as afs
from ._orc_tail import OrcTail
from .writer import (DEFAULT_OPTIONS, WriterOptions, acid_footer_items, acid_schema,
                     orc_writer_kwargs)

__all__ = ["AcidFileWriter", "TEMP_SUFFIX"]

TEMP_SUFFIX = ".tmp"
_KEYS = ("originalTransaction", "bucket", "rowId")
_COPY_CHUNK = 8 * 1024 * 1024


def temporary_name(path: str) -> str:
    """A hidden temporary beside ``path`` (readers skip names starting with '.')."""
    d, _, name = path.rpartition("/")
    return f"{d}/.{name}.{uuid.uuid4().hex[:16]}{TEMP_SUFFIX}"


class AcidFileWriter:
    """Write events (tables in the exact ACID schema for ``row_type``) to ``path``."""

    def __init__(self, path: str, row_type: pa.StructType, *,
                 options: Optional[WriterOptions] = None, filesystem=None,
                 spill_dir: Optional[str] = None):
        self.opts = options or DEFAULT_OPTIONS
        self.fs, self.path = afs.resolve(path, filesystem)
        self.schema = acid_schema(pa.schema(list(row_type)))
        self.local = self.fs is None or isinstance(self.fs, pafs.LocalFileSystem)
        if self.local:
            self.spill = temporary_name(self.path)
        else:
            fd, self.spill = tempfile.mkstemp(prefix=".hms-compaction-", suffix=TEMP_SUFFIX,
                                              dir=spill_dir)
            os.close(fd)
        self.writer = orc.ORCWriter(self.spill, **orc_writer_kwargs(self.opts))
        self.pending: List[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0
        self.batch_ends: Dict[int, Tuple[int, int, int]] = {}

    def write(self, events: pa.Table) -> None:
        if events.num_rows == 0:
            return
        self.pending.append(events)
        self.pending_rows += events.num_rows
        if self.pending_rows >= self.opts.batch_size:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        t = self.pending[0] if len(self.pending) == 1 else pa.concat_tables(self.pending)
        bs = self.opts.batch_size
        m = t.num_rows if final else (t.num_rows // bs) * bs
        if m:
            part = t.slice(0, m)
            ends = list(range(bs - 1, m, bs))
            if not ends or ends[-1] != m - 1:
                ends.append(m - 1)
            idx = pa.array(ends, pa.int64())
            keys = zip(*(part.column(c).take(idx).to_pylist() for c in _KEYS))
            for i, k in zip(ends, keys):
                self.batch_ends[self.rows + i] = k
            self.writer.write(part)
            self.rows += m
        rest = t.slice(m)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def _key_at(self, row: int, counts: List[int]) -> Tuple[int, int, int]:
        """The key of a row that does not end a batch (not expected: read it back)."""
        f = orc.ORCFile(self.spill)
        start = 0
        for i, c in enumerate(counts):
            if row < start + c:
                t = f.read_stripe(i, columns=list(_KEYS))
                return tuple(t.column(k)[row - start].as_py() for k in _KEYS)
            start += c
        raise IndexError(row)

    def close(self, *, inserts: int = 0, updates: int = 0, deletes: int = 0) -> str:
        """Finish the file with Hive's footer metadata and put it under its final name
        (replacing a file there); returns that path. Nothing is written for no events."""
        try:
            if self.pending_rows:
                self._flush(final=True)
            self.writer.close()
            self.writer = None
            tail = OrcTail(self.spill)
            counts = tail.stripe_row_counts()
            ends = (np.cumsum(np.asarray(counts, dtype=np.int64)) - 1)[np.asarray(counts) > 0]
            keys = [self.batch_ends.get(int(e)) or self._key_at(int(e), counts) for e in ends]
            key_index = "".join(f"{o},{b},{r};" for o, b, r in keys)
            new_tail = tail.tail_with_user_metadata(
                acid_footer_items(key_index, inserts, updates, deletes))
            if self.local:
                with open(self.spill, "r+b") as fh:
                    fh.truncate(tail.footer_end)
                    fh.seek(tail.footer_end)
                    fh.write(new_tail)
                os.replace(self.spill, self.path)
            else:
                self._copy_out(tail.footer_end, new_tail)
        except BaseException:
            self.abort()
            raise
        return self.path

    def _copy_out(self, length: int, new_tail: bytes) -> None:
        renames = afs.can_rename(self.fs)
        target = temporary_name(self.path) if renames else self.path
        with open(self.spill, "rb") as src, self.fs.open_output_stream(target) as out:
            left = length
            while left:
                chunk = src.read(min(_COPY_CHUNK, left))
                if not chunk:
                    raise OSError(f"{self.spill}: shorter than its ORC tail says")
                out.write(chunk)
                left -= len(chunk)
            out.write(new_tail)
        if renames:
            self.fs.move(target, self.path)
        os.unlink(self.spill)

    def abort(self) -> None:
        """Drop what was written (the final name is left as it was)."""
        if self.writer is not None:
            try:
                self.writer.close()
            except Exception:  # noqa: BLE001 - already failing: only clean up
                pass
            self.writer = None
        try:
            os.unlink(self.spill)
        except OSError:
            pass
