"""Messages of constraints and column statistics (the calls the drop-in work adds).

As in ``ddl``: keys in the declaration order of the named ``JSON*Message`` class, unset
fields written as ``null``, row columns as DbNotificationListener sets them. None of these
types is known to Hive 2.3's reader; Impala ignores them (and skips the column-statistics
updates by default, ``default_skipped_hms_event_types``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from hms_txn.domain.events.event_messages.base import (
    DEFAULT_CATALOG, Doc, LogEntry, MessageContext, catalog_of)

# event type, JSON key of the list, Thrift struct of its elements, the element keys naming
# the table the row is filed under (Hive files a foreign key under the parent table).
_CONSTRAINTS = {
    "primary_keys": ("ADD_PRIMARYKEY", "primaryKeyListJson", "SQLPrimaryKey",
                     ("table_db", "table_name")),
    "foreign_keys": ("ADD_FOREIGNKEY", "foreignKeyListJson", "SQLForeignKey",
                     ("pktable_db", "pktable_name")),
    "unique_constraints": ("ADD_UNIQUECONSTRAINT", "uniqueConstraintListJson",
                           "SQLUniqueConstraint", ("table_db", "table_name")),
    "not_null_constraints": ("ADD_NOTNULLCONSTRAINT", "notNullConstraintListJson",
                             "SQLNotNullConstraint", ("table_db", "table_name")),
    "default_constraints": ("ADD_DEFAULTCONSTRAINT", "defaultConstraintListJson",
                            "SQLDefaultConstraint", ("table_db", "table_name")),
    "check_constraints": ("ADD_CHECKCONSTRAINT", "checkConstraintListJson",
                          "SQLCheckConstraint", ("table_db", "table_name")),
}


def _add_constraints(ctx: MessageContext, which: str, columns: Sequence[Doc]) -> LogEntry | None:
    if not columns:
        return None     # DbNotificationListener writes nothing for an empty list
    event_type, key, kind, (db_key, table_key) = _CONSTRAINTS[which]
    message = {**ctx.head(), "timestamp": ctx.now(), key: [ctx.obj(kind, c) for c in columns]}
    first = columns[0]
    return LogEntry(event_type, message, first.get(db_key), first.get(table_key), catalog_of(first))


def add_primary_keys(ctx: MessageContext, keys: Sequence[Doc]) -> LogEntry | None:
    """ADD_PRIMARYKEY (``JSONAddPrimaryKeyMessage``: ``primaryKeyListJson``)."""
    return _add_constraints(ctx, "primary_keys", keys)


def add_foreign_keys(ctx: MessageContext, keys: Sequence[Doc]) -> LogEntry | None:
    """ADD_FOREIGNKEY (``JSONAddForeignKeyMessage``: ``foreignKeyListJson``); the row is
    filed under the parent table (``pktable_db``/``pktable_name``), as Hive does."""
    return _add_constraints(ctx, "foreign_keys", keys)


def add_unique_constraints(ctx: MessageContext, columns: Sequence[Doc]) -> LogEntry | None:
    """ADD_UNIQUECONSTRAINT (``JSONAddUniqueConstraintMessage``)."""
    return _add_constraints(ctx, "unique_constraints", columns)


def add_not_null_constraints(ctx: MessageContext, columns: Sequence[Doc]) -> LogEntry | None:
    """ADD_NOTNULLCONSTRAINT (``JSONAddNotNullConstraintMessage``)."""
    return _add_constraints(ctx, "not_null_constraints", columns)


def add_default_constraints(ctx: MessageContext, columns: Sequence[Doc]) -> LogEntry | None:
    """ADD_DEFAULTCONSTRAINT (``JSONAddDefaultConstraintMessage``)."""
    return _add_constraints(ctx, "default_constraints", columns)


def add_check_constraints(ctx: MessageContext, columns: Sequence[Doc]) -> LogEntry | None:
    """ADD_CHECKCONSTRAINT (``JSONAddCheckConstraintMessage``)."""
    return _add_constraints(ctx, "check_constraints", columns)


def drop_constraint(ctx: MessageContext, db: str, table: str, constraint: str,
                    cat: str | None = None) -> LogEntry:
    """DROP_CONSTRAINT (``JSONDropConstraintMessage``). ``catName`` is in the class, but
    the 4.0-era builder call passes none, so it is written as null; the row carries the
    catalog."""
    message = {**ctx.head(), "catName": None, "dbName": db, "tableName": table,
               "constraintName": constraint, "timestamp": ctx.now()}
    return LogEntry("DROP_CONSTRAINT", message, db, table, cat or DEFAULT_CATALOG)


# ------------------------------------------------------------------ column statistics


def _stats_desc(stats: Doc) -> Doc:
    return stats.get("statsDesc") or {}


def update_table_column_stats(ctx: MessageContext, stats: Doc, table: Doc,
                              parameters: Mapping[str, str] | None, *, write_id: int = -1,
                              valid_write_ids: str | None = None) -> LogEntry:
    """UPDATE_TBL_COL_STAT_EVENT (``JSONUpdateTableColumnStatMessage``): ``colStatsJson``
    the ColumnStatistics, ``parameters`` the table's parameters after the update (a plain
    JSON map), ``tableObjJson`` the table. ``validWriteIds`` is in the 4.0-era class and
    dropped from later ones; written (null unless given) since every reader ignores a key it
    does not know. The message names no table: the row does."""
    desc = _stats_desc(stats)
    message = {"writeId": int(write_id), "timestamp": ctx.now(), "validWriteIds": valid_write_ids,
               **ctx.head(), "database": desc.get("dbName"),
               "colStatsJson": ctx.obj("ColumnStatistics", stats),
               "parameters": dict(parameters) if parameters is not None else None,
               "tableObjJson": ctx.obj("Table", table)}
    return LogEntry("UPDATE_TBL_COL_STAT_EVENT", message, desc.get("dbName"),
                    desc.get("tableName"), catalog_of(desc))


def delete_table_column_stats(ctx: MessageContext, db: str, table: str, column: str | None,
                              cat: str | None = None) -> LogEntry:
    """DELETE_TBL_COL_STAT_EVENT (``JSONDeleteTableColumnStatMessage``): ``database`` and
    ``colName``; the table is only in the row."""
    message = {"timestamp": ctx.now(), **ctx.head(), "database": db, "colName": column}
    return LogEntry("DELETE_TBL_COL_STAT_EVENT", message, db, table, cat or DEFAULT_CATALOG)


def update_partition_column_stats(ctx: MessageContext, stats: Doc, partition_values: Sequence[str],
                                  table: Doc, parameters: Mapping[str, str] | None, *,
                                  write_id: int = -1) -> LogEntry:
    """UPDATE_PART_COL_STAT_EVENT (``JSONUpdatePartitionColumnStatMessage``), one per
    partition (also from the batched update, which Hive writes as one row per partition):
    ``partVals`` the partition's values, ``parameters`` its parameters after the update."""
    desc = _stats_desc(stats)
    message: dict[str, Any] = {
        "writeId": int(write_id), "timestamp": ctx.now(), **ctx.head(),
        "catalog": desc.get("catName"), "database": desc.get("dbName"),
        "colStatsJson": ctx.obj("ColumnStatistics", stats),
        "parameters": dict(parameters) if parameters is not None else None,
        "partVals": [str(v) for v in partition_values], "tableObjJson": ctx.obj("Table", table)}
    return LogEntry("UPDATE_PART_COL_STAT_EVENT", message, desc.get("dbName"),
                    desc.get("tableName"), catalog_of(desc))


def delete_partition_column_stats(ctx: MessageContext, db: str, table: str, partition_name: str,
                                  partition_values: Sequence[str], column: str | None,
                                  cat: str | None = None) -> LogEntry:
    """DELETE_PART_COL_STAT_EVENT (``JSONDeletePartitionColumnStatMessage``)."""
    message = {"timestamp": ctx.now(), **ctx.head(), "catalog": cat, "database": db,
               "colName": column, "partName": partition_name,
               "partValues": [str(v) for v in partition_values]}
    return LogEntry("DELETE_PART_COL_STAT_EVENT", message, db, table, cat or DEFAULT_CATALOG)
