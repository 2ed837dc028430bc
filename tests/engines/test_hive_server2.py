"""HiveServer2 4.x: the metastore calls of everyday statements, replayed over Thrift.

Each test is one statement: the calls HiveServer2's metastore client sends for it, in
order, with the argument shapes of the source, and the answers it goes on with. Sources
(apache/hive master snapshots; /work/notes/clients/hs2.md has the full call map):

* ``Hive`` = ql/src/java/org/apache/hadoop/hive/ql/metadata/Hive.java
* ``HMSC`` = standalone-metastore/metastore-common/.../HiveMetaStoreClient.java (the
  Thrift client: catalog ``hive`` on request structs, ``@hive#db`` inside the database
  argument of the older calls via MetaStoreUtils.prependCatalogToDbName, capabilities
  ``[INSERT_ONLY_TABLES]`` on GetTableRequest)
* ``DbTxnManager``, ``DriverTxnHandler``, ``DbLockManager`` = ql/.../lockmgr and ql/...
* ``AcidUtils.makeLockComponents`` = ql/.../io/AcidUtils.java, with Hive 4's defaults
  (hive.txn.xlock.write=true, hive.txn.strict.locking.mode=true, read locks on, lockless
  reads off): INSERT into a plain table EXCLUSIVE, into an ACID table SHARED_READ,
  UPDATE/DELETE EXCL_WRITE, reads SHARED_READ (per partition when partitions are read)
* ``PartitionPruner``, ``PartitionIterable``, ``DescTableOperation``, ``BasicStatsTask``,
  ``ColStatsProcessor``, ``CreateFunctionOperation``, ``DropFunctionAnalyzer``,
  ``DropFunctionOperation``, ``Registry`` (ql/...)

Gaps (not read in Hive's source, so not replayed): Driver's exact moment of ``open_txns``
(it is taken before semantic analysis here, as Hive 3's Driver.compile does), whether a
DDL statement opens a transaction (DDL here runs without one), the semantic analyzer's
existence checks before CREATE TABLE, and the write type TRUNCATE's analyzer gives its
output (DDL_EXCLUSIVE for a plain table, DDL_EXCL_WRITE for an ACID one are assumed).
"""

from __future__ import annotations

import glob
import os
import time

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.engines.replay import (
    AnyAnswer, Raises, Returns, Step, UnknownMethod, equals, fields_set,
    satisfies)
from tests.engines.structs import (
    ALL_STATS_ACCURATE, DAYS, UPPER_UDF, basic_stats, column_stats, given_committed_write, given_database,
    given_table, min_history_write_ids, partition, table, txn_list, with_params,
    write_id_list)

CAT = "hive"


def hive_basic_stats() -> dict[str, str]:
    """BasicStatsTask's parameters: the basic statistics, and COLUMN_STATS_ACCURATE with
    BASIC_STATS true (StatsSetupConst.setBasicStatsState) keeping the accurate columns."""
    return {**basic_stats(), **ALL_STATS_ACCURATE}
DB = "hs2db"
PDB = f"@{CAT}#{DB}"          # MetaStoreUtils.prependCatalogToDbName(cat, db, conf)
USER = "hive"
HOST = "hs2.example.com"
QUERY = "hive_20240101000000_0001"
CAPS = t.ClientCapabilities([t.ClientCapability.INSERT_ONLY_TABLES])
DO_NOT_UPDATE_STATS = {"DO_NOT_UPDATE_STATS": "true"}
COLS = ["id", "name"]


@pytest.fixture
def hs2(hive4_session, client):
    """HiveServer2's metastore client: one connection per session thread, ``set_ugi``
    right after connecting (HMSC.open: not SASL, metastore.execute.setugi on; any
    TException is logged as "new client talking to old server" and ignored)."""
    given_database(client, DB)
    return hive4_session(on_open=(Step("HMSC.open", "set_ugi", (USER, [USER]), AnyAnswer()),))


# --------------------------------------------------------------------------- requests

def get_table_req(name: str, **fields) -> Step:
    return Step("Hive.getTable(db, tbl, metaRef, throw, checkTransactional, getColumnStats) "
                "→ HMSC.getTable(GetTableRequest)", "get_table_req",
                (t.GetTableRequest(dbName=DB, tblName=name, catName=CAT, capabilities=CAPS,
                                   engine="hive", getColumnStats=False, **fields),),
                Returns(fields_set("table.sd.location", "table.sd.cols", "table.parameters",
                                   "table.partitionKeys", "table.tableType", "table.id")),
                save="table")


def lock_component(type_, op, name: str | None = None, partition_name: str | None = None,
                   acid: bool = False, dynamic: bool = False) -> t.LockComponent:
    """LockComponentBuilder.build: the level follows the names set."""
    level = (t.LockLevel.PARTITION if partition_name else
             t.LockLevel.TABLE if name else t.LockLevel.DB)
    return t.LockComponent(type=type_, level=level, dbname=DB, tablename=name,
                           partitionname=partition_name, operationType=op,
                           isTransactional=acid, isDynamicPartitionWrite=dynamic)


