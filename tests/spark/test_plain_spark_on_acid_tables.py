"""Plain Spark (its built-in Hive 2.3 client, no hive_acid) beside ACID tables (issues 33, 41).

Spark's Hive 2.3 client asks for a table with plain ``get_table`` (HiveMetaStoreClient 2.3
getTable; ``VERSION`` = null, no capabilities anywhere) for every statement that names it
(SessionCatalog.getTableRawMetadata -> HiveClientImpl.getTableOption -> Hive.getTable),
``catalog.tableExists`` (HiveClientImpl.tableExists) and DROP TABLE (Hive 2.3
HiveMetaStoreClient.dropTable fetches the table first) among them. The metastore hands it
ACID tables in the plain form (``hms_txn.domain.catalog.plain_form``): HiveClientImpl
.convertHiveTableToCatalogTable makes a Hive serde table of it (no serde name with "orc" in
it, so HiveStrategies' RelationConversions leaves it to HiveTableScanExec), whose input and
output format ``ACID.table.use.spark.hive_acid`` no class loader finds: HiveTableScanExec
and InsertIntoHiveTable build their TableDesc from ``Table.getInputFormatClass()`` before
anything is read or written. So SELECT, ``count()``, INSERT INTO/OVERWRITE and CREATE TABLE
AS SELECT fail with ``ClassNotFoundException: ACID.table.use.spark.hive_acid``; DESCRIBE,
``listColumns``, SHOW TBLPROPERTIES, SHOW CREATE TABLE ... AS SERDE, SHOW TABLES,
``tableExists``, CREATE TABLE IF NOT EXISTS and DROP TABLE work. Plain SHOW CREATE TABLE
gets Spark's own answer for any table with ``transactional=true``
(ShowCreateTableCommand: UNSUPPORTED_SHOW_CREATE_TABLE.ON_TRANSACTIONAL_HIVE_TABLE, whatever
the metastore), and TRUNCATE TABLE is refused as on an external table (TruncateTableCommand).

Plain Spark needs a session with Hive support, which the suite's hive_acid session is not:
it runs in its own interpreter (``plain_spark_statements.py``, one session per server), the
tables are made and read with hive_acid here. With ``hive.metastore.client.capability.check
=false`` (a second server on the same metastore database) plain Spark gets the tables as
stored: it reads the raw ACID directories (no rows) and writes a plain file into the table.
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
PLAIN_FORMAT = "ACID.table.use.spark.hive_acid"      # hms_txn.domain.catalog.plain_form


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
    """A database of ACID tables made with hive_acid: full-ACID and insert-only,
    partitioned or not (the full-ACID ones with rows deleted and updated, the issue's
    example), and one more full-ACID table for plain Spark to drop."""
    from spark import hive_acid as H
    spark = acid_spark
    db = f"plain_beside_{os.getpid()}"
    H.create_database(spark, db)
    tables = {"full": f"{db}.full_t", "full_part": f"{db}.full_part",
              "insert_only": f"{db}.io_t", "insert_only_part": f"{db}.io_part",
              "to_drop": f"{db}.to_drop"}
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
        elif key.startswith("insert_only"):
            df.where("id < 2").write.format("hive_acid").mode("append").save(name)
    tables["db"] = db
    return tables


def _acid_rows(spark, name):
    return rows(spark.read.format("hive_acid").load(name))


def _statements(tables: dict) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """(what must work, per ACID table; what must fail naming hive_acid, per ACID table;
    the plain tables' statements and the listings), in the order plain Spark runs them."""
    works: dict[str, list[str]] = {}
    fails: dict[str, list[str]] = {}
    for key in ("full", "full_part", "insert_only", "insert_only_part"):
        name = tables[key]
        part = " PARTITION (p = 'a')" if key.endswith("_part") else ""
        works[key] = [
            f"tableExists:{name}",
            f"CREATE TABLE IF NOT EXISTS {name} (id INT) STORED AS ORC",
            f"DESCRIBE {name}",
            f"listColumns:{name}",
            f"SHOW CREATE TABLE {name} AS SERDE",
            f"SHOW TBLPROPERTIES {name}",
        ]
        values = "(100, 'x')" if part else "(100, 'x', 'a')"
        fails[key] = [
            f"SELECT * FROM {name}",
            f"count:{name}",
            f"INSERT INTO {name}{part} VALUES {values}",
            f"INSERT OVERWRITE TABLE {name}{part} SELECT 7, 'o'" + ("" if part else ", 'a'"),
            f"CREATE TABLE {tables['db']}.ctas_{key} STORED AS ORC AS SELECT * FROM {name}",
        ]
    db = tables["db"]
    plain = [
        f"CREATE TABLE {db}.plain_orc (id INT, name STRING) STORED AS ORC",
        f"INSERT INTO {db}.plain_orc VALUES (1, 'a'), (2, 'b')",
        f"CREATE TABLE {db}.plain_parquet USING parquet AS SELECT id * 10 AS id FROM {db}.plain_orc",
        f"SELECT * FROM {db}.plain_orc",
        f"count:{db}.plain_parquet",
        f"SHOW CREATE TABLE {db}.plain_orc",
        f"SHOW TABLES IN {db}",
        f"listTables:{db}",
        f"tableExists:{db}.no_such_table",
    ]
    return works, fails, plain


def test_plain_spark_describes_and_drops_acid_tables_but_never_reads_or_writes_them(
        acid_spark, acid_hms, acid_tables, ms, tmp_path):
    """Issue 41's "must show": Spark's built-in client in a database of ACID tables and
    plain tables. What names a table and what describes it works; every read and write of
    an ACID table fails naming hive_acid and leaves its files, its metastore state and the
    rows hive_acid reads as they were. DROP TABLE drops one (its files with it)."""
    spark = acid_spark
    db = acid_tables["db"]
    acid = {k: v for k, v in acid_tables.items() if k not in ("db", "to_drop")}
    works, fails, plain = _statements(acid_tables)
    refused = [f"SHOW CREATE TABLE {acid['full']}", f"TRUNCATE TABLE {acid['full']}",
               f"TRUNCATE TABLE {acid['full_part']}"]
    drop = acid_tables["to_drop"]
    drop_dir = _location(ms, drop)
    before = {name: (_acid_rows(spark, name), _files(_location(ms, name)),
                     _metastore_state(ms, name)) for name in acid.values()}
    event_id = ms.get_current_notificationEventId().eventId

    statements = ([s for key in works for s in works[key]] + plain + refused +
                  [s for key in fails for s in fails[key]] +
                  [f"DROP TABLE {drop}", f"tableExists:{drop}"])
    results = _plain_spark(acid_hms.uri, str(tmp_path), statements)

    def ok(sql):
        assert "error" not in results[sql], (sql, results[sql]["error"][:2000])
        return results[sql]["rows"]

    for key, name in acid.items():
        assert ok(f"tableExists:{name}") == [[True]]
        ok(f"CREATE TABLE IF NOT EXISTS {name} (id INT) STORED AS ORC")    # a no-op
        assert [r[:2] for r in ok(f"DESCRIBE {name}")][:3] == [
            ["id", "int"], ["name", "string"], ["p", "string"]]
        assert ok(f"listColumns:{name}") == [["id", "int", False], ["name", "string", False],
                                              ["p", "string", key.endswith("_part")]]
        ddl = ok(f"SHOW CREATE TABLE {name} AS SERDE")[0][0]
        assert f"INPUTFORMAT '{PLAIN_FORMAT}'" in ddl and "'transactional' = 'true'" in ddl
        props = dict(map(tuple, ok(f"SHOW TBLPROPERTIES {name}")))
        assert props["transactional"] == "true"
        for sql in fails[key]:
            assert "error" in results[sql], (sql, results[sql])
            assert f"ClassNotFoundException: {PLAIN_FORMAT}" in results[sql]["error"], \
                (sql, results[sql]["error"][:2000])

    # the plain tables beside them work as usual
    assert ok(f"SELECT * FROM {db}.plain_orc") == [[1, "a"], [2, "b"]]
    assert ok(f"count:{db}.plain_parquet") == [[2]]
    assert "USING orc" in ok(f"SHOW CREATE TABLE {db}.plain_orc")[0][0]
    shown = {r[1] for r in ok(f"SHOW TABLES IN {db}")}
    assert shown >= {n.split(".")[1] for n in acid.values()} | {"plain_orc", "plain_parquet"}
    listed = dict(map(tuple, ok(f"listTables:{db}")))
    assert {listed[n.split(".")[1]] for n in acid.values()} == {"EXTERNAL"}
    assert listed["plain_orc"] == "MANAGED"
    assert ok(f"tableExists:{db}.no_such_table") == [[False]]
    # Spark's own refusals: SHOW CREATE TABLE of a transactional Hive table (it points to
    # AS SERDE), TRUNCATE of what it is shown as an external table
    assert "ON_TRANSACTIONAL_HIVE_TABLE" in results[refused[0]]["error"]
    for sql in refused[1:]:
        assert "CANNOT_TRUNCATE_EXTERNAL_TABLE" in results[sql]["error"], results[sql]
    # DROP TABLE: gone, with its files (the metastore decides from the stored, managed table)
    ok(f"DROP TABLE {drop}")
    assert ok(f"tableExists:{drop}") == [[False]]
    assert drop.split(".")[1] not in ms.get_all_tables(db) and not os.path.exists(drop_dir)

    # nothing changed: no file, no metastore change of an ACID table, no CTAS table left
    touched = {e.tableName for e in ms.get_next_notification(
        T.NotificationEventRequest(lastEvent=event_id, maxEvents=10000)).events if e.tableName}
    assert touched & {n.split(".")[1] for n in acid.values()} == set()
    for name, (acid_rows, files, state) in before.items():
        assert _files(_location(ms, name)) == files, name
        assert _metastore_state(ms, name) == state, name
        assert _acid_rows(spark, name) == acid_rows, name
    assert not [x for x in ms.get_all_tables(db) if x.startswith("ctas_")]
    db_dir = location_path(ms.get_database(db).locationUri)
    assert not [d for d in os.listdir(db_dir) if d.startswith("ctas_")]
    full = before[acid["full"]][0]
    assert len(full) == 7 and (4, "updated", "a") in full


def test_hive_acid_sql_keeps_working_for_mixed_statements(acid_spark, acid_tables):
    """hive_acid.sql hands Spark the statements it does not run itself with their ACID reads
    replaced by hive_acid reads: an INSERT into a table that is not ACID and CREATE TABLE AS
    SELECT from an ACID table."""
    from spark import hive_acid as H
    spark = acid_spark
    full = acid_tables["full"]
    expected = _acid_rows(spark, full)
    plain = f"default.cap_plain_{os.getpid()}"     # Spark's own (in-memory) catalog
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
