"""Trino's Hive connector: the metastore calls of everyday statements, replayed over Thrift.

Trino speaks the Hive 3.1-era IDL through its own stubs: it never sends ``catName``, the
``@hive#db`` prefix, ``engine``, processor capabilities or, on reads, a
``validWriteIdList``. Every ``ThriftHiveMetastore`` operation opens a new connection and
closes it (``per_call``); ``set_ugi`` is sent only with impersonation (off here).
Sources (trinodb/trino, plugin/trino-hive/src/main/java/io/trino/plugin/hive/; the full
call map is /work/notes/clients/trino.md):

* ``Client`` = metastore/thrift/ThriftHiveMetastoreClient.java (alternative calls:
  ``get_table_req`` falls back to ``get_table`` on any exception but NoSuchObject,
  ``alter_table_req``/``alter_partitions_req`` to the old calls on UNKNOWN_METHOD only)
* ``THM`` = metastore/thrift/ThriftHiveMetastore.java, ``STHM`` =
  metastore/SemiTransactionalHiveMetastore.java, ``HiveTransaction`` =
  metastore/HiveTransaction.java
* ``MetastoreUtil`` = lib/trino-metastore/.../MetastoreUtil.java (function names and
  resource URIs of SQL routines)

Not replayed (not in Trino or not read): TRUNCATE and SHOW TRANSACTIONS/LOCKS/COMPACTIONS
have no metastore call in Trino; DESCRIBE reads only the table; the metastore calls of
STHM.Committer.prepareMergeExistingTable after the files of an UPDATE/DELETE/MERGE are
written were not read, so those statements replay their transaction only.
"""

from __future__ import annotations

import time

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.engines.replay import Raises, Returns, Step, equals, fields_set, satisfies
from tests.engines.structs import (
    basic_stats, column_stats, given_committed_write, given_database, given_table,
    partition, table, txn_list, with_params, write_id_list)

DB = "trino_db"
USER = "trino"
HOST = "trino-coordinator"
QUERY_ID = "20240101_000000_00001_abcde"
CAPS = t.ClientCapabilities([t.ClientCapability.INSERT_ONLY_TABLES])
COLS = ["id", "name"]


@pytest.fixture
def trino(hive4_session, client):
    given_database(client, DB)
    return hive4_session(per_call=True)


def get_table_req(name: str, cite: str = "THM.getTable → Client.getTable") -> Step:
    return Step(cite + " (get_table_req first; NoSuchObjectException means no table)",
                "get_table_req",
                (t.GetTableRequest(dbName=DB, tblName=name, capabilities=CAPS),),
                Returns(fields_set("table.sd.location", "table.parameters", "table.sd.cols")),
                save="table")


def txn_id(s: dict) -> int:
    return s["txn"].txn_ids[0]


def begin_transaction(name: str, op: int, *, partitioned: bool = False) -> list[Step]:
    """STHM.makeHiveTransaction and the table lock of HiveTransaction/THM.acquireSharedLock:
    a SHARED_READ component with the operation's type (Trino never asks SHARED_WRITE)."""
    component = t.LockComponent(type=t.LockType.SHARED_READ, level=t.LockLevel.TABLE, dbname=DB,
                                tablename=name, operationType=op, isTransactional=True,
                                isDynamicPartitionWrite=(partitioned and
                                                         op != t.DataOperationType.SELECT))
    return [
        Step("STHM.getServerExpectedHeartbeatIntervalMillis → THM.getConfigValue (the "
             "heartbeat interval is half of it)", "get_config_value",
             ("metastore.txn.timeout", None),
             Returns(satisfies("a duration", lambda r, s: bool(r) and r[0].isdigit()))),
        Step("STHM.makeHiveTransaction → Client.openTransaction", "open_txns",
             (t.OpenTxnRequest(num_txns=1, user=USER, hostname=HOST),),
             Returns(fields_set("txn_ids.0")), save="txn"),
        Step("STHM.makeHiveTransaction: heartbeat task → Client.sendTransactionHeartbeat",
             "heartbeat_txn_range", lambda s: (t.HeartbeatTxnRangeRequest(min=txn_id(s),
                                                                           max=txn_id(s)),),
             Returns(equals("aborted", set()), equals("nosuch", set()))),
        Step("THM.acquireSharedLock → createLockComponentForOperation → THM.acquireLock "
             "(not ACQUIRED: unlock and HIVE_TABLE_LOCK_NOT_ACQUIRED)", "lock",
             lambda s: (t.LockRequest(component=[component], txnid=txn_id(s), user=USER,
                                      hostname=HOST, agentInfo=QUERY_ID),),
             Returns(equals("state", t.LockState.ACQUIRED))),
    ]