def begin() -> list[Step]:
    """Opening the statement's transaction and its snapshot (hs2.md, transaction skeleton
    1-2)."""
    return [
        Step("DbTxnManager.openTxn → HMSC.openTxn(user, txnType) → openTxnsIntr", "open_txns",
             (t.OpenTxnRequest(num_txns=1, user=USER, hostname=HOST),),
             Returns(satisfies("one transaction id", lambda r, s: len(r.txn_ids) == 1)),
             save="txn"),
        Step("DbTxnManager.getValidTxns(excludeTxnTypes) → HMSC.getValidTxns",
             "get_open_txns_req", (t.GetOpenTxnsRequest(excludeTxnTypes=[t.TxnType.READ_ONLY]),),
             Returns(fields_set("txn_high_water_mark", "open_txns", "abortedBits")),
             save="txns"),
    ]


def txn_id(s: dict) -> int:
    return s["txn"].txn_ids[0]


def lock(*components: t.LockComponent) -> Step:
    return Step("DriverTxnHandler.acquireLocks → DbTxnManager.acquireLocks → DbLockManager.lock; "
                "components from AcidUtils.makeLockComponents", "lock",
                lambda s: (t.LockRequest(component=list(components), txnid=txn_id(s), user=USER,
                                         hostname=HOST, agentInfo=QUERY,
                                         zeroWaitReadEnabled=False, exclusiveCTAS=False),),
                Returns(equals("state", t.LockState.ACQUIRED), fields_set("lockid")),
                save="lock")


def allocate(name: str) -> Step:
    return Step("DriverTxnHandler.setWriteIdForAcidFileSinks → DbTxnManager.getTableWriteId → "
                "HMSC.allocateTableWriteIdsBatch", "allocate_table_write_ids",
                lambda s: (t.AllocateTableWriteIdsRequest(dbName=DB, tableName=name,
                                                          txnIds=[txn_id(s)]),),
                Returns(fields_set("txnToWriteIds.0.writeId")), save="alloc")


def write_id(s: dict) -> int:
    return s["alloc"].txnToWriteIds[0].writeId


def valid_write_ids(*names: str) -> Step:
    return Step("DriverTxnHandler.recordValidWriteIds → DbTxnManager.getValidWriteIds → "
                "HMSC.getValidWriteIds(tablesList, validTxnList)", "get_valid_write_ids",
                lambda s: (t.GetValidWriteIdsRequest(
                    fullTableNames=[f"{DB}.{n}" for n in names],
                    validTxnList=txn_list(s, "txns")),),
                Returns(satisfies(f"one TableValidWriteIds per table of {names}",
                                  lambda r, s: [w.fullTableName for w in r.tblValidWriteIds]
                                  == [f"{DB}.{n}" for n in names])),
                save="writeids")


def min_history() -> Step:
    return Step("DriverTxnHandler.recordValidWriteIds → DbTxnManager.addWriteIdsToMinHistory "
                "(transactional inputs; any TException fails the statement, no fall-back)",
                "add_write_ids_to_min_history",
                lambda s: (txn_id(s), min_history_write_ids(s, "writeids")), Returns())


def commit() -> Step:
    return Step("DbTxnManager.commitTxn", "commit_txn",
                lambda s: (t.CommitTxnRequest(txnid=txn_id(s), exclWriteEnabled=True),), Returns())


def alter_table_req(name: str, params: dict, *, acid: bool = False) -> Step:
    """Hive.alterTable(cat, db, tbl, newTbl, cascade, env, transactional, writeId) →
    HMSC.alter_table(..., validWriteIds) → alter_table_req; DDL_TIME removed first."""
    def args(s):
        tbl = with_params(s["table"].table, params)
        tbl.parameters.pop("transient_lastDdlTime", None)
        extra = {}
        if acid:
            tbl.writeId = write_id(s)
            extra = dict(writeId=write_id(s), validWriteIdList=write_id_list(s, "writeids"))
        return (t.AlterTableRequest(catName=CAT, dbName=DB, tableName=name, table=tbl,
                                    environmentContext=t.EnvironmentContext(DO_NOT_UPDATE_STATS),
                                    **extra),)
    return Step("Hive.loadTable / BasicStatsTask.aggregateStats → Hive.alterTable → "
                "HMSC.alter_table → alter_table_req", "alter_table_req", args, Returns())


def set_aggr_stats(name: str, *, part_name: str | None = None, acid: bool = False,
                   need_merge: bool = True) -> Step:
    def args(s):
        extra = dict(writeId=write_id(s), validWriteIdList=write_id_list(s, "writeids")) \
            if acid else {}
        return (t.SetPartitionsStatsRequest(
            colStats=[column_stats(t, DB, name, part_name=part_name, catName=CAT, engine="hive")],
            needMerge=need_merge, engine="hive", **extra),)
    return Step("ColStatsProcessor.persistColumnStats → Hive.setPartitionColumnStatistics → "
                "HMSC.setPartitionColumnStatistics (a failure fails the statement)",
                "set_aggr_stats_for", args, Returns())


