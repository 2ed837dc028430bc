"""Plain Spark (its built-in Hive 2.3 client, no hive_acid) on ACID tables (issue 33).

Spark's Hive 2.3 client asks for a table with plain ``get_table`` (HiveMetaStoreClient
2.3 getTable; ``VERSION`` = null, no capabilities anywhere), for every statement that names
it: SELECT and count(*) (SessionCatalog.getTableRawMetadata -> HiveClientImpl.getTableOption
-> Hive.getTable), INSERT [OVERWRITE] and the source of CREATE TABLE AS SELECT while the
statement is analysed (InsertIntoHiveTable / CreateHiveTableAsSelectCommand run only after
that), and ``spark.table()``. The metastore refuses it ACID tables, so each of those fails
before any file is written, with a message naming the table's kind and spark.hive_acid.
SHOW TABLES (``get_tables``: names only) keeps working, and so does ``catalog.listTables``:
Spark 4's CatalogImpl loads each listed table and lists one it cannot load with no type
(observed here; the ACID tables come back with ``tableType`` None).

Plain Spark needs a session with Hive support, which the suite's hive_acid session is not:
it runs in its own interpreter (``plain_spark_statements.py``), the tables are made and read
with hive_acid here. With ``hive.metastore.client.capability.check=false`` (a second server
on the same metastore database) plain Spark gets today's behaviour: it reads the raw ACID
directories (no rows) and writes a plain file into the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from orc_acid.layout import location_path
from hms_txn.clients.acid.metastore import T
from tests.support.servers import InProcessServer, checkout_env

pytestmark = [pytest.mark.spark]

SCRIPT = os.path.join(os.path.dirname(__file__), "plain_spark_statements.py")


def _plain_spark(uri: str, workdir: str, statements: list[str]) -> dict[str, dict]:
    out = os.path.join(workdir, "results.json")
    log = os.path.join(workdir, "spark.log")
    with open(log, "ab") as err:
        code = subprocess.run(
            [sys.executable, SCRIPT, uri, os.path.join(workdir, "spark-wh"), out, *statements],
            stdout=err, stderr=err, cwd=workdir, env=dict(checkout_env(), SPARK_LOCAL_IP="127.0.0.1"),
            timeout=600).returncode
    if code != 0:
        with open(log, errors="replace") as f:
            raise AssertionError(f"plain Spark exited with {code}:\n{f.read()[-5000:]}")
    with open(out) as f:
        return {r["sql"]: r for r in json.load(f)}


def _files(location: str) -> dict[str, tuple[int, int]]:
    """Every file under a table's directory with its size and modification time."""
    out = {}
    for root, _, names in os.walk(location):
        for n in names:
            path = os.path.join(root, n)
            st = os.stat(path)
            out[os.path.relpath(path, location)] = (st.st_size, st.st_mtime_ns)
    return out


def _location(ms, full: str) -> str:
    return location_path(ms.get_table_acid_aware(*full.split(".")).sd.location)


def _metastore_state(ms, full: str):
    db, name = full.split(".")
    table = ms.get_table_acid_aware(db, name)
    parts = sorted((tuple(p.values), p.sd.location, tuple(sorted(p.parameters.items())))
                   for p in ms.get_partitions(db, name, -1))
    return table, parts


