"""Minor and major compaction of a Hive full-ACID table (or partition) directory.

Pure library (no metastore): the caller supplies the compactor's snapshot and the id of the
compaction transaction that will make the output visible.

* **Minor**: the selected insert deltas become ``delta_MIN_MAX_vC`` and the selected delete
  deltas ``delete_delta_MIN_MAX_vC`` (no statement id). Events are copied unchanged, except
  that events of aborted write ids are dropped; each output ``bucket_N`` holds the events of
  the input ``bucket_N`` files sorted by (originalTransaction, bucket, rowId).
* **Major**: the snapshot's live rows (base + deltas - deletes, original files included)
  become ``base_MAX_vC``, one ``bucket_N`` per bucket id, ROW__IDs preserved, plus Hive 3's
  ``_metadata_acid`` marker.

``MAX`` is the compactor's high watermark: :func:`compactor_write_ids` turns a reader's
ValidWriteIdList into Hive's compactor list (``createValidCompactWriteIdList``): nothing at or
above the lowest open write id, aborted ids kept as exceptions so their data is dropped. A
streaming delta that straddles the watermark lowers it further (to just below that delta),
so the output never overlaps a delta it does not replace. ``MIN`` (minor) is the smallest
write id of the compacted deltas.

Crash safety: a ``_vC`` directory is invisible to readers whose ValidTxnList does not show C
committed (``orc_acid.snapshot``), so the output appears exactly when the compaction
transaction commits, and output of a compaction whose transaction aborted is an aborted
directory the cleaner deletes (with any stale staging directory: :func:`cleanable`).

* On file systems that rename atomically (local disk, HDFS) the output is written under a
  hidden staging directory (``.hms-compactor-vC-<random>``, skipped by every reader) and
  renamed to its final ``_vC`` name: a half-written output never carries that name.
* On object stores (S3, Azure, GCS: ``orc_acid.fs.can_rename`` is false) there is no
  atomic rename, so each file is uploaded under its final ``_vC`` name directly (each object
  whole or absent); the directory may be seen half-written by a lister, but it is the
  compaction transaction's commit, after the last upload, that makes it visible -- as Hive's
  compactor does on S3. A compaction that fails leaves an aborted ``_vC`` directory for the
  cleaner.

Locations: any of ``orc_acid.fs`` (an optional ``filesystem`` as in ``orc_acid.writer``).

The unit of work, for engines (the metastore's LOCAL worker, a Spark job)::

    plan = plan_compaction(location, kind, write_ids, visibility_txn_id=C, valid_txns=...)
    staged = begin_staging(plan)          # staging dir + output dirs and their markers
    tasks = plan_tasks(staged)            # one CompactionTask per bucket id (picklable)
    for task in tasks:                    # anywhere: a thread, a Spark executor
        result = run_task(task)           # writes that bucket's files, returns a TaskResult
        record_task(staged, result)       # back where `staged` lives
    publish_compaction(staged)            # only once every task has a result
    ... commit C ...                      # (or discard_staged(staged) and abort C)

:func:`stage_compaction` is the LOCAL engine: that loop, in this thread. A task's contract
(inputs, outputs, idempotent re-runs) is stated in ``orc_acid.compaction_tasks``.

Memory, bounded whatever the partition's size: a task merges its already-sorted input files
as streams (``orc_acid.event_merge``: a k-way merge by (originalTransaction, bucket, rowId,
currentTransaction); deletes of a major compaction as a second sorted stream beside the
rows), reads each file ``batch_rows`` rows at a time (``orc_acid.compaction_events``) and
writes its output as it comes (``orc_acid.acid_file_writer``). It holds at most, per *open*
input file, one batch and the ORC reader's buffers of one stripe; one merged table; and
the writer's stripe being encoded (``WriterOptions.stripe_size``). A data file is open only
while the merge is inside its key range (deltas of successive write ids: one or two at a
time); a bucket's delete files are open together. Measured: 20 million rows in 50 files,
peak RSS under 300 MiB (docs/compaction.md; ``python -m hms_bench.compaction_memory``).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from . import fs as afs
from .compaction_plan import group_tasks, remove_stale_temporaries
from .compaction_run import run_task
from .compaction_tasks import CompactionTask, TaskResult
from .layout import METADATA_FILE, format_base, format_delete_delta, format_delta
from .snapshot import AcidSnapshot, SnapshotError, get_acid_state
from .table_files import TableFiles
from .valid_ids import ValidTxnList, ValidWriteIdList, as_valid_txns, as_valid_write_ids
from .writer import WriterOptions, ensure_acid_dir

__all__ = [
    "MINOR", "MAJOR", "STAGING_PREFIX", "CompactionError", "CompactionPlan", "CompactionResult",
    "StagedCompaction", "compactor_write_ids", "plan_compaction", "stage_compaction",
    "publish_compaction", "discard_staged", "compact", "compact_minor", "compact_major",
    "cleanable", "staging_txn_id", "dir_size",
    # the unit of work (one per partition and bucket id), for engines that fan out
    "begin_staging", "plan_tasks", "run_task", "record_task", "CompactionTask",
    "TaskResult",
]

MINOR, MAJOR = "minor", "major"
STAGING_PREFIX = ".hms-compactor-v"
_STAGING_RE = re.compile(r"\.hms-compactor-v([0-9]+)-[0-9a-f]+\Z")
_METADATA_ACID = {"thisFileVersion": "0", "dataFormat": "compacted"}


class CompactionError(Exception):
    """A compaction that cannot be done (bad input, insert-only table, name clash...)."""


# -- snapshots -------------------------------------------------------------------------------

def compactor_write_ids(valid_write_ids) -> ValidWriteIdList:
    """Hive's ``TxnUtils.createValidCompactWriteIdList``: the high watermark drops to just
    below the lowest open write id, and only aborted ids (below it) stay exceptions."""
    w = as_valid_write_ids(valid_write_ids)
    hwm = w.high_watermark
    opens = w.open_ids
    low_open = w.min_open if w.min_open is not None else (min(opens) if opens else None)
    if low_open is not None:
        hwm = min(hwm, low_open - 1)
    return _with_hwm(w, hwm)


def _with_hwm(w: ValidWriteIdList, hwm: int) -> ValidWriteIdList:
    """A compactor list lowered to ``hwm``: the aborted ids up to it stay exceptions."""
    return ValidWriteIdList(w.table_name, hwm, aborted_ids=[x for x in w.aborted_ids if x <= hwm])


# -- planning --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompactionPlan:
    location: str
    kind: str                              # MINOR | MAJOR
    valid_write_ids: ValidWriteIdList      # the compactor list actually used
    valid_txns: Optional[ValidTxnList]
    visibility_txn_id: int
    snapshot: AcidSnapshot
    min_write_id: int
    max_write_id: int
    inputs: Tuple[str, ...]                # directories / original files read (relative)
    outputs: Tuple[str, ...]               # final directory names this compaction creates
    filesystem: object = None              # pyarrow FileSystem of location (None: local)

    @property
    def highest_write_id(self) -> int:
        return self.max_write_id


def plan_compaction(location: str, kind: str, valid_write_ids, *, visibility_txn_id: int,
                    valid_txns=None, already_compactor_list: bool = False,
                    filesystem=None) -> Optional[CompactionPlan]:
    """Decide what a compaction of ``location`` reads and writes; None if there is nothing
    worth compacting (minor: fewer than two deltas; major: no delta and no original file).

    ``valid_write_ids``: the table's ValidWriteIdList as of the compaction transaction's
    snapshot (turned into the compactor list unless ``already_compactor_list``);
    ``valid_txns``: that snapshot's ValidTxnList (``_vT`` visibility);
    ``visibility_txn_id``: the compaction transaction (the ``_vC`` suffix), > 0;
    ``filesystem``: as in ``orc_acid.writer`` (default: by the location's scheme)."""
    kind = kind.lower()
    if kind not in (MINOR, MAJOR):
        raise ValueError(f"kind must be {MINOR!r} or {MAJOR!r}, not {kind!r}")
    if int(visibility_txn_id) <= 0:
        raise ValueError("visibility_txn_id must be the compaction transaction id (> 0)")
    fs, loc = afs.resolve(location, filesystem)
    txns = as_valid_txns(valid_txns)
    wids = as_valid_write_ids(valid_write_ids) if already_compactor_list \
        else compactor_write_ids(valid_write_ids)
    snap = get_acid_state(loc, wids, txns, filesystem=fs)
    # a delta straddling the watermark (streaming, or a multi-id range) caps the compaction
    # just below it, so that the output never overlaps a directory it does not replace
    cap = wids.high_watermark
    for d in snap.current:
        if d.max_write_id > cap:
            cap = min(cap, d.min_write_id - 1)
    if cap != wids.high_watermark:
        wids = _with_hwm(wids, cap)
        snap = get_acid_state(loc, wids, txns, filesystem=fs)
    if cap <= 0:
        return None
    base_id = snap.base.write_id if snap.base is not None else 0
    if cap <= base_id:
        return None
    if kind == MINOR:
        if len(snap.current) < 2:
            return None
        lo = min(d.min_write_id for d in snap.current)
        if any((d.min_write_id, d.max_write_id, d.statement_id) == (lo, cap, None)
               for d in snap.current):
            return None  # the output range exists already (a compacted delta): no gain
        outputs = []
        if snap.deltas:
            outputs.append(format_delta(lo, cap, None, visibility_txn_id))
        if snap.delete_deltas:
            outputs.append(format_delete_delta(lo, cap, None, visibility_txn_id))
        inputs = tuple(d.path for d in snap.current)
    else:
        if not snap.current and not snap.original_files:
            return None
        lo = 0
        outputs = [format_base(cap, visibility_txn_id)]
        inputs = ((snap.base.path,) if snap.base is not None else ()) + \
            tuple(d.path for d in snap.current) + tuple(snap.original_files)
    return CompactionPlan(loc, kind, wids, txns, int(visibility_txn_id), snap, lo, cap,
                          inputs, tuple(outputs), fs)


# -- staging: the output directories, then one task per bucket id -------------------------

@dataclass
class StagedCompaction:
    plan: CompactionPlan
    staging_dir: str                       # absolute; the table's own for direct output
    rows: int = 0                          # insert events / live rows written
    deletes: int = 0                       # delete events written
    files: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    published: List[str] = field(default_factory=list)
    tasks: Optional[Tuple[CompactionTask, ...]] = None     # set by plan_tasks
    results: Dict[int, TaskResult] = field(default_factory=dict)   # bucket id -> result


@dataclass(frozen=True)
class CompactionResult:
    kind: str
    location: str
    visibility_txn_id: int
    min_write_id: int
    max_write_id: int
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    rows: int
    deletes: int
    files: int
    seconds: float


def _direct(plan: CompactionPlan) -> bool:
    """Output written under its final names (object stores: no atomic rename)."""
    return not afs.can_rename(plan.filesystem)


def begin_staging(plan: CompactionPlan) -> StagedCompaction:
    """Create where the output goes, before any task runs: a hidden staging directory of the
    table where directories rename atomically (else the table itself: output written
    directly under the final ``_vC`` names, invisible until the compaction transaction
    commits), and in it the output directories with their marker files
    (``_orc_acid_version``; a base's ``_metadata_acid``)."""
    fs = plan.filesystem
    if _direct(plan):
        for name in plan.outputs:
            if afs.exists(fs, afs.join(plan.location, name)):
                raise CompactionError(f"{afs.join(plan.location, name)} already exists: "
                                      f"compaction output names are unique per compaction "
                                      f"transaction")
        st = StagedCompaction(plan, plan.location, published=list(plan.outputs))
    else:
        staging = afs.join(plan.location, f"{STAGING_PREFIX}{plan.visibility_txn_id:07d}-"
                                          f"{uuid.uuid4().hex[:12]}")
        afs.makedirs(fs, staging)
        st = StagedCompaction(plan, staging)
    try:
        for name in plan.outputs:
            target = afs.join(st.staging_dir, name)
            ensure_acid_dir(target, fs)
            if plan.kind == MAJOR:
                afs.write_bytes(fs, afs.join(target, METADATA_FILE),
                                json.dumps(_METADATA_ACID, separators=(",", ":")).encode())
    except BaseException:
        discard_staged(st)
        raise
    return st


def plan_tasks(staged: StagedCompaction, *, schema=None) -> List[CompactionTask]:
    """The compaction cut into one task per bucket id (sorted), to run anywhere with
    :func:`orc_acid.compaction_tasks.run_task` and record with :func:`record_task`.
    ``schema`` (major): the table columns the base gets; default: the widest ``row`` found
    in the inputs (by position; real names preferred over ``_colN``), as for minor."""
    plan = staged.plan
    files = TableFiles(plan.location, plan.filesystem)
    tasks = group_tasks(plan, staged.staging_dir, files, schema)
    staged.tasks = tuple(tasks)
    return tasks


def record_task(staged: StagedCompaction, result: TaskResult) -> None:
    """Count a finished task's result in the compaction (a re-run's result replaces the
    earlier one of the same bucket id)."""
    if staged.tasks is None or result.bucket_id not in {t.bucket_id for t in staged.tasks}:
        raise CompactionError(f"bucket {result.bucket_id} is not a task of this compaction")
    staged.results[result.bucket_id] = result
    done = staged.results.values()
    staged.rows = sum(r.rows for r in done)
    staged.deletes = sum(r.deletes for r in done)
    staged.files = sum(len(r.files) for r in done)
    staged.bytes_read = sum(r.bytes_read for r in done)


def stage_compaction(plan: CompactionPlan, *, schema=None,
                     options: Optional[WriterOptions] = None,
                     batch_rows: Optional[int] = None) -> StagedCompaction:
    """The LOCAL engine: :func:`begin_staging`, :func:`plan_tasks`, then every task in this
    thread, one after the other (:func:`run_task`, :func:`record_task`). On failure the
    staged output is discarded."""
    start = time.perf_counter()
    st = begin_staging(plan)
    try:
        for task in plan_tasks(st, schema=schema):
            record_task(st, run_task(task, options=options, filesystem=plan.filesystem,
                                     batch_rows=batch_rows))
    except BaseException:
        discard_staged(st)
        raise
    st.seconds = time.perf_counter() - start
    return st


def publish_compaction(st: StagedCompaction) -> List[str]:
    """Rename the staged directories to their final ``_vC`` names (still invisible until the
    compaction transaction commits); refuses to replace an existing directory, and refuses
    while a task of the compaction has no recorded result. Output written directly (object
    stores) is already in place. Hidden temporaries of dead task attempts are removed."""
    if st.tasks is None or set(st.results) != {t.bucket_id for t in st.tasks}:
        missing = sorted({t.bucket_id for t in st.tasks or ()} - set(st.results))
        raise CompactionError(f"cannot publish: tasks of buckets {missing} have not finished"
                              if st.tasks is not None else "cannot publish: no tasks planned")
    fs, loc = st.plan.filesystem, st.plan.location
    for name in st.plan.outputs:
        remove_stale_temporaries(fs, afs.join(st.staging_dir, name))
    if _direct(st.plan):
        return list(st.published)
    for name in st.plan.outputs:
        src = afs.join(st.staging_dir, name)
        dst = afs.join(loc, name)
        if not afs.is_dir(fs, src):
            afs.makedirs(fs, src)  # nothing staged for it (cannot happen; keep the name complete)
        if afs.exists(fs, dst):
            raise CompactionError(f"{dst} already exists: compaction output names are unique "
                                  f"per compaction transaction")
        if fs is None:
            os.rename(src, dst)
        else:
            fs.move(src, dst)
        st.published.append(name)
    afs.delete_tree(fs, st.staging_dir)
    return list(st.published)


def discard_staged(st: StagedCompaction) -> None:
    """Remove staged and published output (for a compaction that will not commit)."""
    fs = st.plan.filesystem
    if st.staging_dir != st.plan.location:
        _quietly(afs.delete_tree, fs, st.staging_dir)
    for name in st.published:
        _quietly(afs.delete_tree, fs, afs.join(st.plan.location, name))


def _quietly(op, *args) -> None:
    try:
        op(*args)
    except OSError:
        pass


def _result(st: StagedCompaction) -> CompactionResult:
    p = st.plan
    return CompactionResult(p.kind, p.location, p.visibility_txn_id, p.min_write_id,
                            p.max_write_id, p.inputs, p.outputs, st.rows, st.deletes,
                            st.files, st.seconds)


def compact(location: str, kind: str, valid_write_ids, *, visibility_txn_id: int,
            valid_txns=None, schema=None, options: Optional[WriterOptions] = None,
            already_compactor_list: bool = False, filesystem=None
            ) -> Optional[CompactionResult]:
    """Plan, stage and publish a compaction; None when there is nothing to compact."""
    plan = plan_compaction(location, kind, valid_write_ids, visibility_txn_id=visibility_txn_id,
                           valid_txns=valid_txns, already_compactor_list=already_compactor_list,
                           filesystem=filesystem)
    if plan is None:
        return None
    st = stage_compaction(plan, schema=schema, options=options)
    publish_compaction(st)
    return _result(st)


def compact_minor(location: str, valid_write_ids, *, visibility_txn_id: int, valid_txns=None,
                  options: Optional[WriterOptions] = None) -> Optional[CompactionResult]:
    return compact(location, MINOR, valid_write_ids, visibility_txn_id=visibility_txn_id,
                   valid_txns=valid_txns, options=options)


def compact_major(location: str, valid_write_ids, *, visibility_txn_id: int, valid_txns=None,
                  schema=None, options: Optional[WriterOptions] = None
                  ) -> Optional[CompactionResult]:
    return compact(location, MAJOR, valid_write_ids, visibility_txn_id=visibility_txn_id,
                   valid_txns=valid_txns, schema=schema, options=options)


# -- cleaning --------------------------------------------------------------------------------

def staging_txn_id(name: str) -> Optional[int]:
    """The compaction transaction of a staging directory name, or None."""
    m = _STAGING_RE.match(name)
    return int(m.group(1)) if m else None


def cleanable(location: str, highest_write_id: int, valid_write_ids, valid_txns,
              *, txn_finished: Optional[Callable[[int], bool]] = None,
              filesystem=None) -> List[str]:
    """Directories (relative names) of ``location`` a cleaner may delete once no reader can
    need them: the obsolete and aborted directories at or below ``highest_write_id`` (the
    compaction's), under the current snapshot (``valid_write_ids``/``valid_txns``: the
    compaction must be committed in it), plus staging directories of compaction
    transactions for which ``txn_finished(txn_id)`` is true."""
    fs, loc = afs.resolve(location, filesystem)
    if not afs.is_dir(fs, loc):
        return []
    w = as_valid_write_ids(valid_write_ids)
    hwm = min(w.high_watermark, int(highest_write_id))
    cleaner_wids = ValidWriteIdList(w.table_name, hwm,
                                    open_ids=[x for x in w.open_ids if x <= hwm],
                                    aborted_ids=[x for x in w.aborted_ids if x <= hwm])
    try:
        snap = get_acid_state(loc, cleaner_wids, valid_txns, filesystem=fs)
    except SnapshotError:
        return []
    out = [p for p in list(snap.obsolete) + list(snap.aborted) if "/" not in p]
    if txn_finished is not None:
        for name, _, _ in sorted(afs.list_names(fs, loc)):
            t = staging_txn_id(name)
            if t is not None and txn_finished(t):
                out.append(name)
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def dir_size(path: str, filesystem=None) -> int:
    """Bytes of the non-hidden files directly in ``path`` (Hive's sumDirSize)."""
    fs, path = afs.resolve(path, filesystem)
    return sum(size for name, is_dir, size in afs.list_names(fs, path)
               if not is_dir and not name.startswith(("_", ".")))
