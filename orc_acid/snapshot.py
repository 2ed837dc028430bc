"""Which directories and files of an ACID table a reader uses (Hive's getAcidState).

:func:`select_snapshot` is a pure function over a listing: relative paths of the files under
the table (or partition) directory, ``/``-separated, optionally with entries ending in ``/``
that only declare a directory. :func:`list_table_dir` produces such a listing for a local
directory or any ``pyarrow.fs`` file system, and :func:`get_acid_state` combines the two.

Rules (from Hive's AcidUtils; the tests replay the vectors of Hive's TestAcidUtils and
Impala's AcidUtilsTest):

* Top-level entries are taken in name order; hidden ones (``_`` / ``.`` prefix) are skipped.
  A top-level file is an original file; a directory that is not base/delta is an original
  directory whose (non-hidden, recursive) files are original files.
* ``_vT`` directories are ignored unless T is committed in the ValidTxnList (recorded as
  aborted when T is aborted). Without a ValidTxnList every ``_vT`` counts as committed.
* Bases: a base whose write id is aborted and that is not compacted is an aborted directory.
  A base replaces the current best when its write id is higher (or equal, when it is a
  committed compacted base competing with an INSERT OVERWRITE base of the same id) and it is
  usable: a compacted base (``_vT`` or ``_metadata_acid``) needs N < minOpenWriteId and
  N <= hwm; an INSERT OVERWRITE base needs write id N valid. Replaced or lower bases are
  obsolete. (Hive 4 also accepts any base with N <= minOpenWriteId; we do not, because an
  INSERT OVERWRITE base of an open write id must stay invisible.)
* A chosen base makes every original file and original directory obsolete.
* Deltas: wholly aborted ranges are aborted directories; ranges with no valid id are dropped;
  the rest is sorted by (min asc, max desc, statement asc with none first, path) and walked
  from current = base write id (0 without base): a delta is taken when max > current and
  some id in (current, max] is valid; also taken: further statements of the write id just
  taken, and a directory with the very same range and statement as the previous one (the
  delta / delete_delta twin). Everything else is obsolete.
* If there are usable bases but none was chosen and the oldest is compacted:
  :class:`NotEnoughHistoryError`.
* Original files are sorted by full path (this order numbers their synthetic ROW__IDs).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from .layout import (ACID_FORMAT_FILE, BASE_PREFIX, DELETE_DELTA_PREFIX, DELTA_PREFIX,
                     METADATA_FILE, ParsedBaseName, ParsedDeltaName, is_side_file,
                     parse_base, parse_delta, side_file_for)
from .fs import read_bytes, resolve
from .valid_ids import RangeResponse, ValidWriteIdList, as_valid_txns, as_valid_write_ids

__all__ = [
    "AcidSnapshot", "BaseDir", "DeltaDir", "NotEnoughHistoryError", "SnapshotError",
    "select_snapshot", "list_table_dir", "get_acid_state",
]


class SnapshotError(Exception):
    """Base class of snapshot selection errors."""


class NotEnoughHistoryError(SnapshotError):
    """Only compacted bases that contain write ids this snapshot must not see exist."""

    def __init__(self, high_watermark: int, min_open: str, oldest_base: str):
        self.high_watermark = high_watermark
        self.min_open = min_open
        self.oldest_base = oldest_base
        super().__init__(
            f"not enough history for snapshot (hwm {high_watermark}, lowest invalid write id "
            f"{min_open}): the oldest usable base is the compacted {oldest_base!r}, which "
            f"already merged write ids this snapshot must not see")


class _DataDir:
    """What base and delta directories share: data files, some with a side file."""

    def side_file_for(self, rel: str) -> Optional[str]:
        """The ``_flush_length`` side file of the data file ``rel`` (a streaming file still
        being written), or None."""
        side = side_file_for(rel)
        return side if side in self.side_files else None


@dataclass(frozen=True)
class BaseDir(_DataDir):
    path: str                       # relative to the table dir
    write_id: int
    visibility_txn_id: int
    is_compacted: bool
    files: Tuple[str, ...]          # data files (relative paths), sorted
    side_files: Tuple[str, ...] = ()
    has_acid_version_file: bool = False


@dataclass(frozen=True)
class DeltaDir(_DataDir):
    path: str
    min_write_id: int
    max_write_id: int
    statement_id: Optional[int]
    visibility_txn_id: int
    is_delete: bool
    files: Tuple[str, ...]
    side_files: Tuple[str, ...] = ()
    has_acid_version_file: bool = False

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class AcidSnapshot:
    base: Optional[BaseDir]
    deltas: Tuple[DeltaDir, ...]           # selected insert deltas, Hive order
    delete_deltas: Tuple[DeltaDir, ...]    # selected delete deltas, Hive order
    current: Tuple[DeltaDir, ...]          # all selected deltas in Hive order (both kinds)
    original_files: Tuple[str, ...]        # sorted by full path
    obsolete: Tuple[str, ...]
    aborted: Tuple[str, ...]
    valid_write_ids: ValidWriteIdList = field(repr=False, compare=False, default=None)

    @property
    def base_path(self) -> Optional[str]:
        return None if self.base is None else self.base.path


def _delta_cmp(a: Tuple[ParsedDeltaName, str], b: Tuple[ParsedDeltaName, str]) -> int:
    da, pa_ = a
    db, pb = b
    if da.min_write_id != db.min_write_id:
        return -1 if da.min_write_id < db.min_write_id else 1
    if da.max_write_id != db.max_write_id:
        return 1 if da.max_write_id < db.max_write_id else -1
    sa, sb = da.sort_statement_id, db.sort_statement_id
    if sa != sb:
        return -1 if sa < sb else 1
    return (pa_ > pb) - (pa_ < pb)


def select_snapshot(listing: Iterable[str], valid_write_ids, valid_txns=None, *,
                    is_compacted_base: Optional[Callable[[str, Tuple[str, ...]], bool]] = None
                    ) -> AcidSnapshot:
    """Pick base, deltas, delete deltas and original files of a snapshot from a listing.

    ``listing``: relative paths (``/``-separated) of the files under the table directory;
    entries ending in ``/`` declare directories. ``valid_write_ids``: ValidWriteIdList (object
    or string); ``valid_txns``: ValidTxnList for ``_vT`` visibility (None: all committed).
    ``is_compacted_base(base_rel_path, files)``: decides whether a base without ``_v`` is a
    compacted one; default: it holds a ``_metadata_acid`` file.
    """
    wids = as_valid_write_ids(valid_write_ids)
    txns = as_valid_txns(valid_txns)

    # -- group the listing by top-level entry -------------------------------------------
    top_files: List[str] = []
    dirs: Dict[str, List[str]] = {}
    for raw in listing:
        p = raw.replace("\\", "/")
        while p.startswith("./"):
            p = p[2:]
        p = p.lstrip("/")
        if not p:
            continue
        is_dir_marker = p.endswith("/")
        p = p.rstrip("/")
        head, sep, rest = p.partition("/")
        if not sep:
            if is_dir_marker:
                dirs.setdefault(head, [])
            else:
                top_files.append(head)
        else:
            lst = dirs.setdefault(head, [])
            if not is_dir_marker:
                lst.append(rest)

    def visible(rel: str) -> bool:
        return not any(part.startswith(("_", ".")) for part in rel.split("/"))

    obsolete: List[str] = []
    aborted: List[str] = []
    original_files: List[str] = []
    original_dirs: List[str] = []
    best_base: Optional[BaseDir] = None
    oldest_base: Optional[Tuple[ParsedBaseName, str, bool]] = None
    candidates: List[Tuple[ParsedDeltaName, str, DeltaDir]] = []

    def usable(name: str, vis: int) -> bool:
        if txns is None or vis == 0:
            return True
        if txns.is_valid(vis):
            return True
        if txns.is_aborted(vis):
            aborted.append(name)
        return False

    def dir_contents(name: str):
        entries = dirs[name]
        data, side = [], []
        has_version = has_meta = False
        for rel in entries:
            if rel == ACID_FORMAT_FILE:
                has_version = True
                continue
            if rel == METADATA_FILE:
                has_meta = True
                continue
            if not visible(rel):
                continue
            if is_side_file(rel):
                side.append(f"{name}/{rel}")
                continue
            data.append(f"{name}/{rel}")
        return tuple(sorted(data)), tuple(sorted(side)), has_version, has_meta

    entries = sorted(set(top_files) | set(dirs))
    top_file_set = set(top_files)
    for name in entries:
        if name.startswith(("_", ".")):
            continue
        if name in top_file_set and name not in dirs:
            original_files.append(name)
            continue
        pb = parse_base(name) if name.startswith(BASE_PREFIX) else None
        pd = parse_delta(name) if name.startswith((DELTA_PREFIX, DELETE_DELTA_PREFIX)) else None
        if pb is not None:
            if not usable(name, pb.visibility_txn_id):
                continue
            files, side, has_version, has_meta = dir_contents(name)
            if pb.visibility_txn_id > 0:
                compacted = True
            elif is_compacted_base is not None:
                compacted = bool(is_compacted_base(name, tuple(dirs[name])))
            else:
                compacted = has_meta
            if oldest_base is None or oldest_base[0].write_id > pb.write_id:
                oldest_base = (pb, name, compacted)
            if wids.is_aborted(pb.write_id) and not compacted:
                aborted.append(name)
                continue
            if (best_base is None or best_base.write_id < pb.write_id
                    or (best_base.write_id == pb.write_id and compacted
                        and (txns is None or txns.is_valid(pb.visibility_txn_id)))):
                if compacted:
                    ok = wids.is_valid_base(pb.write_id)
                else:
                    ok = wids.is_valid(pb.write_id)
                if ok:
                    if best_base is not None:
                        obsolete.append(best_base.path)
                    best_base = BaseDir(name, pb.write_id, pb.visibility_txn_id, compacted,
                                        files, side, has_version)
            else:
                obsolete.append(name)
        elif pd is not None:
            if not usable(name, pd.visibility_txn_id):
                continue
            if wids.range_aborted(pd.min_write_id, pd.max_write_id) is RangeResponse.ALL:
                aborted.append(name)
                continue
            if wids.range_validity(pd.min_write_id, pd.max_write_id) is RangeResponse.NONE:
                continue
            files, side, has_version, _ = dir_contents(name)
            dd = DeltaDir(name, pd.min_write_id, pd.max_write_id, pd.statement_id,
                          pd.visibility_txn_id, pd.is_delete, files, side, has_version)
            candidates.append((pd, name, dd))
        elif name in dirs:
            # an original directory (or an unparseable base_/delta_ name: treated alike)
            original_dirs.append(name)
            if name in top_file_set:  # pragma: no cover - a name cannot be file and dir
                original_files.append(name)

    if best_base is not None:
        obsolete.extend(original_files)
        obsolete.extend(original_dirs)
        original_files = []
    else:
        for d in original_dirs:
            for rel in dirs[d]:
                if visible(rel):
                    original_files.append(f"{d}/{rel}")

    # -- deltas: keep the best covering set ---------------------------------------------
    candidates.sort(key=functools.cmp_to_key(lambda a, b: _delta_cmp(a[:2], b[:2])))
    current = 0 if best_base is None else best_base.write_id
    last_stmt = -1
    prev: Optional[ParsedDeltaName] = None
    chosen: List[DeltaDir] = []
    for pd, name, dd in candidates:
        if pd.max_write_id > current:
            if wids.range_validity(current + 1, pd.max_write_id) is not RangeResponse.NONE:
                chosen.append(dd)
                current = pd.max_write_id
                last_stmt = pd.sort_statement_id
                prev = pd
        elif pd.max_write_id == current and last_stmt >= 0:
            chosen.append(dd)
            prev = pd
        elif (prev is not None and pd.max_write_id == prev.max_write_id
              and pd.min_write_id == prev.min_write_id
              and pd.sort_statement_id == prev.sort_statement_id):
            chosen.append(dd)
            prev = pd
        else:
            obsolete.append(name)

    if oldest_base is not None and best_base is None and oldest_base[2]:
        exc = wids.exceptions
        raise NotEnoughHistoryError(wids.high_watermark, str(exc[0]) if exc else "x",
                                    oldest_base[1])

    original_files.sort()
    return AcidSnapshot(
        base=best_base,
        deltas=tuple(d for d in chosen if not d.is_delete),
        delete_deltas=tuple(d for d in chosen if d.is_delete),
        current=tuple(chosen),
        original_files=tuple(original_files),
        obsolete=tuple(obsolete),
        aborted=tuple(aborted),
        valid_write_ids=wids,
    )


# -- file system helpers ----------------------------------------------------------------------

def resolve_filesystem(location: str, filesystem=None):
    """-> (pyarrow filesystem, or None for the local one used through ``os``; the path in
    it): ``orc_acid.fs.resolve`` (a location's scheme picks the file system)."""
    return resolve(location, filesystem)


def list_table_dir(location: str, filesystem=None) -> List[str]:
    """Relative paths of all files (and, with a trailing ``/``, directories) under location.

    ``location``: a local path, a ``file://`` URI, or any URI pyarrow.fs understands;
    ``filesystem``: an explicit ``pyarrow.fs.FileSystem`` (then location is a path in it).
    """
    fs, root = resolve_filesystem(location, filesystem)
    out: List[str] = []
    if fs is None:
        root = os.path.abspath(root)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"table directory not found: {location}")
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root)
            prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            for d in dirnames:
                out.append(prefix + d + "/")
            for f in filenames:
                out.append(prefix + f)
        return out
    import pyarrow.fs as pafs
    root = root.rstrip("/")
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    for info in infos:
        rel = info.path[len(root):].lstrip("/")
        if info.type == pafs.FileType.Directory:
            out.append(rel + "/")
        elif info.type == pafs.FileType.File:
            out.append(rel)
    return out


def get_acid_state(location: str, valid_write_ids, valid_txns=None, *, filesystem=None
                   ) -> AcidSnapshot:
    """List ``location`` and select the snapshot (reads ``_metadata_acid`` when present)."""
    fs, root = resolve_filesystem(location, filesystem)

    def compacted(base_rel: str, entries: Tuple[str, ...]) -> bool:
        if METADATA_FILE not in entries:
            return False
        path = root.rstrip("/") + "/" + base_rel + "/" + METADATA_FILE
        try:
            data = read_bytes(fs, path)
            import json
            return json.loads(data.decode("utf-8")).get("dataFormat", "compacted") == "compacted"
        except (OSError, ValueError):
            return True

    return select_snapshot(list_table_dir(location, filesystem), valid_write_ids, valid_txns,
                           is_compacted_base=compacted)
