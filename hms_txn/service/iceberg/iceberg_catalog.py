"""The Iceberg REST catalog's namespaces and table reads, drops and renames, over the same
databases and tables the Thrift door serves (``domain.catalog.iceberg_tables`` says how they map).

Namespaces are databases: one level, as in Hive (a longer namespace does not exist; creating
one is refused). Tables are the metastore's Iceberg tables: listings leave Hive's own tables
out, and loading one that is not an Iceberg table answers that no such Iceberg table exists.
Every change goes through the domain's ``Databases``/``Tables``, so it writes the same
notification events as the Thrift calls (the metadata cache and Impala see it).

A drop with purge deletes what Iceberg's ``HiveCatalog`` deletes (``CatalogUtil.dropTableData``):
the files every snapshot's manifests list (data and delete files; unless ``gc.enabled`` is
false), the manifests, the manifest lists, the previous metadata files, the statistics files
and the current metadata file, after the table's row is gone; a file that cannot be deleted
is logged, the drop stands.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyiceberg.table.metadata import TableMetadata

from orc_acid import fs as afs
from hms_txn.common.errors import (AlreadyExists, InvalidInput, InvalidOperation,
                                   NoSuchNamespace, NoSuchObject)
from hms_txn.domain.model import catalog
from hms_txn.domain.catalog import iceberg_tables as it
from hms_txn.domain.cache.cache import MetadataCache
from hms_txn.domain.model.catalog import Doc, database_row, require_table, table_row
from hms_txn.domain.catalog.databases import Databases
from hms_txn.domain.model.names import lower
from hms_txn.domain.catalog.tables import Tables
from hms_txn.domain.model.warehouse import Warehouse
from hms_txn.service.iceberg.iceberg_commits import Committed, IcebergCommits, pyiceberg_call
from hms_txn.service.iceberg.iceberg_metadata import MetadataFile, MetadataFiles
from hms_txn.service.units import UnitOfWork

log = logging.getLogger(__name__)


def database_of(namespace: list[str]) -> str:
    """The database a namespace names (NoSuchNamespace for a multi-level one)."""
    if len(namespace) != 1 or not namespace[0]:
        raise NoSuchNamespace(f"Namespace does not exist: {'.'.join(namespace)} "
                              f"(Hive's namespaces are databases: one level)")
    return lower(namespace[0])


class IcebergNamespaces:
    """listNamespaces, createNamespace, loadNamespaceMetadata, namespaceExists,
    updateProperties, dropNamespace."""

    def __init__(self, units: UnitOfWork, databases: Databases, warehouse: Warehouse):
        self.units = units
        self.databases = databases
        self.warehouse = warehouse

    def list(self, parent: list[str] | None) -> list[str]:
        if parent:
            self.load(parent)           # databases have no namespaces under them
            return []
        return self.units.read(lambda c: catalog.list_databases(c))

    def create(self, namespace: list[str], properties: dict[str, str], user: str) -> dict:
        if len(namespace) != 1 or not namespace[0]:
            raise InvalidInput(f"Cannot create namespace {'.'.join(namespace) or '(empty)'}: "
                               f"Hive's namespaces are databases, one level")
        doc = it.database_doc(namespace[0], properties, user)
        try:
            self.units.write(lambda c: self.databases.create(c, doc)).apply(self.warehouse)
        except AlreadyExists:
            raise AlreadyExists(f"Namespace already exists: {namespace[0]}") from None
        return self.load(namespace)

    def _database(self, namespace: list[str]) -> Doc:
        name = database_of(namespace)
        row = self.units.read(lambda c: database_row(c, name))
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {name}")
        return json.loads(row.doc)

    def load(self, namespace: list[str]) -> dict[str, str]:
        return it.namespace_properties(self._database(namespace))

    def update(self, namespace: list[str], updates: dict[str, str],
               removals: list[str]) -> tuple[list[str], list[str], list[str]]:
        """(updated, removed, missing) keys."""
        name = database_of(namespace)

        def work(conn):
            row = database_row(conn, name)
            if row is None:
                raise NoSuchNamespace(f"Namespace does not exist: {name}")
            doc, updated, removed, missing = it.apply_namespace_changes(
                json.loads(row.doc), updates, removals)
            if updated or removed:
                self.databases.alter(conn, name, doc)
            return updated, removed, missing

        return self.units.write(work)

    def drop(self, namespace: list[str]) -> None:
        name = database_of(namespace)
        if name == "default":
            raise InvalidInput("the default database cannot be dropped")

        def work(conn):
            if database_row(conn, name) is None:
                raise NoSuchNamespace(f"Namespace does not exist: {name}")
            return self.databases.drop(conn, name, delete_data=False, cascade=False)

        self.units.write(work).apply(self.warehouse)


class IcebergTables:
    """listTables, loadTable, tableExists, dropTable (with purge), renameTable,
    registerTable, reportMetrics."""

    def __init__(self, units: UnitOfWork, cache: MetadataCache, tables: Tables,
                 files: MetadataFiles, commits: IcebergCommits):
        self.units = units
        self.cache = cache
        self.tables = tables
        self.files = files
        self.commits = commits

    def list(self, namespace: list[str]) -> list[str]:
        name = database_of(namespace)

        def read(conn):
            if database_row(conn, name) is None:
                raise NoSuchNamespace(f"Namespace does not exist: {name}")
            return [d["tableName"] for d in catalog.get_tables(conn, name, None)
                    if it.is_iceberg_table(d)]

        return self.units.read(read)

    def _doc(self, namespace: list[str], table: str) -> Doc:
        db, name = database_of(namespace), lower(table)
        try:
            doc = self.cache.get_table(db, name).doc
        except NoSuchObject:
            raise NoSuchObject(f"Table does not exist: {db}.{name}") from None
        if not it.is_iceberg_table(doc):
            raise NoSuchObject(f"Not an iceberg table: {db}.{name}")
        return doc

    def load(self, namespace: list[str], table: str) -> Committed:
        """The table's current metadata file (from the metadata cache's table and the
        metadata files' own cache: no database or file read when both are warm)."""
        location = it.metadata_location(self._doc(namespace, table))
        return Committed(location, self.files.read(location))

    def exists(self, namespace: list[str], table: str) -> None:
        self._doc(namespace, table)

    def drop(self, namespace: list[str], table: str, purge: bool) -> None:
        db, name = database_of(namespace), lower(table)
        last: TableMetadata | None = None
        if purge:
            try:
                entry = self.files.read(it.metadata_location(self._doc(namespace, table)))
                last = self.files.model(entry)
                last_location = entry.location
            except InvalidInput as err:   # as Iceberg: drop without purging what it can't read
                log.warning("dropping %s.%s without purging its files: %s", db, name, err)

        def work(conn):
            tbl_id, doc = require_table(conn, db, name, for_update=True)
            if not it.is_iceberg_table(doc):
                raise NoSuchObject(f"Not an iceberg table: {db}.{name}")
            self.tables.drop_rows(conn, tbl_id, doc, delete_data=False)

        self.units.write(work)
        if last is not None:
            purge_files(self.files, last, last_location)

    def rename(self, source: tuple[list[str], str], target: tuple[list[str], str]) -> None:
        db, name = database_of(source[0]), lower(source[1])
        try:
            new_db = database_of(target[0])
        except NoSuchNamespace:
            raise NoSuchNamespace(f"Namespace does not exist: {'.'.join(target[0])}") from None
        new_name = lower(target[1])

        def work(conn):
            _, doc = require_table(conn, db, name, for_update=True)
            if not it.is_iceberg_table(doc):
                raise NoSuchObject(f"Not an iceberg table: {db}.{name}")
            if database_row(conn, new_db) is None:
                raise NoSuchNamespace(f"Namespace does not exist: {new_db}")
            if table_row(conn, new_db, new_name) is not None:
                raise AlreadyExists(f"Table already exists: {new_db}.{new_name}")
            renamed = dict(doc, dbName=new_db, tableName=new_name)
            try:
                return self.tables.alter(conn, db, name, renamed)
            except InvalidOperation as err:
                raise InvalidInput(str(err)) from None

        try:
            self.units.write(work)
        except NoSuchObject as err:
            if isinstance(err, NoSuchNamespace):
                raise
            raise NoSuchObject(f"Table does not exist: {db}.{name}") from None

    def register(self, namespace: list[str], table: str, location: str, overwrite: bool,
                 user: str) -> Committed:
        """registerTable: a table whose current metadata is the file at ``location``."""
        db, name = database_of(namespace), lower(table)
        if self.units.read(lambda c: database_row(c, db)) is None:
            raise NoSuchNamespace(f"Namespace does not exist: {db}")
        entry = self.files.read(location)
        pyiceberg_call("invalid metadata file", lambda: self.files.model(entry))
        return self.commits.register((db, name), entry, overwrite, user)

    def report_metrics(self, namespace: list[str], table: str, report: dict[str, Any]) -> None:
        """reportMetrics: accepted for an existing table and logged (at DEBUG)."""
        self.exists(namespace, table)
        log.debug("metrics report for %s.%s: %s", namespace, table, report.get("report-type"))