def snapshot(name: str) -> list[Step]:
    """Client.getValidWriteIds: ``get_open_txns`` and a ValidTxnList with current txn 0."""
    return [
        Step("HiveTransaction.getValidWriteIds → Client.getValidWriteIds", "get_open_txns", (),
             Returns(fields_set("txn_high_water_mark", "open_txns")), save="txns"),
        Step("Client.getValidWriteIds (a TException: 'Transactional tables support requires "
             "Hive metastore version at least 3.0')", "get_valid_write_ids",
             lambda s: (t.GetValidWriteIdsRequest(fullTableNames=[f"{DB}.{name}"],
                                                  validTxnList=txn_list(s, "txns", None)),),
             Returns(fields_set("tblValidWriteIds.0.writeIdHighWaterMark",
                                "tblValidWriteIds.0.invalidWriteIds")),
             save="writeids"),
    ]


def commit() -> Step:
    return Step("STHM.cleanupQuery → postCommitCleanup → Client.commitTransaction", "commit_txn",
                lambda s: (t.CommitTxnRequest(txnid=txn_id(s)),), Returns())


def update_table_statistics(name: str, *, acid: bool = False) -> list[Step]:
    """THM.updateTableStatistics: re-read the table and its column statistics, write the
    basic statistics into the parameters, then the column statistics."""
    def alter(s):
        tbl = with_params(s["table"].table, basic_stats())
        if acid:
            tbl.writeId = s["alloc"].txnToWriteIds[0].writeId
        return (DB, name, tbl, t.EnvironmentContext({"DO_NOT_UPDATE_STATS": "true"}))
    return [
        get_table_req(name, "THM.updateTableStatistics → getTable"),
        Step("THM.updateTableStatistics → getTableColumnStatistics → "
             "Client.getTableColumnStatistics", "get_table_statistics_req",
             (t.TableStatsRequest(dbName=DB, tblName=name, colNames=COLS),),
             Returns(fields_set("tableStats"))),
        Step("THM.updateTableStatistics → alterTable", "alter_table_with_environment_context",
             alter, Returns()),
        Step("THM.updateTableStatistics → Client.setTableColumnStatistics",
             "update_table_column_statistics", (column_stats(t, DB, name),),
             Returns(equals(None, True))),
    ]


def read_table_statistics(name: str) -> Step:
    return Step("SHOW STATS / planning: THM.getTableColumnStatistics", "get_table_statistics_req",
                (t.TableStatsRequest(dbName=DB, tblName=name, colNames=COLS),),
                Returns(satisfies("the statistics of both columns",
                                  lambda r, s: sorted(o.colName for o in r.tableStats) == COLS)))


# --------------------------------------------------------------------------- schemas, tables

def test_create_schema(trino):
    db = t.Database(name="made", description="by Trino", parameters={}, ownerName=USER,
                    ownerType=t.PrincipalType.USER)
    trino.replay(
        Step("THM.createDatabase → Client.createDatabase", "create_database", (db,), Returns()),
        Step("THM.createDatabase: AlreadyExistsException → SchemaAlreadyExistsException",
             "create_database", (db,), Raises("AlreadyExistsException")),
    )


def test_drop_schema(trino, client):
    given_database(client, "gone")
    given_database(client, "full")
    given_table(client, "full", "inside")
    trino.replay(
        Step("THM.dropDatabase → Client.dropDatabase", "drop_database", ("gone", True, False),
             Returns()),
        Step("THM.dropDatabase: NoSuchObjectException → SchemaNotFoundException",
             "drop_database", ("gone", True, False), Raises("NoSuchObjectException")),
        Step("THM.dropDatabase: InvalidOperationException (not empty) is not retried",
             "drop_database", ("full", True, False), Raises("InvalidOperationException")),
    )


@pytest.mark.parametrize("acid", [False, True], ids=["plain", "acid"])
def test_create_table(trino, client, acid):
    location = client.get_database(DB).locationUri + "/made"
    tbl = table(t, DB, "made", partitioned=True, acid=acid, owner=USER)
    tbl.sd.location = location
    tbl.parameters.update({"trino_version": "450", "trino_query_id": QUERY_ID})
    trino.replay(
        Step("STHM.commitShared → Committer.executeAddTableOperations → THM.createTable → "
             "Client.createTable", "create_table", (tbl,), Returns()),
        Step("THM.createTable: AlreadyExistsException → TableAlreadyExistsException",
             "create_table", (tbl,), Raises("AlreadyExistsException")),
        get_table_req("made"),
    )


def test_drop_table(trino, client):
    given_table(client, DB, "dropped", partitioned=True)
    trino.replay(
        get_table_req("dropped", "STHM.Committer.prepareDropTable → getTable"),
        get_table_req("dropped", "THM.dropTable → getTable"),
        Step("THM.dropTable → Client.dropTable", "drop_table", (DB, "dropped", True), Returns()),
        Step("a later query: THM.getTable → NoSuchObjectException means no table",
             "get_table_req", (t.GetTableRequest(dbName=DB, tblName="dropped",
                                                 capabilities=CAPS),),
             Raises("NoSuchObjectException")),
    )


