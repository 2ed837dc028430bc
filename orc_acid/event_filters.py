"""The two row filters of an ACID read, vectorized: write id validity and delete events.

* :func:`valid_mask`: an event is valid when its write id (``currentTransaction``) is at or
  below the snapshot's high watermark and not one of its exceptions (open or aborted ids).
  Applied to the rows of directories whose write id range is not entirely valid, and to
  delete events of such delete deltas.
* :class:`DeleteSet`: the valid delete events of one split, keyed by (originalTransaction,
  bucket, rowId); a data row whose ROW__ID is among them is dropped. A row can only be
  deleted by an event of its own bucket's delete files, so a set never spans splits.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .table_files import AcidSchemaError, TableFiles, acid_column_names
from .valid_ids import ValidWriteIdList, as_valid_write_ids

__all__ = ["valid_mask", "DeleteSet", "read_delete_set", "delete_key_groups", "keep_mask"]


def valid_mask(wids: ValidWriteIdList, write_ids: np.ndarray,
               exceptions: Optional[np.ndarray] = None) -> np.ndarray:
    """True for the write ids valid in ``wids``. ``exceptions``: ``wids.exceptions`` as an
    int64 array, when the caller keeps one for many calls."""
    mask = write_ids <= wids.high_watermark
    if exceptions is None:
        exceptions = np.asarray(wids.exceptions, dtype=np.int64)
    if len(exceptions):
        mask &= ~np.isin(write_ids, exceptions)
    return mask


def read_delete_set(files: TableFiles, wids: ValidWriteIdList, delete_files: Sequence,
                    exceptions: Optional[np.ndarray] = None) -> Optional["DeleteSet"]:
    """The valid delete events of ``delete_files`` (``orc_acid.DeleteFile``s of one split),
    or None when there is none."""
    parts = []
    for dfile in delete_files:
        f = files.open_orc(dfile.path)
        names = acid_column_names(f.schema)
        if names is None:
            raise AcidSchemaError(f"{files.full(dfile.path)}: delete delta file without "
                                  f"the ACID event schema: {f.schema.names}")
        cols = [names["originaltransaction"], names["bucket"], names["rowid"]]
        if dfile.filter_current_txn:
            cols.append(names["currenttransaction"])
        t = f.read(columns=cols)
        if dfile.filter_current_txn:
            t = t.filter(pa.array(valid_mask(wids, t.column(3).to_numpy(), exceptions)))
        if t.num_rows:
            parts.append(pa.Table.from_arrays(
                [t.column(0).cast(pa.int64()), t.column(1).cast(pa.int32()),
                 t.column(2).cast(pa.int64())], names=["o", "b", "r"]))
    if not parts:
        return None
    return DeleteSet(pa.concat_tables(parts))


def delete_key_groups(location: str, valid_write_ids, delete_files: Sequence, *,
                      filesystem=None) -> Dict[Tuple[int, int], np.ndarray]:
    """The valid delete events of ``delete_files`` (as planned for a snapshot: those whose
    directory holds invalid write ids are filtered by currentTransaction), grouped by
    (originalTransaction, bucket) -> sorted int64 rowIds. For engines that apply deletes
    themselves (the Spark JVM scan path)."""
    found = read_delete_set(TableFiles(location, filesystem),
                            as_valid_write_ids(valid_write_ids), delete_files)
    return {} if found is None else found.groups


def keep_mask(deletes: Optional["DeleteSet"],
              keys: Tuple[pa.ChunkedArray, pa.ChunkedArray, pa.ChunkedArray]
              ) -> Optional[np.ndarray]:
    """-> boolean keep-mask of the rows with these ROW__ID columns (originalTransaction,
    bucket, rowId), or None when ``deletes`` removes none of them."""
    if deletes is None or deletes.size == 0:
        return None
    return deletes.keep_mask(*keys)


class DeleteSet:
    """Valid delete events of one split, grouped by (originalTransaction, bucket) with the
    rowIds of each group sorted, so that a data file whose rows share one (or a few) such
    pairs -- every insert delta, IOW base and original file does -- is matched with a
    binary search per row instead of a hash join."""

    MAX_GROUPS_PER_FILE = 64

    def __init__(self, keys: pa.Table):
        o = keys.column("o").to_numpy()
        b = keys.column("b").to_numpy()
        r = keys.column("r").to_numpy()
        if not self._sorted(o, b, r):
            order = pc.sort_indices(keys, sort_keys=[("o", "ascending"), ("b", "ascending"),
                                                     ("r", "ascending")])
            keys = keys.take(order)
            order = order.to_numpy()
            o, b, r = o[order], b[order], r[order]
        self.table = keys
        self.size = len(r)
        change = np.flatnonzero((o[1:] != o[:-1]) | (b[1:] != b[:-1])) + 1
        starts = np.concatenate(([0], change))
        ends = np.concatenate((change, [len(r)]))
        self.groups = {(int(o[s]), int(b[s])): r[s:e] for s, e in zip(starts, ends)}

    @staticmethod
    def _sorted(o: np.ndarray, b: np.ndarray, r: np.ndarray) -> bool:
        """Already in key order? (Delete deltas are written sorted, Hive's and ours: one
        file's events need no sort.)"""
        do, db = np.diff(o), np.diff(b)
        return bool(((do > 0) | ((do == 0) & ((db > 0) | ((db == 0) & (np.diff(r) >= 0)))))
                    .all())

    @staticmethod
    def _hits(rowid: np.ndarray, dels: np.ndarray) -> np.ndarray:
        n = len(rowid)
        if n > 1 and int(rowid[-1]) - int(rowid[0]) == n - 1 and bool(
                (np.diff(rowid) == 1).all()):
            # consecutive rowIds (a stripe of any file our writer or Hive writes): mark the
            # deleted ones by position instead of a binary search per row
            r0 = int(rowid[0])
            lo, hi = np.searchsorted(dels, [r0, r0 + n])
            hit = np.zeros(n, dtype=bool)
            hit[dels[lo:hi] - r0] = True
            return hit
        idx = np.searchsorted(dels, rowid)
        idx[idx == len(dels)] = len(dels) - 1
        return dels[idx] == rowid

    def keep_mask(self, o_col, b_col, r_col) -> Optional[np.ndarray]:
        """-> boolean keep-mask for the rows with these keys, or None if nothing is deleted."""
        o = np.asarray(o_col.to_numpy(), dtype=np.int64)
        b = np.asarray(b_col.to_numpy(), dtype=np.int64)
        r = np.asarray(r_col.to_numpy(), dtype=np.int64)
        if len(o) == 0:
            return None
        uo = np.unique(o) if o[0] != o[-1] or o.min() != o.max() else o[:1]
        ub = np.unique(b) if b[0] != b[-1] or b.min() != b.max() else b[:1]
        if len(uo) * len(ub) <= self.MAX_GROUPS_PER_FILE:
            deleted = None
            single = len(uo) == 1 and len(ub) == 1
            for ov in uo:
                for bv in ub:
                    dels = self.groups.get((int(ov), int(bv)))
                    if dels is None:
                        continue
                    if single:
                        hit = self._hits(r, dels)
                    else:
                        sel = (o == ov) & (b == bv)
                        hit = np.zeros(len(r), dtype=bool)
                        hit[sel] = self._hits(r[sel], dels)
                    deleted = hit if deleted is None else (deleted | hit)
            if deleted is None or not deleted.any():
                return None
            return ~deleted
        # many distinct (originalTransaction, bucket) pairs (e.g. a compacted base): hash join
        n = len(o)
        probe = pa.Table.from_arrays(
            [pa.array(o), pa.array(b.astype(np.int32)), pa.array(r),
             pa.array(np.arange(n, dtype=np.int64))], names=["o", "b", "r", "i"])
        hit = probe.join(self.table, keys=["o", "b", "r"], join_type="left semi",
                         use_threads=True)
        if hit.num_rows == 0:
            return None
        keep = np.ones(n, dtype=bool)
        keep[hit.column("i").to_numpy()] = False
        return keep
