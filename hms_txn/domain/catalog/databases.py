"""Creating, altering and dropping databases (see ``catalog`` for the stored form).

Each change runs on the caller's connection, writes its notification event there, and
returns the directory changes to make once it has committed (``warehouse.FileChanges``).
"""

from __future__ import annotations

import copy
import json

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import AlreadyExists, InvalidOperation
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import Doc, database_row, dumps, now_s, require_database
from hms_txn.domain.catalog.functions import Functions, database_functions
from hms_txn.domain.catalog.tables import Tables
from hms_txn.domain.model.warehouse import FileChanges, Warehouse
from hms_txn.store.schema import dbs, tbls


class Databases:
    """Database changes (``messages`` builds their notification events, as for
    ``tables.Tables``; ``functions`` are dropped with their database)."""

    def __init__(self, warehouse: Warehouse, tables: Tables, messages: em.MessageContext,
                 functions: Functions):
        self.warehouse = warehouse
        self.tables = tables
        self.messages = messages
        self.functions = functions

    def ensure_default(self, conn: Connection) -> FileChanges:
        files = FileChanges()
        if database_row(conn, "default") is None:
            location = self.warehouse.database_location("default")
            doc = {"name": "default", "description": "Default Hive database",
                   "locationUri": location, "parameters": {}, "ownerName": "public",
                   "ownerType": 2, "catalogName": "hive", "createTime": now_s()}
            conn.execute(insert(dbs).values(name="default", doc=dumps(doc)))
            files.create.append(location)
        return files

    def create(self, conn: Connection, database: Doc) -> FileChanges:
        name = names.check_name("database", database.get("name"))
        doc = copy.deepcopy(database)
        doc["name"] = name
        doc["parameters"] = doc.get("parameters") or {}
        doc.setdefault("catalogName", "hive")
        doc["createTime"] = doc.get("createTime") or now_s()
        if not doc.get("locationUri"):
            doc["locationUri"] = self.warehouse.database_location(name)
        if database_row(conn, name) is not None:
            raise AlreadyExists(f"database {name} already exists")
        conn.execute(insert(dbs).values(name=name, doc=dumps(doc)))
        notifications.append(conn, self.messages.message_format,
                             em.create_database(self.messages, doc))
        return FileChanges(create=[doc["locationUri"]])

    def alter(self, conn: Connection, name: str, new: Doc) -> None:
        name = names.lower(name)
        old = require_database(conn, name)
        if new.get("name") and names.lower(new["name"]) != name:
            raise InvalidOperation(f"renaming database {name} is not supported")
        doc = copy.deepcopy(new)
        doc["name"] = name
        doc["locationUri"] = doc.get("locationUri") or old.get("locationUri")
        doc["createTime"] = old.get("createTime")
        doc.setdefault("catalogName", old.get("catalogName", "hive"))
        conn.execute(update(dbs).where(dbs.c.name == name).values(doc=dumps(doc)))
        notifications.append(conn, self.messages.message_format,
                             em.alter_database(self.messages, old, doc))

    def drop(self, conn: Connection, name: str, *, delete_data: bool,
             cascade: bool) -> FileChanges:
        name = names.lower(name)
        if name == "default":
            raise InvalidOperation("the default database cannot be dropped")
        files = FileChanges()
        doc = require_database(conn, name)
        rows = conn.execute(select(tbls.c.tbl_id, tbls.c.doc)
                            .where(tbls.c.db_name == name)).all()
        if rows and not cascade:
            # Hive's text (HMSHandler.drop_database_core): Spark's HiveClientImpl matches
            # "Database <name> is not empty" to report a non-empty database.
            raise InvalidOperation(f"Database {name} is not empty. One or more tables exist.")
        if not cascade and database_functions(conn, name):
            raise InvalidOperation(f"Database {name} is not empty. One or more functions exist.")
        self.functions.drop_all(conn, name)     # Hive drops them first, each with its event
        for row in rows:
            files.delete.extend(self.tables.drop_rows(conn, row.tbl_id, json.loads(row.doc),
                                                      delete_data))
        conn.execute(delete(dbs).where(dbs.c.name == name))
        notifications.append(conn, self.messages.message_format,
                             em.drop_database(self.messages, doc))
        if delete_data:
            files.delete.append(doc.get("locationUri"))
        return files
