"""Spark 4's built-in Hive 2.3 client: the metastore calls of everyday statements,
replayed over Thrift with hmsclient's Hive 2.3 bindings (the struct shapes Spark sends:
no catalog, no write ids, no engine).

Spark goes SessionCatalog → HiveExternalCatalog → HiveClientImpl → Shim_v2_x → Hive 2.3
→ HiveMetaStoreClient 2.3, which sends only the old calls with plain database names and
``set_ugi`` after connecting. The many repeated ``get_database``/``get_table`` calls are
Spark's own existence checks, each of which turns a NoSuchObjectException into "not
found". Sources: Spark 4.0.1 and Hive 2.3.10 classes from PySpark's jars, decompiled
(/work/notes/clients/spark.md; the decompiled sources: /tmp/pysparkdl):

* ``SessionCatalog``, ``HiveExternalCatalog``, ``HiveClientImpl``, ``Shim_v2_0`` /
  ``Shim_v2_1`` (org.apache.spark.sql.catalyst.catalog / org.apache.spark.sql.hive[.client])
* ``Hive`` and ``HiveMetaStoreClient`` of Hive 2.3.10

Spark has no UPDATE/DELETE/MERGE on Hive tables and no SHOW TRANSACTIONS/LOCKS/
COMPACTIONS, and writes no transactions: those statements are not replayed.
``tests/engines/test_spark_sql.py`` runs the statements in a real Spark.

The same replays also run against Hive's own metastore 2.3 (PySpark's jars,
``test_replay_holds_on_the_java_metastore``), which shows that every expected answer
here is the one Hive gives.
"""

from __future__ import annotations

import inspect
import time

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as h

from tests.engines.replay import (
    AnyAnswer, Raises, Returns, Session, Step, equals, fields_set, satisfies)
from tests.engines.structs import (
    UPPER_UDF, connect_hive23, given_database, given_table, partition, table, with_params)
from tests.support.postgres import free_port
from tests.support.servers import connect

DB = "spark_db"
USER = "spark"


def spark_session(port: int) -> Session:
    return Session(connect=lambda: connect_hive23(port), on_open=(
        Step("HiveMetaStoreClient.open (2.3): hive.metastore.execute.setugi, not SASL; a "
             "TException is logged and ignored", "set_ugi", (USER, [USER]), AnyAnswer()),))


@pytest.fixture
def spark(hms, client):
    given_database(client, DB)
    session = spark_session(hms.port)
    yield session
    session.close()


def exists_db(db: str = DB, why: str = "SessionCatalog.requireDbExists") -> Step:
    return Step(f"{why} → HiveClientImpl.getDatabaseOption → Hive.getDatabase",
                "get_database", (db,), Returns(equals("name", db), fields_set("locationUri")))


def get_table(name: str, why: str, db: str = DB) -> Step:
    return Step(f"{why} → HiveClientImpl.getRawHiveTableOption → Hive.getTable(db, t, false)",
                "get_table", (db, name),
                Returns(fields_set("sd.location", "sd.cols", "partitionKeys", "parameters",
                                   "tableType")),
                save="table")


def function_missing(name: str, why: str) -> Step:
    return Step(f"{why} → Shim_v2_0.getFunctionOption: absent only when a message in the "
                f"cause chain contains '{name} does not exist' (isCausedBy)", "get_function",
                (DB, name),
                Raises("NoSuchObjectException", message_contains=f"{name} does not exist"))


# --------------------------------------------------------------------------- startup, DDL

def test_session_start(spark):
    spark.replay(
        Step("SharedState.externalCatalog → databaseExists(default)", "get_database",
             ("default",), Returns(equals("name", "default"))),
        Step("SharedState.globalTempViewManager: databaseExists(global_temp) must be false or "
             "Spark refuses to start", "get_database", ("global_temp",),
             Raises("NoSuchObjectException")),
    )


