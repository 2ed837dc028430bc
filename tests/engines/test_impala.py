"""Impala's catalog (catalogd and the coordinator's transactions): the metastore calls of
everyday statements, replayed over Thrift.

Impala talks through Hive's own HiveMetaStoreClient; built with the compat-hive-3 shim
(the default, CDP's Hive client, whose Thrift mapping is Hive 4's: /work/notes/clients/hs2.md
conventions) it sends ``catName``, ``@hive#db`` in the older calls, and processor
capabilities. Sources (apache/impala at b21595276c6c; /work/notes/clients/impala.md):

* ``Shim`` = fe/src/compat-hive-3/java/org/apache/impala/compat/MetastoreShim.java, with
  its base fe/src/main/java/org/apache/impala/catalog/Hive3MetastoreShimBase.java
  (``ShimBase``: openTransaction with user "Impala", acquireLock, allocateTableWriteId,
  createTblTransaction, IMPALA_ENGINE = "impala")
* ``COE`` = fe/src/main/java/org/apache/impala/service/CatalogOpExecutor.java
* ``Frontend`` = fe/src/main/java/org/apache/impala/service/Frontend.java
  (createLockForInsert), ``Catalog`` = fe/.../catalog/Catalog.java (lockTableInternal)
* ``CSC`` = CatalogServiceCatalog.java, ``TableLoader``, ``Table``, ``MetaStoreUtil``

Not replayed: UPDATE/DELETE/MERGE on Hive full-ACID tables (Impala writes only insert-only
ACID and Iceberg tables), SHOW TRANSACTIONS/LOCKS/COMPACTIONS (no such statements), and
DESCRIBE, which Impala answers from its catalog cache after the load replayed here.
"""

from __future__ import annotations

import time

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.engines.replay import (
    AnyAnswer, OneOf, Raises, Returns, Step, equals, fields_set, satisfies)
from tests.engines.structs import (
    DAYS, basic_stats, column_stats, given_committed_write, given_database, given_table,
    partition, table, txn_list, with_params, write_id_list)

CAT = "hive"
DB = "impala_db"
PDB = f"@{CAT}#{DB}"
USER = "impala"
TXN_USER = "Impala"          # ShimBase.TRANSACTION_USER_ID
HOST = "catalogd.example.com"
ENGINE = "impala"            # ShimBase.IMPALA_ENGINE
CAPS = t.ClientCapabilities([t.ClientCapability.INSERT_ONLY_TABLES])
# Shim.setHiveClientCapabilities
PROC_CAPS = ["EXTWRITE", "EXTREAD", "HIVEMANAGEDINSERTREAD", "HIVEMANAGEDINSERTWRITE",
             "HIVESQL", "HIVEMQT", "HIVEBUCKET2"]
PROC_ID = "Impala4.5.0@catalogd.example.com"
PROC = dict(processorCapabilities=PROC_CAPS, processorIdentifier=PROC_ID)
COLS = ["id", "name"]


@pytest.fixture
def impala(hive4_session, client):
    given_database(client, DB)
    return hive4_session(on_open=(Step("HMSC.open", "set_ugi", (USER, [USER]), AnyAnswer()),))


def get_table_req(name: str, cite: str = "TableLoader.load → HMSC.getTable") -> Step:
    return Step(cite + " (NoSuchObjectException: 'no longer exists in the Hive MetaStore')",
                "get_table_req",
                (t.GetTableRequest(dbName=DB, tblName=name, catName=CAT, capabilities=CAPS,
                                   **PROC),),
                Returns(fields_set("table.sd.location", "table.parameters", "table.createTime",
                                   "table.sd.cols", "table.partitionKeys")),
                save="table")


def events_since(event_type: str, db: str) -> list[Step]:
    """COE.getCurrentEventId before the DDL, the events after it
    (COE.getNextMetastoreEventsIfEnabled → MetastoreEventsProcessor)."""
    return [
        Step("COE.getCurrentEventId", "get_current_notificationEventId", (),
             Returns(fields_set("eventId")), save="event"),
    ], Step(f"COE.getNextMetastoreEventsIfEnabled: the {event_type} event of {db}",
            "get_next_notification",
            lambda s: (t.NotificationEventRequest(lastEvent=s["event"].eventId, maxEvents=1000),),
            Returns(satisfies(f"a {event_type} event for {db}",
                              lambda r, s: any(e.eventType == event_type and e.dbName == db
                                               for e in r.events))))