def table_stats_read(name: str, *, snapshot: str | None = None) -> Step:
    def args(s):
        extra = {"validWriteIdList": write_id_list(s, snapshot)} if snapshot else {}
        return (t.TableStatsRequest(dbName=DB, tblName=name, colNames=COLS, catName=CAT,
                                    engine="hive", **extra),)
    return Step("Hive.getTableColumnStatistics → HMSC.getTableColumnStatistics(cat, db, tbl, "
                "cols, engine, validWriteIdList) (stats annotation, DESCRIBE FORMATTED t col)",
                "get_table_statistics_req", args,
                Returns(satisfies("the statistics of both columns written by the statement",
                                  lambda r, s: sorted(o.colName for o in r.tableStats) == COLS)))


def table_stats_read_shape(name: str) -> Step:
    """The column statistics read of the stats annotation when none were written: the
    answer's shape only."""
    return Step("stats annotation → Hive.getTableColumnStatistics → HMSC.getTableColumnStatistics",
                "get_table_statistics_req",
                (t.TableStatsRequest(dbName=DB, tblName=name, colNames=COLS, catName=CAT,
                                     engine="hive"),),
                Returns(fields_set("tableStats")))


# --------------------------------------------------------------------------- startup, DDL

def test_startup_registers_permanent_functions(hs2):
    hs2.replay(Step("HiveServer2.init → Hive.get → registerAllFunctionsOnce → reloadFunctions → "
                    "Hive.getAllFunctions (a failure stops the start: 'Failed to register all "
                    "functions')", "get_all_functions", (),
                    Returns(fields_set("functions"))))


def test_create_database(hs2):
    db = t.Database(name="created", description="made by CREATE DATABASE", parameters={},
                    ownerName=USER, ownerType=t.PrincipalType.USER, catalogName=CAT)
    hs2.replay(
        Step("Hive.createDatabase(db, ifNotExist) → HMSC.createDatabase", "create_database",
             (db,), Returns()),
        Step("CREATE DATABASE IF NOT EXISTS: Hive.createDatabase swallows AlreadyExistsException "
             "only", "create_database", (db,), Raises("AlreadyExistsException")),
        Step("HMSC.getDatabase(cat, db) (DESCRIBE DATABASE, DROP DATABASE)", "get_database_req",
             (t.GetDatabaseRequest(name="created", catalogName=CAT),),
             Returns(equals("name", "created"), fields_set("locationUri", "catalogName"))),
        Step("SHOW DATABASES → HMSC.getAllDatabases → getDatabases(cat, null): pattern '@hive#'",
             "get_databases", (f"@{CAT}#",),
             Returns(satisfies("every database of the catalog",
                               lambda r, s: {"default", DB, "created"} <= set(r)))),
    )


def test_drop_database(hs2, client):
    given_database(client, "gone")
    hs2.replay(
        Step("Hive.dropDatabase(DropDatabaseDesc) → HMSC.dropDatabase(DropDatabaseRequest) → "
             "getDatabase(cat, db)", "get_database_req",
             (t.GetDatabaseRequest(name="gone", catalogName=CAT),), Returns(fields_set("name"))),
        Step("HMSC.dropDatabase(DropDatabaseRequest), not cascading: the old call with the "
             "catalog in the name", "drop_database", (f"@{CAT}#gone", True, False), Returns()),
        Step("DROP DATABASE IF EXISTS gone: NoSuchObjectException ends it silently",
             "get_database_req", (t.GetDatabaseRequest(name="gone", catalogName=CAT),),
             Raises("NoSuchObjectException")),
    )
    assert "gone" not in client.get_all_databases()


def test_drop_database_cascade(hs2, client):
    given_database(client, "full")
    given_table(client, "full", "inside")
    hs2.replay(
        Step("HMSC.dropDatabase(DropDatabaseRequest) → getDatabase(cat, db)", "get_database_req",
             (t.GetDatabaseRequest(name="full", catalogName=CAT),), Returns(fields_set("name"))),
        Step("HMSC.dropDatabase(DropDatabaseRequest), cascade: materialized views first",
             "get_tables_by_type", (f"@{CAT}#full", ".*", "MATERIALIZED_VIEW"),
             Returns(equals(None, []))),
        Step("HMSC.dropDatabase(DropDatabaseRequest), cascade → getAllTables(cat, db)",
             "get_all_tables", (f"@{CAT}#full",), Returns(equals(None, ["inside"]))),
        Step("HMSC.dropDatabaseCascadePerDb → getTables(cat, db, names)",
             "get_table_objects_by_name_req",
             (t.GetTablesRequest(dbName="full", tblNames=["inside"], catName=CAT,
                                 capabilities=CAPS),),
             Returns(satisfies("the table", lambda r, s: [x.tableName for x in r.tables]
                               == ["inside"]))),
        Step("HMSC.dropDatabaseCascadePerDb → drop_database_req", "drop_database_req",
             (t.DropDatabaseRequest(name="full", catalogName=CAT, ignoreUnknownDb=False,
                                    deleteData=True, cascade=True, softDelete=False, txnId=0),),
             Returns()),
    )
    assert "full" not in client.get_all_databases()


@pytest.mark.parametrize("acid", [False, True], ids=["plain", "acid"])
def test_create_table(hs2, acid):
    tbl = table(t, DB, "made", partitioned=True, acid=acid, owner=USER, catName=CAT)
    request = t.CreateTableRequest(table=tbl)
    hs2.replay(
        Step("Hive.createTable(tbl, ifNotExists, pk, fk, uk, nn, dc, cc) → "
             "HMSC.createTable(CreateTableRequest) → create_table_req", "create_table_req",
             (request,), Returns()),
        Step("CREATE TABLE IF NOT EXISTS: AlreadyExistsException swallowed (Hive.createTable)",
             "create_table_req", (request,), Raises("AlreadyExistsException")),
        get_table_req("made"),
    )


