"""The whole-file compaction orc_acid had before the streaming merge, kept as the oracle of
the differential tests: every input file read whole into Arrow, concatenated, stably
sorted by (originalTransaction, bucket, rowId, currentTransaction) and written with
``write_acid_file`` in one piece. Memory grows with the data; the output it writes is what
the streaming merge must write byte for byte."""

from __future__ import annotations

import json
import os
from typing import Dict, List

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from orc_acid import fs as afs
from orc_acid.compaction_events import pick_row_type
from orc_acid.event_filters import valid_mask
from orc_acid.layout import (METADATA_FILE, format_base, format_bucket_file, format_delete_delta,
                             format_delta, parse_bucket_file)
from orc_acid.reader import read_split
from orc_acid.splits import plan_splits_for_snapshot
from orc_acid.table_files import TableFiles, acid_column_names
from orc_acid.valid_ids import RangeResponse
from orc_acid.writer import ACID_FIELD_NAMES, OP_INSERT, acid_schema, ensure_acid_dir, \
    write_acid_file

_ACID_TYPES = [pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64()]
_SORT_KEYS = [("originalTransaction", "ascending"), ("bucket", "ascending"),
              ("rowId", "ascending"), ("currentTransaction", "ascending")]


def _conform_row(col: pa.ChunkedArray, target: pa.StructType) -> pa.ChunkedArray:
    if col.type == target:
        return col
    chunks = []
    for ch in col.chunks:
        n = len(ch)
        children = []
        for i, fl in enumerate(target):
            child = ch.field(i).cast(fl.type) if i < ch.type.num_fields else pa.nulls(n, fl.type)
            children.append(child)
        mask = ch.is_null() if ch.null_count else None
        chunks.append(pa.StructArray.from_arrays(children, fields=list(target), mask=mask))
    return pa.chunked_array(chunks, type=target)


def read_events(files, rel, side, filter_invalid, wids, row_type) -> pa.Table:
    f = files.open_orc(rel, side)
    if f is None:
        return acid_schema(pa.schema(list(row_type))).empty_table()
    names = acid_column_names(f.schema)
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


def compact_whole(plan, out_dir: str, *, schema=None, options=None) -> None:
    """Write what ``plan`` (an orc_acid.compaction.CompactionPlan) produces under
    ``out_dir`` (a local directory), the whole-file way."""
    files = TableFiles(plan.location, plan.filesystem)
    snap, wids = plan.snapshot, plan.valid_write_ids
    if plan.kind == "minor":
        cands = [(rel, d.side_file_for(rel), True) for d in snap.deltas for rel in d.files]
        if not cands:
            cands = [(rel, None, True) for d in snap.delete_deltas for rel in d.files]
        row_type = pick_row_type(files, cands) or pa.struct([])
        for is_delete, dirs, out in ((False, snap.deltas, format_delta),
                                     (True, snap.delete_deltas, format_delete_delta)):
            if not dirs:
                continue
            target = os.path.join(out_dir, out(plan.min_write_id, plan.max_write_id, None,
                                               plan.visibility_txn_id))
            ensure_acid_dir(target)
            by_bucket: Dict[int, List[pa.Table]] = {}
            for d in dirs:
                filt = wids.range_validity(d.min_write_id, d.max_write_id) \
                    is not RangeResponse.ALL
                for rel in d.files:
                    b = parse_bucket_file(rel.rsplit("/", 1)[-1])
                    t = read_events(files, rel, d.side_file_for(rel), filt, wids, row_type)
                    if t.num_rows:
                        by_bucket.setdefault(b.bucket_id, []).append(t)
            for bucket_id in sorted(by_bucket):
                events = sort_events(pa.concat_tables(by_bucket[bucket_id]).combine_chunks())
                n = events.num_rows
                write_acid_file(os.path.join(target, format_bucket_file(bucket_id)), events,
                                inserts=0 if is_delete else n, deletes=n if is_delete else 0,
                                options=options)
        return
    target = os.path.join(out_dir, format_base(plan.max_write_id, plan.visibility_txn_id))
    ensure_acid_dir(target)
    afs.write_bytes(None, os.path.join(target, METADATA_FILE), json.dumps(
        {"thisFileVersion": "0", "dataFormat": "compacted"}, separators=(",", ":")).encode())
    if schema is None:
        cands = []
        if snap.base is not None:
            cands += [(rel, snap.base.side_file_for(rel), True) for rel in snap.base.files]
        cands += [(rel, d.side_file_for(rel), True) for d in snap.deltas for rel in d.files]
        cands += [(rel, None, False) for rel in snap.original_files]
        row_type = pick_row_type(files, cands)
        schema = pa.schema(list(row_type)) if row_type is not None else pa.schema([])
    for sp in plan_splits_for_snapshot(plan.location, snap):
        t = read_split(sp, schema=schema, with_row_id=True, filesystem=plan.filesystem)
        if t.num_rows == 0:
            continue
        events = sort_events(live_rows_as_events(t, schema))
        write_acid_file(os.path.join(target, format_bucket_file(sp.bucket_id)), events,
                        inserts=t.num_rows, options=options)


def output_files(root: str, names) -> Dict[str, bytes]:
    """{relative path: bytes} of the files under the output directories ``names``."""
    out = {}
    for name in names:
        d = os.path.join(root, name)
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else ():
            with open(os.path.join(d, f), "rb") as fh:
                out[f"{name}/{f}"] = fh.read()
    return out
