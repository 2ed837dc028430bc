"""Messages of transactions, write ids, ACID writes and compactions.

Hive 4 writes these through DbNotificationListener's direct-SQL path, in the transaction
handler's own database transaction, and leaves CAT_NAME, DB_NAME and TBL_NAME NULL on
OPEN_TXN, COMMIT_TXN and ABORT_TXN (ALLOC_WRITE_ID_EVENT and COMMIT_COMPACTION_EVENT name
their table, still with a NULL catalog). Hive 2.3's reader knows none of these types.

ACID writes (``add_write_notification_log``, and a commit's ``writeEventInfos``) are not
notification events in Hive 4 -- see the package docstring for what we do instead:
``write_notification`` builds the TXN_WRITE_NOTIFICATION_LOG row that replaces them, and
``acid_write_message`` the ``JSONAcidWriteMessage`` Hive builds from it (its replication
puts it in dumps, never in NOTIFICATION_LOG).
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Sequence

from hms_txn.domain.events.event_messages.base import (
    Doc, LogEntry, MessageContext, encode_file, encode_files, join_write_event_files,
    partition_name, split_write_event_files)


def open_txns(ctx: MessageContext, first: int, last: int) -> LogEntry:
    """OPEN_TXN (``JSONOpenTxnMessage``): one event per ``open_txns`` call, written with the
    from/to constructor, so ``txnIds`` is null and readers expand ``fromTxnId..toTxnId``
    (``getTxnIds()``). Hive writes none for ``TxnType.READ_ONLY`` transactions."""
    message = {"txnIds": None, "timestamp": ctx.now(), "fromTxnId": int(first),
               "toTxnId": int(last), **ctx.head()}
    return LogEntry("OPEN_TXN", message, None, None, None)


# An hms-txn key of COMMIT_TXN (Hive's readers ignore keys they do not know): the tables whose
# parameters the commit changed from CommitTxnRequest.keyValue, for which Hive writes no
# event. Our metadata caches read it to drop those tables (see the package docstring).
ALTERED_TABLES_KEY = "hmsTxnAlteredTables"


def commit_txn(ctx: MessageContext, txn_id: int,
               altered_tables: Iterable[tuple[str, str]] = ()) -> LogEntry:
    """COMMIT_TXN (``JSONCommitTxnMessage``), built as ``buildCommitTxnMessage(txnId)``:
    the seven write lists are null (Hive fills them only in replication dumps, from
    TXN_WRITE_NOTIFICATION_LOG; a reader asks ``get_all_write_event_info``). Hive writes
    none for a READ_ONLY transaction nor for a Hive replication transaction.

    ``altered_tables``: (db, table) pairs whose parameters this commit set from
    ``CommitTxnRequest.keyValue``; written under ``ALTERED_TABLES_KEY`` only when there are
    any."""
    message: dict[str, Any] = {
        "txnid": int(txn_id), "timestamp": ctx.now(), **ctx.head(), "writeIds": None,
        "databases": None, "tables": None, "partitions": None, "tableObjs": None,
        "partitionObjs": None, "files": None}
    altered = [{"db": db, "table": table} for db, table in altered_tables]
    if altered:
        message[ALTERED_TABLES_KEY] = altered
    return LogEntry("COMMIT_TXN", message, None, None, None)


def other_changed_tables(event_type: str, message: Doc, db_name: str | None,
                         tbl_name: str | None) -> list[tuple[str, str]]:
    """The tables, besides the row's own DB_NAME.TBL_NAME, whose metadata an event changes
    (lower-case (db, table) pairs): the old name of a renamed table (a rename's ALTER_TABLE
    row names the new table, its message the old one) and the tables whose parameters a
    commit set (``ALTERED_TABLES_KEY`` of COMMIT_TXN). What a metadata cache must drop
    beyond the row's table; empty for every other event."""
    if event_type == "ALTER_TABLE":
        old = ((message.get("db") or "").lower(), (message.get("table") or "").lower())
        row = ((db_name or "").lower(), (tbl_name or "").lower())
        return [old] if all(old) and old != row else []
    if event_type == "COMMIT_TXN":
        return [(t["db"].lower(), t["table"].lower()) for t in message.get(ALTERED_TABLES_KEY) or ()]
    return []


def abort_txn(ctx: MessageContext, txn_id: int,
              dbs_updated: Sequence[str] | None = None) -> LogEntry:
    """ABORT_TXN (``JSONAbortTxnMessage``), one per aborted transaction (``abort_txns``
    too); none for READ_ONLY transactions. ``dbsUpdated`` (the databases the transaction
    wrote) is in the newer listener only; written, null unless given, since readers that
    do not know it ignore it."""
    message = {"txnid": int(txn_id), "timestamp": ctx.now(), **ctx.head(),
               "dbsUpdated": None if dbs_updated is None else list(dbs_updated)}
    return LogEntry("ABORT_TXN", message, None, None, None)


def alloc_write_ids(ctx: MessageContext, db: str, table: str,
                    pairs: Sequence[tuple[int, int]]) -> LogEntry | None:
    """ALLOC_WRITE_ID_EVENT (``JSONAllocWriteIdMessage``) for the (txn id, write id) pairs
    one ``allocate_table_write_ids`` call allocated (the two lists are parallel); None for
    none. ``catName`` (PR #5810, 2025) is not written by 4.0.x."""
    if not pairs:
        return None
    message = {**ctx.head(), "dbName": db, "tableName": table,
               "txnIdList": [int(t) for t, _ in pairs],
               "writeIdList": [int(w) for _, w in pairs], "timestamp": ctx.now()}
    return LogEntry("ALLOC_WRITE_ID_EVENT", message, db, table, None)


