"""K-way merge of ACID event files that are each already sorted, in Arrow batches, and the
removal of deleted rows as a second sorted stream beside it: what a compaction task runs,
in memory bounded by a few batches per input file whatever the files' sizes.

Every ACID file is sorted by (originalTransaction, bucket, rowId) -- the order Hive's
readers (``OrcRawRecordMerger``, the sort-merge delete registry) rely on; ours and Hive's
writers produce it. :func:`merge_sorted` combines such inputs into one stream of tables in
that order, and inside each run of equal (originalTransaction, bucket, rowId) sorted by
currentTransaction, ties kept in input order: exactly a stable sort of all inputs
concatenated in input order (the result of the whole-file concatenate-and-sort it
replaces), without ever holding more than this:

* each *open* input holds one batch (``batch_rows`` rows, read from its file as it goes;
  more only while its whole buffer shares one key: duplicates of one ROW__ID);
* an input is opened only when the merge reaches its lower bound (the minimum key in its
  file's column statistics), and closed when exhausted: deltas of successive write ids --
  disjoint key ranges -- are read one after the other, not side by side;
* one emitted table at a time: the buffered rows below every open input's last key and
  every unopened input's lower bound (whole runs of equal keys, never split).

An input whose events go backwards is refused (:class:`EventOrderError`) rather than
compacted wrongly. :func:`drop_deleted` removes from such a stream the rows whose key is in
a sorted stream of delete keys, holding one delete table at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .event_filters import DeleteSet
from .table_files import OrcAcidError

__all__ = ["KEY_COLUMNS", "EventOrderError", "MergeInput", "MergeStats", "merge_sorted",
           "drop_deleted"]

KEY_COLUMNS = ("originalTransaction", "bucket", "rowId")
_CURRENT = "currentTransaction"
Key = Tuple[float, float, float]
_TOP: Key = (math.inf, math.inf, math.inf)
_BOTTOM: Key = (-math.inf, -math.inf, -math.inf)


class EventOrderError(OrcAcidError):
    """An input file whose events are not sorted by (originalTransaction, bucket, rowId)."""


@dataclass
class MergeInput:
    """One sorted input: ``open()`` yields its tables (all inputs of a merge share one
    schema holding the key columns); ``lower_bound``: a key at or below all of them
    (None: unknown, opened at once); ``what`` names it in errors."""
    what: str
    open: Callable[[], Iterator[pa.Table]]
    lower_bound: Optional[Tuple[int, int, int]] = None


@dataclass
class MergeStats:
    """What a merge held at most at once (the evidence of its memory bound)."""
    max_open_inputs: int = 0
    max_buffered_rows: int = 0
    max_batches_per_input: int = 0
    batches_read: int = 0


def _keys(t: pa.Table, what: str) -> List[np.ndarray]:
    out = []
    for name in KEY_COLUMNS:
        col = t.column(name)
        if col.null_count:
            raise EventOrderError(f"{what}: null {name} in an ACID event")
        out.append(np.asarray(col.to_numpy(), dtype=np.int64))
    return out


def _in_order(cols: Sequence[np.ndarray]) -> np.ndarray:
    """For each row after the first: is its key (``cols`` compared left to right) at or
    above its predecessor's?"""
    n = len(cols[0])
    ok = np.zeros(max(n - 1, 0), dtype=bool)
    eq = np.ones(max(n - 1, 0), dtype=bool)
    for c in cols:
        d = np.diff(c)
        ok |= eq & (d > 0)
        eq &= d == 0
    return ok | eq


def _first_descent(keys: Sequence[np.ndarray]) -> int:
    """Index of the first row whose key is below its predecessor's, or -1."""
    bad = np.flatnonzero(~_in_order(keys))
    return int(bad[0]) + 1 if len(bad) else -1


def _search(keys: List[np.ndarray], key: Key, lo: int, hi: int, side: str = "left") -> int:
    """Position in the sorted rows ``lo:hi`` of ``keys`` before the first row at or above
    ``key`` (``side="right"``: above it)."""
    for col, v in zip(keys, key):
        if v == math.inf:
            return hi
        if v == -math.inf:
            return lo
        part = col[lo:hi]
        left = lo + int(np.searchsorted(part, v, "left"))
        right = lo + int(np.searchsorted(part, v, "right"))
        if left == right:
            return left
        lo, hi = left, right
    return lo if side == "left" else hi


