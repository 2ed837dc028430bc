"""Notification messages exactly as Hive 4 writes them, so Hive's own deserializers read ours.

Readers of the notification log (Impala's event processor, Hive's replication, other
metastores' caches, our extension mode) decode each event with Hive's
``MessageDeserializer`` and call the message's getters without null checks. Each builder
here returns the ``LogEntry`` -- event type, message dict, DB_NAME/TBL_NAME/CAT_NAME -- that
Hive 4's ``DbNotificationListener`` writes for the same change, with the message's keys,
value types and key order those of the ``org.apache.hadoop.hive.metastore.messaging.json
.JSON*Message`` class it names:

* Thrift objects (``tableObjJson``, ``partitionListJson``, ``dbJson``, ``functionObjJson``,
  ``colStatsJson``, constraint lists) are the TJSONProtocol text of the object, made by the
  injected ``MessageContext.object_json`` (``hms_txn.wire.codec.object_json``);
* ``timestamp`` is a number of seconds; ``isTruncateOp``, ``replace``, ``refreshEvent`` are
  the strings "true"/"false"; a field Hive leaves unset is written as ``null``;
* files are lists of ``ReplChangeManager.encodeFileUri`` strings (``base.encode_file``);
  partition key maps go from partition column name to value in key order.

Every event the server writes is built here: the catalog changes (``databases``,
``tables``, ``partitions``), the data changes clients report (``dml_events``), the
transaction code (``txn``, ``txn_records``, ``txn_commit``, ``writeids``) and extension
mode's forwarded changes (``extension_events``) hand the entries to
``notifications.append``, which encodes each message into the MESSAGE column in the
configured format (``MessageContext.message_format``: ``json-0.2`` or ``gzip(json-2.0)``,
``formats.encode``); ``formats.decode`` reads one back by its row's format.

Which Hive. The target is Hive 4.0.x. Fields that only later releases write are left out
(ALLOC_WRITE_ID_EVENT's and COMMIT_COMPACTION_EVENT's ``catName``, ALTER_TABLE's and
ADD_PARTITION's ``locOwner``, RELOAD's ``partitionListJson``, HIVE-28976's write ids on
COMMIT_TXN/ABORT_TXN). Fields whose 4.0.x presence is not pinned (``cat`` on
CREATE/DROP_DATABASE, INSERT, ALTER/DROP_PARTITION; ABORT_TXN's ``dbsUpdated``;
UPDATE_TBL_COL_STAT_EVENT's ``validWriteIds``) are written: every Hive reader (2.3 and 4,
``FAIL_ON_UNKNOWN_PROPERTIES`` off) ignores a key it does not know and fails on a key it
needs and does not get. For the same reason INSERT also carries Hive 2.3's ``partKeyVals``.

Where Hive 4 writes no event, there is no builder and the caller writes nothing:

* ``commit_txn``'s ``CommitTxnRequest.keyValue`` update of a table parameter
  (``TxnHandler.updateKeyValueAssociatedWithTxn`` is a direct TABLE_PARAMS update with no
  listener): no ALTER_TABLE, only the COMMIT_TXN. Our metadata caches must still drop the
  table, so ``commit_txn(altered_tables=...)`` names it under ``hmsTxnAlteredTables``, a
  key Hive's and Impala's readers ignore;
* ``alter_function`` (Hive has no ALTER_FUNCTION event type);
* ACID writes: ``add_write_notification_log`` (and ``_in_batch``) and a commit's
  ``writeEventInfos`` write no NOTIFICATION_LOG row (see below);
* catalogs, data connectors, schemas and schema versions, ``load_partition_done``;
* OPEN_TXN, COMMIT_TXN and ABORT_TXN of READ_ONLY transactions.

Where we write one Hive 4.0 does not: the ABORT_TXN of a transaction the reaper aborts
after ``hive.txn.timeout`` (Hive's reaper logs none, HIVE-27797): our caches, and Impala,
learn from it that the transaction's write ids are aborted.

ACID writes and COMMIT_TXN. Hive 4 keeps ACID write information out of the notification
log: ``add_write_notification_log`` stores a TXN_WRITE_NOTIFICATION_LOG row (merged per
transaction, table and partition) and COMMIT_TXN carries null write lists; a reader that
wants a transaction's writes calls ``get_all_write_event_info(txnId)`` when it sees the
COMMIT_TXN, which is what Impala does for every COMMIT_TXN (MetastoreShim, compat-hive-3,
CommitTxnEvent). hms-txn does the same:

* ``add_write_notification_log`` and ``writeEventInfos`` become ``WriteNotification`` rows
  (``transactions.write_notification`` / ``commit_write_notification``) in a table of our
  store (``notifications.add_write_notification``), served by ``get_all_write_event_info``
  as ``write_event_info`` documents and purged with the notification log's time to live
  (as ``ObjectStore.cleanWriteNotificationEvents`` does). Hive records ``writeEventInfos``
  only for replicated transactions; we record those of every commit when
  ``hive.metastore.dml.events`` is true (our Spark integration and streaming client
  report their writes that way, as HiveServer2 does with ``add_write_notification_log``);
* COMMIT_TXN is ``transactions.commit_txn``: txnid only, the lists null.

This keeps every reader right: Hive 2.3 and 4 deserializers never see an ACID_WRITE_EVENT
row (Hive's ``getEventMessage`` throws on that type string: its enum name is ACID_WRITE),
Impala finds the writes where it looks for them, and our own metadata cache and extension
mode never read ACID_WRITE_EVENT rows nor COMMIT_TXN's lists: they follow
ALLOC_WRITE_ID_EVENT (``dbName``, ``tableName``, ``txnIdList``, ``writeIdList``) and the
``txnid`` of COMMIT_TXN/ABORT_TXN, which keep their shapes.
"""

