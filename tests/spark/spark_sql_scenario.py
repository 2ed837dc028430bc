"""The Spark SQL scenario of issue 2, run against one Hive metastore.

    python tests/spark/spark_sql_scenario.py URI WAREHOUSE_DIR OUT_JSON [--pause]

Starts a fresh local Spark 4 session with Hive support whose metastore is ``URI`` (the
built-in Hive 2.3 client; no embedded Derby), runs the statements below and writes every
statement's result rows to ``OUT_JSON`` as ``[{"phase", "sql", "columns", "rows"}, ...]``.

With ``--pause`` the script stops between the two phases: it prints ``PAUSED`` on stdout
and waits for one line on stdin before going on. The test restarts the metastore in that
window, so phase 2 shows that what phase 1 wrote survived the restart (phase 2 starts with
``REFRESH TABLE`` so that Spark reads the table again from the metastore, not from its
relation cache). Without ``--pause`` both phases run back to back (the Java reference).

The script must stay independent of the test suite (it runs in its own interpreter) and
prints only the ``PAUSED``/``DONE`` markers on stdout; Spark logs go to stderr.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import sys

DB = "spark_it"
TABLE = f"{DB}.events"

PHASE1 = [
    f"CREATE DATABASE {DB} COMMENT 'spark scenario'",
    "SHOW DATABASES",
    f"CREATE TABLE {TABLE} (id INT, name STRING, amount DOUBLE) "
    f"PARTITIONED BY (dt STRING) STORED AS ORC",
    f"INSERT INTO {TABLE} PARTITION (dt='2024-01-01') "
    f"VALUES (1, 'a', 10.5), (2, 'b', 20.0), (3, 'c', 30.25)",
    f"INSERT INTO {TABLE} PARTITION (dt='2024-01-02') VALUES (4, 'd', 5.0), (5, 'e', 7.5)",
    f"SHOW TABLES IN {DB}",
    f"SHOW PARTITIONS {TABLE}",
    f"DESCRIBE {TABLE}",
    f"DESCRIBE DATABASE EXTENDED {DB}",
    f"DESCRIBE TABLE EXTENDED {TABLE}",
    f"DESCRIBE TABLE EXTENDED {TABLE} PARTITION (dt='2024-01-02')",
    f"SELECT dt, count(*) AS n, sum(amount) AS total, min(id) AS lo, max(id) AS hi "
    f"FROM {TABLE} GROUP BY dt ORDER BY dt",
    f"SELECT count(*) AS n, sum(amount) AS total FROM {TABLE} WHERE dt = '2024-01-02'",
    f"ALTER TABLE {TABLE} SET TBLPROPERTIES ('owner_team'='data', 'retention_days'='30')",
    f"SHOW TBLPROPERTIES {TABLE}",
]

PHASE2 = [
    f"REFRESH TABLE {TABLE}",
    "SHOW DATABASES",
    f"SHOW TABLES IN {DB}",
    f"SHOW PARTITIONS {TABLE}",
    f"SHOW TBLPROPERTIES {TABLE}",
    f"DESCRIBE TABLE EXTENDED {TABLE}",
    f"SELECT dt, count(*) AS n, sum(amount) AS total, min(id) AS lo, max(id) AS hi "
    f"FROM {TABLE} GROUP BY dt ORDER BY dt",
    f"SELECT count(*) AS n, sum(amount) AS total FROM {TABLE} WHERE dt = '2024-01-01'",
    f"DROP TABLE {TABLE}",
    f"SHOW TABLES IN {DB}",
    f"DROP DATABASE {DB}",
    "SHOW DATABASES",
]


def jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return str(value)


def session(uri: str, warehouse: str):
    from pyspark.sql import SparkSession

    scratch = os.path.join(os.path.abspath(warehouse), "..", "spark-scratch")
    os.makedirs(scratch, exist_ok=True)
    scratch = os.path.abspath(scratch)
    return (
        SparkSession.builder
        .master("local[1]")
        .appName("hms-txn-spark-scenario")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.warehouse.dir", os.path.abspath(warehouse))
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        # Reconnect quickly when the metastore restarts between the phases.
        .config("spark.hadoop.hive.metastore.client.connect.retry.delay", "1s")
        .config("spark.hadoop.hive.metastore.failure.retries", "5")
        .config("spark.hadoop.hive.exec.scratchdir", os.path.join(scratch, "hive"))
        .config("spark.local.dir", os.path.join(scratch, "local"))
        # A short-lived JVM on a small machine: the C1 compiler only and the serial GC
        # roughly halve the wall time of a run (fewer compiler and GC threads).
        .config("spark.driver.extraJavaOptions",
                f"-Dderby.system.home={scratch} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .enableHiveSupport()
        .getOrCreate()
    )


def run(spark, phase: str, statements: list[str], out: list[dict]) -> None:
    for sql in statements:
        df = spark.sql(sql)
        rows = [[jsonable(v) for v in row] for row in df.collect()]
        out.append({"phase": phase, "sql": sql, "columns": list(df.columns), "rows": rows})


def main(argv: list[str]) -> int:
    pause = "--pause" in argv
    args = [a for a in argv if a != "--pause"]
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    uri, warehouse, out_path = args
    os.makedirs(warehouse, exist_ok=True)
    spark = session(uri, warehouse)
    spark.sparkContext.setLogLevel("WARN")
    results: list[dict] = []
    try:
        run(spark, "1", PHASE1, results)
        if pause:
            print("PAUSED", flush=True)
            if not sys.stdin.readline():
                raise SystemExit("stdin closed while paused")
        run(spark, "2", PHASE2, results)
    finally:
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)
        spark.stop()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
