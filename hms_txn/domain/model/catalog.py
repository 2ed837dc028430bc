"""The catalog's stored form and its reads: databases, tables and partitions.

Objects are plain dicts that mirror the Thrift structs field by field (``tableName``,
``sd``, ``partitionKeys``, ...) and are stored as JSON documents; the service layer converts
them from and to the wire. Names are case-insensitive and stored lower-case, like the Java
metastore does. Every function here runs on a connection the caller gives it; the changes
are in ``databases``, ``tables`` and ``partitions``, each of which writes the change's
notification event (``event_messages``) in the change's own transaction.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import InvalidInput, InvalidObject, NoSuchObject
from hms_txn.domain.model import names, partition_filter
from hms_txn.store.schema import dbs, partitions, tbls

Doc = dict[str, Any]

MANAGED = "MANAGED_TABLE"
EXTERNAL = "EXTERNAL_TABLE"
VIEW = "VIRTUAL_VIEW"
MATERIALIZED_VIEW = "MATERIALIZED_VIEW"
TABLE_TYPES = {MANAGED, EXTERNAL, VIEW, MATERIALIZED_VIEW}
DDL_TIME = "transient_lastDdlTime"


def dumps(doc: Doc) -> str:
    return json.dumps(doc, separators=(",", ":"))


def now_s() -> int:
    return int(time.time())


def is_true(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def is_external(table: Doc) -> bool:
    return table.get("tableType") == EXTERNAL or is_true((table.get("parameters") or {}).get("EXTERNAL"))


def is_transactional(table: Doc) -> bool:
    return is_true((table.get("parameters") or {}).get("transactional"))


def partition_keys(table: Doc) -> list[str]:
    return [k["name"].lower() for k in table.get("partitionKeys") or []]


# ------------------------------------------------------------------------------ rows

def database_row(conn: Connection, name: str):
    return conn.execute(select(dbs.c.doc).where(dbs.c.name == name)).first()


def require_database(conn: Connection, name: str) -> Doc:
    row = database_row(conn, name)
    if row is None:
        raise NoSuchObject(f"database {name} does not exist")
    return json.loads(row.doc)


def table_row(conn: Connection, db: str, name: str, *, for_update: bool = False):
    query = select(tbls.c.tbl_id, tbls.c.doc).where(tbls.c.db_name == db, tbls.c.tbl_name == name)
    if for_update:
        query = query.with_for_update()
    return conn.execute(query).first()


def require_table(conn: Connection, db: str, name: str, *,
                  for_update: bool = False) -> tuple[int, Doc]:
    """(table id, document) of ``db.name`` (lower-case names); NoSuchObject naming the
    database when that is what is missing."""
    row = table_row(conn, db, name, for_update=for_update)
    if row is None:
        if database_row(conn, db) is None:
            raise NoSuchObject(f"database {db} does not exist")
        raise NoSuchObject(f"table {db}.{name} does not exist")
    return row.tbl_id, json.loads(row.doc)


def partition_rows(conn: Connection, tbl_id: int, part_names: Iterable[str] | None = None,
                   limit: int = -1) -> list[tuple[str, Doc]]:
    """(name, document) of a table's partitions (those named, if given), in name order."""
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


def partition_name(table: Doc, values: list[str]) -> str:
    """The partition name of ``values`` in ``table`` (InvalidObject when they do not fit
    its partition keys)."""
    keys = partition_keys(table)
    if len(values) != len(keys):
        raise InvalidObject(
            f"partition values {values!r} do not match the partition keys "
            f"({', '.join(keys)}) of table {table['dbName']}.{table['tableName']}")
    return names.make_partition_name(keys, [str(v) for v in values])