def test_create_database(spark, client):
    location = client.get_database(DB).locationUri.rsplit("/", 1)[0] + "/made.db"
    db = h.Database(name="made", description="by Spark", locationUri=location, parameters={},
                    ownerName=USER, ownerType=h.PrincipalType.USER)
    spark.replay(
        Step("HiveClientImpl.createDatabase → Shim.createDatabase → Hive.createDatabase",
             "create_database", (db,), Returns()),
        Step("CREATE DATABASE made again: AlreadyExistsException → "
             "DatabaseAlreadyExistsException (swallowed with IF NOT EXISTS)", "create_database",
             (db,), Raises("AlreadyExistsException")),
        exists_db("made", "DESCRIBE DATABASE"),
    )


def test_drop_database(spark, client):
    given_database(client, "gone")
    given_database(client, "full")
    given_table(client, "full", "inside")
    spark.replay(
        exists_db("gone", "SessionCatalog.dropDatabase → requireDbExists"),
        exists_db("gone", "HiveMetaStoreClient.dropDatabase(name, deleteData, ignoreUnknownDb, "
                  "cascade) → getDatabase"),
        Step("HiveMetaStoreClient.dropDatabase", "drop_database", ("gone", True, False),
             Returns()),
        exists_db("full", "SessionCatalog.dropDatabase → requireDbExists"),
        exists_db("full", "HiveMetaStoreClient.dropDatabase → getDatabase"),
        Step("DROP DATABASE full (not empty): HiveClientImpl.dropDatabase maps a message "
             "containing 'Database full is not empty' to cannotDropNonemptyDatabaseError",
             "drop_database", ("full", True, False),
             Raises("InvalidOperationException", message_contains="Database full is not empty")),
    )


def test_drop_database_cascade(spark, client):
    given_database(client, "full")
    given_table(client, "full", "inside")
    spark.replay(
        exists_db("full", "SessionCatalog.dropDatabase → databaseExists"),
        exists_db("full", "SessionCatalog.dropDatabase → listTables → requireDbExists"),
        Step("SessionCatalog.dropDatabase(cascade) → listTables → Hive.getTablesByPattern",
             "get_tables", ("full", "*"), Returns(equals(None, ["inside"]))),
        exists_db("full", "HiveMetaStoreClient.dropDatabase → getDatabase"),
        Step("HiveMetaStoreClient.dropDatabase(cascade) → getAllTables", "get_all_tables",
             ("full",), Returns(equals(None, ["inside"]))),
        get_table("inside", "HiveMetaStoreClient.dropDatabase(cascade) → dropTable → getTable",
                  db="full"),
        Step("HiveMetaStoreClient.dropTable → drop_table_with_environment_context",
             "drop_table_with_environment_context", ("full", "inside", True, None), Returns()),
        Step("HiveMetaStoreClient.dropDatabase(cascade)", "drop_database", ("full", True, True),
             Returns()),
    )
    assert "full" not in client.get_all_databases()


def test_create_table(spark, client):
    location = client.get_database(DB).locationUri + "/made"
    tbl = table(h, DB, "made", partitioned=True, owner=USER)
    tbl.sd.location = location
    tbl.parameters.update({"spark.sql.create.version": "4.0.1"})
    spark.replay(
        exists_db(why="HiveExternalCatalog.createTable → requireDbExists"),
        Step("HiveExternalCatalog.tableExists → HiveClientImpl.tableExists → Hive.getTable("
             "db, t, false): NoSuchObjectException means no table", "get_table", (DB, "made"),
             Raises("NoSuchObjectException")),
        Step("HiveClientImpl.createTable → Shim.createTable → Hive.createTable → "
             "HiveMetaStoreClient.createTable(tbl) → createTable(tbl, null)",
             "create_table_with_environment_context", (tbl, None), Returns()),
        get_table("made", "DESCRIBE made: SessionCatalog.getTableRawMetadata"),
    )


