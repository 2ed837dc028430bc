"""A compaction's unit of work: one (partition, bucket id) group, run anywhere.

:func:`orc_acid.compaction.plan_tasks` cuts a staged compaction into one
:class:`CompactionTask` per bucket id of the partition; ``orc_acid.compaction.run_task``
(``orc_acid.compaction_run``) does one of them --
in the metastore's worker thread (``hms_txn.compactor.engine=LOCAL``, one after the other) or
on a Spark executor (``engine=SPARK``, one Spark task each) -- and returns a
:class:`TaskResult`; the caller records every result (``orc_acid.compaction.record_task``) and
publishes only when every task of the compaction has one.

A task's contract:

* **Inputs**: the files listed in the task, read only. Everything a task needs is in it
  (plain data: picklable, a few hundred bytes plus one path per input file): the table
  location, the staging directory, the snapshot's ValidWriteIdList, the row type every
  output file gets, the output directory names. Optionally the location's pyarrow
  FileSystem (``task.filesystem``; ``run_task(filesystem=...)`` overrides it, e.g. one
  rebuilt on an executor from hive-site keys by ``orc_acid.fs``).
* **Outputs**: only the files ``<output dir>/bucket_NNNNN`` of its own bucket id, under
  ``task.staging_dir`` (the output directories and their marker files exist before any task
  runs: ``orc_acid.compaction.begin_staging``). A bucket whose events are all dropped writes
  no file. Output is deterministic: the same task writes the same bytes every time.
* **Idempotent**: a task may be re-run after an attempt died at any point (an executor lost,
  a speculative duplicate). Each file is written whole under a hidden temporary name
  (``.bucket_NNNNN.<random>.tmp`` in the output directory) and renamed over any file of an
  earlier attempt; on object stores (no rename) it is one upload under the final name, which
  replaces an earlier attempt's object (an upload that failed part way may have left a
  partial object there: it is invisible -- the compaction has not committed -- and the
  re-run replaces it). A half-written file of a dead attempt is thus never taken for
  output; hidden temporaries are removed when the compaction is published
  (``publish_compaction``) or discarded. Two attempts running at once write identical
  bytes. Publish only after the engine's job has ended (no attempt still running).
* **Memory**: bounded independently of the group's size (a batch and a stripe per open
  input file, plus the writer's stripe): stated in ``orc_acid.compaction`` and
  docs/compaction.md.

What a task does, by kind:

* **minor**: the insert events of the group's delta files become
  ``delta_MIN_MAX_vC/bucket_N`` and its delete events ``delete_delta_MIN_MAX_vC/bucket_N``:
  events unchanged except that events of write ids invalid in the snapshot are dropped (in
  directories whose range has any) and ``row`` is conformed by position to the task's row
  type; sorted by (originalTransaction, bucket, rowId, currentTransaction).
* **major**: the group's live rows (base + deltas + original files - delete events) become
  insert events of ``base_MAX_vC/bucket_N`` that keep their ROW__IDs (currentTransaction =
  originalTransaction), in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

import pyarrow as pa

from .layout import format_bucket_file

__all__ = ["INSERT_EVENTS", "DELETE_EVENTS", "ORIGINAL", "TaskInput", "CompactionTask",
           "TaskResult"]

MINOR, MAJOR = "minor", "major"
INSERT_EVENTS, DELETE_EVENTS, ORIGINAL = "insert", "delete", "original"


@dataclass(frozen=True)
class TaskInput:
    """One file a task reads."""
    path: str                          # relative to the table location
    role: str                          # INSERT_EVENTS | DELETE_EVENTS | ORIGINAL
    side_file: Optional[str] = None    # a streaming file's _flush_length (read its prefix)
    filter_invalid: bool = False       # drop events whose write id the snapshot rejects


@dataclass(frozen=True)
class CompactionTask:
    """One (partition, bucket id) group of a compaction: see the module docstring."""
    kind: str                          # "minor" | "major"
    location: str                      # the table (partition) directory, file-system terms
    staging_dir: str                   # outputs go under it (= location for direct output)
    bucket_id: int
    inputs: Tuple[TaskInput, ...]      # in Hive's order: base, deltas, originals; deletes
    insert_dir: Optional[str]          # output dir of inserts / live rows (None: none)
    delete_dir: Optional[str]          # minor: output dir of delete events (None: none)
    valid_write_ids: str               # the compactor's ValidWriteIdList
    row_type: pa.StructType            # the ``row`` struct of every output file
    visibility_txn_id: int
    filesystem: object = field(default=None, compare=False)   # pyarrow FileSystem or None

    @property
    def output_files(self) -> Tuple[str, ...]:
        """The files this task may write, relative to ``staging_dir``."""
        name = format_bucket_file(self.bucket_id)
        return tuple(f"{d}/{name}" for d in (self.insert_dir, self.delete_dir) if d)


@dataclass(frozen=True)
class TaskResult:
    """What one run of a task wrote (``files`` relative to the task's ``staging_dir``)."""
    bucket_id: int
    files: Tuple[str, ...]
    rows: int                          # insert events / live rows written
    deletes: int                       # delete events written (minor)
    bytes_read: int
    seconds: float
    max_open_inputs: int = 0           # merge instrumentation (bounded-memory evidence)
    max_buffered_rows: int = 0