def commit_compaction(ctx: MessageContext, txn_id: int, compaction_id: int,
                      compaction_type: str, db: str, table: str,
                      part_name: str | None) -> LogEntry:
    """COMMIT_COMPACTION_EVENT (``JSONCommitCompactionMessage``) when a compaction's
    transaction commits: ``type`` the CompactionType name ("MAJOR", "MINOR", ...),
    ``partName`` null for an unpartitioned table. Impala reloads the partition (or the
    table) it names."""
    message = {"txnid": int(txn_id), "timestamp": ctx.now(), **ctx.head(),
               "compactionId": int(compaction_id), "type": compaction_type.upper(),
               "dbname": db, "tableName": table, "partName": part_name}
    return LogEntry("COMMIT_COMPACTION_EVENT", message, db, table, None)


# ------------------------------------------------------------------ ACID writes


class WriteNotification(NamedTuple):
    """A TXN_WRITE_NOTIFICATION_LOG row (``TxnHandler.addWriteNotificationLog``): one per
    (transaction, table, partition); a second write to the same one adds its files.
    ``get_all_write_event_info`` answers these as ``WriteEventInfo`` (``write_event_info``)."""
    txn_id: int
    write_id: int
    database: str
    table: str
    partition: str          # "" for an unpartitioned table, as HMSHandler records it
    table_obj: str          # WNL_TABLE_OBJ: tableObjJson
    partition_obj: str | None
    files: str              # WNL_FILES: the encoded files joined with "]"
    event_time: int


def write_notification(ctx: MessageContext, txn_id: int, write_id: int, table: Doc,
                       partition: Doc | None, files: Sequence[str],
                       subdirs: Sequence[str | None] | None = None) -> WriteNotification:
    """The write record of ``add_write_notification_log`` (and each request of
    ``add_write_notification_log_in_batch``): the table and partition as they are now,
    the files encoded as ``encode_file`` with their subdirectories."""
    return WriteNotification(
        int(txn_id), int(write_id), table["dbName"], table["tableName"],
        partition_name(table, partition["values"]) if partition is not None else "",
        ctx.obj("Table", table), ctx.obj("Partition", partition),
        join_write_event_files(encode_files(files, subdirs)), ctx.now())


def commit_write_notification(ctx: MessageContext, txn_id: int, info: Doc, table: Doc,
                              partition: Doc | None) -> WriteNotification:
    """The write record of one ``CommitTxnRequest.writeEventInfos`` entry.

    Hive 4 (``HMSHandler.commit_txn``) records these only for a replayed replication
    transaction, whose ``files`` (joined with "]") are encoded ``file#checksum#cmroot#subdir``
    entries: each file goes under the local table or partition location as
    ``root/subdir/name``. hms-txn records them for every transaction that sends them (the
    Spark integration and the streaming client do, instead of
    ``add_write_notification_log``): an encoded entry as Hive places it; a relative path
    (a name, or ``delta_x/name``) under the location, its directory as the subdirectory;
    an absolute path or URI as it is, its directory below the location (if it is below) as
    the subdirectory.
    """
    root = ((partition if partition is not None else table).get("sd") or {}).get("location") or ""
    root = root.rstrip("/")
    encoded = []
    for entry in split_write_event_files(info.get("files")):
        if not entry:
            continue
        path, _, fragment = entry.partition("#")
        if fragment:
            subdir = fragment.split("#")[2] if fragment.count("#") >= 2 else ""
            name = path.rstrip("/").rsplit("/", 1)[-1]
            path = "/".join(p for p in (root, subdir, name) if p)
        elif path.startswith("/") or ":" in path.split("/", 1)[0]:
            inner = path[len(root) + 1:] if root and path.startswith(root + "/") else ""
            subdir = inner.rpartition("/")[0]
        else:
            subdir = path.rpartition("/")[0]
            path = f"{root}/{path}" if root else path
        encoded.append(encode_file(path, subdir or None))
    return WriteNotification(
        int(txn_id), int(info["writeId"]), table["dbName"], table["tableName"],
        partition_name(table, partition["values"]) if partition is not None else "",
        ctx.obj("Table", table), ctx.obj("Partition", partition),
        join_write_event_files(encoded), ctx.now())


def write_event_info(row: WriteNotification) -> dict[str, Any]:
    """The ``WriteEventInfo`` document ``get_all_write_event_info`` returns for a row
    (``ObjectStore.getAllWriteEventInfo``); Impala reads ``tableObj``/``partitionObj`` with
    ``MessageBuilder.getTObj``."""
    info: dict[str, Any] = {"writeId": row.write_id, "database": row.database,
                            "table": row.table, "files": row.files,
                            "partition": row.partition, "tableObj": row.table_obj}
    if row.partition_obj is not None:
        info["partitionObj"] = row.partition_obj
    return info


def acid_write_message(ctx: MessageContext, row: WriteNotification) -> dict[str, Any]:
    """``JSONAcidWriteMessage`` of a write record (what Hive's listener builds from an
    AcidWriteEvent before it stores only the row): ``files`` a list."""
    return {"txnid": row.txn_id, "writeId": row.write_id, "timestamp": row.event_time,
            **ctx.head(), "database": row.database, "table": row.table,
            "partition": row.partition, "tableObjJson": row.table_obj,
            "partitionObjJson": row.partition_obj, "files": split_write_event_files(row.files)}
