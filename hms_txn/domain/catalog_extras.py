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
import time
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import AlreadyExists, InvalidObject, NoSuchObject, Refused
from hms_txn.domain.catalog import (Doc, database_row, dumps, now_s, partition_keys,
                                    table_row)
from hms_txn.domain.names import check_name, lower
from hms_txn.store.schema import (dataconnectors, packages, partition_events,
                                  replication_metrics, runtime_stats, stored_procedures, types)


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


# ------------------------------------------------------------------ types (legacy)


def create_type(conn: Connection, type_: Doc) -> bool:
    name = type_.get("name")
    try:
        check_name("type", name)
    except InvalidObject:
        raise InvalidObject("Invalid type name") from None
    if _one(conn, types, types.c.name == name) is not None:
        raise AlreadyExists(f"Type {name} already exists")
    conn.execute(insert(types).values(name=name, doc=dumps(type_)))
    return True


def get_type(conn: Connection, name: str | None) -> Doc:
    doc = _one(conn, types, types.c.name == (name or "").strip())
    if doc is None:
        raise NoSuchObject(f'Type "{name}" not found.')
    return doc


def drop_type(conn: Connection, name: str | None) -> bool:
    """ObjectStore.dropType: true once its transaction commits, the type found or not."""
    conn.execute(delete(types).where(types.c.name == (name or "").strip()))
    return True


# ------------------------------------------------------------------ partition marks


class UnknownTable(NoSuchObject):
    """markPartitionForEvent's missing table (Hive answers UnknownTableException)."""


class InvalidPartition(InvalidObject):
    """A partition spec that does not fit the table (Hive's InvalidPartitionException)."""


def _mark_key(conn: Connection, db: str, table_name: str, spec: dict[str, str]) -> str:
    """ObjectStore.getPartitionStr: the table's partition values in key order, joined by
    ","; every key must be given."""
    row = table_row(conn, lower(db), lower(table_name))
    if row is None:
        raise UnknownTable(f"Table: {table_name} is not found.")
    keys = partition_keys(json.loads(row.doc))
    if len(keys) != len(spec or {}):
        raise InvalidPartition(
            f"Number of partition columns in table: {len(keys)} doesn't match with number "
            f"of supplied partition values: {len(spec or {})}")
    values = []
    for key in keys:
        if (spec or {}).get(key) is None:
            raise InvalidPartition(f"No value found for partition column: {key}")
        values.append(spec[key])
    return ",".join(values)


def mark_partition(conn: Connection, db: str, table_name: str, spec: dict[str, str],
                   event_type: int) -> None:
    part = _mark_key(conn, db, table_name, spec)
    key = (partition_events.c.db_name == lower(db), partition_events.c.tbl_name == lower(table_name),
           partition_events.c.part_name == part, partition_events.c.event_type == int(event_type))
    conn.execute(delete(partition_events).where(and_(*key)))
    conn.execute(insert(partition_events).values(
        db_name=lower(db), tbl_name=lower(table_name), part_name=part,
        event_type=int(event_type), event_time=int(time.time() * 1000)))


def is_partition_marked(conn: Connection, db: str, table_name: str, spec: dict[str, str],
                        event_type: int) -> bool:
    part = _mark_key(conn, db, table_name, spec)
    return conn.execute(select(partition_events.c.event_time).where(
        partition_events.c.db_name == lower(db), partition_events.c.tbl_name == lower(table_name),
        partition_events.c.part_name == part,
        partition_events.c.event_type == int(event_type))).first() is not None


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


# ------------------------------------------------------------------ runtime statistics


def add_runtime_stat(conn: Connection, stat: Doc) -> None:
    """A query's runtime statistics (HiveServer2's re-optimization), stamped now when the
    client sent no create time."""
    created = int(stat.get("createTime") or now_s())
    conn.execute(insert(runtime_stats).values(create_time=created,
                                              doc=dumps({**stat, "createTime": created})))


def get_runtime_stats(conn: Connection, max_weight: int, max_create_time: int) -> list[Doc]:
    """ObjectStore.getRuntimeStats: the newest entries created before ``max_create_time``
    (any time for <= 0) until their weights add up to ``max_weight``."""
    query = select(runtime_stats.c.doc).order_by(runtime_stats.c.create_time.desc(),
                                                 runtime_stats.c.rs_id.desc())
    if max_create_time > 0:
        query = query.where(runtime_stats.c.create_time < max_create_time)
    out, left = [], max_weight
    for row in conn.execute(query):
        if left <= 0:
            break
        doc = json.loads(row.doc)
        out.append(doc)
        left -= int(doc.get("weight") or 0) or 1
    return out
