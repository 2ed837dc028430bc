"""Databases, tables and partitions.

Objects are plain dicts that mirror the Thrift structs field by field (``tableName``,
``sd``, ``partitionKeys``, ...); the handler converts them from and to the wire. Every
call is one database transaction that also writes the change's notification event.
Names are case-insensitive and stored lower-case, like the Java metastore does.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any, Callable, Iterable

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from hms_txn.domain import names, notifications, partition_filter
from hms_txn.common.errors import (AlreadyExists, InvalidInput, InvalidObject, InvalidOperation, NoSuchObject)
from hms_txn.store import Store
from hms_txn.store.schema import dbs, partitions, tbls
from hms_txn.domain.warehouse import Warehouse

Doc = dict[str, Any]

MANAGED = "MANAGED_TABLE"
EXTERNAL = "EXTERNAL_TABLE"
VIEW = "VIRTUAL_VIEW"
MATERIALIZED_VIEW = "MATERIALIZED_VIEW"
TABLE_TYPES = {MANAGED, EXTERNAL, VIEW, MATERIALIZED_VIEW}
DDL_TIME = "transient_lastDdlTime"


def _dumps(doc: Doc) -> str:
    return json.dumps(doc, separators=(",", ":"))


def _now() -> int:
    return int(time.time())


def _is_true(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def is_external(table: Doc) -> bool:
    return table.get("tableType") == EXTERNAL or _is_true((table.get("parameters") or {}).get("EXTERNAL"))


def is_transactional(table: Doc) -> bool:
    return _is_true((table.get("parameters") or {}).get("transactional"))


def set_table_parameter_in(conn: Connection, tbl_id: int, key: str, value: str, *,
                           must_exist: bool) -> None:
    """Set one table parameter inside the caller's transaction (with its ALTER_TABLE event).

    ``must_exist``: the parameter must already be set, as Hive requires for the key/value a
    commit records; otherwise the call fails and changes nothing.
    """
    row = conn.execute(select(tbls.c.doc).where(tbls.c.tbl_id == tbl_id).with_for_update()).first()
    if row is None:
        raise InvalidInput(f"no table with id {tbl_id}")
    doc = json.loads(row.doc)
    params = dict(doc.get("parameters") or {})
    if must_exist and key not in params:
        raise InvalidInput(f"table {doc['dbName']}.{doc['tableName']} has no parameter {key!r} to "
                           f"update; set it first (e.g. with ALTER TABLE ... SET TBLPROPERTIES)")
    params[key] = value
    doc["parameters"] = params
    conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(doc=_dumps(doc)))
    notifications.append(conn, "ALTER_TABLE", {
        "db": doc["dbName"], "table": doc["tableName"], "tableType": doc.get("tableType"),
        "isTruncateOp": "false", "writeId": -1,
    }, db_name=doc["dbName"], tbl_name=doc["tableName"])


class Catalog:
    """Catalog operations over a ``Store``.

    ``object_json`` turns a document into the Thrift-JSON text the notification messages
    carry (``tableObjJson`` and friends); the handler supplies it, since only it knows the
    wire format. Without one, messages leave those fields out.
    """

    def __init__(self, store: Store, warehouse: Warehouse,
                 object_json: Callable[[str, Doc], str] | None = None):
        self.store = store
        self.warehouse = warehouse
        self.object_json = object_json

    # ------------------------------------------------------------------ helpers

    def _obj_json(self, kind: str, doc: Doc) -> dict[str, str]:
        return {} if self.object_json is None else {"_": self.object_json(kind, doc)}

    def _event(self, conn: Connection, event_type: str, db: str, table: str | None,
               message: Doc) -> None:
        # Every Hive JSON message carries these (JSONCreateTableMessage and friends).
        message = {"server": "", "servicePrincipal": "", **message}
        message.setdefault("timestamp", _now())
        notifications.append(conn, event_type, message, db_name=db, tbl_name=table)

    @staticmethod
    def _db_row(conn: Connection, name: str):
        return conn.execute(select(dbs.c.doc).where(dbs.c.name == name)).first()

    def _require_db(self, conn: Connection, name: str) -> Doc:
        row = self._db_row(conn, name)
        if row is None:
            raise NoSuchObject(f"database {name} does not exist")
        return json.loads(row.doc)

    @staticmethod
    def _table_row(conn: Connection, db: str, name: str, *, for_update: bool = False):
        query = select(tbls.c.tbl_id, tbls.c.doc).where(tbls.c.db_name == db, tbls.c.tbl_name == name)
        if for_update:
            query = query.with_for_update()
        return conn.execute(query).first()

    def _require_table(self, conn: Connection, db: str, name: str, *, for_update: bool = False):
        row = self._table_row(conn, db, name, for_update=for_update)
        if row is None:
            if self._db_row(conn, db) is None:
                raise NoSuchObject(f"database {db} does not exist")
            raise NoSuchObject(f"table {db}.{name} does not exist")
        return row.tbl_id, json.loads(row.doc)

    # ------------------------------------------------------------------ databases

    def ensure_default_database(self) -> None:
        def create(conn: Connection) -> None:
            if self._db_row(conn, "default") is None:
                location = self.warehouse.database_location("default")
                doc = {"name": "default", "description": "Default Hive database",
                       "locationUri": location, "parameters": {}, "ownerName": "public",
                       "ownerType": 2, "catalogName": "hive", "createTime": _now()}
                conn.execute(insert(dbs).values(name="default", doc=_dumps(doc)))
                self.warehouse.mkdirs(location)
        self.store.transaction(create)

    def create_database(self, database: Doc) -> None:
        name = names.check_name("database", database.get("name"))
        doc = copy.deepcopy(database)
        doc["name"] = name
        doc.setdefault("parameters", {})
        doc["parameters"] = doc["parameters"] or {}
        doc.setdefault("catalogName", "hive")
        doc["createTime"] = doc.get("createTime") or _now()
        if not doc.get("locationUri"):
            doc["locationUri"] = self.warehouse.database_location(name)

        def create(conn: Connection) -> None:
            if self._db_row(conn, name) is not None:
                raise AlreadyExists(f"database {name} already exists")
            conn.execute(insert(dbs).values(name=name, doc=_dumps(doc)))
            self._event(conn, "CREATE_DATABASE", name, None,
                        {"db": name, "location": doc["locationUri"]})
        self.store.transaction(create)
        self.warehouse.mkdirs(doc["locationUri"])

    def get_database(self, name: str) -> Doc:
        with self.store.read() as conn:
            return self._require_db(conn, names.lower(name))

    def list_databases(self, pattern: str | None = None) -> list[str]:
        """Names matching ``pattern`` as ``get_databases`` matches them (see names.matches)."""
        with self.store.read() as conn:
            all_names = conn.execute(select(dbs.c.name).order_by(dbs.c.name)).scalars().all()
        return [n for n in all_names if names.matches(pattern, n, empty_matches_all=False)]

    def alter_database(self, name: str, new: Doc) -> None:
        name = names.lower(name)

        def alter(conn: Connection) -> None:
            old = self._require_db(conn, name)
            if new.get("name") and names.lower(new["name"]) != name:
                raise InvalidOperation(f"renaming database {name} is not supported")
            doc = copy.deepcopy(new)
            doc["name"] = name
            doc["locationUri"] = doc.get("locationUri") or old.get("locationUri")
            doc["createTime"] = old.get("createTime")
            doc.setdefault("catalogName", old.get("catalogName", "hive"))
            conn.execute(update(dbs).where(dbs.c.name == name).values(doc=_dumps(doc)))
            self._event(conn, "ALTER_DATABASE", name, None, {"db": name})
        self.store.transaction(alter)

    def drop_database(self, name: str, *, delete_data: bool, cascade: bool) -> None:
        name = names.lower(name)
        if name == "default":
            raise InvalidOperation("the default database cannot be dropped")
        to_delete: list[str] = []

        def drop(conn: Connection) -> None:
            doc = self._require_db(conn, name)
            rows = conn.execute(select(tbls.c.tbl_id, tbls.c.tbl_name, tbls.c.doc)
                                .where(tbls.c.db_name == name)).all()
            if rows and not cascade:
                raise InvalidOperation(
                    f"database {name} is not empty: it has {len(rows)} table(s); "
                    f"drop them first or drop the database with CASCADE"
                )
            for row in rows:
                table = json.loads(row.doc)
                to_delete.extend(self._drop_table_rows(conn, row.tbl_id, table, delete_data))
            from hms_txn.store.schema import functions
            conn.execute(delete(functions).where(functions.c.db_name == name))
            conn.execute(delete(dbs).where(dbs.c.name == name))
            self._event(conn, "DROP_DATABASE", name, None, {"db": name})
            if delete_data:
                to_delete.append(doc.get("locationUri"))
        self.store.transaction(drop)
        for location in to_delete:
            self.warehouse.delete(location)

    # ------------------------------------------------------------------ tables

    def _prepare_table(self, conn: Connection, table: Doc) -> Doc:
        """Validate a new table document and fill in what the server owns."""
        doc = copy.deepcopy(table)
        doc["dbName"] = db = names.check_name("database", doc.get("dbName"))
        doc["tableName"] = names.check_name("table", doc.get("tableName"))
        db_doc = self._require_db(conn, db)
        sd = doc.get("sd")
        if not sd:
            raise InvalidObject(f"table {db}.{doc['tableName']} has no storage descriptor")
        ttype = doc.get("tableType") or MANAGED
        if _is_true((doc.get("parameters") or {}).get("EXTERNAL")):
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
        params[DDL_TIME] = str(_now())
        doc["parameters"] = params
        doc["createTime"] = doc.get("createTime") or _now()
        doc.setdefault("lastAccessTime", 0)
        doc.setdefault("retention", 0)
        doc["catName"] = doc.get("catName") or "hive"
        if not sd.get("location") and ttype != VIEW:
            sd["location"] = self.warehouse.child(db_doc["locationUri"], doc["tableName"])
        return doc

    def create_table(self, table: Doc) -> None:
        holder: dict[str, Doc] = {}

        def create(conn: Connection) -> None:
            doc = self._prepare_table(conn, table)
            holder["doc"] = doc
            db, name = doc["dbName"], doc["tableName"]
            if self._table_row(conn, db, name) is not None:
                raise AlreadyExists(f"table {db}.{name} already exists")
            try:
                result = conn.execute(insert(tbls).values(
                    db_name=db, tbl_name=name, tbl_type=doc["tableType"], doc=_dumps(doc)))
            except IntegrityError:
                raise AlreadyExists(f"table {db}.{name} already exists") from None
            doc["id"] = result.inserted_primary_key[0]
            conn.execute(update(tbls).where(tbls.c.tbl_id == doc["id"]).values(doc=_dumps(doc)))
            message = {"db": db, "table": name, "tableType": doc["tableType"]}
            if self.object_json:
                message["tableObjJson"] = self.object_json("Table", doc)
            self._event(conn, "CREATE_TABLE", db, name, message)
        self.store.transaction(create)
        doc = holder["doc"]
        if doc["tableType"] != VIEW:
            self.warehouse.mkdirs(doc["sd"].get("location"))

    def get_table(self, db: str, name: str) -> Doc:
        with self.store.read() as conn:
            return self._require_table(conn, names.lower(db), names.lower(name))[1]

    def get_tables(self, db: str, table_names: Iterable[str] | None) -> list[Doc]:
        db = names.lower(db)
        with self.store.read() as conn:
            self._require_db(conn, db)
            query = select(tbls.c.doc).where(tbls.c.db_name == db)
            if table_names is not None:
                wanted = sorted({names.lower(n) for n in table_names if n})
                if not wanted:
                    return []
                query = query.where(tbls.c.tbl_name.in_(wanted))
            rows = conn.execute(query.order_by(tbls.c.tbl_name)).scalars().all()
        return [json.loads(r) for r in rows]

    def list_tables(self, db: str, pattern: str | None = None,
                    table_type: str | None = None, *, empty_matches_all: bool = True
                    ) -> list[str]:
        db = names.lower(db)
        with self.store.read() as conn:
            if self._db_row(conn, db) is None:
                return []
            query = select(tbls.c.tbl_name).where(tbls.c.db_name == db)
            if table_type:
                query = query.where(tbls.c.tbl_type == table_type)
            rows = conn.execute(query.order_by(tbls.c.tbl_name)).scalars().all()
        return [n for n in rows if names.matches(pattern, n, empty_matches_all=empty_matches_all)]

    def list_table_meta(self, db_pattern: str | None, tbl_pattern: str | None,
                        table_types: list[str] | None) -> list[Doc]:
        with self.store.read() as conn:
            rows = conn.execute(select(tbls.c.db_name, tbls.c.tbl_name, tbls.c.tbl_type, tbls.c.doc)
                                .order_by(tbls.c.db_name, tbls.c.tbl_name)).all()
        out = []
        for row in rows:
            if not names.matches(db_pattern, row.db_name) or not names.matches(tbl_pattern, row.tbl_name):
                continue
            if table_types and row.tbl_type not in table_types:
                continue
            doc = json.loads(row.doc)
            out.append({"dbName": row.db_name, "tableName": row.tbl_name, "tableType": row.tbl_type,
                        "comments": (doc.get("parameters") or {}).get("comment"), "catName": "hive"})
        return out

    def alter_table(self, db: str, name: str, new: Doc, *, cascade: bool = False) -> None:
        db, name = names.lower(db), names.lower(name)
        moves: list[tuple[str, str]] = []

        def alter(conn: Connection) -> None:
            tbl_id, old = self._require_table(conn, db, name, for_update=True)
            doc = copy.deepcopy(new)
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
            old_keys = [(k["name"].lower(), k.get("type")) for k in old.get("partitionKeys") or []]
            new_keys = [(k["name"].lower(), k.get("type")) for k in doc.get("partitionKeys") or []]
            if [k for k, _ in old_keys] != [k for k, _ in new_keys]:
                raise InvalidOperation(f"the partition keys of table {db}.{name} cannot be changed")
            for key, (_, kt) in zip(doc.get("partitionKeys") or [], old_keys):
                key["name"] = key["name"].lower()
            ttype = doc.get("tableType") or old.get("tableType") or MANAGED
            if _is_true((doc.get("parameters") or {}).get("EXTERNAL")):
                ttype = EXTERNAL
            elif ttype == EXTERNAL and str((doc.get("parameters") or {}).get("EXTERNAL", "")).upper() == "FALSE":
                ttype = MANAGED
            doc["tableType"] = ttype
            doc["createTime"] = old.get("createTime")
            doc["id"] = tbl_id
            doc["catName"] = old.get("catName", "hive")
            params = dict(doc.get("parameters") or {})
            params[DDL_TIME] = str(_now())
            doc["parameters"] = params
            renamed = (new_db, new_name) != (db, name)
            if renamed:
                if self._db_row(conn, new_db) is None:
                    raise InvalidOperation(f"cannot rename {db}.{name}: database {new_db} does not exist")
                if self._table_row(conn, new_db, new_name) is not None:
                    raise InvalidOperation(f"cannot rename {db}.{name}: table {new_db}.{new_name} already exists")
                self._relocate_renamed(conn, tbl_id, old, doc, moves)
            elif not doc["sd"].get("location"):
                doc["sd"]["location"] = old["sd"].get("location")
            conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(
                db_name=new_db, tbl_name=new_name, tbl_type=ttype, doc=_dumps(doc)))
            if cascade and old_keys:
                self._cascade_columns(conn, tbl_id, doc)
            write_id = doc.get("writeId")
            message = {"db": db, "table": name, "tableType": old.get("tableType"),
                       "isTruncateOp": "false",
                       "writeId": int(write_id) if write_id is not None else -1}
            if self.object_json:
                message["tableObjBeforeJson"] = self.object_json("Table", old)
                message["tableObjAfterJson"] = self.object_json("Table", doc)
            self._event(conn, "ALTER_TABLE", db, name, message)
        self.store.transaction(alter)
        for src, dst in moves:
            self.warehouse.rename(src, dst)

    def _relocate_renamed(self, conn: Connection, tbl_id: int, old: Doc, doc: Doc,
                          moves: list[tuple[str, str]]) -> None:
        """A managed table at its default location moves with its name, partitions too."""
        old_loc = old["sd"].get("location")
        new_loc = doc["sd"].get("location")
        if old.get("tableType") != MANAGED or (new_loc and new_loc != old_loc):
            return
        old_db_doc = self._require_db(conn, old["dbName"])
        default_old = self.warehouse.child(old_db_doc["locationUri"], old["tableName"])
        if old_loc != default_old:
            doc["sd"]["location"] = old_loc
            return
        new_db_doc = self._require_db(conn, doc["dbName"])
        target = self.warehouse.child(new_db_doc["locationUri"], doc["tableName"])
        doc["sd"]["location"] = target
        moves.append((old_loc, target))
        rows = conn.execute(select(partitions.c.part_id, partitions.c.doc)
                            .where(partitions.c.tbl_id == tbl_id)).all()
        for row in rows:
            part = json.loads(row.doc)
            part["dbName"], part["tableName"] = doc["dbName"], doc["tableName"]
            loc = (part.get("sd") or {}).get("location") or ""
            if loc.startswith(old_loc + "/"):
                part["sd"]["location"] = target + loc[len(old_loc):]
            conn.execute(update(partitions).where(partitions.c.part_id == row.part_id)
                         .values(doc=_dumps(part)))

    def _cascade_columns(self, conn: Connection, tbl_id: int, table: Doc) -> None:
        rows = conn.execute(select(partitions.c.part_id, partitions.c.doc)
                            .where(partitions.c.tbl_id == tbl_id)).all()
        for row in rows:
            part = json.loads(row.doc)
            part.setdefault("sd", {})["cols"] = copy.deepcopy(table["sd"].get("cols") or [])
            conn.execute(update(partitions).where(partitions.c.part_id == row.part_id)
                         .values(doc=_dumps(part)))

    def _drop_table_rows(self, conn: Connection, tbl_id: int, table: Doc,
                         delete_data: bool) -> list[str]:
        """Delete a table's rows; returns the locations to remove after commit."""
        locations: list[str] = []
        purge_external = _is_true((table.get("parameters") or {}).get("external.table.purge"))
        owns_data = delete_data and (not is_external(table) or purge_external) and table.get("tableType") != VIEW
        if owns_data:
            table_loc = (table.get("sd") or {}).get("location") or ""
            for part_doc in conn.execute(select(partitions.c.doc).where(partitions.c.tbl_id == tbl_id)).scalars():
                loc = (json.loads(part_doc).get("sd") or {}).get("location")
                if loc and not loc.startswith(table_loc.rstrip("/") + "/"):
                    locations.append(loc)
            locations.append(table_loc)
        conn.execute(delete(partitions).where(partitions.c.tbl_id == tbl_id))
        conn.execute(delete(tbls).where(tbls.c.tbl_id == tbl_id))
        message = {"db": table["dbName"], "table": table["tableName"]}
        if self.object_json:
            message["tableObjJson"] = self.object_json("Table", table)
        self._event(conn, "DROP_TABLE", table["dbName"], table["tableName"], message)
        return [loc for loc in locations if loc]

    def drop_table(self, db: str, name: str, *, delete_data: bool) -> None:
        db, name = names.lower(db), names.lower(name)
        holder: list[str] = []

        def drop(conn: Connection) -> None:
            tbl_id, table = self._require_table(conn, db, name, for_update=True)
            holder.extend(self._drop_table_rows(conn, tbl_id, table, delete_data))
        self.store.transaction(drop)
        for location in holder:
            self.warehouse.delete(location)

    # ------------------------------------------------------------------ partitions

    @staticmethod
    def _keys(table: Doc) -> list[str]:
        return [k["name"].lower() for k in table.get("partitionKeys") or []]

    def _prepare_partition(self, table: Doc, part: Doc) -> tuple[str, Doc]:
        keys = self._keys(table)
        label = f"{table['dbName']}.{table['tableName']}"
        if not keys:
            raise InvalidObject(f"table {label} is not partitioned")
        values = part.get("values")
        if values is None or len(values) != len(keys):
            raise InvalidObject(
                f"partition values {values!r} do not match the partition keys "
                f"({', '.join(keys)}) of table {label}"
            )
        if any(v is None for v in values):
            raise InvalidObject(f"partition values {values!r} of table {label} contain a null")
        if part.get("dbName") and names.lower(part["dbName"]) != table["dbName"] or \
           part.get("tableName") and names.lower(part["tableName"]) != table["tableName"]:
            raise InvalidObject(
                f"partition names table {part.get('dbName')}.{part.get('tableName')}, not {label}")
        doc = copy.deepcopy(part)
        doc["dbName"], doc["tableName"] = table["dbName"], table["tableName"]
        doc["values"] = [str(v) for v in values]
        name = names.make_partition_name(keys, doc["values"])
        sd = doc.get("sd")
        if not sd:
            sd = copy.deepcopy(table.get("sd") or {})
            sd["location"] = None
            doc["sd"] = sd
        if not sd.get("location") and table.get("sd", {}).get("location"):
            sd["location"] = self.warehouse.child(table["sd"]["location"], name)
        params = dict(doc.get("parameters") or {})
        params[DDL_TIME] = str(_now())
        doc["parameters"] = params
        doc["createTime"] = doc.get("createTime") or _now()
        doc.setdefault("lastAccessTime", 0)
        doc["catName"] = "hive"
        return name, doc

    def _add_fast_stats(self, part: Doc) -> None:
        """Like the Java metastore (hive.stats.autogather): a partition added over a
        directory that already holds files (Spark and Hive write the files first, then
        add the partition) gets ``numFiles``/``totalSize`` unless it carries both."""
        params = part["parameters"]
        if "numFiles" in params and "totalSize" in params:
            return
        stats = self.warehouse.quick_stats((part.get("sd") or {}).get("location"))
        if stats is not None:
            params.update(stats)

    def add_partitions(self, db: str, table_name: str, parts: list[Doc], *,
                       if_not_exists: bool = False) -> list[Doc]:
        db, table_name = names.lower(db), names.lower(table_name)
        added: list[Doc] = []

        def add(conn: Connection) -> None:
            added.clear()
            tbl_id, table = self._require_table(conn, db, table_name, for_update=True)
            prepared: dict[str, Doc] = {}
            for part in parts:
                name, doc = self._prepare_partition(table, part)
                if name in prepared:
                    raise InvalidObject(f"partition {name} appears twice in the request")
                prepared[name] = doc
            if not prepared:
                return
            existing = set(conn.execute(
                select(partitions.c.part_name).where(partitions.c.tbl_id == tbl_id,
                                                      partitions.c.part_name.in_(list(prepared)))
            ).scalars())
            if existing and not if_not_exists:
                raise AlreadyExists(
                    f"partition {sorted(existing)[0]} of table {db}.{table_name} already exists")
            for n, d in prepared.items():
                if n not in existing:
                    self._add_fast_stats(d)
            rows = [{"tbl_id": tbl_id, "part_name": n, "doc": _dumps(d)}
                    for n, d in prepared.items() if n not in existing]
            if rows:
                conn.execute(insert(partitions), rows)
            added.extend(d for n, d in prepared.items() if n not in existing)
            if added:
                message = {"db": db, "table": table_name,
                           "partitions": [dict(zip(self._keys(table), d["values"])) for d in added]}
                if self.object_json:
                    message["tableObjJson"] = self.object_json("Table", table)
                    message["partitionListJson"] = [self.object_json("Partition", d) for d in added]
                self._event(conn, "ADD_PARTITION", db, table_name, message)
        self.store.transaction(add)
        for doc in added:
            self.warehouse.mkdirs((doc.get("sd") or {}).get("location"))
        return added

    def _partition_rows(self, conn: Connection, tbl_id: int, part_names: Iterable[str] | None = None,
                        limit: int = -1) -> list[tuple[str, Doc]]:
        query = select(partitions.c.part_name, partitions.c.doc).where(partitions.c.tbl_id == tbl_id)
        if part_names is not None:
            wanted = list(dict.fromkeys(part_names))
            if not wanted:
                return []
            query = query.where(partitions.c.part_name.in_(wanted))
        query = query.order_by(partitions.c.part_name)
        if limit is not None and limit >= 0:
            query = query.limit(limit)
        return [(row.part_name, json.loads(row.doc)) for row in conn.execute(query)]

    def _partition_name(self, table: Doc, values: list[str]) -> str:
        keys = self._keys(table)
        if len(values) != len(keys):
            raise InvalidObject(
                f"partition values {values!r} do not match the partition keys "
                f"({', '.join(keys)}) of table {table['dbName']}.{table['tableName']}")
        return names.make_partition_name(keys, [str(v) for v in values])

    def get_partition(self, db: str, table_name: str, values: list[str]) -> Doc:
        with self.store.read() as conn:
            tbl_id, table = self._require_table(conn, names.lower(db), names.lower(table_name))
            name = self._partition_name(table, values)
            rows = self._partition_rows(conn, tbl_id, [name])
        if not rows:
            raise NoSuchObject(f"partition {name} of table {table['dbName']}.{table['tableName']} does not exist")
        return rows[0][1]

    def get_partition_by_name(self, db: str, table_name: str, part_name: str) -> Doc:
        with self.store.read() as conn:
            tbl_id, table = self._require_table(conn, names.lower(db), names.lower(table_name))
            values = names.partition_values_from_name(self._keys(table), part_name)
            name = names.make_partition_name(self._keys(table), values)
            rows = self._partition_rows(conn, tbl_id, [name])
        if not rows:
            raise NoSuchObject(f"partition {part_name} of table {table['dbName']}.{table['tableName']} does not exist")
        return rows[0][1]

    def list_partitions(self, db: str, table_name: str, *, limit: int = -1,
                        partial_values: list[str] | None = None,
                        filter_text: str | None = None,
                        part_names: Iterable[str] | None = None) -> tuple[Doc, list[tuple[str, Doc]]]:
        """The table and its matching (name, partition) pairs in name order.

        ``partial_values`` is a prefix of values where "" matches anything (the ``_ps``
        calls); ``filter_text`` a partition filter; ``part_names`` explicit names.
        """
        with self.store.read() as conn:
            tbl_id, table = self._require_table(conn, names.lower(db), names.lower(table_name))
            keys = self._keys(table)
            wanted = None
            if part_names is not None:
                wanted = [names.make_partition_name(keys, names.partition_values_from_name(keys, n))
                          for n in part_names]
            post_filter = partial_values is not None or filter_text is not None
            rows = self._partition_rows(conn, tbl_id, wanted, -1 if post_filter else limit)
        if partial_values is not None:
            if len(partial_values) > len(keys):
                raise InvalidObject(
                    f"{len(partial_values)} partition values given for table "
                    f"{table['dbName']}.{table['tableName']} with {len(keys)} partition keys")
            rows = [(n, d) for n, d in rows
                    if all(p in ("", None) or p == v for p, v in zip(partial_values, d["values"]))]
        if filter_text is not None and filter_text.strip():
            types = {k["name"].lower(): k.get("type") or "string" for k in table.get("partitionKeys") or []}
            predicate = partition_filter.parse(filter_text, types)
            rows = [(n, d) for n, d in rows if predicate(dict(zip(keys, d["values"])))]
        if post_filter and limit is not None and limit >= 0:
            rows = rows[:limit]
        return table, rows

    def count_partitions_by_filter(self, db: str, table_name: str, filter_text: str) -> int:
        return len(self.list_partitions(db, table_name, filter_text=filter_text)[1])

    def alter_partitions(self, db: str, table_name: str, parts: list[Doc]) -> None:
        db, table_name = names.lower(db), names.lower(table_name)

        def alter(conn: Connection) -> None:
            tbl_id, table = self._require_table(conn, db, table_name, for_update=True)
            for part in parts:
                name = self._partition_name(table, part.get("values") or [])
                rows = conn.execute(select(partitions.c.part_id, partitions.c.doc).where(
                    partitions.c.tbl_id == tbl_id, partitions.c.part_name == name)).first()
                if rows is None:
                    raise InvalidOperation(f"partition {name} of table {db}.{table_name} does not exist")
                old = json.loads(rows.doc)
                doc = copy.deepcopy(part)
                doc["dbName"], doc["tableName"] = db, table_name
                doc["values"] = old["values"]
                doc["createTime"] = old.get("createTime")
                doc["catName"] = "hive"
                if not doc.get("sd"):
                    doc["sd"] = old.get("sd")
                elif not doc["sd"].get("location"):
                    doc["sd"]["location"] = (old.get("sd") or {}).get("location")
                params = dict(doc.get("parameters") or {})
                params[DDL_TIME] = str(_now())
                doc["parameters"] = params
                conn.execute(update(partitions).where(partitions.c.part_id == rows.part_id)
                             .values(doc=_dumps(doc)))
                message = {"db": db, "table": table_name, "isTruncateOp": "false",
                           "keyValues": dict(zip(self._keys(table), doc["values"]))}
                if self.object_json:
                    message["tableObjJson"] = self.object_json("Table", table)
                    message["partitionObjBeforeJson"] = self.object_json("Partition", old)
                    message["partitionObjAfterJson"] = self.object_json("Partition", doc)
                self._event(conn, "ALTER_PARTITION", db, table_name, message)
        self.store.transaction(alter)

    def rename_partition(self, db: str, table_name: str, old_values: list[str], new_part: Doc) -> None:
        db, table_name = names.lower(db), names.lower(table_name)
        moves: list[tuple[str, str]] = []

        def rename(conn: Connection) -> None:
            tbl_id, table = self._require_table(conn, db, table_name, for_update=True)
            old_name = self._partition_name(table, old_values)
            new_name, doc = self._prepare_partition(table, new_part)
            row = conn.execute(select(partitions.c.part_id, partitions.c.doc).where(
                partitions.c.tbl_id == tbl_id, partitions.c.part_name == old_name)).first()
            if row is None:
                raise InvalidOperation(f"partition {old_name} of table {db}.{table_name} does not exist")
            if conn.execute(select(partitions.c.part_id).where(
                    partitions.c.tbl_id == tbl_id, partitions.c.part_name == new_name)).first():
                raise InvalidOperation(f"partition {new_name} of table {db}.{table_name} already exists")
            old = json.loads(row.doc)
            old_loc = (old.get("sd") or {}).get("location")
            table_loc = (table.get("sd") or {}).get("location")
            if old_loc and table_loc and old_loc == self.warehouse.child(table_loc, old_name):
                doc["sd"]["location"] = self.warehouse.child(table_loc, new_name)
                moves.append((old_loc, doc["sd"]["location"]))
            conn.execute(update(partitions).where(partitions.c.part_id == row.part_id)
                         .values(part_name=new_name, doc=_dumps(doc)))
            self._event(conn, "ALTER_PARTITION", db, table_name,
                        {"db": db, "table": table_name, "isTruncateOp": "false",
                         "keyValues": dict(zip(self._keys(table), doc["values"]))})
        self.store.transaction(rename)
        for src, dst in moves:
            self.warehouse.rename(src, dst)

    def drop_partitions(self, db: str, table_name: str, part_values: list[list[str]], *,
                        delete_data: bool, if_exists: bool = False) -> list[Doc]:
        db, table_name = names.lower(db), names.lower(table_name)
        dropped: list[Doc] = []

        def drop(conn: Connection) -> None:
            dropped.clear()
            tbl_id, table = self._require_table(conn, db, table_name, for_update=True)
            wanted = [self._partition_name(table, v) for v in part_values]
            rows = dict(self._partition_rows(conn, tbl_id, wanted))
            missing = [n for n in wanted if n not in rows]
            if missing and not if_exists:
                raise NoSuchObject(f"partition {missing[0]} of table {db}.{table_name} does not exist")
            if not rows:
                return
            conn.execute(delete(partitions).where(partitions.c.tbl_id == tbl_id,
                                                  partitions.c.part_name.in_(list(rows))))
            dropped.extend(rows.values())
            keys = self._keys(table)
            message = {"db": db, "table": table_name,
                       "partitions": [dict(zip(keys, d["values"])) for d in rows.values()]}
            if self.object_json:
                message["tableObjJson"] = self.object_json("Table", table)
            self._event(conn, "DROP_PARTITION", db, table_name, message)
            dropped_table.append(table)

        dropped_table: list[Doc] = []
        self.store.transaction(drop)
        if delete_data and dropped_table and not is_external(dropped_table[0]):
            for doc in dropped:
                self.warehouse.delete((doc.get("sd") or {}).get("location"))
        return dropped

    def partition_names_to_values(self, part_name: str) -> list[str]:
        return [v for _, v in names.split_partition_name(part_name)]

    def partition_name_to_spec(self, part_name: str) -> dict[str, str]:
        return dict(names.split_partition_name(part_name))

    def count_tables(self) -> int:
        with self.store.read() as conn:
            return conn.execute(select(func.count()).select_from(tbls)).scalar_one()


# ------------------------------------------------------------------ reads on a connection

# For code that reads the catalog inside a unit of work of its own (the compactor). The
# ``Catalog`` helpers these use keep no state (no store, no warehouse).
_ON_CONN = Catalog.__new__(Catalog)


def get_table(conn: Connection, db: str, name: str) -> Doc:
    """The table ``db.name``; raises NoSuchObject."""
    return _ON_CONN._require_table(conn, names.lower(db), names.lower(name))[1]


def get_partition_by_name(conn: Connection, db: str, table_name: str, part_name: str) -> Doc:
    """The partition ``part_name`` (``k1=v1/k2=v2``) of ``db.table_name``; raises NoSuchObject."""
    tbl_id, table = _ON_CONN._require_table(conn, names.lower(db), names.lower(table_name))
    values = names.partition_values_from_name(Catalog._keys(table), part_name)
    rows = _ON_CONN._partition_rows(conn, tbl_id, [_ON_CONN._partition_name(table, values)])
    if not rows:
        raise NoSuchObject(f"partition {part_name} of table "
                           f"{table['dbName']}.{table['tableName']} does not exist")
    return rows[0][1]