class _Run:
    """An open input: its rows read but not yet emitted."""

    def __init__(self, index: int, inp: MergeInput, stats: MergeStats):
        self.index = index
        self.what = inp.what
        self.it = iter(inp.open())
        self.stats = stats
        self.table: Optional[pa.Table] = None
        self.keys: List[np.ndarray] = []
        self.batches = 0
        self.exhausted = False
        self.seen = 0                       # rows read so far (for error messages)
        self.last: Optional[Key] = None     # key of the last row read

    def __len__(self) -> int:
        return 0 if self.table is None else self.table.num_rows

    def last_key(self) -> Key:
        return (self.keys[0][-1], self.keys[1][-1], self.keys[2][-1])

    def load(self) -> bool:
        """Append the input's next non-empty table; False when it has none left."""
        for t in self.it:
            if t.num_rows == 0:
                continue
            keys = _keys(t, self.what)
            first = (keys[0][0], keys[1][0], keys[2][0])
            at = _first_descent(keys)
            if at >= 0 or (self.last is not None and first < self.last):
                row = self.seen + max(at, 0)
                raise EventOrderError(
                    f"{self.what}: events out of (originalTransaction, bucket, rowId) order "
                    f"at row {row}; Hive's ACID files are sorted so, and compaction merges "
                    f"them relying on it")
            self.seen += t.num_rows
            self.last = (keys[0][-1], keys[1][-1], keys[2][-1])
            self.stats.batches_read += 1
            if self.table is None or self.table.num_rows == 0:
                self.table, self.keys, self.batches = t, keys, 1
            else:
                self.table = pa.concat_tables([self.table, t])
                self.keys = [np.concatenate((a, k)) for a, k in zip(self.keys, keys)]
                self.batches += 1
            self.stats.max_batches_per_input = max(self.stats.max_batches_per_input,
                                                   self.batches)
            return True
        self.exhausted = True
        self.it = iter(())
        return False

    def take(self, n: int) -> pa.Table:
        out = self.table.slice(0, n)
        self.table = self.table.slice(n)
        self.keys = [k[n:] for k in self.keys]
        if self.table.num_rows == 0:
            self.batches = 0
        return out


def _sort(t: pa.Table, with_current: bool) -> pa.Table:
    """Stable sort by the key (and currentTransaction), skipped when already in order."""
    if t.num_rows <= 1:
        return t
    names = KEY_COLUMNS + ((_CURRENT,) if with_current else ())
    if _in_order([np.asarray(t.column(n).to_numpy(), dtype=np.int64) for n in names]).all():
        return t
    return t.take(pc.sort_indices(t, sort_keys=[(n, "ascending") for n in names]))


def merge_sorted(inputs: Sequence[MergeInput], *, with_current_txn: bool = True,
                 stats: Optional[MergeStats] = None) -> Iterator[pa.Table]:
    """The inputs' rows as one stream sorted by (originalTransaction, bucket, rowId,
    currentTransaction if ``with_current_txn``), ties in input order; see the module
    docstring for what it holds."""
    stats = stats if stats is not None else MergeStats()
    pending = sorted(range(len(inputs)), key=lambda i: (
        _BOTTOM if inputs[i].lower_bound is None else tuple(inputs[i].lower_bound), i))
    active: List[_Run] = []
    while True:
        for run in list(active):
            if len(run) == 0 and (run.exhausted or not run.load()):
                active.remove(run)
        bound = min((run.last_key() for run in active if not run.exhausted), default=_TOP)
        next_lb = _TOP
        if pending:
            lb = inputs[pending[0]].lower_bound
            next_lb = _BOTTOM if lb is None else tuple(lb)
        limit = min(bound, next_lb)
        stats.max_open_inputs = max(stats.max_open_inputs, len(active))
        stats.max_buffered_rows = max(stats.max_buffered_rows, sum(len(r) for r in active))
        cuts = [(run, _search(run.keys, limit, 0, len(run))) for run in active]
        parts = [run.take(n) for run, n in cuts if n]
        if parts:
            yield _sort(parts[0] if len(parts) == 1 else pa.concat_tables(parts),
                        with_current_txn)
            continue
        if pending and next_lb <= bound:
            i = pending.pop(0)
            run = _Run(i, inputs[i], stats)
            run.load()
            active.append(run)
            active.sort(key=lambda r: r.index)
            continue
        if bound == _TOP:
            return
        for run in active:   # every row they hold has the key `bound`: read on past it
            if not run.exhausted and run.last_key() == bound:
                run.load()


def drop_deleted(chunks: Iterator[pa.Table], delete_keys: Iterator[pa.Table]
                 ) -> Iterator[pa.Table]:
    """``chunks`` (sorted, runs of equal keys never split across tables) without the rows
    whose key is among ``delete_keys`` (tables of the key columns, sorted)."""
    dels = iter(delete_keys)
    buf: Optional[pa.Table] = None
    bkeys: List[np.ndarray] = []
    for chunk in chunks:
        if chunk.num_rows == 0:
            continue
        ck = _keys(chunk, "compaction output")
        first = (ck[0][0], ck[1][0], ck[2][0])
        last = (ck[0][-1], ck[1][-1], ck[2][-1])
        keep: Optional[np.ndarray] = None
        while True:
            if buf is None or buf.num_rows == 0:
                buf = next(dels, None)
                if buf is None:
                    dels = iter(())
                    break
                bkeys = _keys(buf, "delete events")
            lo = _search(bkeys, first, 0, buf.num_rows)
            hi = _search(bkeys, last, lo, buf.num_rows, "right")
            if hi > lo:
                part = buf.slice(lo, hi - lo)
                found = DeleteSet(pa.table({
                    "o": part.column(KEY_COLUMNS[0]).cast(pa.int64()),
                    "b": part.column(KEY_COLUMNS[1]).cast(pa.int32()),
                    "r": part.column(KEY_COLUMNS[2]).cast(pa.int64())})).keep_mask(
                    chunk.column(KEY_COLUMNS[0]), chunk.column(KEY_COLUMNS[1]),
                    chunk.column(KEY_COLUMNS[2]))
                if found is not None:
                    keep = found if keep is None else (keep & found)
            buf = buf.slice(hi)
            bkeys = [k[hi:] for k in bkeys]
            if buf.num_rows:
                break            # the rest lies beyond this chunk
        yield chunk if keep is None else chunk.filter(pa.array(keep))