def test_drop_table(spark, client):
    given_table(client, DB, "dropped", partitioned=True)
    spark.replay(
        exists_db(why="SessionCatalog.dropTable → requireDbExists"),
        get_table("dropped", "SessionCatalog.dropTable → tableExists"),
        exists_db(why="HiveExternalCatalog.dropTable → requireDbExists"),
        get_table("dropped", "HiveMetaStoreClient.dropTable → getTable"),
        Step("HiveClientImpl.dropTable → Shim_v2_0.dropTable → Hive.dropTable → "
             "HiveMetaStoreClient.dropTable", "drop_table_with_environment_context",
             (DB, "dropped", True, None), Returns()),
        Step("DROP TABLE IF EXISTS dropped: NoSuchObjectException swallowed", "get_table",
             (DB, "dropped"), Raises("NoSuchObjectException")),
    )


# --------------------------------------------------------------------------- INSERT

def test_insert_into_table(spark, client):
    given_table(client, DB, "plain")
    spark.replay(
        get_table("plain", "HiveExternalCatalog.loadTable → requireTableExists"),
        get_table("plain", "Shim_v2_1.loadTable → Hive.loadTable → getTable(tableName)"),
        Step("Hive.loadTable(..., hasFollowingStatsTask=false) → Hive.alterTable → "
             "alter_table_with_environmentContext (empty context)",
             "alter_table_with_environment_context",
             lambda s: (DB, "plain", s["table"], h.EnvironmentContext({})), Returns()),
    )


def test_insert_into_static_partition(spark, client):
    given_table(client, DB, "events", partitioned=True)
    spark.replay(
        get_table("events", "HiveExternalCatalog.getPartitionOption → getRawHiveTable"),
        Step("HiveClientImpl.getPartitionOption → Hive.getPartition(tbl, spec, false): "
             "NoSuchObjectException means none", "get_partition_with_auth",
             (DB, "events", ["2024-01-03"], USER, [USER]), Raises("NoSuchObjectException")),
        get_table("events", "HiveExternalCatalog.loadPartition → requireTableExists"),
        get_table("events", "HiveClientImpl.loadPartition"),
        get_table("events", "Hive.loadPartition(path, 'db.t', ...)"),
        Step("Hive.loadPartition(path, Table, ...) → getPartition", "get_partition_with_auth",
             (DB, "events", ["2024-01-03"], USER, [USER]), Raises("NoSuchObjectException")),
        Step("Hive.loadPartition: a new partition → HiveMetaStoreClient.add_partition(p, null)",
             "add_partition_with_environment_context",
             lambda s: (partition(h, s["table"], ["2024-01-03"]), None),
             Returns(equals("values", ["2024-01-03"]), fields_set("sd.location"))),
    )


# --------------------------------------------------------------------------- SELECT, DESCRIBE

def test_select_with_partition_pruning(spark, client):
    given_table(client, DB, "events", partitioned=True)
    spark.replay(
        exists_db(why="SessionCatalog.getTableRawMetadata → requireDbExists"),
        get_table("events", "SessionCatalog.getTableRawMetadata → requireTableExists"),
        get_table("events", "HiveExternalCatalog.getTable"),
        exists_db(why="SessionCatalog.listPartitionsByFilter → requireDbExists"),
        get_table("events", "SessionCatalog.listPartitionsByFilter → requireTableExists"),
        get_table("events", "HiveExternalCatalog.listPartitionsByFilter"),
        Step("Shim_v2_0.getPartitionsByFilter with Shim_v2_0.convertFilters' filter (a "
             "MetaException fails the query: metastorePartitionPruningFallbackOnException is "
             "off)", "get_partitions_by_filter", (DB, "events", 'dt = "2024-01-02"', -1),
             Returns(satisfies("only the matching partition, with its location",
                               lambda r, s: [(p.values, bool(p.sd.location)) for p in r]
                               == [(["2024-01-02"], True)]))),
    )


