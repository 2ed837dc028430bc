"""The events a compaction task writes, read from its input files batch by batch, as
inputs of the sorted merge (``orc_acid.event_merge``), every table in the exact ACID
event schema:

* ``EVENTS`` (minor): the events of an ACID file, unchanged except that ``row`` is conformed
  (by field position) to the task's row type and, where the file's directory range has
  invalid write ids, events of those ids are dropped;
* ``LIVE`` (major): the insert events of an ACID data file rebuilt as they go into a base:
  operation insert, currentTransaction = originalTransaction, ROW__ID kept (what a reader
  with ``with_row_id`` returns, as events); :func:`original_input`: the rows of a bucket's
  original (pre-ACID) files the same way, with their synthetic ROW__IDs (0, bucket, rows of
  the earlier original files of the bucket + position);
* ``KEYS`` (major): only the (originalTransaction, bucket, rowId) of valid delete events.

Files are read through ``pyarrow.dataset`` in batches of ``batch_rows`` rows (the ORC
reader decodes one batch at a time, holding one stripe's streams for the column it is
reading), opened only when the merge reaches them; each input's lower bound comes from
its footer's column statistics, read when the task starts (no data decoded).
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.orc as orc

from ._orc_footer import ColumnStats
from ._orc_tail import parse_fields
from .event_filters import valid_mask
from .event_merge import KEY_COLUMNS, MergeInput
from .layout import encode_bucket
from .table_files import (AcidSchemaError, TableFiles, acid_column_names, cast_column,
                          looks_positional)
from .valid_ids import ValidWriteIdList
from .writer import ACID_FIELD_NAMES, OP_INSERT, acid_schema

__all__ = ["EVENTS", "LIVE", "KEYS", "DEFAULT_BATCH_ROWS", "WHOLE_OBJECT_READ_MAX",
           "pick_row_type", "acid_input", "original_input", "key_schema"]

EVENTS, LIVE, KEYS = "events", "live", "keys"
DEFAULT_BATCH_ROWS = 16 * 1024
# object stores: an input file up to this size is fetched in one request
WHOLE_OBJECT_READ_MAX = 8 * 1024 * 1024

_ACID_TYPES = [pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64()]
_KEY_SCHEMA = pa.schema([(KEY_COLUMNS[0], pa.int64()), (KEY_COLUMNS[1], pa.int32()),
                         (KEY_COLUMNS[2], pa.int64())])


def key_schema() -> pa.Schema:
    """The schema of ``KEYS`` tables."""
    return _KEY_SCHEMA


def pick_row_type(files: TableFiles, candidates: Sequence[Tuple[str, Optional[str], bool]]
                  ) -> Optional[pa.StructType]:
    """The row struct of the widest of the ``(path, side file, is ACID)`` candidates (ties:
    the later one), preferring real column names over ``_colN``."""
    best: Optional[List[pa.Field]] = None
    for rel, side, acid in candidates:
        f = files.orc_footer(rel, side)
        if f is None:  # streaming file with nothing flushed yet
            continue
        schema = f.schema
        fields = list(schema.field(5).type) if acid and acid_column_names(schema) \
            else list(schema)
        if best is None or len(fields) > len(best) or (
                len(fields) == len(best) and (not looks_positional(fields)
                                              or looks_positional(best))):
            best = fields
    return None if best is None else pa.struct(best)


def _conform_children(children: List[pa.Array], target: pa.StructType, n: int,
                      what: str) -> List[pa.Array]:
    """Row fields (by position) cast to the target's types; missing ones null."""
    out = []
    for i, fl in enumerate(target):
        if i < len(children):
            out.append(cast_column(children[i], fl.type, f"{what}: row field {i} ({fl.name})"))
        else:
            out.append(pa.nulls(n, type=fl.type))
    return out


def _row_struct(children: List[pa.Array], target: pa.StructType, n: int,
                mask: Optional[pa.Array]) -> pa.Array:
    if not len(target):
        return pa.array([{}] * n, type=target)
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


