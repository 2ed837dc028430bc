"""Spark SQL 4 (``enableHiveSupport()``) against hms-txn, compared with the Java metastore.

The scenario (``spark_sql_scenario.py``) creates a database and a partitioned ORC table,
inserts into two partitions, shows databases/tables/partitions/properties, aggregates,
alters table properties, drops the table and the database. It runs once against the
reference Java metastore (Hive 2.3 from PySpark's jars, started once for the module, its
run overlapping ours in a background thread) and once per backend against a real
``hms-txn serve`` process, which the test restarts between the scenario's two phases.
The results must be equal after normalising only paths and wall-clock times, and they
are also checked against the expected values directly.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from hms_bench.javahms import start_java_metastore
from tests.support.postgres import free_port
from tests.support.servers import ServerProcess, client_for
from tests.support.spark import normalize, rows_of, run_scenario

pytestmark = [pytest.mark.spark, pytest.mark.javahms]

DB = "spark_it"
PARTITIONS = [["dt=2024-01-01"], ["dt=2024-01-02"]]
AGGREGATES = [["2024-01-01", 3, 60.75, 1, 3], ["2024-01-02", 2, 12.5, 4, 5]]


def _java_run(workdir: str) -> dict:
    java = start_java_metastore(free_port(), os.path.join(workdir, "hms"))
    try:
        results = run_scenario(java.uri, workdir, extra_logs=(os.path.join(workdir, "hms", "hms.log"),))
    finally:
        java.stop()
    return {"results": results, "workdir": workdir,
            "leftovers": sorted(os.listdir(os.path.join(workdir, "spark-wh")))}


@pytest.fixture(scope="module")
def java_reference(tmp_path_factory):
    """The Java metastore's results, computed in the background while our runs go on."""
    workdir = str(tmp_path_factory.mktemp("java-ref"))
    pool = ThreadPoolExecutor(1, thread_name_prefix="java-ref")
    future: Future = pool.submit(_java_run, workdir)
    yield future
    pool.shutdown(wait=True)


def _check_expected(results: list[dict]) -> None:
    """The values the scenario must produce, whichever metastore served it."""
    for phase in ("1", "2"):
        assert [DB, "events", False] in rows_of(results, phase, f"SHOW TABLES IN {DB}")
        assert ["default"] in rows_of(results, phase, "SHOW DATABASES")
        assert [DB] in rows_of(results, phase, "SHOW DATABASES")
        assert rows_of(results, phase, "SHOW PARTITIONS") == PARTITIONS
        assert rows_of(results, phase, "SELECT dt, count(*)") == AGGREGATES
        props = {r[0]: r[1] for r in rows_of(results, phase, "SHOW TBLPROPERTIES")}
        assert props["owner_team"] == "data" and props["retention_days"] == "30", props
        assert re.fullmatch(r"\d+", props["transient_lastDdlTime"]), props
    assert rows_of(results, "1", "SELECT count(*)") == [[2, 12.5]]
    assert rows_of(results, "2", "SELECT count(*)") == [[3, 60.75]]
    assert rows_of(results, "1", "DESCRIBE spark_it.events")[:4] == [
        ["id", "int", None], ["name", "string", None], ["amount", "double", None],
        ["dt", "string", None]]
    described = {r[0]: r[1] for r in rows_of(results, "1", "DESCRIBE TABLE EXTENDED spark_it.events")}
    assert described["Type"] == "MANAGED"
    assert described["Provider"] == "hive"
    assert described["InputFormat"] == "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
    assert described["Partition Provider"] == "Catalog"
    assert rows_of(results, "2", f"SHOW TABLES IN {DB}") == [[DB, "events", False]]
    # after DROP TABLE and DROP DATABASE
    tail = [r for r in results if r["phase"] == "2"]
    assert tail[-3]["sql"] == f"SHOW TABLES IN {DB}" and tail[-3]["rows"] == []
    assert tail[-1]["sql"] == "SHOW DATABASES" and tail[-1]["rows"] == [["default"]]


def test_spark_sql_scenario_matches_java_metastore(java_reference, db_overrides, tmp_path):
    workdir = str(tmp_path / "ours")
    data_dir = str(tmp_path / "server")
    overrides = dict(db_overrides, **{"hive.metastore.warehouse.dir": str(tmp_path / "server-wh")})
    servers = [ServerProcess(data_dir, overrides)]
    checked_during_restart: dict = {}

    def restart() -> None:
        # Phase 1 is done: stop the server, start a new process on the same port and
        # database, and check with our own client that phase 1's work is all there
        # before Spark (which reconnects on its own) goes on.
        port = servers[-1].port
        assert servers[-1].stop() == 0
        servers.append(ServerProcess(data_dir, overrides, port=port))
        with client_for(servers[-1].port) as c:
            table = c.get_table(DB, "events")
            checked_during_restart["params"] = dict(table.parameters)
            checked_during_restart["names"] = c.get_partition_names(DB, "events", -1)
            checked_during_restart["sd"] = (table.sd.inputFormat, table.sd.serdeInfo.serializationLib)
            checked_during_restart["keys"] = [(k.name, k.type) for k in table.partitionKeys]
            checked_during_restart["dbs"] = c.get_all_databases()

    try:
        ours = run_scenario(servers[0].uri, workdir, on_pause=restart,
                            extra_logs=(os.path.join(data_dir, "serve.log"),))
        with client_for(servers[-1].port) as c:
            assert c.get_all_databases() == ["default"]
    finally:
        for server in servers:
            if server.proc.poll() is None:
                server.stop()

    # The restart happened and everything phase 1 wrote was there afterwards.
    assert len(servers) == 2
    assert checked_during_restart["names"] == ["dt=2024-01-01", "dt=2024-01-02"]
    assert checked_during_restart["params"]["owner_team"] == "data"
    assert checked_during_restart["params"]["retention_days"] == "30"
    assert checked_during_restart["keys"] == [("dt", "string")]
    assert checked_during_restart["sd"] == ("org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
                                            "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
    assert checked_during_restart["dbs"] == ["default", DB]

    # No call failed inside the server (failures are logged with a traceback).
    log = open(os.path.join(data_dir, "serve.log"), errors="replace").read()
    assert "Traceback" not in log, log[-5000:]
    # Spark used the remote metastore only: no embedded Derby database appeared.
    assert not os.path.exists(os.path.join(workdir, "metastore_db"))

    _check_expected(ours)

    java = java_reference.result(timeout=600)
    _check_expected(java["results"])
    # Only paths and wall-clock times are normalised (see ``normalize``).
    expected = normalize(java["results"], java["workdir"])
    actual = normalize(ours, workdir)
    assert [r["sql"] for r in actual] == [r["sql"] for r in expected]
    for mine, theirs in zip(actual, expected):
        assert (mine["columns"], mine["rows"]) == (theirs["columns"], theirs["rows"]), (
            f"{mine['sql']}: hms-txn and the Java metastore differ")
    # DROP DATABASE removed the managed data in both cases.
    assert sorted(os.listdir(os.path.join(workdir, "spark-wh"))) == java["leftovers"]

