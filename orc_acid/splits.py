"""A snapshot's files grouped into splits: one unit of work per bucket id.

A :class:`Split` holds a bucket id's data files, in the order their rows are read (base,
then deltas in Hive's order, then original files), and the delete files of the same bucket
id: a row can only be deleted by an event in the delete file of its own bucket. Engines that
fan out read one split per task.

Full-ACID directories hold ``bucket_N`` files only; any other name there (raw files written
by LOAD DATA, stray files) is refused rather than guessed at. A directory whose write id range
is not entirely valid in the snapshot (a streaming delta spanning an aborted or open id) is
marked ``filter_current_txn``: its rows must be filtered by ``currentTransaction``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional, Tuple

from .layout import bucket_id_of_file, parse_bucket_file
from .snapshot import AcidSnapshot, get_acid_state
from .table_files import AcidSchemaError, OrcAcidError
from .valid_ids import RangeResponse

__all__ = ["DataFile", "DeleteFile", "Split", "plan_splits", "plan_splits_for_snapshot",
           "split_per_file"]


@dataclass(frozen=True)
class DataFile:
    path: str                     # relative to the table location
    kind: str                     # "base" | "delta" | "original" | "insert_only"
    bucket_id: int
    min_write_id: int = 0
    max_write_id: int = 0
    filter_current_txn: bool = False   # some ids of the dir's range are invalid
    side_file: Optional[str] = None


@dataclass(frozen=True)
class DeleteFile:
    path: str
    bucket_id: int
    filter_current_txn: bool = False


@dataclass(frozen=True)
class Split:
    """One bucket id's work: its data files (in read order) and its delete files."""
    location: str
    bucket_id: int
    data_files: Tuple[DataFile, ...]
    delete_files: Tuple[DeleteFile, ...]
    valid_write_ids: str
    insert_only: bool = False


def _bucket_of(rel: str, strict: bool) -> int:
    name = rel.rsplit("/", 1)[-1]
    b = parse_bucket_file(name)
    if b is not None:
        return b.bucket_id
    if strict:
        raise AcidSchemaError(f"{rel}: not a bucket file name in an ACID directory")
    return bucket_id_of_file(name)


def plan_splits_for_snapshot(location: str, snap: AcidSnapshot, *, insert_only: bool = False
                             ) -> List[Split]:
    wids = snap.valid_write_ids
    data: dict = {}
    deletes: dict = {}

    def add(df: DataFile):
        data.setdefault(df.bucket_id, []).append(df)

    strict = not insert_only
    if snap.base is not None:
        for rel in snap.base.files:
            add(DataFile(rel, "insert_only" if insert_only else "base",
                         _bucket_of(rel, strict), 0, snap.base.write_id, False,
                         snap.base.side_file_for(rel)))
    for d in snap.deltas:
        filt = wids.range_validity(d.min_write_id, d.max_write_id) is not RangeResponse.ALL
        for rel in d.files:
            add(DataFile(rel, "insert_only" if insert_only else "delta",
                         _bucket_of(rel, strict), d.min_write_id, d.max_write_id, filt,
                         d.side_file_for(rel)))
    for rel in snap.original_files:
        add(DataFile(rel, "insert_only" if insert_only else "original",
                     bucket_id_of_file(rel.rsplit("/", 1)[-1])))
    if not insert_only:
        for d in snap.delete_deltas:
            filt = wids.range_validity(d.min_write_id, d.max_write_id) is not RangeResponse.ALL
            for rel in d.files:
                b = _bucket_of(rel, True)
                deletes.setdefault(b, []).append(DeleteFile(rel, b, filt))
    elif snap.delete_deltas:
        raise OrcAcidError(f"{location}: insert-only table has delete deltas "
                           f"{[d.path for d in snap.delete_deltas]}")
    wstr = str(wids)
    return [Split(location, b, tuple(data[b]), tuple(deletes.get(b, ())), wstr, insert_only)
            for b in sorted(data)]


def plan_splits(location: str, valid_write_ids, *, valid_txns=None, insert_only: bool = False,
                filesystem=None) -> List[Split]:
    """List the table, select the snapshot and group its files by bucket id."""
    snap = get_acid_state(location, valid_write_ids, valid_txns, filesystem=filesystem)
    return plan_splits_for_snapshot(location, snap, insert_only=insert_only)


def split_per_file(split: Split) -> List[Split]:
    """``split`` as several splits that can be read in parallel: one per data file, each with
    the bucket's delete files; the original (pre-ACID) files stay together, in order, as
    their synthetic row ids count the rows of the earlier ones."""
    originals = tuple(df for df in split.data_files if df.kind == "original")
    parts = [(df,) for df in split.data_files if df.kind != "original"]
    if originals:
        parts.insert(0, originals)
    if len(parts) <= 1:
        return [split]
    return [replace(split, data_files=p) for p in parts]