def test_drop_table(hs2, client):
    given_table(client, DB, "dropped", partitioned=True)
    hs2.replay(
        Step("HMSC.dropTable(cat, db, name, deleteData, ignoreUnknownTab, env) → getTable",
             "get_table_req", (t.GetTableRequest(dbName=DB, tblName="dropped", catName=CAT,
                                                 capabilities=CAPS),),
             Returns(fields_set("table.tableName"))),
        Step("HMSC.dropTable(Table, ...) → drop_table_with_environment_context (a "
             "NoSuchObjectException here is ignored: the table would stay)",
             "drop_table_with_environment_context", (PDB, "dropped", True, None), Returns()),
        Step("DROP TABLE IF EXISTS dropped: NoSuchObjectException → ignoreUnknownTab",
             "get_table_req", (t.GetTableRequest(dbName=DB, tblName="dropped", catName=CAT,
                                                 capabilities=CAPS),),
             Raises("NoSuchObjectException")),
    )
    assert client.get_all_tables(DB) == []


# --------------------------------------------------------------------------- INSERT

def test_insert_into_plain_table_with_statistics(hs2, client):
    given_table(client, DB, "plain", params=ALL_STATS_ACCURATE)     # as CREATE TABLE made it
    hs2.replay(
        begin(),
        get_table_req("plain"),
        lock(lock_component(t.LockType.EXCLUSIVE, t.DataOperationType.INSERT, "plain")),
        Step("MoveTask → Hive.loadTable → getTable(tableName)", "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName="plain", catName=CAT, capabilities=CAPS),),
             Returns(fields_set("table.sd.location"))),
        alter_table_req("plain", {}),
        alter_table_req("plain", hive_basic_stats()),
        set_aggr_stats("plain"),
        commit(),
        table_stats_read("plain"),
    )


def test_insert_into_new_static_partition_with_statistics(hs2, client):
    tbl = given_table(client, DB, "events", partitioned=True)
    new_part = with_params(partition(t, tbl, ["2024-01-03"], catName=CAT), ALL_STATS_ACCURATE)

    def stats_alter(s):
        part = with_params(s["part"], hive_basic_stats())
        return (t.AlterPartitionsRequest(catName=CAT, dbName=DB, tableName="events",
                                         partitions=[part],
                                         environmentContext=t.EnvironmentContext(
                                             DO_NOT_UPDATE_STATS)),)

    hs2.replay(
        begin(),
        get_table_req("events"),
        lock(lock_component(t.LockType.EXCLUSIVE, t.DataOperationType.INSERT, "events")),
        Step("Hive.loadPartition → getPartition(tbl, spec, false) → "
             "HMSC.getPartitionWithAuthInfo: NoSuchObjectException means no partition yet",
             "get_partition_with_auth", (PDB, "events", ["2024-01-03"], USER, [USER]),
             Raises("NoSuchObjectException")),
        Step("Hive.addPartitionToMetastore → HMSC.add_partition",
             "add_partition_with_environment_context",
             (new_part, None), Returns(fields_set("sd.location", "values")), save="part"),
        Step("BasicStatsTask.aggregateStats → Hive.alterPartitions → alter_partitions_req",
             "alter_partitions_req", stats_alter, Returns()),
        set_aggr_stats("events", part_name="dt=2024-01-03"),
        commit(),
        Step("Hive.getPartitionColumnStatistics → HMSC.getPartitionColumnStatistics",
             "get_partitions_statistics_req",
             (t.PartitionsStatsRequest(dbName=DB, tblName="events", colNames=COLS,
                                       partNames=["dt=2024-01-03"], catName=CAT, engine="hive"),),
             Returns(satisfies("the new partition's statistics",
                               lambda r, s: sorted(o.colName for o in
                                                   r.partStats.get("dt=2024-01-03", []))
                               == COLS))),
    )


def test_insert_into_acid_table_with_statistics(hs2, client):
    given_table(client, DB, "acid", acid=True, params=ALL_STATS_ACCURATE)
    hs2.replay(
        begin(),
        get_table_req("acid"),
        allocate("acid"),
        lock(lock_component(t.LockType.SHARED_READ, t.DataOperationType.INSERT, "acid",
                            acid=True)),
        valid_write_ids("acid"),
        Step("MoveTask → Hive.loadTable → getTable(tableName)", "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName="acid", catName=CAT, capabilities=CAPS),),
             Returns(fields_set("table.sd.location"))),
        alter_table_req("acid", {}, acid=True),
        alter_table_req("acid", hive_basic_stats(), acid=True),
        set_aggr_stats("acid", acid=True),
        Step("BasicStatsTask.TransactionalStatsProcessor.process → "
             "Hive.updateTransactionalStatistics", "update_transaction_statistics",
             lambda s: (t.UpdateTransactionalStatsRequest(tableId=s["table"].table.id,
                                                          insertCount=3, updatedCount=0,
                                                          deletedCount=0),), Returns()),
        commit(),
        # a later query reads the statistics in its own snapshot (stats annotation)
        begin(),
        valid_write_ids("acid"),
        table_stats_read("acid", snapshot="writeids"),
        commit(),
    )