def test_describe_formatted(spark, client):
    given_table(client, DB, "events", partitioned=True,
                params={"spark.sql.statistics.numRows": "5",
                        "spark.sql.statistics.totalSize": "1200"})
    spark.replay(
        exists_db(why="SessionCatalog.getTableRawMetadata → requireDbExists"),
        get_table("events", "SessionCatalog.getTableRawMetadata → requireTableExists"),
        Step("HiveExternalCatalog.getTable → restoreTableMetadata / statsFromProperties: "
             "Spark's statistics come from the table parameters", "get_table", (DB, "events"),
             Returns(satisfies("the Spark statistics parameters", lambda r, s:
                               r.parameters.get("spark.sql.statistics.numRows") == "5"))),
    )


# --------------------------------------------------------------------------- ANALYZE, TRUNCATE

def stats_write(name: str, params: dict[str, str], drop: tuple[str, ...] = ()) -> list[Step]:
    """HiveExternalCatalog.alterTableStats → HiveClientImpl.alterTableProps: the whole
    table with Spark's statistics in its parameters, empty environment context."""
    def args(s):
        tbl = s["table"]
        tbl.parameters = {k: v for k, v in {**tbl.parameters, **params}.items() if k not in drop}
        return (DB, name, tbl, h.EnvironmentContext({}))
    return [
        exists_db(why="SessionCatalog.alterTableStats → requireDbExists"),
        get_table(name, "SessionCatalog.alterTableStats → requireTableExists"),
        get_table(name, "HiveExternalCatalog.alterTableStats → requireTableExists"),
        get_table(name, "HiveExternalCatalog.alterTableStats → getRawHiveTable"),
        Step("HiveClientImpl.alterTableProps → Shim_v2_1.alterTable(null context) → "
             "Hive.alterTable", "alter_table_with_environment_context", args, Returns()),
    ]


def test_analyze_table_compute_statistics_for_columns(spark, client):
    given_table(client, DB, "plain")
    stats = {"spark.sql.statistics.totalSize": "1200", "spark.sql.statistics.numRows": "3",
             "spark.sql.statistics.colStats.id.min": "1",
             "spark.sql.statistics.colStats.id.max": "3",
             "spark.sql.statistics.colStats.id.distinctCount": "3",
             "spark.sql.statistics.colStats.id.nullCount": "0",
             "spark.sql.statistics.colStats.id.version": "2"}
    spark.replay(
        exists_db(why="AnalyzeColumnCommand → SessionCatalog.getTableMetadata → requireDbExists"),
        get_table("plain", "SessionCatalog.getTableMetadata → requireTableExists"),
        get_table("plain", "HiveExternalCatalog.getTable"),
        stats_write("plain", stats),
        Step("the next query: HiveExternalCatalog.statsFromProperties", "get_table",
             (DB, "plain"), Returns(satisfies("Spark's statistics", lambda r, s: all(
                 r.parameters.get(k) == v for k, v in stats.items())))),
    )


def test_analyze_partition(spark, client):
    given_table(client, DB, "events", partitioned=True)
    spark.replay(
        get_table("events", "CommandUtils.analyzeTable → SessionCatalog.getTableMetadata"),
        Step("AnalyzeTableCommand → SessionCatalog.listPartitions → HiveClientImpl.getPartitions"
             " → Hive.getPartitions(tbl, spec) → listPartitionsWithAuthInfo",
             "get_partitions_ps_with_auth", (DB, "events", ["2024-01-01"], -1, USER, [USER]),
             Returns(satisfies("the partition", lambda r, s: [p.values for p in r]
                               == [["2024-01-01"]])), save="parts"),
        Step("CommandUtils → HiveClientImpl.alterPartitions → Shim_v2_1.alterPartitions → "
             "Hive.alterPartitions(name, parts, null) → HiveMetaStoreClient.alter_partitions",
             "alter_partitions", lambda s: (DB, "events", [
                 with_params(p, {"spark.sql.statistics.numRows": "2",
                           "spark.sql.statistics.totalSize": "600"}) for p in s["parts"]]),
             Returns()),
    )