# --------------------------------------------------------------------------- SELECT

def test_select_with_partition_pruning_and_statistics(trino, client):
    given_table(client, DB, "events", partitioned=True)
    trino.replay(
        get_table_req("events"),
        Step("THM.getPartitionNamesByFilter → Client.getPartitionNamesFiltered (values from "
             "the TupleDomain)", "get_partition_names_ps", (DB, "events", ["2024-01-02"], -1),
             Returns(equals(None, ["dt=2024-01-02"]))),
        Step("THM.getPartitionsByNames → Client.getPartitionsByNames", "get_partitions_by_names",
             (DB, "events", ["dt=2024-01-02"]),
             Returns(satisfies("the partition with its location",
                               lambda r, s: [(p.values, bool(p.sd.location)) for p in r]
                               == [(["2024-01-02"], True)]))),
        Step("THM.getPartitionColumnStatistics → Client.getPartitionColumnStatistics (no "
             "engine: Trino's IDL has none)", "get_partitions_statistics_req",
             (t.PartitionsStatsRequest(dbName=DB, tblName="events", colNames=COLS,
                                       partNames=["dt=2024-01-02"]),),
             Returns(fields_set("partStats"))),
    )


def test_select_from_acid_table(trino, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    trino.replay(
        get_table_req("acid"),
        begin_transaction("acid", t.DataOperationType.SELECT),
        snapshot("acid"),
        Step("THM.getTableColumnStatistics → Client.getTableColumnStatistics",
             "get_table_statistics_req", (t.TableStatsRequest(dbName=DB, tblName="acid",
                                                              colNames=COLS),),
             Returns(fields_set("tableStats"))),
        commit(),
    )


# --------------------------------------------------------------------------- INSERT, ANALYZE

def test_insert_into_plain_table_with_statistics(trino, client):
    given_table(client, DB, "plain")
    trino.replay(
        get_table_req("plain"),
        update_table_statistics("plain"),
        read_table_statistics("plain"),
    )


def test_insert_into_new_partition_with_statistics(trino, client):
    tbl = given_table(client, DB, "events", partitioned=True)
    new_part = with_params(partition(t, tbl, ["2024-01-03"]), basic_stats())
    trino.replay(
        get_table_req("events"),
        Step("THM.getPartitionsByNames: is the partition there?", "get_partitions_by_names",
             (DB, "events", ["dt=2024-01-03"]), Returns(equals(None, []))),
        Step("STHM.commitShared → THM.addPartitions → Client.addPartitions (a count other "
             "than the request's is HIVE_METASTORE_ERROR)", "add_partitions", ([new_part],),
             Returns(equals(None, 1))),
        Step("THM.addPartitions → setPartitionColumnStatistics → "
             "Client.setPartitionColumnStatistics", "update_partition_column_statistics",
             (column_stats(t, DB, "events", part_name="dt=2024-01-03"),),
             Returns(equals(None, True))),
        Step("SHOW STATS: THM.getPartitionColumnStatistics", "get_partitions_statistics_req",
             (t.PartitionsStatsRequest(dbName=DB, tblName="events", colNames=COLS,
                                       partNames=["dt=2024-01-03"]),),
             Returns(satisfies("the new partition's statistics",
                               lambda r, s: sorted(o.colName for o in
                                                   r.partStats.get("dt=2024-01-03", []))
                               == COLS))),
    )


def test_insert_into_acid_table_with_statistics(trino, client):
    given_table(client, DB, "acid", acid=True)

    def alter_req(s):
        tbl = s["table"].table
        tbl.writeId = s["alloc"].txnToWriteIds[0].writeId
        return (t.AlterTableRequest(dbName=DB, tableName="acid", table=tbl,
                                    validWriteIdList=write_id_list(s, "writeids"),
                                    writeId=tbl.writeId,
                                    environmentContext=t.EnvironmentContext({})),)

    trino.replay(
        get_table_req("acid"),
        begin_transaction("acid", t.DataOperationType.INSERT),
        Step("STHM.beginInsert → allocateWriteId → Client.allocateTableWriteIds",
             "allocate_table_write_ids",
             lambda s: (t.AllocateTableWriteIdsRequest(dbName=DB, tableName="acid",
                                                       txnIds=[txn_id(s)]),),
             Returns(fields_set("txnToWriteIds.0.writeId")), save="alloc"),
        get_table_req("acid", "STHM.updateTableWriteId → THM.updateTableWriteId → getTable"),
        snapshot("acid"),
        Step("THM.alterTransactionalTable → Client.alterTransactionalTable (falls back to "
             "alter_table_with_environment_context only on UNKNOWN_METHOD)", "alter_table_req",
             alter_req, Returns()),
        update_table_statistics("acid", acid=True),
        commit(),
        read_table_statistics("acid"),
    )


def test_analyze_partitioned_table(trino, client):
    given_table(client, DB, "events", partitioned=True)
    trino.replay(
        get_table_req("events"),
        Step("THM.updatePartitionStatistics → getPartitionsByNames", "get_partitions_by_names",
             (DB, "events", ["dt=2024-01-01"]),
             Returns(satisfies("the partition", lambda r, s: len(r) == 1)), save="parts"),
        Step("THM.updatePartitionStatistics → getPartitionColumnStatistics",
             "get_partitions_statistics_req",
             (t.PartitionsStatsRequest(dbName=DB, tblName="events", colNames=COLS,
                                       partNames=["dt=2024-01-01"]),),
             Returns(fields_set("partStats"))),
        Step("THM.updatePartitionStatistics → alterPartitionWithoutStatistics → "
             "Client.alterPartition", "alter_partition",
             lambda s: (DB, "events", with_params(s["parts"][0], basic_stats())), Returns()),
        Step("THM.updatePartitionStatistics → Client.setPartitionColumnStatistics",
             "update_partition_column_statistics",
             (column_stats(t, DB, "events", part_name="dt=2024-01-01"),),
             Returns(equals(None, True))),
        Step("SHOW STATS: THM.getPartitionColumnStatistics", "get_partitions_statistics_req",
             (t.PartitionsStatsRequest(dbName=DB, tblName="events", colNames=COLS,
                                       partNames=["dt=2024-01-01"]),),
             Returns(satisfies("both columns", lambda r, s: sorted(
                 o.colName for o in r.partStats.get("dt=2024-01-01", [])) == COLS))),
    )


def test_drop_column_statistics(trino, client):
    """THM.updateTableStatistics ends by deleting the statistics of columns that have none
    any more (after a DELETE or an ANALYZE over fewer columns)."""
    given_table(client, DB, "plain")
    trino.replay(
        update_table_statistics("plain"),
        Step("THM.updateTableStatistics → Client.deleteTableColumnStatistics",
             "delete_table_column_statistics", (DB, "plain", "name", None),
             Returns(equals(None, True))),
        Step("THM.getTableColumnStatistics", "get_table_statistics_req",
             (t.TableStatsRequest(dbName=DB, tblName="plain", colNames=COLS),),
             Returns(satisfies("only the id column's statistics",
                               lambda r, s: [o.colName for o in r.tableStats] == ["id"]))),
    )


# --------------------------------------------------------------------------- UPDATE/DELETE/MERGE

@pytest.mark.parametrize("op", ["update", "delete", "merge"])
def test_row_changes_on_acid_table(trino, client, op):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    trino.replay(
        get_table_req("acid"),
        begin_transaction("acid", t.DataOperationType.UPDATE),
        Step(f"{op.upper()}: STHM.beginMerge → beginOperation → allocateWriteId",
             "allocate_table_write_ids",
             lambda s: (t.AllocateTableWriteIdsRequest(dbName=DB, tableName="acid",
                                                       txnIds=[txn_id(s)]),),
             Returns(fields_set("txnToWriteIds.0.writeId"))),
        snapshot("acid"),
        commit(),
    )


# --------------------------------------------------------------------------- functions

def test_create_and_drop_function(trino):
    name = "trino__double_it__" + "0" * 64          # MetastoreUtil.metastoreFunctionName
    function = t.Function(functionName=name, dbName=DB, className="TrinoFunction",
                          ownerName=USER, ownerType=t.PrincipalType.USER,
                          createTime=int(time.time()), functionType=t.FunctionType.JAVA,
                          resourceUris=[t.ResourceUri(t.ResourceType.FILE, "KLUv_QBYaQAAeyJ9")])
    trino.replay(
        Step("THM.getFunction: NoSuchObjectException (or a Hive 2 MetaException "
             "'NoSuchObjectException(...') means none", "get_function", (DB, name),
             Raises("NoSuchObjectException")),
        Step("THM.createFunction (NoSuchObjectException → SchemaNotFoundException)",
             "create_function", (function,), Returns()),
        Step("THM.getFunctions(db, 'trino__double_it__*')", "get_functions",
             (DB, "trino__double_it__*"), Returns(equals(None, [name]))),
        Step("THM.getFunction", "get_function", (DB, name),
             Returns(equals("className", "TrinoFunction"), fields_set("resourceUris.0.uri"))),
        Step("THM.dropFunction", "drop_function", (DB, name), Returns()),
        Step("THM.getFunction after the drop", "get_function", (DB, name),
             Raises("NoSuchObjectException")),
    )