def test_insert_into_acid_table_dynamic_partitions_with_dml_events(hs2, client):
    """INSERT INTO acid PARTITION (dt) SELECT ... with hive.metastore.dml.events=true:
    the new partitions, their write events in one batch, the dynamic partitions of the
    write id, then the partition statistics."""
    tbl = given_table(client, DB, "acid_parts", partitioned=True, acid=True, days=())
    days = ["2024-01-03", "2024-01-04"]
    names = [f"dt={d}" for d in days]
    new_parts = [partition(t, tbl, [d], catName=CAT) for d in days]

    def events(s):
        return (t.WriteNotificationLogBatchRequest(
            catalog=CAT, db=DB, table="acid_parts", requestList=[
            t.WriteNotificationLogRequest(
                txnId=txn_id(s), writeId=write_id(s), db=DB, table="acid_parts",
                fileInfo=t.InsertEventRequestData(replace=True, filesAdded=[
                    f"{p.sd.location}/delta_{write_id(s):07d}_{write_id(s):07d}_0000/bucket_00000"],
                    filesAddedChecksum=[""], subDirectoryList=[
                        f"delta_{write_id(s):07d}_{write_id(s):07d}_0000"]),
                partitionVals=p.values) for p in new_parts]),)

    def stats_alter(s):
        parts = [with_params(p, basic_stats(1)) for p in new_parts]
        for p in parts:
            p.writeId = write_id(s)
        return (t.AlterPartitionsRequest(
            catName=CAT, dbName=DB, tableName="acid_parts", partitions=parts,
            environmentContext=t.EnvironmentContext(DO_NOT_UPDATE_STATS), writeId=write_id(s),
            validWriteIdList=write_id_list(s, "writeids")),)

    hs2.replay(
        begin(),
        get_table_req("acid_parts"),
        allocate("acid_parts"),
        lock(lock_component(t.LockType.SHARED_READ, t.DataOperationType.INSERT, "acid_parts",
                            acid=True, dynamic=True)),
        valid_write_ids("acid_parts"),
        Step("Hive.loadDynamicPartitions → addPartitionsToMetastore → HMSC.add_partitions(List)",
             "add_partitions", (new_parts,), Returns(equals(None, 2))),
        Step("Hive.loadDynamicPartitions → Hive.addWriteNotificationLogInBatch (only "
             "UNKNOWN_METHOD/WRONG_METHOD_NAME fall back to one call per partition; other "
             "TApplicationExceptions are rethrown)", "add_write_notification_log_in_batch",
             events, Returns()),
        Step("Hive.loadDynamicPartitions → HMSC.addDynamicPartitions(..., DataOperationType) "
             "(a TException: 'Exception updating metastore for acid table')",
             "add_dynamic_partitions",
             lambda s: (t.AddDynamicPartitions(txnid=txn_id(s), writeid=write_id(s), dbname=DB,
                                               tablename="acid_parts", partitionnames=names,
                                               operationType=t.DataOperationType.INSERT),),
             Returns()),
        Step("BasicStatsTask.aggregateStats → Hive.alterPartitions(..., env, validWriteIdList, "
             "writeId) → alter_partitions_req", "alter_partitions_req", stats_alter, Returns()),
        [set_aggr_stats("acid_parts", part_name=n, acid=True) for n in names],
        Step("BasicStatsTask.TransactionalStatsProcessor.process → "
             "Hive.updateTransactionalStatistics", "update_transaction_statistics",
             lambda s: (t.UpdateTransactionalStatsRequest(tableId=s["table"].table.id,
                                                          insertCount=2, updatedCount=0,
                                                          deletedCount=0),), Returns()),
        commit(),
    )


# --------------------------------------------------------------------------- SELECT, DESCRIBE

