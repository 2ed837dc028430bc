"""Iceberg commits, made the way Iceberg's ``HiveTableOperations`` makes them, so that the
Iceberg REST catalog and Thrift clients (Iceberg's and pyiceberg's ``HiveCatalog``) commit
to one table:

1. take the table's EXCLUSIVE lock in the metastore's lock manager (txn-less, as Iceberg
   takes it; waiting behind other holders for up to ``hms_txn.iceberg.lock.timeout``, then
   failing with ``ConcurrentModification``, a 409);
2. read the table under the lock and check the commit's requirements against its current
   metadata (pyiceberg's requirement classes);
3. apply the updates (pyiceberg's ``update_table_metadata``) and write the new metadata
   file, ``NNNNN-<uuid>.metadata.json`` (durably, under a name nobody else can choose);
4. in one database transaction: swap ``metadata_location`` only if it still names the base
   (the compare-and-swap Thrift's ``expected_parameter_key`` does, so a writer that skipped
   the lock cannot be overwritten), write the ALTER_TABLE event with it, and release the
   lock.

A failed commit deletes its metadata file. A commit whose database transaction failed in a
way that leaves its outcome unknown re-reads the table: its pointer says whether it
happened; if even that fails the answer is ``CommitStateUnknown`` (the spec's 500) and the
file is kept, since the table may point at it.

The lock is acquired in a transaction that may commit lazily (``MAY_BE_LAZY``): it only
guards the swap that follows, whose durable commit flushes it along; a power cut before
that loses the lock together with the commit it guarded, which never returned success.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from pydantic import TypeAdapter, ValidationError
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata, TableMetadataV1, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from sqlalchemy.engine import Connection

from hms_txn.common.errors import (AlreadyExists, CommitStateUnknown, ConcurrentModification,
                                   Internal, InvalidInput, MetastoreError, NoSuchObject)
from hms_txn.domain.catalog import iceberg_tables as it
from hms_txn.domain.locks import locks
from hms_txn.domain.model.catalog import Doc, require_database, require_table, table_row
from hms_txn.domain.model.names import check_name
from hms_txn.domain.catalog.tables import Tables
from hms_txn.domain.txn.txn_records import DataOp
from hms_txn.domain.model.warehouse import FileChanges, Warehouse
from hms_txn.service.iceberg.iceberg_metadata import (MAX_FORMAT_VERSION, MetadataFile,
                                                      MetadataFiles, format_error, metadata_version)
from hms_txn.service.units import Durability, UnitOfWork

HOST = socket.gethostname()
AGENT = "hms-txn Iceberg REST catalog"
_REQUIREMENTS = TypeAdapter(list[TableRequirement])
_UPDATES = TypeAdapter(list[TableUpdate])

TableName = tuple[str, str]


@dataclass
class Change:
    """One table's part of a commit, as sent: requirements and updates (JSON documents)."""
    table: TableName
    requirements: list[dict]
    updates: list[dict]


@dataclass
class Committed:
    """A table as a commit left it: its metadata file (location None: staged, not
    committed)."""
    location: str | None
    file: MetadataFile


@dataclass
class _Plan:
    change: Change
    owner: str
    base: MetadataFile | None        # None: the commit creates the table
    new: MetadataFile | None = None  # None: nothing changed
    files: FileChanges = field(default_factory=FileChanges)
    committed: bool = False          # the table points at ``new``


def parse_changes(requirements: Any, updates: Any) -> tuple[list, list]:
    """pyiceberg's requirement and update objects of a commit (InvalidInput for anything
    the spec does not define: the spec's 400 for unknown requirements and updates)."""
    try:
        return (_REQUIREMENTS.validate_python(requirements or []),
                _UPDATES.validate_python(updates or []))
    except ValidationError as err:
        raise InvalidInput(f"invalid commit: {format_error(err)}") from None