class _File:
    """One input file: its column names, row count and lower bound, from the footer."""

    def __init__(self, files: TableFiles, rel: str, side: Optional[str], acid: bool):
        self.files, self.rel, self.side = files, rel, side
        self.what = files.full(rel)
        f = files.orc_footer(rel, side)
        self.nrows, self.names, self.bound = 0, None, None
        if f is None:             # a streaming file with nothing flushed yet
            return
        self.nrows = f.nrows
        self.schema = f.schema
        if acid:
            self.names = acid_column_names(f.schema)
            if self.names is None:
                raise AcidSchemaError(f"{self.what}: not an ACID event file: "
                                      f"{f.schema.names}")
            self.bound = _lower_bound(f)

    def batches(self, columns: List[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        src = self.files.open_input(self.rel, self.side, WHOLE_OBJECT_READ_MAX)
        if src is None:
            return
        try:
            frag = ds.OrcFileFormat().make_fragment(src)
            yield from frag.to_batches(columns=columns, batch_size=batch_rows,
                                       use_threads=False, batch_readahead=0,
                                       fragment_readahead=0)
        finally:
            src.close()


def _lower_bound(f: orc.ORCFile) -> Optional[Tuple[int, int, int]]:
    """(min originalTransaction, min bucket, min rowId) from the footer statistics: at or
    below every event's key. None when the statistics do not say."""
    try:
        tail = f.reader.serialized_file_tail()
        footer = next(v for n, w, v, _ in parse_fields(tail) if n == 2 and w == 2)
        stats = [ColumnStats.parse(v) for n, w, v, _ in parse_fields(footer)
                 if n == 7 and w == 2]
    except (StopIteration, ValueError, AttributeError):
        return None
    # column ids: 0 the root struct, 1 operation, 2 originalTransaction, 3 bucket, 4 rowId
    if len(stats) < 5 or any(s.kind != "int" or s.lo is None for s in stats[2:5]):
        return None
    return (int(stats[2].lo), int(stats[3].lo), int(stats[4].lo))


def _acid_tables(fl: _File, mode: str, filt: bool, wids: ValidWriteIdList,
                 row_type: pa.StructType, batch_rows: int) -> Iterator[pa.Table]:
    names = fl.names
    wanted = {EVENTS: ACID_FIELD_NAMES, KEYS: KEY_COLUMNS,
              LIVE: KEY_COLUMNS + ("row",)}[mode]
    if filt and "currentTransaction" not in wanted:
        wanted = wanted + ("currentTransaction",)
    cols = [names[n.lower()] for n in wanted]
    exc = np.asarray(wids.exceptions, dtype=np.int64)
    schema = _KEY_SCHEMA if mode == KEYS else acid_schema(pa.schema(list(row_type)))
    for batch in fl.batches(cols, batch_rows):
        n = batch.num_rows
        got = dict(zip(wanted, batch.columns))
        if filt and n:
            keep = valid_mask(wids, np.asarray(got["currentTransaction"].to_numpy(
                zero_copy_only=False), dtype=np.int64), exc)
            if not keep.all():
                mask = pa.array(keep)
                got = {k: v.filter(mask) for k, v in got.items()}
                n = int(keep.sum())
        if n == 0:
            continue
        ids = [got[c].cast(t) if got[c].type != t else got[c]
               for c, t in zip(KEY_COLUMNS, (pa.int64(), pa.int32(), pa.int64()))]
        if mode == KEYS:
            yield pa.Table.from_arrays(ids, schema=schema)
            continue
        row = got["row"]
        children = _conform_children([row.field(i) for i in range(row.type.num_fields)],
                                     row_type, n, fl.what)
        if mode == LIVE:
            yield pa.Table.from_arrays([
                pa.array(np.full(n, OP_INSERT, dtype=np.int32)), ids[0], ids[1], ids[2],
                ids[0], _row_struct(children, row_type, n, None)], schema=schema)
            continue
        op, cur = (got[c] for c in ("operation", "currentTransaction"))
        mask = row.is_null() if row.null_count else None
        yield pa.Table.from_arrays([
            op.cast(pa.int32()) if op.type != pa.int32() else op, ids[0], ids[1], ids[2],
            cur.cast(pa.int64()) if cur.type != pa.int64() else cur,
            _row_struct(children, row_type, n, mask)], schema=schema)


def acid_input(files: TableFiles, rel: str, side: Optional[str], filter_invalid: bool,
               wids: ValidWriteIdList, row_type: pa.StructType, mode: str,
               batch_rows: int = DEFAULT_BATCH_ROWS) -> Optional[MergeInput]:
    """One ACID file as a merge input (``mode``: EVENTS, LIVE or KEYS); None when it
    holds no event."""
    fl = _File(files, rel, side, acid=True)
    if fl.nrows == 0:
        return None
    return MergeInput(fl.what, lambda: _acid_tables(fl, mode, filter_invalid, wids, row_type,
                                                    batch_rows), fl.bound)


def _original_tables(files: List[_File], row_type: pa.StructType, bucket_id: int,
                     batch_rows: int) -> Iterator[pa.Table]:
    bucket = encode_bucket(bucket_id, 0)
    schema = acid_schema(pa.schema(list(row_type)))
    offset = 0
    for fl in files:
        fields = list(fl.schema)
        cols = [f.name for f in fields[:len(row_type)]]
        for batch in (fl.batches(cols, batch_rows) if cols else ()):
            n = batch.num_rows
            children = _conform_children(list(batch.columns), row_type, n, fl.what)
            ids = pa.array(np.arange(offset, offset + n, dtype=np.int64))
            zero = pa.array(np.zeros(n, dtype=np.int64))
            yield pa.Table.from_arrays([
                pa.array(np.full(n, OP_INSERT, dtype=np.int32)), zero,
                pa.array(np.full(n, bucket, dtype=np.int32)), ids, zero,
                _row_struct(children, row_type, n, None)], schema=schema)
            offset += n
        if not cols and fl.nrows:     # a table without columns: ROW__IDs only
            for start in range(0, fl.nrows, batch_rows):
                n = min(batch_rows, fl.nrows - start)
                zero = pa.array(np.zeros(n, dtype=np.int64))
                yield pa.Table.from_arrays([
                    pa.array(np.full(n, OP_INSERT, dtype=np.int32)), zero,
                    pa.array(np.full(n, bucket, dtype=np.int32)),
                    pa.array(np.arange(offset, offset + n, dtype=np.int64)), zero,
                    _row_struct([], row_type, n, None)], schema=schema)
                offset += n


def original_input(files: TableFiles, rels: Sequence[str], row_type: pa.StructType,
                   bucket_id: int, batch_rows: int = DEFAULT_BATCH_ROWS
                   ) -> Optional[MergeInput]:
    """A bucket's original files (in full-path order) as one merge input of live rows."""
    opened = [fl for fl in (_File(files, rel, None, acid=False) for rel in rels) if fl.nrows]
    if not opened:
        return None
    return MergeInput(", ".join(fl.what for fl in opened),
                      lambda: _original_tables(opened, row_type, bucket_id, batch_rows),
                      (0, encode_bucket(bucket_id, 0), 0))