def test_select_with_partition_pruning_and_statistics(hs2, client):
    given_table(client, DB, "events", partitioned=True)
    hs2.replay(
        begin(),
        get_table_req("events"),
        Step("PartitionPruner.getPartitionsFromServer → Hive.getPartitionsByExpr → "
             "HMSC.listPartitionsSpecByExpr: UNKNOWN_METHOD/WRONG_METHOD_NAME → "
             "IncompatibleMetastoreException → client-side pruning (any other answer fails "
             "the query)", "get_partitions_spec_by_expr",
             lambda s: (t.PartitionsByExprRequest(
                 dbName=DB, tblName="events", expr=b"\x01kryo:ExprNodeGenericFuncDesc(dt = "
                 b"'2024-01-02')", defaultPartitionName="__HIVE_DEFAULT_PARTITION__",
                 catName=CAT, id=s["table"].table.id),),
             UnknownMethod()),
        Step("PartitionPruner.pruneBySequentialScan → Hive.getPartitionNames(db, tbl, -1) → "
             "HMSC.listPartitionNames", "get_partition_names", (PDB, "events", -1),
             Returns(equals(None, [f"dt={d}" for d in DAYS]))),
        Step("PartitionPruner.pruneBySequentialScan → Hive.getPartitionsByNames → "
             "MetaStoreUtils.convertToGetPartitionsByNamesRequest", "get_partitions_by_names_req",
             (t.GetPartitionsByNamesRequest(db_name=PDB, tbl_name="events",
                                            names=["dt=2024-01-02"], get_col_stats=False,
                                            engine="hive"),),
             Returns(satisfies("the pruned partition with its location",
                               lambda r, s: [(p.values, bool(p.sd.location))
                                             for p in r.partitions]
                               == [(["2024-01-02"], True)]))),
        Step("stats annotation → Hive.getAggrColStatsFor → HMSC.getAggrColStatsFor (Hive "
             "swallows a failure: the plan loses its statistics)", "get_aggr_stats_for",
             (t.PartitionsStatsRequest(dbName=DB, tblName="events", colNames=COLS,
                                       partNames=["dt=2024-01-02"], catName=CAT,
                                       engine="hive"),),
             Returns(fields_set("colStats", "partsFound"))),
        Step("Hive.getPartitionColumnStatistics → HMSC.getPartitionColumnStatistics",
             "get_partitions_statistics_req",
             (t.PartitionsStatsRequest(dbName=DB, tblName="events", colNames=COLS,
                                       partNames=["dt=2024-01-02"], catName=CAT, engine="hive"),),
             Returns(fields_set("partStats"))),
        lock(lock_component(t.LockType.SHARED_READ, t.DataOperationType.SELECT, "events",
                            partition_name="dt=2024-01-02")),
        commit(),
    )