def referenced_only(entry: MetadataFile) -> bytes:
    """The metadata with only the snapshots its branches and tags reference (loadTable's
    ``snapshots=refs``)."""
    doc = dict(entry.doc)
    wanted = {ref.get("snapshot-id") for ref in (doc.get("refs") or {}).values()}
    if doc.get("current-snapshot-id") not in (None, -1):
        wanted.add(doc["current-snapshot-id"])
    doc["snapshots"] = [s for s in doc.get("snapshots") or [] if s.get("snapshot-id") in wanted]
    return json.dumps(doc).encode()


def purge_files(files: MetadataFiles, metadata: TableMetadata, location: str) -> int:
    """Delete a dropped table's files as Iceberg's ``CatalogUtil.dropTableData`` does;
    returns how many were deleted."""
    io = files.file_io()
    lists: set[str] = set()
    manifests: dict[str, Any] = {}
    for snapshot in metadata.snapshots:
        if snapshot.manifest_list:
            lists.add(snapshot.manifest_list)
            try:
                for manifest in snapshot.manifests(io):
                    manifests[manifest.manifest_path] = manifest
            except Exception as err:
                log.warning("purge: cannot read manifest list %s: %s", snapshot.manifest_list, err)
    doomed: list[str] = []
    gc = str(metadata.properties.get("gc.enabled", "true")).lower() != "false"
    if gc:     # data files only when no other table may share them
        for manifest in manifests.values():
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            except Exception as err:
                log.warning("purge: cannot read manifest %s: %s", manifest.manifest_path, err)
                continue
            doomed.extend(e.data_file.file_path for e in entries)
    doomed.extend(manifests)
    doomed.extend(lists)
    doomed.extend(entry.metadata_file for entry in metadata.metadata_log)
    doomed.extend(s.statistics_path for s in metadata.statistics)
    doomed.extend(s.statistics_path for s in getattr(metadata, "partition_statistics", []) or [])
    doomed.append(location)
    deleted = 0
    for path in dict.fromkeys(doomed):
        try:
            afs.delete_file(*afs.filesystem_for(path, files.fs_options))
            deleted += 1
        except FileNotFoundError:
            pass
        except (OSError, afs.FileSystemError) as err:
            log.warning("purge: cannot delete %s: %s", path, err)
    return deleted
