"""The directories statements write in a table, and removing what must not stay.

A statement of write id W and statement id S writes, in the table directory or in its
partition directories (``k=v`` per partition key, one level each):

* INSERT: ``delta_W_W_S``; INSERT OVERWRITE: ``base_W``;
* UPDATE / DELETE / MERGE (Hive's split update): ``delete_delta_W_W_S`` for the delete
  events and ``delta_W_W_(S+1)`` for new row versions (and ``delta_W_W_S`` is swept too).

A transaction's directories are every ``base_W`` / ``delta_W_W_*`` / ``delete_delta_W_W_*``
of its write id. Removal never goes beyond them, except for partition directories left empty
that the metastore does not know (created by the removed statements).

Through ``orc_acid.fs`` with the table's file system (``TableInfo.fs``). On an object store
a listing is not a snapshot: a late task attempt may upload after the sweep listed; such a
file is of a (write id, statement) whose committed file list does not name it -- a reader
of the committed write id would read it, so a statement's sweep runs after every attempt
ended (Spark's ``Attempts.end``) and an attempt reporting later is swept again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence

from orc_acid import fs as afs
from orc_acid.layout import (format_base, format_delete_delta, format_delta, parse_base,
                             parse_delta)
from orc_acid.writer import ensure_acid_dir

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError


@dataclass(frozen=True)
class Outcome:
    """How a statement ended. ``None`` as the kept sets means aborted: nothing is kept."""
    kept_files: Optional[FrozenSet[str]] = None     # absolute, normalized paths
    kept_dirs: Optional[FrozenSet[str]] = None

    @property
    def aborted(self) -> bool:
        return self.kept_files is None


ABORTED = Outcome()


def statement_dir_names(op: str, write_id: int, statement_id: int) -> List[str]:
    if op == "overwrite":
        return [format_base(write_id)]
    names = [format_delta(write_id, write_id, statement_id)]
    if op in ("update", "delete", "merge"):
        names += [format_delete_delta(write_id, write_id, statement_id),
                  format_delta(write_id, write_id, statement_id + 1)]
    return names


def acid_dirs(info: M.TableInfo, wanted: Callable[[str], bool]) -> List[str]:
    """The directories, in the table dir or its partition dirs, whose names are ``wanted``."""
    depth = len(info.partition_keys)
    out = []

    def walk(d: str, level: int):
        for e, is_dir, _ in afs.list_names(info.fs, d):
            p = os.path.join(d, e)
            if level == depth:
                if wanted(e) and is_dir:
                    out.append(p)
            elif "=" in e and is_dir:
                walk(p, level + 1)
    walk(info.location, 0)
    return out


def write_id_dirs(info: M.TableInfo, write_id: int) -> List[str]:
    """Every directory of ``write_id`` (one transaction's) in the table."""
    def mine(name: str) -> bool:
        b = parse_base(name)
        if b is not None:
            return b.write_id == write_id
        d = parse_delta(name)
        return d is not None and d.min_write_id == write_id == d.max_write_id
    return acid_dirs(info, mine)


def sweep(ms: M.MetastoreConnection, info: M.TableInfo, dir_names: Sequence[str],
          outcome: Outcome) -> None:
    """Remove what the directories named ``dir_names`` hold beyond ``outcome``'s kept files
    and directories (everything, when aborted). Hidden names (``_orc_acid_version``, a
    writer's ``.tmp``) are left in a kept directory."""
    swept = False
    for d in acid_dirs(info, set(dir_names).__contains__):
        d = os.path.normpath(d)
        if outcome.aborted or d not in outcome.kept_dirs:
            _remove(info, d)
            swept = True
            continue
        try:    # another late attempt's sweep may run at the same time
            for name, _, _ in afs.list_names(info.fs, d):
                p = os.path.join(d, name)
                if not name.startswith(("_", ".")) and p not in outcome.kept_files:
                    afs.delete_file(info.fs, p)
        except FileNotFoundError:
            pass
    if swept:
        remove_empty_partition_dirs(ms, info)


def _remove(info: M.TableInfo, d: str) -> None:
    try:
        afs.delete_tree(info.fs, d)
    except OSError:
        pass


def remove_write_id_dirs(ms: M.MetastoreConnection, info: M.TableInfo, write_id: int) -> None:
    for d in write_id_dirs(info, write_id):
        _remove(info, d)
    remove_empty_partition_dirs(ms, info)


def remove_empty_partition_dirs(ms: M.MetastoreConnection, info: M.TableInfo) -> None:
    """Empty partition directories the metastore does not list (a removed statement made
    them) go; registered partitions keep theirs, empty or not. (Object stores have no
    empty directories: nothing to do there.)"""
    if not info.partition_keys or info.fs is not None and not afs.can_rename(info.fs):
        return
    try:
        registered = {os.path.normpath(loc) for _, _, loc in M.list_partitions(ms, info)}
    except Exception:
        return
    if info.fs is not None:
        return    # HDFS: left (a harmless empty directory)
    for root, dirs, files in os.walk(info.location, topdown=False):
        if root == info.location or "=" not in os.path.basename(root):
            continue
        if os.path.normpath(root) in registered:
            continue
        try:    # a late attempt's sweep may be removing the same directories
            if not os.listdir(root):
                os.rmdir(root)
        except OSError:
            pass


def make_empty_bases(info: M.TableInfo, dirs: Sequence[str]) -> None:
    """``base_W`` directories for overwritten partitions that got no rows: they hide the
    older data (a full-ACID one needs its ``_orc_acid_version`` to be read as ACID)."""
    for d in dirs:
        if info.insert_only:
            if info.fs is None:
                os.makedirs(d, exist_ok=True)
            else:
                info.fs.create_dir(d)     # object stores: a marker object
        else:
            ensure_acid_dir(d, info.fs)


def require_own_dirs(info: M.TableInfo, written: Sequence[str],
                     registered: Dict[str, str]) -> None:
    """Statements write partition ``p`` in ``<table location>/p`` (``p`` escaped as Hive
    does). A partition registered at another directory (an ADD PARTITION ... LOCATION, or a
    name escaped differently by an older hive_acid) would never show those files to a
    reader: the commit is refused, and the transaction's files go with its abort."""
    for p in sorted(written):
        at = registered.get(p)
        own = os.path.join(info.location, p)
        if at is not None and os.path.normpath(at) != os.path.normpath(own):
            raise HiveAcidError(
                f"partition {p} of {info.full_name} is at {at}, not at {own}: hive_acid "
                f"writes a partition only in its directory under the table's location")