def test_select_from_acid_table(hs2, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    hs2.replay(
        begin(),
        get_table_req("acid"),
        table_stats_read_shape("acid"),
        lock(lock_component(t.LockType.SHARED_READ, t.DataOperationType.SELECT, "acid",
                            acid=True)),
        valid_write_ids("acid"),
        min_history(),
        commit(),
    )


def test_describe_formatted(hs2, client):
    given_table(client, DB, "events", partitioned=True)
    given_table(client, DB, "plain")
    constraints = ("primaryKeys", "foreignKeys", "uniqueConstraints", "notNullConstraints",
                   "defaultConstraints", "checkConstraints")
    hs2.replay(
        Step("DescTableOperation.getTable → Hive.getTable(db, t, metaRef, false, false, false)",
             "get_table_req", (t.GetTableRequest(dbName=DB, tblName="events", catName=CAT,
                                                 capabilities=CAPS, engine="hive",
                                                 getColumnStats=False),),
             Returns(fields_set("table.sd.cols", "table.partitionKeys", "table.id")),
             save="table"),
        Step("DescTableOperation.getColumnsNoColumnPath → PartitionIterable(db, table, null, "
             "batch) → Hive.getPartitionNames(db, tbl, -1)", "get_partition_names",
             (PDB, "events", -1), Returns(equals(None, [f"dt={d}" for d in DAYS]))),
        Step("PartitionIterable.getNextBatch → Hive.getPartitionsByNames(tbl, names, false)",
             "get_partitions_by_names_req",
             (t.GetPartitionsByNamesRequest(db_name=PDB, tbl_name="events",
                                            names=[f"dt={d}" for d in DAYS],
                                            get_col_stats=False, engine="hive"),),
             Returns(satisfies("both partitions", lambda r, s: len(r.partitions) == 2))),
        Step("DescTableOperation.setConstraintsAndStorageHandlerInfo → "
             "Hive.getTableConstraints(db, t, false, false, tableId) → "
             "HMSC.getAllTableConstraints (TableConstraintsInfo reads every list)",
             "get_all_table_constraints",
             lambda s: (t.AllTableConstraintsRequest(dbName=DB, tblName="events", catName=CAT,
                                                     tableId=s["table"].table.id),),
             Returns(*[fields_set(f"allTableConstraints.{c}") for c in constraints])),
        Step("DESCRIBE FORMATTED plain id → DescTableOperation → Hive.getTableColumnStatistics",
             "get_table_statistics_req",
             (t.TableStatsRequest(dbName=DB, tblName="plain", colNames=["id"], catName=CAT,
                                  engine="hive"),),
             Returns(fields_set("tableStats"))),
    )


# --------------------------------------------------------------------------- ANALYZE

def test_analyze_table_compute_statistics_for_columns(hs2, client):
    given_table(client, DB, "plain")
    hs2.replay(
        begin(),
        get_table_req("plain"),
        lock(lock_component(t.LockType.SHARED_READ, t.DataOperationType.SELECT, "plain"),
             lock_component(t.LockType.SHARED_READ, t.DataOperationType.NO_TXN, "plain")),
        alter_table_req("plain", hive_basic_stats()),
        set_aggr_stats("plain", need_merge=False),
        commit(),
        table_stats_read("plain"),
    )


def test_analyze_acid_table(hs2, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    hs2.replay(
        begin(),
        get_table_req("acid"),
        allocate("acid"),
        # the DDL_SHARED output of a transactional ANALYZE is left out (isTxnAnalyze)
        lock(lock_component(t.LockType.SHARED_READ, t.DataOperationType.SELECT, "acid",
                            acid=True)),
        valid_write_ids("acid"),
        min_history(),
        alter_table_req("acid", hive_basic_stats(), acid=True),
        set_aggr_stats("acid", acid=True, need_merge=False),
        commit(),
        # a later query reads them in its own snapshot
        begin(),
        valid_write_ids("acid"),
        table_stats_read("acid", snapshot="writeids"),
        commit(),
    )


# --------------------------------------------------------------------------- UPDATE/DELETE/MERGE

def dml_on_acid(target: str, op: int, counts: dict[str, int], *components,
                inputs: tuple[str, ...] = ()) -> list[Step]:
    """An UPDATE/DELETE/MERGE writing ``target``: the target is also an input, so the
    snapshot goes to the min-history table, and its EXCL_WRITE lock asks for the
    conflict check (DriverTxnHandler.isValidTxnListState)."""
    return [
        begin(),
        get_table_req(target),
        allocate(target),
        lock(*components),
        valid_write_ids(*inputs, target),
        min_history(),
        Step("DriverTxnHandler.isValidTxnListState → DbTxnManager.getLatestTxnIdInConflict",
             "get_latest_txnid_in_conflict", lambda s: (txn_id(s),),
             Returns(satisfies("a transaction id (0: no conflict)",
                               lambda r, s: isinstance(r, int) and r >= 0))),
        Step("MoveTask → Hive.loadTable → getTable(tableName)", "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName=target, catName=CAT, capabilities=CAPS),),
             Returns(fields_set("table.sd.location"))),
        alter_table_req(target, {}, acid=True),
        alter_table_req(target, hive_basic_stats(), acid=True),
        Step("BasicStatsTask.TransactionalStatsProcessor.process → "
             "Hive.updateTransactionalStatistics", "update_transaction_statistics",
             lambda s: (t.UpdateTransactionalStatsRequest(
                 tableId=s["table"].table.id, insertCount=counts.get("insert", 0),
                 updatedCount=counts.get("update", 0), deletedCount=counts.get("delete", 0)),),
             Returns()),
        commit(),
    ]


def test_update_acid_table(hs2, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    hs2.replay(dml_on_acid("acid", t.DataOperationType.UPDATE, {"update": 1},
                           lock_component(t.LockType.EXCL_WRITE, t.DataOperationType.UPDATE,
                                          "acid", acid=True)))


def test_delete_from_acid_table(hs2, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    hs2.replay(dml_on_acid("acid", t.DataOperationType.DELETE, {"delete": 1},
                           lock_component(t.LockType.EXCL_WRITE, t.DataOperationType.DELETE,
                                          "acid", acid=True)))


def test_merge_into_acid_table(hs2, client):
    given_table(client, DB, "target", acid=True)
    given_table(client, DB, "source", acid=True)
    given_committed_write(client, DB, "target")
    given_committed_write(client, DB, "source")
    hs2.replay(dml_on_acid(
        "target", t.DataOperationType.UPDATE, {"insert": 1, "update": 1},
        lock_component(t.LockType.SHARED_READ, t.DataOperationType.SELECT, "source", acid=True),
        lock_component(t.LockType.SHARED_READ, t.DataOperationType.INSERT, "target", acid=True),
        lock_component(t.LockType.EXCL_WRITE, t.DataOperationType.UPDATE, "target", acid=True),
        inputs=("source",)))


# --------------------------------------------------------------------------- TRUNCATE

def truncate_steps(name: str, *, acid: bool) -> list[Step]:
    def request(s):
        extra = dict(writeId=write_id(s), validWriteIdList=write_id_list(s, "writeids")) \
            if acid else dict(writeId=-1)
        # deleteData = !(hive.acid.truncate.usebase) for ACID (Hive.truncateTable)
        skip = "true" if acid else "false"
        return (t.TruncateTableRequest(dbName=PDB, tableName=name, partNames=None,
                                       environmentContext=t.EnvironmentContext(
                                           {"truncateSkipDataDeletion": skip}), **extra),)
    return [
        Step("Hive.truncateTable → getTable(dbDotTable, true)", "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName=name, catName=CAT, capabilities=CAPS),),
             Returns(fields_set("table.sd.location")), save="table"),
        Step("HMSC.truncateTableInternal → getTable(cat, db, t)", "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName=name, catName=CAT, capabilities=CAPS),),
             Returns(fields_set("table.tableName"))),
        Step("HMSC.truncateTableInternal → truncate_table_req (any exception → HiveException)",
             "truncate_table_req", request, Returns()),
    ]


def test_truncate_table(hs2, client):
    given_table(client, DB, "plain")
    hs2.replay(
        begin(),
        get_table_req("plain"),
        lock(lock_component(t.LockType.EXCLUSIVE, t.DataOperationType.NO_TXN, "plain")),
        truncate_steps("plain", acid=False),
        commit(),
    )


def test_truncate_acid_table(hs2, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")

    def new_empty_base(value, s):
        location = s["table"].table.sd.location.removeprefix("file:")
        bases = glob.glob(os.path.join(location, f"base_{write_id(s):07d}*"))
        assert bases, f"no base_{write_id(s):07d} directory under {location}"

    hs2.replay(
        begin(),
        get_table_req("acid"),
        Step("DriverTxnHandler.setWriteIdForAcidDdl → DbTxnManager.getTableWriteId",
             "allocate_table_write_ids",
             lambda s: (t.AllocateTableWriteIdsRequest(dbName=DB, tableName="acid",
                                                       txnIds=[txn_id(s)]),),
             Returns(fields_set("txnToWriteIds.0.writeId")), save="alloc"),
        lock(lock_component(t.LockType.EXCL_WRITE, t.DataOperationType.NO_TXN, "acid", acid=True)),
        valid_write_ids("acid"),
        truncate_steps("acid", acid=True),
        commit(),
        Step("after TRUNCATE: Hive's metastore leaves a new empty base at the truncating "
             "write id (readers of older snapshots keep theirs)", "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName="acid", catName=CAT, capabilities=CAPS),),
             Returns(new_empty_base)),
    )


# --------------------------------------------------------------------------- functions

def test_create_and_drop_function(hs2):
    function = t.Function(functionName="upper2", dbName=DB, className=UPPER_UDF, ownerName=USER,
                          ownerType=t.PrincipalType.USER, createTime=int(time.time()),
                          functionType=t.FunctionType.JAVA, resourceUris=[], catName=CAT)
    lookup = ("Registry.getFunctionInfoFromMetastoreNoLock → Hive.getFunction → "
              "HMSC.getFunction (used by another session, or DropFunctionAnalyzer → "
              "FunctionRegistry.getFunctionInfo)")
    hs2.replay(
        Step("CreateFunctionOperation.addToMetastore → Hive.createFunction → HMSC.createFunction",
             "create_function", (function,), Returns()),
        Step("CreateFunctionOperation.addToMetastore: AlreadyExistsException keeps the "
             "registered function", "create_function", (function,),
             Raises("AlreadyExistsException")),
        Step(lookup, "get_function", (PDB, "upper2"),
             Returns(equals("className", UPPER_UDF), fields_set("resourceUris"))),
        Step("a HiveServer2 starting later: Hive.reloadFunctions → getAllFunctions registers "
             "every permanent function", "get_all_functions", (),
             Returns(satisfies(f"{DB}.upper2 among the functions",
                               lambda r, s: any(f.functionName == "upper2" and f.dbName == DB
                                                for f in r.functions or [])))),
        Step("DropFunctionOperation.dropPermanentFunction → Hive.dropFunction → "
             "HMSC.dropFunction", "drop_function", (PDB, "upper2"), Returns()),
        Step(lookup + ": DROP FUNCTION IF EXISTS finds nothing (any error reads as absent)",
             "get_function", (PDB, "upper2"), Raises("NoSuchObjectException")),
    )


# --------------------------------------------------------------------------- SHOW

def test_show_transactions_locks_compactions(hs2, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    other = client.open_txns(t.OpenTxnRequest(num_txns=1, user="etl",
                                              hostname="etl-host")).txn_ids[0]
    held = client.lock(t.LockRequest(component=[t.LockComponent(
        type=t.LockType.SHARED_READ, level=t.LockLevel.TABLE, dbname=DB, tablename="acid",
        operationType=t.DataOperationType.SELECT, isTransactional=True)],
        txnid=other, user="etl", hostname="etl-host"))
    compaction = t.CompactionRequest(dbname=DB, tablename="acid", type=t.CompactionType.MAJOR)
    hs2.replay(
        Step("SHOW TRANSACTIONS → Hive.showTransactions → HMSC.showTxns", "get_open_txns_info", (),
             Returns(satisfies("the open transaction with its id, state, user and host",
                               lambda r, s: any(x.id == other and x.state == t.TxnState.OPEN
                                                and x.user == "etl" and x.hostname
                                                for x in r.open_txns)))),
        Step("SHOW LOCKS acid → ShowLocksOperation.getLocksForNewFormat → DbLockManager.getLocks",
             "show_locks", (t.ShowLocksRequest(dbname=DB, tablename="acid"),),
             Returns(satisfies("the held lock with the fields SHOW LOCKS prints",
                               lambda r, s: any(x.lockid == held.lockid and x.tablename == "acid"
                                                and x.state == t.LockState.ACQUIRED
                                                and x.type == t.LockType.SHARED_READ
                                                and x.user == "etl" and x.hostname
                                                and x.lastheartbeat is not None
                                                for x in r.locks)))),
        Step("ALTER TABLE acid COMPACT 'major' → Hive.compact(CompactionRequest) → "
             "HMSC.compact2", "compact2", (compaction,),
             Returns(equals("accepted", True), fields_set("id", "state")), save="compaction"),
        Step("ALTER TABLE acid COMPACT 'major' again: already queued, Hive 4 answers not "
             "accepted", "compact2", (compaction,), Returns(equals("accepted", False))),
        Step("SHOW COMPACTIONS acid → ShowCompactionsOperation.getShowCompactioRequest → "
             "Hive.showCompactions(request)", "show_compact",
             (t.ShowCompactRequest(dbName=DB, tbName="acid"),),
             Returns(satisfies("the queued compaction with the fields SHOW COMPACTIONS prints",
                               lambda r, s: any(c.id == s["compaction"].id and c.dbname == DB
                                                and c.tablename == "acid"
                                                and c.type == t.CompactionType.MAJOR
                                                and c.state for c in r.compacts)))),
    )
    client.abort_txn(t.AbortTxnRequest(txnid=other))