def rows(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture(scope="module")
def acid_tables(acid_spark, acid_hms):
    """Four ACID tables made with hive_acid: full-ACID and insert-only, partitioned or not.
    The full-ACID ones have had rows deleted and updated (the issue's example)."""
    from spark import hive_acid as H
    spark = acid_spark
    suffix = os.getpid()
    tables = {
        "full": f"default.cap_full_{suffix}", "full_part": f"default.cap_full_part_{suffix}",
        "insert_only": f"default.cap_io_{suffix}", "insert_only_part": f"default.cap_io_part_{suffix}"}
    data = [(i, f"n{i}", "ab"[i % 2]) for i in range(10)]
    for key, name in tables.items():
        H.create_table(spark, name, "id INT, name STRING, p STRING",
                       partition_by=["p"] if key.endswith("_part") else [],
                       insert_only=key.startswith("insert_only"))
        df = spark.createDataFrame(data, "id INT, name STRING, p STRING")
        df.write.format("hive_acid").mode("append").save(name)
        if key.startswith("full"):
            H.delete(spark, name, "id IN (1, 2, 3)")
            H.update(spark, name, set={"name": "'updated'"}, condition="id = 4")
        else:
            df.where("id < 2").write.format("hive_acid").mode("append").save(name)
    return tables


def _acid_rows(spark, name):
    return rows(spark.read.format("hive_acid").load(name))


def test_plain_spark_gets_a_clear_error_and_changes_nothing(acid_spark, acid_hms, acid_tables,
                                                           ms, tmp_path):
    spark = acid_spark
    statements: dict[str, list[str]] = {}
    for key, name in acid_tables.items():
        part = " PARTITION (p = 'a')" if key.endswith("_part") else ""
        values = "(100, 'x')" if part else "(100, 'x', 'a')"
        statements[key] = [
            f"SELECT * FROM {name}",
            f"SELECT count(*) FROM {name}",
            f"INSERT INTO {name}{part} VALUES {values}",
            f"INSERT OVERWRITE TABLE {name}{part} SELECT 7, 'o'" + ("" if part else ", 'a'"),
            f"CREATE TABLE default.ctas_{name.split('.')[1]} STORED AS ORC AS SELECT * FROM {name}",
            f"table:{name}",
        ]
    before = {name: (_acid_rows(spark, name), _files(_location(ms, name)),
                     _metastore_state(ms, name)) for name in acid_tables.values()}
    event_id = ms.get_current_notificationEventId().eventId

    listing = [f"SHOW TABLES IN default LIKE 'cap_*_{os.getpid()}'", "listTables:default"]
    all_statements = [s for group in statements.values() for s in group] + listing
    results = _plain_spark(acid_hms.uri, str(tmp_path), all_statements)

    for key, name in acid_tables.items():
        kind = "an insert-only transactional table" if key.startswith("insert_only") \
            else "a full-ACID transactional table"
        for sql in statements[key]:
            result = results[sql]
            assert "error" in result, (sql, result)
            assert f"{name} is {kind}" in result["error"], (sql, result["error"][:2000])
            assert 'spark.read.format("hive_acid")' in result["error"], sql

    # SHOW TABLES lists names only (get_tables): it works
    shown = {r[1] for r in results[listing[0]]["rows"]}
    assert {n.split(".")[1] for n in acid_tables.values()} <= shown
    # catalog.listTables loads each table (get_table) and lists one it cannot load without a
    # type: the ACID tables are listed, typeless (observed with PySpark's Spark 4 CatalogImpl)
    listed = dict(map(tuple, results["listTables:default"]["rows"]))
    assert {n.split(".")[1]: listed.get(n.split(".")[1], "missing")
            for n in acid_tables.values()} == {n.split(".")[1]: None for n in acid_tables.values()}

    # nothing changed: no file, no metastore change (no catalog event), no CTAS table
    touched = [(e.eventType, e.tableName) for e in ms.get_next_notification(
        T.NotificationEventRequest(lastEvent=event_id, maxEvents=10000)).events if e.tableName]
    assert touched == []
    for name, (acid_rows, files, state) in before.items():
        assert _files(_location(ms, name)) == files, name
        assert _metastore_state(ms, name) == state, name
    assert not [t for t in ms.get_all_tables("default") if t.startswith("ctas_")]
    default_dir = location_path(ms.get_database("default").locationUri)
    assert not [d for d in os.listdir(default_dir) if d.startswith("ctas_")]
    # and hive_acid reads the same rows as before
    for name, (acid_rows, _, _) in before.items():
        assert _acid_rows(spark, name) == acid_rows, name
    full = before[acid_tables["full"]][0]
    assert len(full) == 7 and (4, "updated", "a") in full


def test_listing_a_database_with_only_full_acid_tables_works(acid_spark, acid_hms, tmp_path):
    """SHOW TABLES (get_tables, names only) and spark.catalog.listTables of a database with
    an ACID table work; DESCRIBE does not, since it needs the table's definition."""
    from spark import hive_acid as H
    db = f"cap_list_{os.getpid()}"
    H.create_database(acid_spark, db)
    H.create_table(acid_spark, f"{db}.t", "id INT")
    results = _plain_spark(acid_hms.uri, str(tmp_path),
                           [f"SHOW TABLES IN {db}", f"listTables:{db}", f"DESCRIBE {db}.t"])
    assert results[f"SHOW TABLES IN {db}"]["rows"] == [[db, "t", False]]
    assert results[f"listTables:{db}"]["rows"] == [["t", None]]      # listed, not loaded
    # DESCRIBE reads the table with get_table, as SELECT does: it cannot be told apart
    assert f"{db}.t is a full-ACID transactional table" in results[f"DESCRIBE {db}.t"]["error"]


def test_hive_acid_sql_keeps_working_for_mixed_statements(acid_spark, acid_tables):
    """hive_acid.sql hands Spark the statements it does not run itself with their ACID reads
    replaced by hive_acid reads: an INSERT into a table that is not ACID and CREATE TABLE AS
    SELECT from an ACID table."""
    from spark import hive_acid as H
    spark = acid_spark
    full = acid_tables["full"]
    expected = _acid_rows(spark, full)
    plain = f"default.cap_plain_{os.getpid()}"
    spark.sql(f"CREATE TABLE {plain} (id INT, name STRING, p STRING) USING parquet")
    H.sql(spark, f"INSERT INTO {plain} SELECT * FROM {full}")
    assert rows(spark.table(plain)) == expected
    ctas = f"default.cap_ctas_{os.getpid()}"
    H.sql(spark, f"CREATE TABLE {ctas} USING parquet AS SELECT f.id, f.name FROM {full} f "
                 f"JOIN {plain} q ON f.id = q.id WHERE f.p = 'a'")
    assert rows(spark.table(ctas)) == sorted((r[0], r[1]) for r in expected if r[2] == "a")


def test_check_off_gives_todays_behaviour(acid_spark, acid_hms, ms, tmp_path):
    """``hive.metastore.client.capability.check=false``: plain Spark gets the table again,
    reads the raw ACID directories (no rows, not the 7 hive_acid reads) and writes a plain
    file into the table, outside any transaction."""
    from spark import hive_acid as H
    spark = acid_spark
    name = f"default.cap_off_{os.getpid()}"
    H.create_table(spark, name, "id INT, name STRING")
    spark.createDataFrame([(i, f"n{i}") for i in range(10)], "id INT, name STRING") \
        .write.format("hive_acid").mode("append").save(name)
    H.delete(spark, name, "id IN (1, 2, 3)")
    location = _location(ms, name)
    files = _files(location)
    # a second server on the same metastore database, with the check off
    off = InProcessServer(os.path.join(str(tmp_path), "off-data"), {
        **acid_hms.overrides,
        "hive.metastore.client.capability.check": "false"})
    try:
        results = _plain_spark(off.uri, str(tmp_path), [
            f"SELECT count(*) FROM {name}", f"INSERT INTO {name} VALUES (100, 'x')"])
    finally:
        off.stop()
    assert results[f"SELECT count(*) FROM {name}"]["rows"] == [[0]]
    assert "error" not in results[f"INSERT INTO {name} VALUES (100, 'x')"]
    written = set(_files(location)) - set(files)
    assert written and not any(f.startswith(("delta_", "base_")) for f in written), written
