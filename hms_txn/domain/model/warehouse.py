"""Default locations and directory housekeeping for managed databases, tables, partitions.

Directories change only after the database transaction that makes them referenced (or
unreferenced) has committed: a catalog change records what it needs in a ``FileChanges``
and the service layer applies it once the commit is done, so a rolled-back change leaves
the file system as it was and a committed one never points at a directory not made yet
(a crash in between leaves at worst an empty or orphaned directory, never lost data).

Locations are stored as Hadoop-style URIs (``file:/abs/path``, ``s3a://bucket/path``,
``abfs://container@account.dfs.core.windows.net/path``), which is what the Java metastore
hands back and what Spark, Hive and pyiceberg all accept. Every location goes through
``orc_acid.fs`` (the project's one file-system layer), configured with the ``fs.*`` keys of
hive-site.xml (``Config.filesystem_options``). On an object store a directory is only a key
prefix: creating one writes a marker object (``create_dir``), deleting one deletes every
object under the prefix (many requests, not atomic: a reader listing meanwhile may see part
of it; the metadata change, committed before, is what readers go by), and a rename copies
every object, not atomically (as Hive's S3A does).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field

from orc_acid import fs as afs
from orc_acid.layout import METADATA_FILE, format_base

log = logging.getLogger(__name__)


def to_uri(path: str) -> str:
    if afs.scheme_of(path) != "file" and "://" in path:
        return path
    return "file:" + os.path.abspath(path)


class Warehouse:
    def __init__(self, root: str, fs_options: dict[str, str] | None = None):
        self.fs_options = dict(fs_options or {})
        self.root = root if "://" in root else os.path.abspath(root)

    def database_location(self, db_name: str) -> str:
        if db_name == "default":
            return to_uri(self.root)
        return to_uri(self.child(self.root, f"{db_name}.db"))

    @staticmethod
    def child(location: str, name: str) -> str:
        return location.rstrip("/") + "/" + name

    def _fs(self, location: str | None):
        """(file system, path) of a location, or None when it is empty or no file system
        of ``orc_acid.fs`` serves it (recorded, never touched)."""
        if not location:
            return None
        try:
            return afs.filesystem_for(location, self.fs_options)
        except afs.FileSystemError as err:
            log.warning("not touching %s: %s", location, err)
            return None

    def mkdirs(self, location: str | None) -> None:
        found = self._fs(location)
        if found:
            fs, path = found
            if fs is None:
                os.makedirs(path, exist_ok=True)
                return
            try:
                fs.create_dir(path, recursive=True)   # object stores: a marker object
            except OSError as err:  # the store's answer; the metadata change stands
                log.warning("could not create %s: %s", location, err)

    def delete(self, location: str | None) -> None:
        found = self._fs(location)
        if found:
            try:
                afs.delete_tree(*found)
            except OSError as err:  # the metadata change stands; leave a trace for operators
                log.warning("could not delete %s: %s", location, err)

    def quick_stats(self, location: str | None) -> dict[str, str] | None:
        """``numFiles``/``totalSize`` of an existing directory, or None.

        The Java metastore's "fast stats" (MetaStoreUtils.populateQuickStats): regular
        files under the directory, recursively, skipping hidden names (``.``/``_``
        prefixes, e.g. Hadoop's ``.crc`` files and ``_SUCCESS``). One recursive listing on
        an object store.
        """
        found = self._fs(location)
        if not found:
            return None
        fs, path = found
        try:
            if not afs.is_dir(fs, path):
                return None
            listed = afs.walk_files(fs, path)
        except OSError as err:
            log.warning("no quick stats for %s: %s", location, err)
            return None
        files = [size for rel, size in listed
                 if not any(p.startswith((".", "_")) for p in rel.split("/"))]
        return {"numFiles": str(len(files)), "totalSize": str(sum(files))}

    def data_files(self, location: str | None) -> list[str]:
        """The files directly under a directory, as URIs under ``location`` (see the
        module function ``data_files``)."""
        return data_files(location, self.fs_options)

    def empty(self, location: str | None) -> None:
        """Delete everything under a directory and keep the directory (made if missing):
        what a truncate leaves of a plain table's or partition's location."""
        found = self._fs(location)
        if found:
            self.delete(location)
            afs.makedirs(*found)

    def remove_if_empty(self, location: str | None) -> None:
        found = self._fs(location)
        if not found or not afs.is_dir(*found) or afs.list_names(*found):
            return
        fs, path = found
        if fs is None:
            os.rmdir(path)
        else:
            fs.delete_dir(path)

    def add_truncate_base(self, location: str | None, write_id: int) -> None:
        """Hive's truncate of a transactional table (``addTruncateBaseFile``): an empty
        ``base_<writeId>`` holding only a ``_metadata_acid`` marker whose data format is
        "truncated". Readers take it as the newest base once the write id commits; the
        cleaner removes what it hides. On an object store the marker is one upload
        (complete or absent); on local disk it is renamed into place."""
        found = self._fs(location)
        if not found:
            return
        fs, path = found
        base = afs.join(path, format_base(write_id))
        afs.makedirs(fs, base)
        marker = afs.join(base, METADATA_FILE)
        data = json.dumps({"thisFileVersion": "0", "dataFormat": "truncated"},
                          separators=(",", ":")).encode()
        if fs is not None:
            afs.write_bytes(fs, marker, data)
            return
        tmp = marker + ".tmp"
        afs.write_bytes(None, tmp, data)
        os.replace(tmp, marker)

    def rename(self, old: str, new: str) -> None:
        src, dst = self._fs(old), self._fs(new)
        if not (src and dst) or src[0] is not dst[0] or not afs.exists(*src):
            return
        fs, src_path, dst_path = src[0], src[1], dst[1]
        parent = dst_path.rsplit("/", 1)[0]
        afs.makedirs(fs, parent)
        if fs is None:
            os.rename(src_path, dst_path)
        else:
            fs.move(src_path, dst_path)


def data_files(location: str | None, fs_options: dict[str, str] | None = None) -> list[str]:
    """The files directly under a directory, as URIs under ``location``, skipping hidden
    names; [] when there are none or no file system serves the location. What Hive's
    DbNotificationListener lists in the CREATE_TABLE and ADD_PARTITION events of a managed
    table created or added over existing data (its ``FileIterator``)."""
    if not location:
        return []
    try:
        fs, path = afs.filesystem_for(location, fs_options or {})
        entries = sorted(afs.list_names(fs, path))
    except (OSError, afs.FileSystemError):
        return []
    return [Warehouse.child(location, name) for name, is_dir, _size in entries
            if not is_dir and not name.startswith((".", "_"))]


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