def test_truncate_table(spark, client):
    given_table(client, DB, "plain", params={"spark.sql.statistics.numRows": "3",
                                             "spark.sql.statistics.totalSize": "1200"})
    spark.replay(
        exists_db(why="TruncateTableCommand → SessionCatalog.getTableMetadata → requireDbExists"),
        get_table("plain", "SessionCatalog.getTableMetadata → requireTableExists"),
        get_table("plain", "HiveExternalCatalog.getTable"),
        # the files are deleted by Spark; then CommandUtils.updateTableStats clears the stats
        stats_write("plain", {}, drop=("spark.sql.statistics.numRows",
                                       "spark.sql.statistics.totalSize")),
    )


# --------------------------------------------------------------------------- functions

def test_create_and_drop_function(spark):
    function = h.Function(functionName="upper2", dbName=DB, className=UPPER_UDF, ownerName=None,
                          ownerType=h.PrincipalType.USER, createTime=int(time.time()),
                          functionType=h.FunctionType.JAVA, resourceUris=[])
    found = Returns(equals("className", function.className), fields_set("resourceUris"))
    spark.replay(
        exists_db(why="SessionCatalog.createFunction → requireDbExists"),
        exists_db(why="SessionCatalog.functionExists → requireDbExists"),
        function_missing("upper2", "HiveExternalCatalog.functionExists → "
                         "HiveClientImpl.getFunctionOption"),
        exists_db(why="HiveExternalCatalog.createFunction → requireDbExists"),
        function_missing("upper2", "HiveExternalCatalog.createFunction → requireFunctionNotExists"),
        Step("HiveClientImpl.createFunction → Shim_v2_0.createFunction(toHiveFunction) → "
             "Hive.createFunction", "create_function", (function,), Returns()),
        exists_db(why="SELECT spark_db.upper2(...): SessionCatalog.lookupFunction"),
        Step("SessionCatalog.getFunctionMetadata → Shim_v2_0.getFunctionOption", "get_function",
             (DB, "upper2"), found),
        Step("SHOW USER FUNCTIONS → HiveExternalCatalog.listFunctions → "
             "Shim_v2_0.listFunctions", "get_functions", (DB, "*"),
             Returns(equals(None, ["upper2"]))),
        exists_db(why="SessionCatalog.dropFunction → requireDbExists"),
        exists_db(why="SessionCatalog.functionExists → requireDbExists"),
        Step("SessionCatalog.functionExists → getFunctionOption", "get_function", (DB, "upper2"),
             found),
        exists_db(why="HiveExternalCatalog.dropFunction → requireDbExists"),
        Step("HiveExternalCatalog.dropFunction → requireFunctionExists", "get_function",
             (DB, "upper2"), found),
        Step("HiveClientImpl.dropFunction → Shim_v2_0.dropFunction → Hive.dropFunction",
             "drop_function", (DB, "upper2"), Returns()),
        exists_db(why="DROP FUNCTION IF EXISTS upper2: SessionCatalog.dropFunction"),
        exists_db(why="SessionCatalog.functionExists → requireDbExists"),
        function_missing("upper2", "SessionCatalog.functionExists (absent: no drop call)"),
    )


# --------------------------------------------------------------------------- Hive's answers

STATEMENTS = sorted(name for name, fn in list(globals().items())
                    if name.startswith("test_") and inspect.isfunction(fn))


@pytest.fixture(scope="module")
def java_hms(tmp_path_factory):
    from hms_bench.javahms import start_java_metastore
    java = start_java_metastore(free_port(), str(tmp_path_factory.mktemp("java-hms")))
    yield java
    java.stop()


@pytest.mark.javahms
@pytest.mark.parametrize("statement", STATEMENTS)
def test_replay_holds_on_the_java_metastore(java_hms, statement):
    """Each statement's replay against Hive's metastore 2.3, from a metastore holding only
    ``default`` and the replay's database."""
    with connect(java_hms.port) as client:
        for name in client.get_all_databases():
            if name != "default":
                client.drop_database(name, True, True)
        given_database(client, DB)
        session = spark_session(java_hms.port)
        try:
            replay = globals()[statement]
            args = {"spark": session, "client": client}
            replay(*(args[p] for p in inspect.signature(replay).parameters))
        finally:
            session.close()
