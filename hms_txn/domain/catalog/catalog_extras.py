"""The smaller things Hive's metastore stores next to its catalog: data connectors, the
legacy types, partition marks (``markPartitionForEvent``), HPL/SQL stored procedures and
packages, replication metrics and runtime statistics.

Each is a document per key (the Thrift struct's fields), written and read as Hive's
HMSHandler and ObjectStore do; names are lower-cased as Hive normalizes them. None of
these writes a notification event: Hive 4's DbNotificationListener writes none for them
(``event_messages``). Texts are Hive's where its code builds one.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import AlreadyExists, InvalidObject, NoSuchObject, Refused
from hms_txn.domain.model.catalog import (Doc, database_row, dumps, now_s)
from hms_txn.domain.model.names import check_name, lower
from hms_txn.store.schema import (dataconnectors, packages, replication_metrics, stored_procedures)


def _one(conn: Connection, table, *where) -> Doc | None:
    row = conn.execute(select(table.c.doc).where(and_(*where))).first()
    return None if row is None else json.loads(row.doc)


def _names(conn: Connection, table, column, *where) -> list[str]:
    query = select(column).order_by(column)
    if where:
        query = query.where(and_(*where))
    return list(conn.execute(query).scalars())


# ------------------------------------------------------------------ data connectors


def create_connector(conn: Connection, connector: Doc) -> None:
    raw = connector.get("name")
    try:
        name = check_name("dataconnector", raw)
    except InvalidObject:
        raise InvalidObject(f"{raw} is not a valid dataconnector name") from None
    if _one(conn, dataconnectors, dataconnectors.c.name == name) is not None:
        raise AlreadyExists(f"DataConnector {name} already exists")
    doc = {**connector, "name": name, "createTime": now_s()}
    conn.execute(insert(dataconnectors).values(name=name, doc=dumps(doc)))


def get_connector(conn: Connection, name: str | None) -> Doc:
    if name is None:
        raise Refused("Data connector name cannot be null.")
    doc = _one(conn, dataconnectors, dataconnectors.c.name == lower(name))
    if doc is None:
        raise NoSuchObject(f"DataConnector {name} doesn't exist")
    return doc


def connector_names(conn: Connection) -> list[str]:
    return _names(conn, dataconnectors, dataconnectors.c.name)


def alter_connector(conn: Connection, name: str | None, new: Doc) -> None:
    """Hive's alter_dataconnector: the old one must exist; the name and create time stay."""
    old = get_connector(conn, name)
    doc = {**old, **{k: v for k, v in new.items() if v is not None},
           "name": old["name"], "createTime": old.get("createTime")}
    conn.execute(update(dataconnectors).where(dataconnectors.c.name == old["name"])
                 .values(doc=dumps(doc)))


def drop_connector(conn: Connection, name: str | None, *, if_not_exists: bool) -> None:
    """Hive's drop_dataconnector (``checkReferences`` is not implemented by Hive either)."""
    if _one(conn, dataconnectors, dataconnectors.c.name == lower(name)) is None:
        if if_not_exists:
            return
        raise NoSuchObject(f"DataConnector {name} doesn't exist")
    conn.execute(delete(dataconnectors).where(dataconnectors.c.name == lower(name)))


# ------------------------------------------------------------------ HPL/SQL routines


REMOTE = 2  # DatabaseType.REMOTE


def _require_db(conn: Connection, db: str | None, operation: str) -> str:
    name = lower(db)
    row = database_row(conn, name)
    if row is None:
        raise NoSuchObject(f"database {db} does not exist")
    if json.loads(row.doc).get("type") == REMOTE:
        raise Refused(f"Operation {operation} not supported for REMOTE database {name}")
    return name


