"""Cutting a compaction plan into its tasks (one per bucket id), and the staging helpers
tasks and publishing share. ``orc_acid.compaction`` is the public front."""

from __future__ import annotations

from typing import Dict, List, Optional

import pyarrow as pa

from . import fs as afs
from .acid_file_writer import TEMP_SUFFIX
from .compaction_events import pick_row_type
from .compaction_tasks import (DELETE_EVENTS, INSERT_EVENTS, MAJOR, ORIGINAL, CompactionTask,
                               TaskInput)
from .layout import format_base, format_delete_delta, format_delta, parse_bucket_file
from .splits import plan_splits_for_snapshot
from .table_files import AcidSchemaError, TableFiles
from .valid_ids import RangeResponse

__all__ = ["group_tasks", "remove_stale_temporaries"]


def _minor_tasks(plan, staging_dir: str, files: TableFiles) -> List[CompactionTask]:
    wids, snap = plan.valid_write_ids, plan.snapshot
    cands = [(rel, d.side_file_for(rel), True) for d in snap.deltas for rel in d.files]
    if not cands:
        cands = [(rel, None, True) for d in snap.delete_deltas for rel in d.files]
    row_type = pick_row_type(files, cands) or pa.struct([])
    groups: Dict[int, List[TaskInput]] = {}
    for role, dirs in ((INSERT_EVENTS, snap.deltas), (DELETE_EVENTS, snap.delete_deltas)):
        for d in dirs:
            filt = wids.range_validity(d.min_write_id, d.max_write_id) is not RangeResponse.ALL
            for rel in d.files:
                b = parse_bucket_file(rel.rsplit("/", 1)[-1])
                if b is None:
                    raise AcidSchemaError(f"{files.full(rel)}: not a bucket file name in an "
                                          f"ACID directory")
                groups.setdefault(b.bucket_id, []).append(
                    TaskInput(rel, role, d.side_file_for(rel), filt))
    lo, hi, vis = plan.min_write_id, plan.max_write_id, plan.visibility_txn_id
    insert_dir = format_delta(lo, hi, None, vis) if snap.deltas else None
    delete_dir = format_delete_delta(lo, hi, None, vis) if snap.delete_deltas else None
    return [CompactionTask(plan.kind, plan.location, staging_dir, b, tuple(groups[b]),
                           insert_dir, delete_dir, str(wids), row_type, vis, plan.filesystem)
            for b in sorted(groups)]


def _major_tasks(plan, staging_dir: str, files: TableFiles, schema) -> List[CompactionTask]:
    snap = plan.snapshot
    if schema is None:
        cands = []
        if snap.base is not None:
            cands += [(rel, snap.base.side_file_for(rel), True) for rel in snap.base.files]
        cands += [(rel, d.side_file_for(rel), True) for d in snap.deltas for rel in d.files]
        cands += [(rel, None, False) for rel in snap.original_files]
        row_type = pick_row_type(files, cands) or pa.struct([])
    else:
        schema = schema.remove_metadata() if isinstance(schema, pa.Schema) else pa.schema(schema)
        row_type = pa.struct(list(schema))
    out = format_base(plan.max_write_id, plan.visibility_txn_id)
    tasks = []
    for sp in plan_splits_for_snapshot(plan.location, snap):
        inputs = [TaskInput(df.path, ORIGINAL if df.kind == "original" else INSERT_EVENTS,
                            df.side_file, df.filter_current_txn) for df in sp.data_files]
        inputs += [TaskInput(dfile.path, DELETE_EVENTS, None, dfile.filter_current_txn)
                   for dfile in sp.delete_files]
        tasks.append(CompactionTask(MAJOR, plan.location, staging_dir, sp.bucket_id,
                                    tuple(inputs), out, None, str(plan.valid_write_ids),
                                    row_type, plan.visibility_txn_id, plan.filesystem))
    return tasks


def group_tasks(plan, staging_dir: str, files: TableFiles,
                schema: Optional[pa.Schema] = None) -> List[CompactionTask]:
    """One task per bucket id of ``plan`` (an ``orc_acid.compaction.CompactionPlan``),
    writing under ``staging_dir``; sorted by bucket id."""
    if plan.kind == MAJOR:
        return _major_tasks(plan, staging_dir, files, schema)
    return _minor_tasks(plan, staging_dir, files)


def remove_stale_temporaries(fs, directory: str) -> None:
    """Delete hidden temporaries (``.<name>.<random>.tmp``) left in an output directory by
    task attempts that died."""
    try:
        names = afs.list_names(fs, directory)
    except (FileNotFoundError, OSError):
        return
    for name, is_dir, _ in names:
        if not is_dir and name.startswith(".") and name.endswith(TEMP_SUFFIX):
            try:
                afs.delete_file(fs, afs.join(directory, name))
            except (FileNotFoundError, OSError):
                pass
