"""Messages of databases, tables, partitions, functions, INSERT and RELOAD.

Each function returns the ``LogEntry`` Hive 4's DbNotificationListener writes for the
change: the message's keys in the declaration order of the ``@JsonProperty`` fields of the
``JSON*Message`` class named (``org.apache.hadoop.hive.metastore.messaging.json``; Jackson
writes them in that order and writes unset fields as ``null``), and the row's columns as
the listener sets them. Documents are the domain's plain dicts (Thrift field names).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from hms_txn.domain.events.event_messages.base import (
    Doc, LogEntry, MessageContext, bool_text, catalog_of, encode_file, encode_files,
    is_external, is_transactional, partition_key_values, partition_name)

# AlterTableRequest.writeId and Partition.writeId default to -1: the write id of an alter
# that is not part of a transaction.
NO_WRITE_ID = -1


# ------------------------------------------------------------------ databases


def create_database(ctx: MessageContext, db: Doc) -> LogEntry:
    """CREATE_DATABASE (``JSONCreateDatabaseMessage``): ``dbJson`` is the Database."""
    message = {**ctx.head(), "cat": db.get("catalogName"), "db": db["name"],
               "dbJson": ctx.obj("Database", db), "timestamp": ctx.now()}
    return LogEntry("CREATE_DATABASE", message, db["name"], None, catalog_of(db, "catalogName"))


def alter_database(ctx: MessageContext, before: Doc, after: Doc) -> LogEntry:
    """ALTER_DATABASE (``JSONAlterDatabaseMessage``): ``db`` is the old name. Hive 2.3
    knows no ALTER_DATABASE; Impala needs ``dbObjAfterJson``."""
    message = {**ctx.head(), "db": before["name"],
               "dbObjBeforeJson": ctx.obj("Database", before),
               "dbObjAfterJson": ctx.obj("Database", after), "timestamp": ctx.now()}
    return LogEntry("ALTER_DATABASE", message, before["name"], None,
                    catalog_of(before, "catalogName"))


def drop_database(ctx: MessageContext, db: Doc) -> LogEntry:
    """DROP_DATABASE (``JSONDropDatabaseMessage``): the dropped Database in ``dbJson``."""
    message = {**ctx.head(), "cat": db.get("catalogName"), "db": db["name"],
               "dbJson": ctx.obj("Database", db), "timestamp": ctx.now()}
    return LogEntry("DROP_DATABASE", message, db["name"], None, catalog_of(db, "catalogName"))


# ------------------------------------------------------------------ tables


def _table_entry(event_type: str, message: dict[str, Any], table: Doc) -> LogEntry:
    return LogEntry(event_type, message, table["dbName"], table["tableName"], catalog_of(table))


def create_table(ctx: MessageContext, table: Doc, files: Iterable[str] = ()) -> LogEntry:
    """CREATE_TABLE (``JSONCreateTableMessage``). ``files``: the paths of the files under
    the new table's location (a table created over existing data); Hive lists them for a
    managed table and writes ``[]`` for an external one. ``files`` is never null."""
    listed = [] if is_external(table) else [encode_file(f) for f in files]
    message = {**ctx.head(), "db": table["dbName"], "table": table["tableName"],
               "tableType": table.get("tableType"), "tableObjJson": ctx.obj("Table", table),
               "timestamp": ctx.now(), "files": listed}
    return _table_entry("CREATE_TABLE", message, table)


def alter_table(ctx: MessageContext, before: Doc, after: Doc, *, is_truncate: bool = False,
                write_id: int | None = None) -> LogEntry:
    """ALTER_TABLE (``JSONAlterTableMessage``), also for a rename (one event) and TRUNCATE.

    ``db``, ``table`` and ``tableType`` come from the table before; the row's columns from
    the table after (a rename's row names the new table, its message the old one).
    ``write_id``: the alter's write id (``AlterTableRequest.writeId``), -1 outside a
    transaction. Hive 4's newest class also has ``locOwner``, which 4.0.x does not write.
    """
    message = {**ctx.head(), "db": before["dbName"], "table": before["tableName"],
               "tableType": before.get("tableType"),
               "tableObjBeforeJson": ctx.obj("Table", before),
               "tableObjAfterJson": ctx.obj("Table", after),
               "isTruncateOp": bool_text(is_truncate), "timestamp": ctx.now(),
               "writeId": NO_WRITE_ID if write_id is None else int(write_id)}
    return _table_entry("ALTER_TABLE", message, after)


def drop_table(ctx: MessageContext, table: Doc) -> LogEntry:
    """DROP_TABLE (``JSONDropTableMessage``); Impala needs ``tableObjJson``."""
    message = {**ctx.head(), "db": table["dbName"], "table": table["tableName"],
               "tableType": table.get("tableType"), "tableObjJson": ctx.obj("Table", table),
               "timestamp": ctx.now()}
    return _table_entry("DROP_TABLE", message, table)


# ------------------------------------------------------------------ partitions


def add_partitions(ctx: MessageContext, table: Doc, partitions: Sequence[Doc],
                   files: Mapping[str, Iterable[str]] | None = None) -> LogEntry | None:
    """ADD_PARTITION (``JSONAddPartitionMessage``): one event for all the partitions one
    call added; None for none (Hive writes no event).

    ``partitionFiles`` (``messaging/PartitionFiles``: ``partitionName``, ``files``) is
    ``[]`` for an external table; otherwise one entry per partition, whose files are
    ``files[<partition name>]`` (the files already under its location) for a plain managed
    table and always ``[]`` for a transactional one (its data arrives as ACID writes).
    Hive 2.3's reader and Hive's replication iterate it without a null check.
    """
    if not partitions:
        return None
    if is_external(table):
        partition_files: list[dict[str, Any]] = []
    else:
        partition_files = []
        for part in partitions:
            name = partition_name(table, part["values"])
            listed = [] if is_transactional(table) else (files or {}).get(name, ())
            partition_files.append({"partitionName": name,
                                    "files": [encode_file(f) for f in listed]})
    message = {**ctx.head(), "db": table["dbName"], "table": table["tableName"],
               "tableType": table.get("tableType"), "tableObjJson": ctx.obj("Table", table),
               "timestamp": ctx.now(),
               "partitions": [partition_key_values(table, p["values"]) for p in partitions],
               "partitionListJson": [ctx.obj("Partition", p) for p in partitions],
               "partitionFiles": partition_files}
    return _table_entry("ADD_PARTITION", message, table)


def _partition_write_id(partition: Doc, write_id: int | None) -> int:
    if write_id is not None:
        return int(write_id)
    value = partition.get("writeId")
    return NO_WRITE_ID if value is None else int(value)


def alter_partition(ctx: MessageContext, table: Doc, before: Doc, after: Doc, *,
                    is_truncate: bool = False, write_id: int | None = None) -> LogEntry:
    """ALTER_PARTITION (``JSONAlterPartitionMessage``), one per altered partition (also a
    rename_partition). ``keyValues`` are the partition's values before; ``write_id``
    defaults to the new partition's ``writeId`` (what HiveAlterHandler passes). The row
    names the partition's table before the change."""
    message = {**ctx.head(), "cat": table.get("catName"), "db": table["dbName"],
               "table": table["tableName"], "tableType": table.get("tableType"),
               "tableObjJson": ctx.obj("Table", table), "isTruncateOp": bool_text(is_truncate),
               "timestamp": ctx.now(), "writeId": _partition_write_id(after, write_id),
               "keyValues": partition_key_values(table, before["values"]),
               "partitionObjBeforeJson": ctx.obj("Partition", before),
               "partitionObjAfterJson": ctx.obj("Partition", after)}
    return LogEntry("ALTER_PARTITION", message, before.get("dbName") or table["dbName"],
                    before.get("tableName") or table["tableName"],
                    before.get("catName") or catalog_of(table))


def alter_partitions(ctx: MessageContext, table: Doc, after: Sequence[Doc], *,
                     is_truncate: bool = False, write_id: int | None = None) -> LogEntry | None:
    """ALTER_PARTITIONS (``JSONAlterPartitionsMessage``, HIVE-27746): one event for a batch
    of altered partitions, carrying only the partitions after the change; ``writeId`` is the
    first partition's. Hive writes it from ``alter_partitions`` when
    ``metastore.alterPartitions.notification.v2.enabled`` (default true) in the releases
    that have it; Hive 2.3 readers do not know the type and Impala handles it only since
    IMPALA-13593 (Dec 2024). hms-txn writes one ALTER_PARTITION per partition, which every
    reader knows; this builder is there for a switch to Hive's batch event."""
    if not after:
        return None
    message = {**ctx.head(), "cat": table.get("catName"), "db": table["dbName"],
               "table": table["tableName"], "tableType": table.get("tableType"),
               "tableObjJson": ctx.obj("Table", table), "isTruncateOp": bool_text(is_truncate),
               "timestamp": ctx.now(), "writeId": _partition_write_id(after[0], write_id),
               "partitions": [partition_key_values(table, p["values"]) for p in after],
               "partitionListJson": [ctx.obj("Partition", p) for p in after]}
    return _table_entry("ALTER_PARTITIONS", message, table)


def drop_partitions(ctx: MessageContext, table: Doc,
                    values: Sequence[Sequence[str]]) -> LogEntry | None:
    """DROP_PARTITION (``JSONDropPartitionMessage``): one event for the partitions one call
    dropped, ``partitions`` as partition column -> value maps (never ``{"values": ...}``);
    None for none. Impala needs ``tableObjJson`` and ``partitions``."""
    if not values:
        return None
    message = {**ctx.head(), "cat": table.get("catName"), "db": table["dbName"],
               "table": table["tableName"], "tableType": table.get("tableType"),
               "tableObjJson": ctx.obj("Table", table), "timestamp": ctx.now(),
               "partitions": [partition_key_values(table, v) for v in values]}
    return _table_entry("DROP_PARTITION", message, table)


# ------------------------------------------------------------------ DML


def insert(ctx: MessageContext, table: Doc, partition: Doc | None, files: Sequence[str], *,
           replace: bool = True, subdirs: Sequence[str | None] | None = None) -> LogEntry:
    """INSERT (``JSONInsertMessage``) for one ``InsertEventRequestData`` of
    ``fire_listener_event``: ``ptnObjJson`` null for an unpartitioned table, ``replace`` as
    text (``InsertEventRequestData.replace`` unset means true), ``files`` the added files
    with their subdirectories (``subDirectoryList``).

    One key more than Hive 4 writes: ``partKeyVals`` (partition column -> value, ``{}``
    unpartitioned), the key Hive 2.3's ``JSONInsertMessage.getPartitionKeyValues`` reads;
    Hive 4 readers ignore it.
    """
    message = {**ctx.head(), "cat": table.get("catName"), "db": table["dbName"],
               "table": table["tableName"], "tableType": table.get("tableType"),
               "tableObjJson": ctx.obj("Table", table),
               "ptnObjJson": ctx.obj("Partition", partition),
               "timestamp": ctx.now(), "replace": bool_text(replace),
               "files": encode_files(files, subdirs),
               "partKeyVals": partition_key_values(table, partition["values"]) if partition else {}}
    return _table_entry("INSERT", message, table)


def reload(ctx: MessageContext, table: Doc, partition: Doc | None = None, *,
           refresh: bool = True) -> LogEntry:
    """RELOAD (``JSONReloadMessage``, HIVE-26838): ``fire_listener_event`` with
    ``FireEventRequestData.refreshEvent`` (Impala's REFRESH: true, INVALIDATE: false).
    The newest class also has ``partitionListJson``, which 4.0.x's builder does not fill."""
    message = {"timestamp": ctx.now(), **ctx.head(), "db": table["dbName"],
               "table": table["tableName"], "tableObjJson": ctx.obj("Table", table),
               "ptnObjJson": ctx.obj("Partition", partition), "refreshEvent": bool_text(refresh)}
    return _table_entry("RELOAD", message, table)


# ------------------------------------------------------------------ functions


def create_function(ctx: MessageContext, function: Doc) -> LogEntry:
    """CREATE_FUNCTION (``JSONCreateFunctionMessage``): the Function in ``functionObjJson``."""
    message = {**ctx.head(), "db": function["dbName"],
               "functionObjJson": ctx.obj("Function", function), "timestamp": ctx.now()}
    return LogEntry("CREATE_FUNCTION", message, function["dbName"], None, catalog_of(function))


def drop_function(ctx: MessageContext, function: Doc) -> LogEntry:
    """DROP_FUNCTION (``JSONDropFunctionMessage``): ``db`` and ``functionName`` only."""
    message = {**ctx.head(), "db": function["dbName"],
               "functionName": function["functionName"], "timestamp": ctx.now()}
    return LogEntry("DROP_FUNCTION", message, function["dbName"], None, catalog_of(function))
