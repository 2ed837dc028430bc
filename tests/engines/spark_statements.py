"""Everyday Spark SQL statements against one Hive metastore, each on its own.

    python tests/engines/spark_statements.py URI WAREHOUSE_DIR OUT_JSON

A fresh local Spark 4 session with Hive support (the built-in Hive 2.3 client; the
session of ``tests/spark/spark_sql_scenario.py``) runs ``STATEMENTS`` in order and writes
``[{"sql", "columns", "rows"} | {"sql", "error"}, ...]`` to ``OUT_JSON``. A failing
statement is recorded with Spark's error and the next one runs, so one run shows every
statement that fails. Runs in its own interpreter; prints only ``DONE`` on stdout.
"""

from __future__ import annotations

import json
import os
import sys

from tests.engines.structs import UPPER_UDF
from tests.spark.spark_sql_scenario import jsonable, session

DB = "eng_db"

STATEMENTS = [
    f"CREATE DATABASE {DB} COMMENT 'engine statements'",
    f"CREATE TABLE {DB}.plain (id BIGINT, name STRING) STORED AS ORC",
    f"CREATE TABLE {DB}.events (id BIGINT, name STRING) PARTITIONED BY (dt STRING) STORED AS ORC",
    f"INSERT INTO {DB}.plain VALUES (1, 'a'), (2, 'bb'), (3, 'ccc')",
    f"INSERT INTO {DB}.events PARTITION (dt='2024-01-01') VALUES (1, 'a'), (2, 'b')",
    f"INSERT INTO {DB}.events PARTITION (dt='2024-01-02') VALUES (3, 'c')",
    f"SELECT id, name FROM {DB}.events WHERE dt = '2024-01-02'",
    f"DESCRIBE FORMATTED {DB}.plain",
    f"ANALYZE TABLE {DB}.plain COMPUTE STATISTICS",
    f"ANALYZE TABLE {DB}.plain COMPUTE STATISTICS FOR COLUMNS id, name",
    f"DESCRIBE FORMATTED {DB}.plain id",
    f"ANALYZE TABLE {DB}.events PARTITION (dt='2024-01-01') COMPUTE STATISTICS",
    f"DESCRIBE FORMATTED {DB}.events PARTITION (dt='2024-01-01')",
    f"CREATE FUNCTION {DB}.upper2 AS '{UPPER_UDF}'",
    f"SELECT {DB}.upper2(name) FROM {DB}.plain ORDER BY id",
    f"SHOW USER FUNCTIONS FROM {DB}",
    f"DROP FUNCTION {DB}.upper2",
    f"DROP FUNCTION IF EXISTS {DB}.upper2",
    f"TRUNCATE TABLE {DB}.plain",
    f"SELECT count(*) FROM {DB}.plain",
    f"DROP TABLE {DB}.events",
    f"DROP TABLE {DB}.plain",
    f"DROP DATABASE {DB}",
    "SHOW DATABASES",
]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    uri, warehouse, out_path = argv
    os.makedirs(warehouse, exist_ok=True)
    spark = session(uri, warehouse)
    spark.sparkContext.setLogLevel("WARN")
    results: list[dict] = []
    try:
        for sql in STATEMENTS:
            try:
                df = spark.sql(sql)
                rows = [[jsonable(v) for v in row] for row in df.collect()]
                results.append({"sql": sql, "columns": list(df.columns), "rows": rows})
            except Exception as err:        # recorded; the next statement runs
                results.append({"sql": sql, "error": f"{type(err).__name__}: {err}"[:2000]})
    finally:
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)
        spark.stop()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