def put_procedure(conn: Connection, proc: Doc) -> None:
    """create_stored_procedure: create or replace."""
    db = _require_db(conn, proc.get("dbName"), "create_stored_procedure")
    name = lower(proc.get("name"))
    doc = {**proc, "name": name, "dbName": db, "catName": lower(proc.get("catName")) or "hive"}
    conn.execute(delete(stored_procedures).where(stored_procedures.c.db_name == db,
                                                 stored_procedures.c.name == name))
    conn.execute(insert(stored_procedures).values(db_name=db, name=name, doc=dumps(doc)))


def get_procedure(conn: Connection, db: str, name: str) -> Doc:
    doc = _one(conn, stored_procedures, stored_procedures.c.db_name == lower(db),
               stored_procedures.c.name == lower(name))
    if doc is None:
        raise NoSuchObject(f"HPL/SQL StoredProcedure {db}.{name} does not exist")
    return doc


def drop_procedure(conn: Connection, db: str, name: str) -> None:
    conn.execute(delete(stored_procedures).where(stored_procedures.c.db_name == lower(db),
                                                 stored_procedures.c.name == lower(name)))


def procedure_names(conn: Connection, db: str | None) -> list[str]:
    where = [stored_procedures.c.db_name == lower(db)] if db else []
    return _names(conn, stored_procedures, stored_procedures.c.name, *where)


def put_package(conn: Connection, package: Doc) -> None:
    """add_package: create or replace."""
    db = _require_db(conn, package.get("dbName"), "add_package")
    name = lower(package.get("packageName"))
    doc = {**package, "packageName": name, "dbName": db,
           "catName": lower(package.get("catName")) or "hive"}
    conn.execute(delete(packages).where(packages.c.db_name == db, packages.c.name == name))
    conn.execute(insert(packages).values(db_name=db, name=name, doc=dumps(doc)))


def get_package(conn: Connection, db: str, name: str) -> Doc:
    doc = _one(conn, packages, packages.c.db_name == lower(db), packages.c.name == lower(name))
    if doc is None:
        raise NoSuchObject(f"HPL/SQL package {db}.{name} does not exist")
    return doc


def drop_package(conn: Connection, db: str, name: str) -> None:
    conn.execute(delete(packages).where(packages.c.db_name == lower(db),
                                        packages.c.name == lower(name)))


def package_names(conn: Connection, db: str | None) -> list[str]:
    where = [packages.c.db_name == lower(db)] if db else []
    return _names(conn, packages, packages.c.name, *where)


# ------------------------------------------------------------------ replication metrics


def add_replication_metrics(conn: Connection, metrics: list[Doc]) -> None:
    """ObjectStore.addReplicationMetrics: a new execution is stored; a known one gets the
    metadata and progress that are set."""
    for item in metrics:
        key = int(item["scheduledExecutionId"])
        old = _one(conn, replication_metrics, replication_metrics.c.scheduled_execution_id == key)
        if old is None:
            conn.execute(insert(replication_metrics).values(
                scheduled_execution_id=key, policy=item.get("policy") or "",
                dump_execution_id=int(item.get("dumpExecutionId") or 0), doc=dumps(item)))
            continue
        doc = {**old, **{k: item[k] for k in ("metadata", "progress", "messageFormat")
                         if item.get(k) is not None}}
        conn.execute(update(replication_metrics)
                     .where(replication_metrics.c.scheduled_execution_id == key)
                     .values(doc=dumps(doc)))


def get_replication_metrics(conn: Connection, scheduled_execution_id: int | None,
                            policy: str | None, dump_execution_id: int | None) -> list[Doc]:
    """By execution id, else by policy, else by dump execution id; newest first."""
    c = replication_metrics.c
    if scheduled_execution_id is not None:
        where: Any = c.scheduled_execution_id == int(scheduled_execution_id)
    elif policy is not None:
        where = c.policy == policy
    elif dump_execution_id is not None:
        where = c.dump_execution_id == int(dump_execution_id)
    else:
        return []
    rows = conn.execute(select(c.doc).where(where).order_by(c.scheduled_execution_id.desc()))
    return [json.loads(r.doc) for r in rows]
