"""Default locations and directory housekeeping for managed databases, tables, partitions.

Directories change only after the database transaction that makes them referenced (or
unreferenced) has committed: a catalog change records what it needs in a ``FileChanges``
and the service layer applies it once the commit is done, so a rolled-back change leaves
the file system as it was and a committed one never points at a directory not made yet
(a crash in between leaves at worst an empty or orphaned directory, never lost data).

Locations are stored as Hadoop-style URIs (``file:/abs/path``), which is what the Java
metastore hands back for a local warehouse and what Spark, Hive and pyiceberg all accept.
Only local (``file``) locations are created or deleted here; locations on other file
systems are recorded but never touched, because the engines own those file systems.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field

# a location's directory on disk, or None when it is not local
from orc_acid.layout import METADATA_FILE, format_base, location_path as local_path

log = logging.getLogger(__name__)


def to_uri(path: str) -> str:
    return "file:" + os.path.abspath(path)


class Warehouse:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)

    def database_location(self, db_name: str) -> str:
        if db_name == "default":
            return to_uri(self.root)
        return to_uri(os.path.join(self.root, f"{db_name}.db"))

    @staticmethod
    def child(location: str, name: str) -> str:
        return location.rstrip("/") + "/" + name

    @staticmethod
    def mkdirs(location: str | None) -> None:
        path = local_path(location)
        if path:
            os.makedirs(path, exist_ok=True)

    @staticmethod
    def delete(location: str | None) -> None:
        path = local_path(location)
        if path and os.path.exists(path):
            try:
                shutil.rmtree(path)
            except OSError as err:  # the metadata change stands; leave a trace for operators
                log.warning("could not delete %s: %s", path, err)

    @staticmethod
    def quick_stats(location: str | None) -> dict[str, str] | None:
        """``numFiles``/``totalSize`` of an existing local directory, or None.

        The Java metastore's "fast stats" (MetaStoreUtils.populateQuickStats): regular
        files under the directory, recursively, skipping hidden names (``.``/``_``
        prefixes, e.g. Hadoop's ``.crc`` files and ``_SUCCESS``).
        """
        path = local_path(location)
        if not path or not os.path.isdir(path):
            return None
        count = size = 0
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            for name in files:
                if name.startswith((".", "_")):
                    continue
                try:
                    size += os.path.getsize(os.path.join(root, name))
                except OSError:
                    continue
                count += 1
        return {"numFiles": str(count), "totalSize": str(size)}

    @staticmethod
    def data_files(location: str | None) -> list[str]:
        """The files directly under a local directory, as URIs under ``location``, skipping
        hidden names; [] when there are none or the location is not local. What Hive's
        DbNotificationListener lists in the CREATE_TABLE and ADD_PARTITION events of a
        managed table created or added over existing data (its ``FileIterator``)."""
        path = local_path(location)
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name) if path else []
        except OSError:
            return []
        return [Warehouse.child(location, e.name) for e in entries
                if not e.name.startswith((".", "_")) and e.is_file()]

    @staticmethod
    def empty(location: str | None) -> None:
        """Delete everything under a local directory and keep the directory (made if
        missing): what a truncate leaves of a plain table's or partition's location."""
        path = local_path(location)
        if not path:
            return
        Warehouse.delete(location)
        os.makedirs(path, exist_ok=True)

    @staticmethod
    def remove_if_empty(location: str | None) -> None:
        path = local_path(location)
        if path and os.path.isdir(path) and not os.listdir(path):
            os.rmdir(path)

    @staticmethod
    def add_truncate_base(location: str | None, write_id: int) -> None:
        """Hive's truncate of a transactional table (``addTruncateBaseFile``): an empty
        ``base_<writeId>`` holding only a ``_metadata_acid`` marker whose data format is
        "truncated". Readers take it as the newest base once the write id commits; the
        cleaner removes what it hides."""
        path = local_path(location)
        if not path:
            return
        base = os.path.join(path, format_base(write_id))
        os.makedirs(base, exist_ok=True)
        marker = os.path.join(base, METADATA_FILE)
        tmp = marker + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"thisFileVersion": "0", "dataFormat": "truncated"}, fh,
                      separators=(",", ":"))
        os.replace(tmp, marker)

    @staticmethod
    def rename(old: str, new: str) -> None:
        src, dst = local_path(old), local_path(new)
        if src and dst and os.path.exists(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.rename(src, dst)


@dataclass
class FileChanges:
    """Directory changes a catalog change asks for, applied after its commit (in order:
    creations, renames, deletions, emptied directories, directories removed if empty)."""
    create: list[str] = field(default_factory=list)
    rename: list[tuple[str, str]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    remove_if_empty: list[str] = field(default_factory=list)

    def apply(self, warehouse: "Warehouse") -> None:
        for location in self.create:
            warehouse.mkdirs(location)
        for src, dst in self.rename:
            warehouse.rename(src, dst)
        for location in self.delete:
            warehouse.delete(location)
        for location in self.empty:
            warehouse.empty(location)
        for location in self.remove_if_empty:
            warehouse.remove_if_empty(location)