def txn_id(s: dict) -> int:
    return s["txn"].txn_ids[0]


def open_txn() -> Step:
    return Step("ShimBase.openTransaction → HMSC.openTxn('Impala')", "open_txns",
                (t.OpenTxnRequest(num_txns=1, user=TXN_USER, hostname=HOST),),
                Returns(fields_set("txn_ids.0")), save="txn")


def allocate(name: str) -> Step:
    return Step("ShimBase.allocateTableWriteId → HMSC.allocateTableWriteId",
                "allocate_table_write_ids",
                lambda s: (t.AllocateTableWriteIdsRequest(dbName=DB, tableName=name,
                                                          txnIds=[txn_id(s)]),),
                Returns(fields_set("txnToWriteIds.0.writeId")), save="alloc")


def write_id(s: dict) -> int:
    return s["alloc"].txnToWriteIds[0].writeId


def lock(component: t.LockComponent, cite: str) -> Step:
    return Step(cite + " → ShimBase.acquireLock (WAITING: check_lock; not ACQUIRED: unlock "
                "and TransactionException)", "lock",
                lambda s: (t.LockRequest(component=[component], txnid=txn_id(s), user=TXN_USER,
                                         hostname=HOST),),
                Returns(equals("state", t.LockState.ACQUIRED), fields_set("lockid")), save="lock")


def tbl_transaction(name: str) -> list[Step]:
    """ShimBase.createTblTransaction inside an open transaction: a write id and the
    table's snapshot (getValidWriteIdListInTxn)."""
    return [
        allocate(name),
        Step("ShimBase.getValidWriteIdListInTxn → HMSC.getValidTxns(txnId)", "get_open_txns_req",
             (t.GetOpenTxnsRequest(excludeTxnTypes=[t.TxnType.READ_ONLY]),),
             Returns(fields_set("txn_high_water_mark", "open_txns")), save="txns"),
        Step("ShimBase.getValidWriteIdListInTxn → HMSC.getValidWriteIds(tables, validTxnList)",
             "get_valid_write_ids",
             lambda s: (t.GetValidWriteIdsRequest(fullTableNames=[f"{DB}.{name}"],
                                                  validTxnList=txn_list(s, "txns")),),
             Returns(fields_set("tblValidWriteIds.0.writeIdHighWaterMark")), save="writeids"),
    ]


def commit() -> Step:
    return Step("ShimBase.commitTransaction → HMSC.commitTxn", "commit_txn",
                lambda s: (t.CommitTxnRequest(txnid=txn_id(s)),), Returns())


def alter_table(name: str, params: dict, *, acid: bool = False) -> Step:
    """COE.applyAlterTable: DO_NOT_UPDATE_STATS as a table parameter; non-ACID →
    HMSC.alter_table, ACID → Shim.alterTableWithTransaction (both alter_table_req on
    Hive 4's client)."""
    def args(s):
        tbl = with_params(s["table"].table, {**params, "DO_NOT_UPDATE_STATS": "true"})
        extra = {}
        if acid:
            tbl.writeId = write_id(s)
            extra = dict(writeId=write_id(s), validWriteIdList=write_id_list(s, "writeids"))
        return (t.AlterTableRequest(catName=CAT, dbName=DB, tableName=name, table=tbl,
                                    **PROC, **extra),)
    return Step("COE.applyAlterTable", "alter_table_req", args, Returns())


def read_column_stats(name: str) -> Step:
    return Step("Table.loadAllColumnStats → Shim.getTableColumnStatistics(db, t, cols, "
                "'impala') (a failure is logged: the table loads without statistics)",
                "get_table_statistics_req",
                (t.TableStatsRequest(dbName=DB, tblName=name, colNames=COLS, catName=CAT,
                                     engine=ENGINE),),
                Returns(fields_set("tableStats")), save="colstats")


# --------------------------------------------------------------------------- catalog, DDL

def test_catalog_start_loads_databases_functions_tables(impala, client):
    given_table(client, DB, "plain")
    impala.replay(
        Step("CSC.reset → HMSC.getAllDatabases → get_databases('@hive#')", "get_databases",
             (f"@{CAT}#",), Returns(satisfies(f"default and {DB}",
                                              lambda r, s: {"default", DB} <= set(r)))),
        Step("CSC.invalidateDb → loadJavaFunctions → HMSC.getFunctions(db, '*')",
             "get_functions", (PDB, "*"), Returns(equals(None, []))),
        Step("CSC.invalidateDb → HMSC.getDatabase(db)", "get_database_req",
             (t.GetDatabaseRequest(name=DB, catalogName=CAT, **PROC),),
             Returns(equals("name", DB), fields_set("parameters", "locationUri"))),
        Step("CSC.reset → HMSC.getAllTables(db)", "get_all_tables", (PDB,),
             Returns(equals(None, ["plain"]))),
    )


