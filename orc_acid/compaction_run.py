"""Running one compaction task (``orc_acid.compaction_tasks.run_task``)."""

from __future__ import annotations

import time
from typing import Optional

import pyarrow as pa

from . import fs as afs
from .compaction_events import live_rows_as_events, read_events, sort_events
from .compaction_tasks import DELETE_EVENTS, MAJOR, ORIGINAL, CompactionTask, TaskResult
from .layout import format_bucket_file
from .reader import read_split
from .splits import DataFile, DeleteFile, Split
from .table_files import TableFiles
from .valid_ids import as_valid_write_ids
from .writer import WriterOptions, write_acid_file

__all__ = ["run_task"]


def _replaceable(fs, path: str) -> None:
    """An earlier attempt's output is replaced (staging: invisible to readers)."""
    if afs.exists(fs, path):
        afs.delete_file(fs, path)


def _execute(task: CompactionTask, fs, options, batch_rows, start: float) -> TaskResult:
    files = TableFiles(task.location, fs)
    wids = as_valid_write_ids(task.valid_write_ids)
    name = format_bucket_file(task.bucket_id)
    written, rows, deletes = [], 0, 0
    bytes_read = sum(files.size(i.path) for i in task.inputs)
    if task.kind == MAJOR:
        data = tuple(DataFile(i.path, "original" if i.role == ORIGINAL else "delta",
                              task.bucket_id, 0, 0, i.filter_invalid, i.side_file)
                     for i in task.inputs if i.role != DELETE_EVENTS)
        dels = tuple(DeleteFile(i.path, task.bucket_id, i.filter_invalid)
                     for i in task.inputs if i.role == DELETE_EVENTS)
        schema = pa.schema(list(task.row_type))
        t = read_split(Split(task.location, task.bucket_id, data, dels, task.valid_write_ids),
                       schema=schema, with_row_id=True, filesystem=fs)
        if t.num_rows:
            events = sort_events(live_rows_as_events(t, schema))
            rel = f"{task.insert_dir}/{name}"
            _replaceable(fs, afs.join(task.staging_dir, rel))
            write_acid_file(afs.join(task.staging_dir, rel), events, inserts=t.num_rows,
                            options=options, filesystem=fs)
            written.append(rel)
            rows = t.num_rows
    else:
        for is_delete, out in ((False, task.insert_dir), (True, task.delete_dir)):
            parts = [read_events(files, i.path, i.side_file, i.filter_invalid, wids,
                                 task.row_type)
                     for i in task.inputs if (i.role == DELETE_EVENTS) == is_delete]
            parts = [p for p in parts if p.num_rows]
            if not out or not parts:
                continue
            events = sort_events(pa.concat_tables(parts).combine_chunks())
            n = events.num_rows
            rel = f"{out}/{name}"
            _replaceable(fs, afs.join(task.staging_dir, rel))
            write_acid_file(afs.join(task.staging_dir, rel), events,
                            inserts=0 if is_delete else n, deletes=n if is_delete else 0,
                            options=options, filesystem=fs)
            written.append(rel)
            if is_delete:
                deletes += n
            else:
                rows += n
    return TaskResult(task.bucket_id, tuple(written), rows, deletes, bytes_read,
                      time.perf_counter() - start)


def run_task(task: CompactionTask, *, options: Optional[WriterOptions] = None,
             filesystem=None, batch_rows: Optional[int] = None) -> TaskResult:
    """Do one task: merge its inputs and write its output files under ``task.staging_dir``
    (replacing those of an earlier attempt). ``options``: ORC writer settings (default:
    Hive's delta writer's); ``filesystem``: overrides ``task.filesystem``; ``batch_rows``:
    rows read per input file at a time (default ``DEFAULT_BATCH_ROWS``; smaller: less
    memory, more steps)."""
    start = time.perf_counter()
    fs = filesystem if filesystem is not None else task.filesystem
    return _execute(task, fs, options, batch_rows, start)
