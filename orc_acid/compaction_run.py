"""Running one compaction task (:func:`run_task`): its inputs merged as sorted streams
(``orc_acid.event_merge``), read batch by batch (``orc_acid.compaction_events``), written
as they come (``orc_acid.acid_file_writer``). The task's contract is in
``orc_acid.compaction_tasks``."""

from __future__ import annotations

import time
from typing import Iterator, List, Optional, Tuple

import pyarrow as pa

from . import fs as afs
from .acid_file_writer import AcidFileWriter
from .compaction_events import (DEFAULT_BATCH_ROWS, EVENTS, KEYS, LIVE, acid_input,
                                original_input)
from .compaction_tasks import (DELETE_EVENTS, INSERT_EVENTS, MAJOR, ORIGINAL, CompactionTask,
                               TaskResult)
from .event_merge import MergeStats, drop_deleted, merge_sorted
from .layout import format_bucket_file
from .table_files import TableFiles
from .valid_ids import as_valid_write_ids
from .writer import WriterOptions

__all__ = ["run_task"]


def run_task(task: CompactionTask, *, options: Optional[WriterOptions] = None,
             filesystem=None, batch_rows: Optional[int] = None,
             spill_dir: Optional[str] = None) -> TaskResult:
    """Do one task: merge its inputs and write its output files under ``task.staging_dir``
    (replacing those of an earlier attempt). ``options``: ORC writer settings (default:
    Hive's delta writer's); ``filesystem``: overrides ``task.filesystem``; ``batch_rows``:
    rows read from an input file at a time (default
    ``orc_acid.compaction_events.DEFAULT_BATCH_ROWS``: less is less memory and more
    steps); ``spill_dir``: where output for a remote file system is encoded before it is
    streamed there (default: the system's temporary directory)."""
    start = time.perf_counter()
    fs = filesystem if filesystem is not None else task.filesystem
    files = TableFiles(task.location, fs)
    wids = as_valid_write_ids(task.valid_write_ids)
    rows_at_once = int(batch_rows or DEFAULT_BATCH_ROWS)
    name = format_bucket_file(task.bucket_id)

    def inputs(role: str, mode: str) -> list:
        found = [acid_input(files, i.path, i.side_file, i.filter_invalid, wids, task.row_type,
                            mode, rows_at_once) for i in task.inputs if i.role == role]
        return [m for m in found if m is not None]

    stats: List[MergeStats] = []

    def merged(found: list, with_current_txn: bool = True) -> Iterator[pa.Table]:
        st = MergeStats()
        stats.append(st)
        return merge_sorted(found, with_current_txn=with_current_txn, stats=st)

    def write(rel_dir: Optional[str], chunks, is_delete: bool) -> Tuple[Optional[str], int]:
        if rel_dir is None:
            return None, 0
        rel = f"{rel_dir}/{name}"
        n, writer = 0, None
        try:
            for chunk in chunks:
                if chunk.num_rows == 0:
                    continue
                if writer is None:
                    writer = AcidFileWriter(afs.join(task.staging_dir, rel), task.row_type,
                                            options=options, filesystem=fs,
                                            spill_dir=spill_dir)
                writer.write(chunk)
                n += chunk.num_rows
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if writer is None:
            return None, 0
        writer.close(inserts=0 if is_delete else n, deletes=n if is_delete else 0)
        return rel, n

    written, rows, deletes = [], 0, 0
    if task.kind == MAJOR:
        data = inputs(INSERT_EVENTS, LIVE)
        originals = [i.path for i in task.inputs if i.role == ORIGINAL]
        if originals:
            orig = original_input(files, originals, task.row_type, task.bucket_id,
                                  rows_at_once)
            if orig is not None:
                data.append(orig)
        chunks = merged(data)
        dels = inputs(DELETE_EVENTS, KEYS)
        if dels:
            chunks = drop_deleted(chunks, merged(dels, with_current_txn=False))
        rel, rows = write(task.insert_dir, chunks, False)
        written += [rel] if rel else []
    else:
        rel, rows = write(task.insert_dir, merged(inputs(INSERT_EVENTS, EVENTS)), False)
        written += [rel] if rel else []
        rel, deletes = write(task.delete_dir, merged(inputs(DELETE_EVENTS, EVENTS)), True)
        written += [rel] if rel else []
    return TaskResult(task.bucket_id, tuple(written), rows, deletes,
                      sum(files.size(i.path) for i in task.inputs),
                      time.perf_counter() - start,
                      max_open_inputs=sum(s.max_open_inputs for s in stats),
                      max_buffered_rows=sum(s.max_buffered_rows for s in stats))