def test_create_database(impala):
    db = t.Database(name="made", description="by Impala", locationUri=None, ownerName=USER,
                    ownerType=t.PrincipalType.USER, parameters={}, catalogName=CAT)
    before, after = events_since("CREATE_DATABASE", "made")
    impala.replay(
        before,
        Step("COE.createDatabase → HMSC.createDatabase", "create_database", (db,), Returns()),
        after,
        Step("CREATE DATABASE IF NOT EXISTS, not in the cache: AlreadyExistsException, then "
             "COE.createDatabase → getDatabase", "create_database", (db,),
             Raises("AlreadyExistsException")),
    )


def test_drop_database(impala, client):
    given_database(client, "gone")
    before, after = events_since("DROP_DATABASE", "gone")
    impala.replay(
        before,
        Step("COE.dropDatabase → HMSC.dropDatabase(db, true, false, cascade) → getDatabase",
             "get_database_req", (t.GetDatabaseRequest(name="gone", catalogName=CAT, **PROC),),
             Returns(fields_set("name"))),
        Step("HMSC.dropDatabase(DropDatabaseRequest), not cascading", "drop_database",
             (f"@{CAT}#gone", True, False), Returns()),
        after,
        Step("DROP DATABASE IF EXISTS gone: NoSuchObjectException is 'Database does not exist.'",
             "get_database_req", (t.GetDatabaseRequest(name="gone", catalogName=CAT, **PROC),),
             Raises("NoSuchObjectException")),
    )


@pytest.mark.parametrize("acid", [False, True], ids=["plain", "insert-only acid"])
def test_create_table(impala, acid):
    tbl = table(t, DB, "made", partitioned=True, owner=USER, catName=CAT)
    if acid:
        tbl.parameters.update({"transactional": "true",
                               "transactional_properties": "insert_only"})
    impala.replay(
        Step("CREATE TABLE doHmsOperations → HMSC.createTable → create_table_req",
             "create_table_req", (t.CreateTableRequest(table=tbl, **PROC),), Returns()),
        get_table_req("made", "doHmsOperations: getTable for createTime and location"),
    )


def test_drop_table(impala, client):
    given_table(client, DB, "dropped", partitioned=True)
    impala.replay(
        Step("COE.dropTableOrView → HMSC.dropTable(cat, db, t, deleteData, ignoreUnknown, "
             "ifPurge) → getTable", "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName="dropped", catName=CAT, capabilities=CAPS),),
             Returns(fields_set("table.tableName"))),
        Step("HMSC.dropTable → drop_table_with_environment_context", 
             "drop_table_with_environment_context", (PDB, "dropped", True, None), Returns()),
        Step("DROP TABLE IF EXISTS: HMSC.dropTable → getTable: NoSuchObjectException",
             "get_table_req",
             (t.GetTableRequest(dbName=DB, tblName="dropped", catName=CAT, capabilities=CAPS),),
             Raises("NoSuchObjectException")),
    )


# --------------------------------------------------------------------------- loading, SELECT

def test_load_table_for_select_with_partitions_and_statistics(impala, client):
    given_table(client, DB, "events", partitioned=True)
    names = [f"dt={d}" for d in DAYS]
    impala.replay(
        get_table_req("events"),
        Step("MetaStoreUtil.fetchAllPartitions → HMSC.listPartitionNames(db, t, -1)",
             "get_partition_names", (PDB, "events", -1), Returns(equals(None, names))),
        Step("MetaStoreUtil.fetchPartitionsByName → HMSC.getPartitionsByNames (a "
             "MetaException retries the whole fetch)", "get_partitions_by_names_req",
             (t.GetPartitionsByNamesRequest(db_name=PDB, tbl_name="events", names=names, **PROC),),
             Returns(satisfies("both partitions with their locations",
                               lambda r, s: sorted(p.values[0] for p in r.partitions
                                                   if p.sd.location) == list(DAYS)))),
        read_column_stats("events"),
    )