def pyiceberg_call(what: str, call: Callable[[], Any]) -> Any:
    """Run pyiceberg's metadata code: its refusals as InvalidInput (a failed requirement as
    ConcurrentModification)."""
    try:
        return call()
    except CommitFailedException as err:
        raise ConcurrentModification(f"Requirement failed: {err}") from None
    except MetastoreError:
        raise
    except ValidationError as err:
        raise InvalidInput(f"{what}: {format_error(err)}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise InvalidInput(f"{what}: {err}") from None
    except Exception as err:   # pyiceberg's ValidationError, ResolveError, ...
        if type(err).__module__.startswith("pyiceberg"):
            raise InvalidInput(f"{what}: {err}") from None
        raise


class IcebergCommits:
    """Table creation and commits of the Iceberg REST catalog."""

    def __init__(self, units: UnitOfWork, tables: Tables, warehouse: Warehouse,
                 files: MetadataFiles, *, lock_timeout: float = 180.0):
        self.units = units
        self.tables = tables
        self.warehouse = warehouse
        self.files = files
        self.lock_timeout = lock_timeout

    # -- create ---------------------------------------------------------------------------

    def create(self, table: TableName, request: dict, user: str) -> Committed:
        """createTable: a new table at metadata version 0, or (``stage-create``) the
        metadata a create transaction starts from, nothing stored."""
        db, name = table
        check_name("table", name)      # before anything is written under its location
        props = {str(k): str(v) for k, v in (request.get("properties") or {}).items()}
        version = props.get("format-version", "2")
        if not version.isdigit() or not 1 <= int(version) <= MAX_FORMAT_VERSION:
            raise InvalidInput(f"format-version {version}: hms-txn's Iceberg REST catalog "
                               f"creates format versions 1 and 2")
        db_doc = self.units.read(lambda c: require_database(c, db))
        if self.units.read(lambda c: table_row(c, db, name)) is not None:
            raise AlreadyExists(f"Table already exists: {db}.{name}")
        location = (request.get("location") or "").rstrip("/") or \
            self.warehouse.child(db_doc["locationUri"], name)

        def build() -> TableMetadata:
            schema = Schema.model_validate(request.get("schema"))
            spec = (PartitionSpec.model_validate(request["partition-spec"])
                    if request.get("partition-spec") else UNPARTITIONED_PARTITION_SPEC)
            order = (SortOrder.model_validate(request["write-order"])
                     if request.get("write-order") else UNSORTED_SORT_ORDER)
            return new_table_metadata(schema, spec, order, location, dict(props))

        metadata = pyiceberg_call("invalid table", build)
        if request.get("stage-create"):
            raw = metadata.model_dump_json(exclude_none=True).encode()
            return Committed(None, MetadataFile("", raw, json.loads(raw), metadata))
        new_location = _new_location(metadata, 0)
        written = self.files.write(metadata, new_location)
        doc = it.new_table_doc(db, name, user, written.doc, new_location)
        try:
            self.units.write(lambda c: self.tables.create(c, doc)).apply(self.warehouse)
        except MetastoreError:
            self.files.delete(new_location)
            raise
        return Committed(new_location, written)

    # -- commit ---------------------------------------------------------------------------

    def commit(self, change: Change, user: str) -> Committed:
        return self.commit_all([change], user)[0]

    def commit_all(self, changes: Sequence[Change], user: str) -> list[Committed]:
        """Commit changes to one or more tables atomically: all or none."""
        names = [c.table for c in changes]
        if len(set(names)) != len(names):
            raise InvalidInput("a transaction names a table more than once")
        if not changes:
            return []
        parsed = [parse_changes(c.requirements, c.updates) for c in changes]
        lock_id, docs = self._lock(names, user)
        released = False
        plans: list[_Plan] = []
        try:
            for change, (requirements, updates) in zip(changes, parsed):
                plans.append(self._plan(change, user, docs[change.table], requirements,
                                        updates))
            if any(p.new is not None for p in plans):
                try:
                    self.units.write(lambda c: self._swap(c, plans, lock_id))
                except MetastoreError:
                    raise
                except Exception as err:
                    self._settle(plans, err)
                released = True
                for plan in plans:
                    plan.files.apply(self.warehouse)
            return [Committed(p.new.location, p.new) if p.new is not None
                    else Committed(p.base.location, p.base) for p in plans]
        finally:
            self._discard(plans)
            if not released:
                self._unlock(lock_id)

    def register(self, table: TableName, entry: MetadataFile, overwrite: bool,
                 user: str) -> Committed:
        """registerTable: point a new table (or, with ``overwrite``, an existing Iceberg
        table, under its lock) at an existing metadata file."""
        db, name = table
        lock_id, docs = self._lock([table], user)
        released = False
        try:
            doc = docs[table]
            if doc is not None and not (overwrite and it.is_iceberg_table(doc)):
                raise AlreadyExists(f"Table already exists: {db}.{name}")

            def work(conn: Connection) -> FileChanges:
                if doc is None:
                    files = self.tables.create(
                        conn, it.new_table_doc(db, name, user, entry.doc, entry.location))
                else:
                    _, current = require_table(conn, db, name, for_update=True)
                    files = self.tables.alter(
                        conn, db, name,
                        it.committed_table_doc(current, None, entry.doc, entry.location),
                        expected=(it.METADATA_LOCATION, it.metadata_location(doc)))
                locks.unlock(conn, lock_id)
                return files

            files = self.units.write(work)
            released = True
            files.apply(self.warehouse)
            return Committed(entry.location, entry)
        finally:
            if not released:
                self._unlock(lock_id)

    def _plan(self, change: Change, owner: str, doc: Doc | None, requirements: list,
              updates: list) -> _Plan:
        db, name = change.table
        if doc is not None and not it.is_iceberg_table(doc):
            raise NoSuchObject(f"Not an iceberg table: {db}.{name}")
        if doc is None and not requirements_create(requirements):
            raise NoSuchObject(f"Table does not exist: {db}.{name}")
        base = self.files.read(it.metadata_location(doc)) if doc is not None else None
        base_model = self.files.require_round_trip(base) if base is not None else None
        for requirement in requirements:
            pyiceberg_call("requirement", lambda r=requirement: r.validate(base_model))
        plan = _Plan(change, owner, base)
        new = pyiceberg_call("invalid update", lambda: update_table_metadata(
            base_metadata=base_model if base_model is not None else _empty_metadata(),
            updates=tuple(updates), enforce_validation=base_model is None,
            metadata_location=base.location if base is not None else None))
        if base_model is not None and new == base_model:
            return plan
        version = metadata_version(base.location) + 1 if base is not None else 0
        plan.new = self.files.write(new, _new_location(new, version))
        return plan

    def _swap(self, conn: Connection, plans: list[_Plan], lock_id: int) -> None:
        """The commit's one transaction: each table's pointer swapped only if it still names
        the base, its event written; the lock released."""
        for plan in plans:
            if plan.new is None:
                continue
            db, name = plan.change.table
            if plan.base is None:
                doc = it.new_table_doc(db, name, plan.owner, plan.new.doc, plan.new.location)
                plan.files = self.tables.create(conn, doc)
                continue
            _, current = require_table(conn, db, name, for_update=True)
            doc = it.committed_table_doc(current, plan.base.doc, plan.new.doc, plan.new.location)
            plan.files = self.tables.alter(conn, db, name, doc,
                                           expected=(it.METADATA_LOCATION, plan.base.location))
        locks.unlock(conn, lock_id)
        for plan in plans:
            plan.committed = plan.new is not None

    def _settle(self, plans: list[_Plan], err: Exception) -> None:
        """After an unexpected failure of the swap: returns when the tables' pointers show
        it committed (the lock went with it); raises when it did not, or when that cannot be
        told (then its files are kept: the tables may point at them)."""
        changed = [p for p in plans if p.new is not None]
        try:
            found = self.units.read(lambda c: {
                p.change.table: it.metadata_location(json_doc(table_row(c, *p.change.table)))
                for p in changed})
        except Exception:
            for plan in changed:
                plan.committed = True       # unknown: keep the files
            raise CommitStateUnknown(
                f"Commit state unknown: the database failed during the commit ({err}) and "
                f"the table cannot be read back") from err
        if all(found[p.change.table] == p.new.location for p in changed):
            for plan in changed:
                plan.committed = True
            return
        raise Internal(f"the commit failed and changed nothing: {type(err).__name__}: "
                       f"{err}") from err

    def _discard(self, plans: list[_Plan]) -> None:
        """Delete the metadata files of a commit that did not happen."""
        for plan in plans:
            if plan.new is not None and not plan.committed:
                self.files.delete(plan.new.location)

    # -- the table lock -------------------------------------------------------------------

    def _lock(self, tables: list[TableName], user: str) -> tuple[int, dict]:
        """Acquire the EXCLUSIVE lock of every table (one request: all or none) and read
        them under it: (lock id, table -> document or None)."""
        request = locks.LockRequest(
            components=[locks.LockComponent(
                type=locks.LockType.EXCLUSIVE, level=locks.LockLevel.TABLE, dbname=db,
                tablename=name, operation_type=DataOp.NO_TXN, is_transactional=False)
                for db, name in sorted(set(tables))],
            user=user, hostname=HOST, agent_info=AGENT)

        def read(conn: Connection) -> dict:
            return {t: json_doc(table_row(conn, *t)) for t in tables}

        def first(conn: Connection):
            result = locks.lock(conn, request)
            return result, read(conn) if result.state == locks.LockState.ACQUIRED else None

        result, docs = self.units.write(first, Durability.MAY_BE_LAZY)
        if result.state == locks.LockState.NOT_ACQUIRED:
            raise ConcurrentModification(result.error_message or "lock not acquired")
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.02
        while docs is None:
            if time.monotonic() >= deadline:
                self._unlock(result.lock_id)
                what = ", ".join(f"{db}.{name}" for db, name in tables)
                raise ConcurrentModification(
                    f"Timed out after {self.lock_timeout:g} s waiting for the lock on {what}: "
                    f"another commit holds it")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

            def again(conn: Connection, lock_id: int = result.lock_id):
                checked = locks.check_lock(conn, lock_id)
                return read(conn) if checked.state == locks.LockState.ACQUIRED else None

            docs = self.units.write(again, Durability.MAY_BE_LAZY)
        return result.lock_id, docs

    def _unlock(self, lock_id: int) -> None:
        try:
            self.units.write(lambda c: locks.unlock(c, lock_id))
        except Exception:   # the reaper removes it after hive.txn.timeout
            pass


def requirements_create(requirements: list) -> bool:
    return any(getattr(r, "type", None) == "assert-create" for r in requirements)


def json_doc(row) -> Doc | None:
    return None if row is None else json.loads(row.doc)


def _empty_metadata() -> TableMetadata:
    """What a create transaction's updates start from (as pyiceberg's catalogs do: version
    1, upgraded by the transaction's own upgrade-format-version)."""
    return TableMetadataV1.model_construct(last_column_id=-1, schema=Schema())


def _new_location(metadata: TableMetadata, version: int) -> str:
    provider = load_location_provider(metadata.location, metadata.properties)
    return provider.new_table_metadata_file_location(version)
