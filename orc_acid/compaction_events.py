"""The events a compaction writes, as Arrow tables in the exact ACID event schema.

* Minor: the events of the input files, unchanged except that every file's ``row`` is
  conformed (by field position) to one row type, and events of invalid write ids are
  dropped where the directory's range has any (:func:`read_events`).
* Major: the live rows of the snapshot rebuilt as insert events that keep their ROW__IDs
  (:func:`live_rows_as_events`).

Either way an output file's events are sorted by (originalTransaction, bucket, rowId,
currentTransaction) (:func:`sort_events`), the order Hive's readers rely on.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .event_filters import valid_mask
from .table_files import AcidSchemaError, TableFiles, acid_column_names, looks_positional
from .valid_ids import ValidWriteIdList
from .writer import ACID_FIELD_NAMES, OP_INSERT, acid_schema

__all__ = ["pick_row_type", "read_events", "live_rows_as_events", "sort_events"]

_ACID_TYPES = [pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64()]
_SORT_KEYS = [("originalTransaction", "ascending"), ("bucket", "ascending"),
              ("rowId", "ascending"), ("currentTransaction", "ascending")]


def pick_row_type(files: TableFiles, candidates: Sequence[Tuple[str, Optional[str], bool]]
                  ) -> Optional[pa.StructType]:
    """The row struct of the widest of the ``(path, side file, is ACID)`` candidates (ties:
    the later one), preferring real column names over ``_colN``."""
    best: Optional[List[pa.Field]] = None
    for rel, side, acid in candidates:
        f = files.open_orc(rel, side)
        if f is None:  # streaming file with nothing flushed yet
            continue
        fields = list(f.schema.field(5).type) if acid and acid_column_names(f.schema) \
            else list(f.schema)
        if best is None or len(fields) > len(best) or (
                len(fields) == len(best) and (not looks_positional(fields)
                                              or looks_positional(best))):
            best = fields
    return None if best is None else pa.struct(best)


def _conform_row(col: pa.ChunkedArray, target: pa.StructType) -> pa.ChunkedArray:
    """Map a ``row`` struct column to the target struct by field position."""
    if col.type == target:
        return col
    chunks = []
    for ch in col.chunks:
        n = len(ch)
        children = []
        for i, fl in enumerate(target):
            if i < ch.type.num_fields:
                child = ch.field(i)
                if child.type != fl.type:
                    try:
                        child = child.cast(fl.type)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                        raise AcidSchemaError(f"row field {i} has type {child.type}, "
                                              f"expected {fl.type}: {e}") from e
            else:
                child = pa.nulls(n, type=fl.type)
            children.append(child)
        mask = ch.is_null() if ch.null_count else None
        chunks.append(pa.StructArray.from_arrays(children, fields=list(target), mask=mask))
    return pa.chunked_array(chunks, type=target)


def read_events(files: TableFiles, rel: str, side: Optional[str], filter_invalid: bool,
                wids: ValidWriteIdList, row_type: pa.StructType) -> pa.Table:
    """Every event of one ACID file, ``row`` conformed to ``row_type``; with
    ``filter_invalid`` the events of write ids invalid in ``wids`` are dropped."""
    f = files.open_orc(rel, side)
    if f is None:  # streaming file with nothing flushed yet
        return acid_schema(pa.schema(list(row_type))).empty_table()
    names = acid_column_names(f.schema)
    if names is None:
        raise AcidSchemaError(f"{files.full(rel)}: not an ACID event file: {f.schema.names}")
    t = f.read()
    cols = [t.column(names[n.lower()]) for n in ACID_FIELD_NAMES]
    cols = [c if c.type == ty else c.cast(ty) for c, ty in zip(cols[:5], _ACID_TYPES)] + \
        [_conform_row(cols[5], row_type)]
    t = pa.Table.from_arrays(cols, schema=acid_schema(pa.schema(list(row_type))))
    if filter_invalid and t.num_rows:
        keep = valid_mask(wids, t.column("currentTransaction").to_numpy())
        if not keep.all():
            t = t.filter(pa.array(keep))
    return t


def live_rows_as_events(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """Rows read with their ``ROW__ID`` (first column, then the table columns of
    ``schema``) as insert events keeping those ids: the write id becomes both
    originalTransaction and currentTransaction."""
    n = rows.num_rows
    rid = rows.column("ROW__ID").combine_chunks()
    write_id = rid.field("writeid")
    cols = [rows.column(i).combine_chunks() for i in range(1, rows.num_columns)]
    fields = list(schema)
    return pa.Table.from_arrays([
        pa.array(np.full(n, OP_INSERT, dtype=np.int32)), write_id, rid.field("bucketid"),
        rid.field("rowid"), write_id,
        pa.StructArray.from_arrays(cols, fields=fields) if fields
        else pa.array([{}] * n, type=pa.struct([])),
    ], schema=acid_schema(schema))


def sort_events(t: pa.Table) -> pa.Table:
    if t.num_rows <= 1:
        return t
    return t.take(pc.sort_indices(t, sort_keys=_SORT_KEYS))