def test_load_acid_table(impala, client):
    given_table(client, DB, "acid", acid=True)
    given_committed_write(client, DB, "acid")
    impala.replay(
        get_table_req("acid"),
        Step("Table.loadValidWriteIdList → Shim.fetchValidWriteIds → HMSC.getValidWriteIds("
             "fullTableName): no validTxnList, the server takes the snapshot",
             "get_valid_write_ids", (t.GetValidWriteIdsRequest(fullTableNames=[f"{DB}.acid"]),),
             Returns(equals("tblValidWriteIds.0.writeIdHighWaterMark", 1),
                     fields_set("tblValidWriteIds.0.invalidWriteIds",
                                "tblValidWriteIds.0.abortedBits"))),
        read_column_stats("acid"),
    )


# --------------------------------------------------------------------------- INSERT

def test_insert_into_new_partition(impala, client):
    tbl = given_table(client, DB, "events", partitioned=True)
    new_part = partition(t, tbl, ["2024-01-03"], catName=CAT)
    impala.replay(
        get_table_req("events"),
        Step("COE.updateCatalog → MetaStoreUtil.addPartitions → HMSC.add_partitions(parts, "
             "ifNotExists, needResults)", "add_partitions_req",
             (t.AddPartitionsRequest(dbName=DB, tblName="events", parts=[new_part],
                                     ifNotExists=True, needResult=True, catName=CAT),),
             Returns(satisfies("the added partition",
                               lambda r, s: [p.values for p in r.partitions]
                               == [["2024-01-03"]]))),
        Step("COE insert events → Shim.fireInsertEvents → fireInsertEventHelper (a failure "
             "is logged and swallowed: the event is lost)", "fire_listener_event",
             (t.FireEventRequest(successful=True, data=t.FireEventRequestData(
                 insertData=t.InsertEventRequestData(replace=False, filesAdded=[
                     new_part.sd.location + "/000000_0"])),
                 dbName=DB, tableName="events", partitionVals=["2024-01-03"], catName=CAT),),
             Returns(fields_set("eventIds"))),
    )


def test_insert_into_acid_table(impala, client):
    given_table(client, DB, "acid", acid=True,
                params={"transactional_properties": "insert_only"})
    impala.replay(
        get_table_req("acid"),
        open_txn(),
        allocate("acid"),
        lock(t.LockComponent(type=t.LockType.SHARED_READ, level=t.LockLevel.TABLE, dbname=DB,
                             tablename="acid", operationType=t.DataOperationType.INSERT),
             "Frontend.createLockForInsert"),
        Step("TransactionKeepalive → ShimBase.heartbeat (NoSuchLock/NoSuchTxn/TxnAborted stop "
             "it; any other TException is a TransactionException)", "heartbeat",
             lambda s: (t.HeartbeatRequest(txnid=txn_id(s), lockid=s["lock"].lockid),),
             Returns()),
        Step("COE → Shim.fireInsertTransactionalEventHelper: one write event per table or "
             "partition (swallowed on error)", "add_write_notification_log",
             lambda s: (t.WriteNotificationLogRequest(
                 txnId=txn_id(s), writeId=write_id(s), db=DB, table="acid",
                 fileInfo=t.InsertEventRequestData(replace=False, filesAdded=[
                     s["table"].table.sd.location + f"/delta_{write_id(s):07d}_{write_id(s):07d}"
                     "_0000/000000_0"])),),
             Returns()),
        commit(),
    )


# --------------------------------------------------------------------------- COMPUTE STATS

