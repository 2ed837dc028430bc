"""The metastore's relational schema (SQLAlchemy Core).

Catalog objects are stored as JSON documents mirroring the Thrift structs, next to the
columns we look them up by. Documents keep every field a client sent, including ones this
server does not interpret, so a table round-trips unchanged; the columns are what queries
and uniqueness need.

Each table records in ``info["since"]`` the schema version that introduced it; the
migration code creates the tables newer than a database's version when it upgrades it.
The security tables (delegation tokens, roles, privileges, HiveServer2's token store) are in
``security_schema``, on the same ``metadata``.
"""

from sqlalchemy import (
    BigInteger, Column, ForeignKey, Index, Integer, LargeBinary, MetaData, String, Table, Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 11

metadata = MetaData()

NAME = String(128)          # Hive's identifier limit
PART_NAME = String(767)     # Hive's PART_NAME column width
DOC = Text                  # JSON document

schema_version = Table(
    "hms_schema_version", metadata,
    Column("id", Integer, primary_key=True),
    Column("version", Integer, nullable=False),
    info={"since": 1},
)

# A single row whose counter a durable commit with nothing else to write increments
# (hms_txn.store.engine: after lazy commits, the commit that fsyncs them). It must change a
# value: SQLite writes no page for an UPDATE that leaves a row as it was, and a commit with
# no page to write fsyncs nothing.
durability_marker = Table(
    "hms_durability_marker", metadata,
    Column("id", Integer, primary_key=True),
    Column("n", BigInteger, nullable=False),
    info={"since": 5},
)

# ------------------------------------------------------------------------------ catalog (v1)

dbs = Table(
    "dbs", metadata,
    Column("name", NAME, primary_key=True),
    Column("doc", DOC, nullable=False),
    info={"since": 1},
)

tbls = Table(
    "tbls", metadata,
    Column("tbl_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("db_name", NAME, ForeignKey("dbs.name"), nullable=False),
    Column("tbl_name", NAME, nullable=False),
    Column("tbl_type", String(64), nullable=False),
    Column("doc", DOC, nullable=False),
    UniqueConstraint("db_name", "tbl_name", name="uq_tbls_db_name"),
    info={"since": 1},
)

partitions = Table(
    "partitions", metadata,
    Column("part_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("tbl_id", BigInteger, ForeignKey("tbls.tbl_id", ondelete="CASCADE"),
           nullable=False),
    Column("part_name", PART_NAME, nullable=False),
    Column("doc", DOC, nullable=False),
    UniqueConstraint("tbl_id", "part_name", name="uq_partitions_name"),
    info={"since": 1},
)

functions = Table(
    "functions", metadata,
    Column("db_name", NAME, ForeignKey("dbs.name"), primary_key=True),
    Column("func_name", NAME, primary_key=True),
    Column("doc", DOC, nullable=False),
    info={"since": 1},
)

Index("ix_tbls_db", tbls.c.db_name)

# ------------------------------------------------------------------ notification log (v2)

# Every transaction writes an event here, so each page its INSERT touches is one more WAL
# frame for the commit to fsync. Since version 4: on SQLite the event id is the rowid (a
# BIGINT key would be a separate index beside the table), and there is no index on
# event_time (purging walks the log in id order, see hms_txn.notifications).
notification_log = Table(
    "notification_log", metadata,
    Column("event_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=False),
    Column("event_time", Integer, nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("cat_name", NAME),
    Column("db_name", NAME),
    Column("tbl_name", NAME),
    Column("message", Text, nullable=False),
    Column("message_format", String(32)),
    info={"since": 2},
)

# Single-row counter: the next event id. Updated under a row lock so ids are dense and
# strictly increasing in commit order even with several server processes.
notification_sequence = Table(
    "notification_sequence", metadata,
    Column("id", Integer, primary_key=True),
    Column("next_event_id", BigInteger, nullable=False),
    info={"since": 2},
)


# ------------------------------------------------------- transactions, write ids, locks (v2)
#
# Owned by hms_txn.txn / writeids / locks / compaction / housekeeping. Every id counter is a
# single row read with SELECT ... FOR UPDATE and bumped in the same database transaction that
# uses the ids, so two server processes on one PostgreSQL database can never hand out the
# same id; on SQLite every write transaction is serialized anyway.
#
# Operation types are stored as DataOperationType numbers (SELECT=1, INSERT=2, UPDATE=3,
# DELETE=4, UNSET=5, NO_TXN=6); lock types and states as LockType / LockState numbers.

TXN_ID = BigInteger().with_variant(Integer, "sqlite")

txns = Table(
    "txns", metadata,
    Column("txn_id", TXN_ID, primary_key=True, autoincrement=False),
    # 'o' open, 'a' aborted, 'c' committed (committed rows are kept: "already committed")
    Column("state", String(1), nullable=False),
    Column("txn_type", Integer, nullable=False, default=0),
    Column("started_ms", BigInteger, nullable=False),
    Column("last_heartbeat_ms", BigInteger, nullable=False),
    Column("heartbeat_count", Integer, nullable=False, default=0),
    Column("user_name", String(128), nullable=False),
    Column("host", String(128), nullable=False),
    Column("agent_info", String(128)),
    Column("meta_info", String(1024)),
    # highest txn id allocated when this txn committed (Hive's WS_COMMIT_ID)
    Column("commit_id", BigInteger),
    Column("ended_ms", BigInteger),
    info={"since": 2},
)
# open_txns / snapshots / timeouts scan the (few) non-committed rows only.
Index("ix_txns_state", txns.c.state, txns.c.txn_id)

next_txn_id = Table(
    "next_txn_id", metadata,
    Column("id", Integer, primary_key=True),
    Column("next_id", BigInteger, nullable=False),
    info={"since": 2},
)

# What an open transaction writes (from lock() and add_dynamic_partitions).
txn_components = Table(
    "txn_components", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("txn_id", TXN_ID, nullable=False),
    Column("db_name", NAME, nullable=False),
    Column("tbl_name", NAME),
    Column("part_name", PART_NAME),
    Column("operation_type", Integer, nullable=False),
    Column("write_id", BigInteger),
    info={"since": 2},
)
Index("ix_txn_components_txn", txn_components.c.txn_id)

# What committed transactions wrote: the compactor's work list.
completed_txn_components = Table(
    "completed_txn_components", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("txn_id", TXN_ID, nullable=False),
    Column("db_name", NAME, nullable=False),
    Column("tbl_name", NAME),
    Column("part_name", PART_NAME),
    Column("write_id", BigInteger),
    Column("update_delete", String(1), nullable=False, default="N"),
    Column("commit_ms", BigInteger),
    info={"since": 2},
)
Index("ix_ctc_object", completed_txn_components.c.db_name, completed_txn_components.c.tbl_name,
      completed_txn_components.c.part_name)
Index("ix_ctc_txn", completed_txn_components.c.txn_id)

# UPDATE/DELETE writes of committed transactions, for write-write conflict detection.
write_set = Table(
    "write_set", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("db_name", NAME, nullable=False),
    Column("tbl_name", NAME, nullable=False),
    Column("part_name", PART_NAME),
    Column("txn_id", TXN_ID, nullable=False),
    Column("commit_id", BigInteger, nullable=False),
    Column("operation_type", Integer, nullable=False),
    info={"since": 2},
)
Index("ix_write_set_object", write_set.c.db_name, write_set.c.tbl_name, write_set.c.commit_id)

txn_to_write_id = Table(
    "txn_to_write_id", metadata,
    Column("txn_id", TXN_ID, nullable=False),
    Column("db_name", NAME, nullable=False),
    Column("tbl_name", NAME, nullable=False),
    Column("write_id", BigInteger, nullable=False),
    UniqueConstraint("db_name", "tbl_name", "txn_id", name="uq_t2w_txn"),
    UniqueConstraint("db_name", "tbl_name", "write_id", name="uq_t2w_write_id"),
    info={"since": 2},
)
Index("ix_t2w_txn", txn_to_write_id.c.txn_id)

next_write_id = Table(
    "next_write_id", metadata,
    Column("db_name", NAME, primary_key=True),
    Column("tbl_name", NAME, primary_key=True),
    Column("next_id", BigInteger, nullable=False),
    info={"since": 2},
)

hive_locks = Table(
    "hive_locks", metadata,
    Column("ext_id", BigInteger, primary_key=True, autoincrement=False),
    Column("int_id", Integer, primary_key=True, autoincrement=False),
    Column("txn_id", TXN_ID, nullable=False, default=0),
    Column("db_name", NAME, nullable=False),
    Column("tbl_name", NAME),
    Column("part_name", PART_NAME),
    Column("state", Integer, nullable=False),          # LockState
    Column("lock_type", Integer, nullable=False),      # LockType
    Column("operation_type", Integer),
    Column("last_heartbeat_ms", BigInteger, nullable=False),
    Column("acquired_ms", BigInteger),
    Column("heartbeat_count", Integer, nullable=False, default=0),
    Column("user_name", String(128), nullable=False),
    Column("host", String(128), nullable=False),
    Column("agent_info", String(128)),
    Column("blocked_by_ext_id", BigInteger),
    Column("blocked_by_int_id", Integer),
    info={"since": 2},
)
Index("ix_hive_locks_txn", hive_locks.c.txn_id)
Index("ix_hive_locks_db", hive_locks.c.db_name, hive_locks.c.ext_id)

next_lock_id = Table(
    "next_lock_id", metadata,
    Column("id", Integer, primary_key=True),
    Column("next_id", BigInteger, nullable=False),
    info={"since": 2},
)

# Named rows locked FOR UPDATE to serialize a critical section across server processes
# (e.g. "locks": deciding which waiting locks may be granted).
txn_mutex = Table(
    "txn_mutex", metadata,
    Column("name", String(64), primary_key=True),
    info={"since": 2},
)

_COMPACTION_COLUMNS = lambda: [  # noqa: E731 - shared by the queue and the history
    Column("db_name", NAME, nullable=False),
    Column("tbl_name", NAME, nullable=False),
    Column("part_name", PART_NAME),
    Column("state", String(1), nullable=False),
    Column("ctype", Integer, nullable=False),             # CompactionType
    Column("properties", Text),                           # JSON map
    Column("worker_id", String(128)),
    Column("worker_version", String(128)),
    Column("start_ms", BigInteger),
    Column("enqueue_ms", BigInteger),
    Column("run_as", String(128)),
    Column("highest_write_id", BigInteger),
    Column("meta_info", Text),
    Column("hadoop_job_id", String(128)),
    Column("error_message", Text),
    Column("initiator_id", String(128)),
    Column("initiator_version", String(128)),
    Column("pool_name", String(128)),
    Column("number_of_buckets", Integer),
    Column("order_by", Text),
    Column("txn_id", BigInteger),
    Column("next_txn_id", BigInteger),
    Column("commit_ms", BigInteger),
    Column("cleaner_start_ms", BigInteger),
]

compaction_queue = Table(
    "compaction_queue", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    *_COMPACTION_COLUMNS(),
    info={"since": 2},
)
Index("ix_compaction_queue_object", compaction_queue.c.db_name, compaction_queue.c.tbl_name,
      compaction_queue.c.part_name)

completed_compactions = Table(
    "completed_compactions", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    *_COMPACTION_COLUMNS(),
    Column("end_ms", BigInteger),
    info={"since": 2},
)

next_compaction_id = Table(
    "next_compaction_id", metadata,
    Column("id", Integer, primary_key=True),
    Column("next_id", BigInteger, nullable=False),
    info={"since": 2},
)

# ------------------------------------------------------------ Hive's small stores (v8)
#
# Owned by hms_txn.domain.stats.runtime_stats, hms_txn.domain.catalog.type_definitions and
# partition_events. The security tables of the same version are in security_schema.

runtime_stats = Table(
    "runtime_stats", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("create_time", Integer, nullable=False),
    Column("weight", Integer, nullable=False),
    Column("payload", LargeBinary),
    info={"since": 8},
)
Index("ix_runtime_stats_time", runtime_stats.c.create_time)

# The legacy type calls (create_type, get_type, drop_type): fields as a JSON list.
type_definitions = Table(
    "type_definitions", metadata,
    Column("name", NAME, primary_key=True),
    Column("type1", String(767)),
    Column("type2", String(767)),
    Column("fields", Text),
    info={"since": 8},
)

# markPartitionForEvent: names as the caller sent them, values joined by "," (Hive's
# PARTITION_EVENTS).
partition_events = Table(
    "partition_events", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("cat_name", NAME),
    Column("db_name", NAME),
    Column("tbl_name", NAME),
    Column("part_name", Text),
    Column("event_type", Integer, nullable=False),
    Column("event_time", BigInteger, nullable=False),
    info={"since": 8},
)
Index("ix_partition_events_table", partition_events.c.db_name, partition_events.c.tbl_name)


# ------------------------------------------------------------------------ constraints (v6)
#
# Owned by hms_txn.domain.catalog.constraints. One row per column of a constraint, as Hive's
# KEY_CONSTRAINTS: ``parent_tbl_id`` is the table the constraint is declared on (for a
# foreign key, the referenced table), ``child_tbl_id`` the referencing table of a foreign
# key. Rows go with either table (domain.catalog.tables.Tables.drop_rows). Column names are stored
# lower-case; ``kind`` is Hive's MConstraint type (0 primary key, 1 foreign key, 2 unique,
# 3 not null, 4 default, 5 check); ``value`` the default value or check expression.

table_constraints = Table(
    "table_constraints", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("constraint_name", NAME, nullable=False),
    Column("kind", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Column("parent_tbl_id", BigInteger, nullable=False),
    Column("parent_column", NAME),
    Column("child_tbl_id", BigInteger),
    Column("child_column", NAME),
    Column("enable_validate_rely", Integer, nullable=False),
    Column("update_rule", Integer),
    Column("delete_rule", Integer),
    Column("value", Text),
    info={"since": 6},
)
Index("ix_table_constraints_parent", table_constraints.c.parent_tbl_id,
      table_constraints.c.constraint_name)
Index("ix_table_constraints_child", table_constraints.c.child_tbl_id)


# ------------------------------------------------------------------ column statistics (v7)
#
# Owned by hms_txn.domain.stats.column_stats. One row per table (or partition), engine ("hive",
# "impala", ...) and column, as Hive's TAB_COL_STATS / PART_COL_STATS; ``data`` is the
# ColumnStatisticsData document. Rows go with their table or partition (ON DELETE CASCADE;
# SQLite enforces it, see hms_txn.store.engine).

STATS_COLUMN = String(767)  # Hive's COLUMN_NAME width

table_column_stats = Table(
    "table_column_stats", metadata,
    Column("tbl_id", BigInteger, ForeignKey("tbls.tbl_id", ondelete="CASCADE"), primary_key=True),
    Column("engine", NAME, primary_key=True),
    Column("col_name", STATS_COLUMN, primary_key=True),
    Column("col_type", Text, nullable=False),
    Column("last_analyzed", BigInteger, nullable=False),
    Column("data", DOC, nullable=False),
    info={"since": 7},
)

partition_column_stats = Table(
    "partition_column_stats", metadata,
    Column("part_id", BigInteger, ForeignKey("partitions.part_id", ondelete="CASCADE"),
           primary_key=True),
    Column("engine", NAME, primary_key=True),
    Column("col_name", STATS_COLUMN, primary_key=True),
    Column("col_type", Text, nullable=False),
    Column("last_analyzed", BigInteger, nullable=False),
    Column("data", DOC, nullable=False),
    info={"since": 7},
)


# ------------------------------------------------------- ACID write notifications (v9)
#
# Owned by hms_txn.domain.events.notifications: Hive's TXN_WRITE_NOTIFICATION_LOG. One row per
# (transaction, table, partition) an ACID write went into (add_write_notification_log, or a
# commit's writeEventInfos), read by get_all_write_event_info and purged with the
# notification log. ``part_name`` is "" for an unpartitioned table; ``files`` the encoded
# file URIs joined with "]"; the objects are TJSON text. Indexed by time for the purge (one
# row per write, not per commit as in the notification log).

txn_write_notification_log = Table(
    "txn_write_notification_log", metadata,
    Column("txn_id", BigInteger, primary_key=True, autoincrement=False),
    Column("db_name", NAME, primary_key=True),
    Column("tbl_name", NAME, primary_key=True),
    Column("part_name", PART_NAME, primary_key=True),
    Column("write_id", BigInteger, nullable=False),
    Column("table_obj", Text, nullable=False),
    Column("partition_obj", Text),
    Column("files", Text, nullable=False),
    Column("event_time", Integer, nullable=False),
    Index("ix_txn_write_notification_time", "event_time"),
    info={"since": 9},
)


# ------------------------------------------------- catalogs and catalog extras (v10)
#
# Owned by hms_txn.domain.catalog.catalogs and catalog_extras. Documents mirror the Thrift structs
# (Catalog, DataConnector, StoredProcedure, Package, ReplicationMetrics). Databases live in
# the ``hive`` catalog only; ``catalogs`` holds it and the catalogs created with
# create_catalog.

catalogs = Table(
    "catalogs", metadata,
    Column("name", NAME, primary_key=True),
    Column("doc", DOC, nullable=False),
    info={"since": 10},
)

dataconnectors = Table(
    "dataconnectors", metadata,
    Column("name", NAME, primary_key=True),
    Column("doc", DOC, nullable=False),
    info={"since": 10},
)

stored_procedures = Table(
    "stored_procedures", metadata,
    Column("db_name", NAME, primary_key=True),
    Column("name", NAME, primary_key=True),
    Column("doc", DOC, nullable=False),
    info={"since": 10},
)

packages = Table(
    "packages", metadata,
    Column("db_name", NAME, primary_key=True),
    Column("name", NAME, primary_key=True),
    Column("doc", DOC, nullable=False),
    info={"since": 10},
)

replication_metrics = Table(
    "replication_metrics", metadata,
    Column("scheduled_execution_id", BigInteger, primary_key=True, autoincrement=False),
    Column("policy", String(256), nullable=False),
    Column("dump_execution_id", BigInteger, nullable=False),
    Column("doc", DOC, nullable=False),
    info={"since": 10},
)

# One rebuild at a time per materialized view (Hive's MATERIALIZATION_REBUILD_LOCKS): the
# transaction rebuilding it and its last heartbeat.
materialization_rebuild_locks = Table(
    "materialization_rebuild_locks", metadata,
    Column("db_name", NAME, primary_key=True),
    Column("tbl_name", NAME, primary_key=True),
    Column("txn_id", TXN_ID, nullable=False),
    Column("last_heartbeat_ms", BigInteger, nullable=False),
    info={"since": 11},
)

# Delta-file metrics a Hive compactor reports per table/partition (Hive's
# COMPACTION_METRICS_CACHE); part_name "" is the table itself.
compaction_metrics = Table(
    "compaction_metrics", metadata,
    Column("db_name", NAME, primary_key=True),
    Column("tbl_name", NAME, primary_key=True),
    Column("part_name", PART_NAME, primary_key=True),
    Column("metric_type", String(32), primary_key=True),
    Column("metric_value", Integer, nullable=False),
    Column("version", Integer, nullable=False),
    info={"since": 11},
)
