"""Creating, altering and dropping tables (see ``catalog`` for the stored form).

Each change runs on the caller's connection, writes its notification event there, and
returns the directory changes to make once it has committed (``warehouse.FileChanges``).
"""

from __future__ import annotations

import copy
import json

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from hms_txn.common.errors import (AlreadyExists, ConcurrentModification, InvalidObject,
                                   InvalidOperation, Refused)
from hms_txn.domain.stats import column_stats
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.catalog.constraints import Constraints, delete_table_rows
from hms_txn.domain.catalog.plain_form import stored_table
from hms_txn.domain.model.catalog import (DDL_TIME, EXTERNAL, MANAGED, TABLE_TYPES, VIEW, Doc,
                                          database_row, dumps, is_external, is_true, now_s,
                                          require_database, require_table, table_row)
from hms_txn.domain.model.warehouse import FileChanges, Warehouse
from hms_txn.store.schema import partitions, tbls


class Tables:
    """Table changes. ``messages`` builds their notification events as Hive 4 writes them
    (``event_messages``; the server gives it, with the wire format's ``object_json``: the
    domain does not know the wire format); ``constraints`` stores the constraints a table is
    created with."""

    def __init__(self, warehouse: Warehouse, messages: em.MessageContext,
                 constraints: Constraints | None = None):
        self.warehouse = warehouse
        self.messages = messages
        self.constraints = constraints

    def _log(self, conn: Connection, entry: em.LogEntry | None) -> None:
        notifications.append(conn, self.messages.message_format, entry)

    def _prepare(self, conn: Connection, table: Doc) -> Doc:
        """Validate a new table document and fill in what the server owns."""
        doc = copy.deepcopy(stored_table(table, None))
        doc["dbName"] = db = names.check_name("database", doc.get("dbName"))
        doc["tableName"] = names.check_name("table", doc.get("tableName"))
        db_doc = require_database(conn, db)
        sd = doc.get("sd")
        if not sd:
            raise InvalidObject(f"table {db}.{doc['tableName']} has no storage descriptor")
        ttype = doc.get("tableType") or MANAGED
        if is_true((doc.get("parameters") or {}).get("EXTERNAL")):
            ttype = EXTERNAL
        if ttype not in TABLE_TYPES:
            raise InvalidObject(f"unknown table type {ttype!r} (one of {', '.join(sorted(TABLE_TYPES))})")
        doc["tableType"] = ttype
        label = f"table {db}.{doc['tableName']}"
        names.check_columns(label, sd.get("cols"))
        keys = doc.get("partitionKeys") or []
        names.check_columns(label + " (partition keys)", keys)
        col_names = {c["name"].lower() for c in sd.get("cols") or []}
        for key in keys:
            key["name"] = key["name"].lower()
            if key["name"] in col_names:
                raise InvalidObject(f"{label}: partition key {key['name']} is also a column")
        doc["partitionKeys"] = keys
        params = dict(doc.get("parameters") or {})
        params[DDL_TIME] = str(now_s())
        doc["parameters"] = params
        doc["createTime"] = doc.get("createTime") or now_s()
        doc.setdefault("lastAccessTime", 0)
        doc.setdefault("retention", 0)
        doc["catName"] = doc.get("catName") or "hive"
        if not sd.get("location") and ttype != VIEW:
            sd["location"] = self.warehouse.child(db_doc["locationUri"], doc["tableName"])
        return doc

    def create(self, conn: Connection, table: Doc, *,
               constraints: dict[str, list[Doc]] | None = None) -> FileChanges:
        """Create a table; ``constraints`` (documents by kind, see ``domain.catalog.constraints``)
        are added in the same transaction, their events after CREATE_TABLE."""
        doc = self._prepare(conn, table)
        db, name = doc["dbName"], doc["tableName"]
        if table_row(conn, db, name) is not None:
            raise AlreadyExists(f"table {db}.{name} already exists")
        try:
            result = conn.execute(insert(tbls).values(
                db_name=db, tbl_name=name, tbl_type=doc["tableType"], doc=dumps(doc)))
        except IntegrityError:
            raise AlreadyExists(f"table {db}.{name} already exists") from None
        doc["id"] = result.inserted_primary_key[0]
        conn.execute(update(tbls).where(tbls.c.tbl_id == doc["id"]).values(doc=dumps(doc)))
        self._log(conn, em.create_table(self.messages, doc,
                                        self.warehouse.data_files(doc["sd"].get("location"))))
        if constraints:
            self.constraints.add_for_new_table(conn, doc["catName"], constraints)
        if doc["tableType"] == VIEW:
            return FileChanges()
        return FileChanges(create=[doc["sd"].get("location")])

    def alter(self, conn: Connection, db: str, name: str, new: Doc, *,
              cascade: bool = False, valid_write_ids: str | None = None,
              expected: tuple[str, str] | None = None) -> FileChanges:
        """Replace a table's definition. ``expected`` (key, value): only if the stored
        table's parameter ``key`` still has ``value`` (Hive 4's ``expected_parameter_key``
        and ``_value``: a compare-and-swap, checked on the row this transaction holds for
        update, so no other writer can change it in between); ``ConcurrentModification``
        otherwise, with Hive's text (Iceberg's clients recognise it)."""
        db, name = names.lower(db), names.lower(name)
        files = FileChanges()
        tbl_id, old = require_table(conn, db, name, for_update=True)
        if expected is not None:
            _check_expected(old, new, *expected)
        doc = copy.deepcopy(stored_table(new, old))
        if not doc.get("sd"):
            raise InvalidOperation(f"new definition of table {db}.{name} has no storage descriptor")
        new_db = names.check_name("database", doc.get("dbName") or db)
        new_name = names.check_name("table", doc.get("tableName") or name)
        doc["dbName"], doc["tableName"] = new_db, new_name
        label = f"table {new_db}.{new_name}"
        try:
            names.check_columns(label, doc["sd"].get("cols"))
        except InvalidObject as err:
            raise InvalidOperation(str(err)) from None
        old_keys = [k["name"].lower() for k in old.get("partitionKeys") or []]
        new_keys = [k["name"].lower() for k in doc.get("partitionKeys") or []]
        if old_keys != new_keys:
            raise InvalidOperation(f"the partition keys of table {db}.{name} cannot be changed")
        for key in doc.get("partitionKeys") or []:
            key["name"] = key["name"].lower()
        ttype = doc.get("tableType") or old.get("tableType") or MANAGED
        if is_true((doc.get("parameters") or {}).get("EXTERNAL")):
            ttype = EXTERNAL
        elif ttype == EXTERNAL and str((doc.get("parameters") or {}).get("EXTERNAL", "")).upper() == "FALSE":
            ttype = MANAGED
        doc["tableType"] = ttype
        doc["createTime"] = old.get("createTime")
        doc["id"] = tbl_id
        doc["catName"] = old.get("catName", "hive")
        params = dict(doc.get("parameters") or {})
        params[DDL_TIME] = str(now_s())
        doc["parameters"] = params
        if (new_db, new_name) != (db, name):
            if database_row(conn, new_db) is None:
                raise InvalidOperation(f"cannot rename {db}.{name}: database {new_db} does not exist")
            if table_row(conn, new_db, new_name) is not None:
                raise InvalidOperation(f"cannot rename {db}.{name}: table {new_db}.{new_name} already exists")
            self._relocate_renamed(conn, tbl_id, old, doc, files)
        elif not doc["sd"].get("location"):
            doc["sd"]["location"] = old["sd"].get("location")
        column_stats.table_altered(conn, tbl_id, old, doc, valid_write_ids, cascade=cascade)
        conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(
            db_name=new_db, tbl_name=new_name, tbl_type=ttype, doc=dumps(doc)))
        if cascade and old_keys:
            _cascade_columns(conn, tbl_id, doc)
        self._log(conn, em.alter_table(self.messages, old, doc, write_id=doc.get("writeId")))
        return files

    def _relocate_renamed(self, conn: Connection, tbl_id: int, old: Doc, doc: Doc,
                          files: FileChanges) -> None:
        """A managed table at its default location moves with its name, partitions too."""
        old_loc = old["sd"].get("location")
        new_loc = doc["sd"].get("location")
        if old.get("tableType") != MANAGED or (new_loc and new_loc != old_loc):
            return
        old_db_doc = require_database(conn, old["dbName"])
        default_old = self.warehouse.child(old_db_doc["locationUri"], old["tableName"])
        if old_loc != default_old:
            doc["sd"]["location"] = old_loc
            return
        new_db_doc = require_database(conn, doc["dbName"])
        target = self.warehouse.child(new_db_doc["locationUri"], doc["tableName"])
        doc["sd"]["location"] = target
        files.rename.append((old_loc, target))
        rows = conn.execute(select(partitions.c.part_id, partitions.c.doc)
                            .where(partitions.c.tbl_id == tbl_id)).all()
        for row in rows:
            part = json.loads(row.doc)
            part["dbName"], part["tableName"] = doc["dbName"], doc["tableName"]
            loc = (part.get("sd") or {}).get("location") or ""
            if loc.startswith(old_loc + "/"):
                part["sd"]["location"] = target + loc[len(old_loc):]
            conn.execute(update(partitions).where(partitions.c.part_id == row.part_id)
                         .values(doc=dumps(part)))

    def drop_rows(self, conn: Connection, tbl_id: int, table: Doc,
                  delete_data: bool) -> list[str]:
        """Delete a table's rows (with its DROP_TABLE event); returns the locations to
        remove after the commit."""
        locations: list[str] = []
        purge_external = is_true((table.get("parameters") or {}).get("external.table.purge"))
        owns_data = (delete_data and (not is_external(table) or purge_external)
                     and table.get("tableType") != VIEW)
        if owns_data:
            table_loc = (table.get("sd") or {}).get("location") or ""
            for part_doc in conn.execute(select(partitions.c.doc)
                                         .where(partitions.c.tbl_id == tbl_id)).scalars():
                loc = (json.loads(part_doc).get("sd") or {}).get("location")
                if loc and not loc.startswith(table_loc.rstrip("/") + "/"):
                    locations.append(loc)
            locations.append(table_loc)
        conn.execute(delete(partitions).where(partitions.c.tbl_id == tbl_id))
        delete_table_rows(conn, tbl_id)
        conn.execute(delete(tbls).where(tbls.c.tbl_id == tbl_id))
        self._log(conn, em.drop_table(self.messages, table))
        return [loc for loc in locations if loc]

    def drop(self, conn: Connection, db: str, name: str, *, delete_data: bool) -> FileChanges:
        tbl_id, table = require_table(conn, names.lower(db), names.lower(name), for_update=True)
        return FileChanges(delete=self.drop_rows(conn, tbl_id, table, delete_data))


def _cascade_columns(conn: Connection, tbl_id: int, table: Doc) -> None:
    rows = conn.execute(select(partitions.c.part_id, partitions.c.doc)
                        .where(partitions.c.tbl_id == tbl_id)).all()
    for row in rows:
        part = json.loads(row.doc)
        part.setdefault("sd", {})["cols"] = copy.deepcopy(table["sd"].get("cols") or [])
        conn.execute(update(partitions).where(partitions.c.part_id == row.part_id)
                     .values(doc=dumps(part)))


def _check_expected(old: Doc, new: Doc, key: str, value: str) -> None:
    """Hive's HiveAlterHandler rule for an expected parameter: the new definition sets the
    key, and the stored one still has the expected value."""
    if (new.get("parameters") or {}).get(key) is None:
        raise Refused(f"New value for expected key {key} is not set")
    current = (old.get("parameters") or {}).get(key)
    if current != value:
        raise ConcurrentModification(
            f"The table has been modified. The parameter value for key '{key}' is "
            f"'{_java_str(current)}'. The expected was value was '{value}'")


def _java_str(value: str | None) -> str:
    return "null" if value is None else value