def test_compute_stats(impala, client):
    given_table(client, DB, "events", partitioned=True)
    names = [f"dt={d}" for d in DAYS]

    def partitions_with_stats(s):
        parts = [with_params(p, {"numRows": "2", "STATS_GENERATED": "TASK"})
                 for p in s["parts"].partitions]
        return (t.AlterPartitionsRequest(catName=CAT, dbName=DB, tableName="events",
                                         partitions=parts),)

    impala.replay(
        get_table_req("events"),
        Step("MetaStoreUtil.fetchPartitionsByName", "get_partitions_by_names_req",
             (t.GetPartitionsByNamesRequest(db_name=PDB, tbl_name="events", names=names, **PROC),),
             Returns(fields_set("partitions.1")), save="parts"),
        Step("COE.alterTableUpdateStatsInner → HMSC.updateTableColumnStatistics(ColumnStatistics"
             "{engine 'impala'}) (error: \"Error making 'updateTableColumnStatistics' RPC\")",
             "update_table_column_statistics_req",
             (t.SetPartitionsStatsRequest(colStats=[column_stats(t, DB, "events", catName=CAT,
                                                                 engine=ENGINE)],
                                          engine=ENGINE),),
             Returns(equals("result", True))),
        Step("COE.updatePartitionStats → bulkAlterPartitions → Shim.alterPartitions → "
             "HMSC.alter_partitions(db, t, parts, null)", "alter_partitions_req",
             partitions_with_stats, Returns()),
        alter_table("events", {"numRows": "4", "totalSize": "1200", "STATS_GENERATED": "TASK",
                               "impala.lastComputeStatsTime": str(int(time.time()))}),
        Step("the next load: Table.loadAllColumnStats", "get_table_statistics_req",
             (t.TableStatsRequest(dbName=DB, tblName="events", colNames=COLS, catName=CAT,
                                  engine=ENGINE),),
             Returns(satisfies("Impala's statistics of both columns",
                               lambda r, s: sorted(o.colName for o in r.tableStats) == COLS))),
    )


def test_compute_stats_on_acid_table(impala, client):
    given_table(client, DB, "acid", acid=True, params={"transactional_properties": "insert_only"})
    given_committed_write(client, DB, "acid")
    impala.replay(
        get_table_req("acid"),
        open_txn(),
        tbl_transaction("acid"),
        Step("COE.alterTableUpdateStatsInner → Shim.setTableColumnStatsTransactional → "
             "HMSC.setPartitionColumnStatistics", "set_aggr_stats_for",
             lambda s: (t.SetPartitionsStatsRequest(
                 colStats=[column_stats(t, DB, "acid", catName=CAT, engine=ENGINE)],
                 writeId=write_id(s), validWriteIdList=write_id_list(s, "writeids"),
                 engine=ENGINE),),
             Returns()),
        alter_table("acid", basic_stats(), acid=True),
        Step("ShimBase.commitTblTransactionIfNeeded", "commit_txn",
             lambda s: (t.CommitTxnRequest(txnid=txn_id(s)),), Returns()),
    )


# --------------------------------------------------------------------------- TRUNCATE

def test_truncate_table(impala, client):
    given_table(client, DB, "plain", params=basic_stats())
    impala.replay(
        get_table_req("plain"),
        Step("COE.truncateNonTransactionalTable → isTableBeingReplicated → HMSC.getDatabase",
             "get_database_req", (t.GetDatabaseRequest(name=DB, catalogName=CAT, **PROC),),
             Returns(fields_set("parameters"))),
        Step("COE.dropColumnStats → Shim.deleteTableColumnStatistics(db, t, col, 'impala') "
             "(NoSuchObjectException ignored)", "delete_table_column_statistics",
             (PDB, "plain", "id", ENGINE),
             OneOf(Returns(), Raises("NoSuchObjectException"))),
        alter_table("plain", {"numRows": "0", "totalSize": "0"}),
    )


def acid_truncate_start(name: str) -> list[Step]:
    return [
        get_table_req(name),
        open_txn(),
        lock(t.LockComponent(type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname=DB,
                             tablename=name, operationType=t.DataOperationType.NO_TXN),
             "COE.truncateTransactionalTable → Catalog.lockTableInTransaction → "
             "lockTableInternal"),
        tbl_transaction(name),
    ]


def test_truncate_acid_table(impala, client):
    given_table(client, DB, "acid", acid=True, params={"transactional_properties": "insert_only"})
    given_committed_write(client, DB, "acid")
    impala.replay(
        acid_truncate_start("acid"),
        Step("COE.isTableBeingReplicated → HMSC.getDatabase", "get_database_req",
             (t.GetDatabaseRequest(name=DB, catalogName=CAT, **PROC),),
             Returns(fields_set("parameters"))),
        # not replicated: Impala writes base_<writeId> itself, then unsets the statistics
        alter_table("acid", {}, acid=True),
        commit(),
    )