def set_table_parameter_in(conn: Connection, tbl_id: int, key: str, value: str, *,
                           must_exist: bool) -> tuple[str, str]:
    """Set one table parameter inside the caller's transaction; returns the table's
    (database, name). Like Hive's ``TxnHandler.updateKeyValueAssociatedWithTxn``, a direct
    update that writes no ALTER_TABLE event (the commit's COMMIT_TXN names the table for
    our caches: ``event_messages.commit_txn``).

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
    conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(doc=dumps(doc)))
    return doc["dbName"], doc["tableName"]


# ------------------------------------------------------------------------------ reads

def get_database(conn: Connection, name: str) -> Doc:
    return require_database(conn, names.lower(name))


def list_databases(conn: Connection, pattern: str | None = None) -> list[str]:
    """Names matching ``pattern`` as ``get_databases`` matches them (see names.matches)."""
    all_names = conn.execute(select(dbs.c.name).order_by(dbs.c.name)).scalars().all()
    return [n for n in all_names if names.matches(pattern, n, empty_matches_all=False)]


def get_table(conn: Connection, db: str, name: str) -> Doc:
    return require_table(conn, names.lower(db), names.lower(name))[1]


def get_tables(conn: Connection, db: str, table_names: Iterable[str] | None) -> list[Doc]:
    db = names.lower(db)
    require_database(conn, db)
    query = select(tbls.c.doc).where(tbls.c.db_name == db)
    if table_names is not None:
        wanted = sorted({names.lower(n) for n in table_names if n})
        if not wanted:
            return []
        query = query.where(tbls.c.tbl_name.in_(wanted))
    rows = conn.execute(query.order_by(tbls.c.tbl_name)).scalars().all()
    return [json.loads(r) for r in rows]


def list_tables(conn: Connection, db: str, pattern: str | None = None,
                table_type: str | None = None, *, empty_matches_all: bool = True) -> list[str]:
    db = names.lower(db)
    if database_row(conn, db) is None:
        return []
    query = select(tbls.c.tbl_name).where(tbls.c.db_name == db)
    if table_type:
        query = query.where(tbls.c.tbl_type == table_type)
    rows = conn.execute(query.order_by(tbls.c.tbl_name)).scalars().all()
    return [n for n in rows if names.matches(pattern, n, empty_matches_all=empty_matches_all)]


def list_table_meta(conn: Connection, db_pattern: str | None, tbl_pattern: str | None,
                    table_types: list[str] | None) -> list[Doc]:
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


def count_tables(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(tbls)).scalar_one()


def get_partition(conn: Connection, db: str, table_name: str, values: list[str]) -> Doc:
    tbl_id, table = require_table(conn, names.lower(db), names.lower(table_name))
    name = partition_name(table, values)
    rows = partition_rows(conn, tbl_id, [name])
    if not rows:
        raise NoSuchObject(f"partition {name} of table {table['dbName']}.{table['tableName']} does not exist")
    return rows[0][1]


def get_partition_by_name(conn: Connection, db: str, table_name: str, part_name: str) -> Doc:
    tbl_id, table = require_table(conn, names.lower(db), names.lower(table_name))
    keys = partition_keys(table)
    name = names.make_partition_name(keys, names.partition_values_from_name(keys, part_name))
    rows = partition_rows(conn, tbl_id, [name])
    if not rows:
        raise NoSuchObject(f"partition {part_name} of table {table['dbName']}.{table['tableName']} does not exist")
    return rows[0][1]


def list_partitions(conn: Connection, db: str, table_name: str, *, limit: int = -1,
                    partial_values: list[str] | None = None, filter_text: str | None = None,
                    part_names: Iterable[str] | None = None) -> tuple[Doc, list[tuple[str, Doc]]]:
    """The table and its matching (name, partition) pairs in name order.

    ``partial_values`` is a prefix of values where "" matches anything (the ``_ps``
    calls); ``filter_text`` a partition filter; ``part_names`` explicit names.
    """
    tbl_id, table = require_table(conn, names.lower(db), names.lower(table_name))
    keys = partition_keys(table)
    wanted = None
    if part_names is not None:
        wanted = [names.make_partition_name(keys, names.partition_values_from_name(keys, n))
                  for n in part_names]
    post_filter = partial_values is not None or filter_text is not None
    rows = partition_rows(conn, tbl_id, wanted, -1 if post_filter else limit)
    return table, select_partitions(table, rows, limit=limit, partial_values=partial_values,
                                    filter_text=filter_text)


def select_partitions(table: Doc, rows: list[tuple[str, Doc]], *, limit: int = -1,
                      partial_values: list[str] | None = None,
                      filter_text: str | None = None) -> list[tuple[str, Doc]]:
    """The (name, partition) pairs of ``rows`` that match a partial spec and a filter, at
    most ``limit`` of them (limits of unfiltered reads are applied by the read)."""
    keys = partition_keys(table)
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
    if (partial_values is not None or filter_text is not None) and limit is not None and limit >= 0:
        rows = rows[:limit]
    return rows


def count_partitions_by_filter(conn: Connection, db: str, table_name: str,
                               filter_text: str) -> int:
    return len(list_partitions(conn, db, table_name, filter_text=filter_text)[1])


def hive_table_not_found(db: str | None, name: str | None) -> NoSuchObject:
    """Hive 4's text for a missing table (or its database) where its handler looks the
    table up with ``get_table_core``: ``<catalog>.<db>.<table> table not found``."""
    return NoSuchObject(f"hive.{names.lower(db)}.{names.lower(name)} table not found")