from hms_txn.domain.events.event_messages.base import (
    DEFAULT_CATALOG, LogEntry, MessageContext, ObjectJson, encode_file, encode_files)
from hms_txn.domain.events.event_messages.ddl import (
    add_partitions, alter_database, alter_partition, alter_partitions, alter_table,
    create_database, create_function, create_table, drop_database, drop_function,
    drop_partitions, drop_table, insert, reload)
from hms_txn.domain.events.event_messages.metadata import (
    add_check_constraints, add_default_constraints, add_foreign_keys, add_not_null_constraints,
    add_primary_keys, add_unique_constraints, delete_partition_column_stats,
    delete_table_column_stats, drop_constraint, update_partition_column_stats,
    update_table_column_stats)
from hms_txn.domain.events.event_messages.transactions import (
    ALTERED_TABLES_KEY, WriteNotification, abort_txn, acid_write_message, alloc_write_ids,
    commit_compaction, commit_txn, commit_write_notification, open_txns,
    other_changed_tables, write_event_info, write_notification)

__all__ = [
    "DEFAULT_CATALOG", "LogEntry", "MessageContext", "ObjectJson", "encode_file", "encode_files",
    "add_partitions", "alter_database", "alter_partition", "alter_partitions", "alter_table",
    "create_database", "create_function", "create_table", "drop_database", "drop_function",
    "drop_partitions", "drop_table", "insert", "reload",
    "add_check_constraints", "add_default_constraints", "add_foreign_keys",
    "add_not_null_constraints", "add_primary_keys", "add_unique_constraints",
    "delete_partition_column_stats", "delete_table_column_stats", "drop_constraint",
    "update_partition_column_stats", "update_table_column_stats",
    "ALTERED_TABLES_KEY", "WriteNotification", "abort_txn", "acid_write_message",
    "alloc_write_ids", "commit_compaction", "commit_txn", "commit_write_notification",
    "open_txns", "other_changed_tables", "write_event_info", "write_notification",
]