def test_truncate_replicated_acid_table(impala, client):
    given_database(client, "repl_db", parameters={"repl.source.for": "policy1"})
    given_table(client, "repl_db", "acid", acid=True,
                params={"transactional_properties": "insert_only"})

    def request(s):
        return (t.TruncateTableRequest(
            dbName=f"@{CAT}#repl_db", tableName="acid", partNames=None, writeId=write_id(s),
            validWriteIdList=write_id_list(s, "writeids"),
            environmentContext=t.EnvironmentContext({"truncateSkipDataDeletion": "true"})),)

    steps = [
        Step("TableLoader.load → HMSC.getTable", "get_table_req",
             (t.GetTableRequest(dbName="repl_db", tblName="acid", catName=CAT,
                                capabilities=CAPS, **PROC),), Returns(), save="table"),
        open_txn(),
        Step("Catalog.lockTableInternal → ShimBase.acquireLock", "lock",
             lambda s: (t.LockRequest(component=[t.LockComponent(
                 type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname="repl_db",
                 tablename="acid", operationType=t.DataOperationType.NO_TXN)],
                 txnid=txn_id(s), user=TXN_USER, hostname=HOST),),
             Returns(equals("state", t.LockState.ACQUIRED))),
        Step("ShimBase.createTblTransaction → allocateTableWriteId", "allocate_table_write_ids",
             lambda s: (t.AllocateTableWriteIdsRequest(dbName="repl_db", tableName="acid",
                                                       txnIds=[txn_id(s)]),),
             Returns(fields_set("txnToWriteIds.0.writeId")), save="alloc"),
        Step("ShimBase.getValidWriteIdListInTxn → HMSC.getValidTxns(txnId)", "get_open_txns_req",
             (t.GetOpenTxnsRequest(excludeTxnTypes=[t.TxnType.READ_ONLY]),), Returns(),
             save="txns"),
        Step("ShimBase.getValidWriteIdListInTxn → HMSC.getValidWriteIds", "get_valid_write_ids",
             lambda s: (t.GetValidWriteIdsRequest(fullTableNames=["repl_db.acid"],
                                                  validTxnList=txn_list(s, "txns")),),
             Returns(), save="writeids"),
        Step("COE.isTableBeingReplicated → HMSC.getDatabase: repl.source.for is set",
             "get_database_req", (t.GetDatabaseRequest(name="repl_db", catalogName=CAT, **PROC),),
             Returns(satisfies("repl.source.for among the parameters", lambda r, s:
                               (r.parameters or {}).get("repl.source.for") == "policy1"))),
        Step("Shim.truncateTable → HMSC.truncateTable(db, t, parts, validWriteIds, writeId, "
             "deleteData) → truncateTableInternal → getTable", "get_table_req",
             (t.GetTableRequest(dbName="repl_db", tblName="acid", catName=CAT,
                                capabilities=CAPS),), Returns()),
        Step("HMSC.truncateTableInternal (deleteData = !hive.acid.truncate.usebase)",
             "truncate_table_req", request, Returns()),
        commit(),
    ]
    impala.replay(steps)


# --------------------------------------------------------------------------- functions

def test_create_and_drop_function(impala):
    function = t.Function(functionName="upper_java", dbName=DB, className="com.example.Upper",
                          ownerName="", ownerType=t.PrincipalType.USER,
                          createTime=int(time.time()), functionType=t.FunctionType.JAVA,
                          resourceUris=[t.ResourceUri(t.ResourceType.JAR,
                                                      "hdfs:///udfs/upper.jar")],
                          catName=CAT)
    impala.replay(
        Step("COE.createFunction → addJavaFunctionToHms → HMSC.createFunction (HiveJavaFunction"
             ".getHiveFunction builds it)", "create_function", (function,), Returns()),
        Step("CREATE FUNCTION IF NOT EXISTS: AlreadyExistsException → false",
             "create_function", (function,), Raises("AlreadyExistsException")),
        Step("INVALIDATE METADATA: CSC.loadJavaFunctions → HMSC.getFunctions(db, '*')",
             "get_functions", (PDB, "*"), Returns(equals(None, ["upper_java"]))),
        Step("CSC.loadJavaFunctions → HMSC.getFunction (a failure skips the function)",
             "get_function", (PDB, "upper_java"),
             Returns(equals("className", "com.example.Upper"),
                     equals("resourceUris.0.uri", "hdfs:///udfs/upper.jar"))),
        Step("COE.dropFunction → dropJavaFunctionFromHms → HMSC.dropFunction", "drop_function",
             (PDB, "upper_java"), Returns()),
        Step("DROP FUNCTION IF EXISTS: NoSuchObjectException → false", "drop_function",
             (PDB, "upper_java"), Raises("NoSuchObjectException")),
    )
