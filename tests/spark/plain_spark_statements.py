"""Run SQL statements with plain Spark (its built-in Hive 2.3 client, no hive_acid).

    python tests/spark/plain_spark_statements.py URI WAREHOUSE_DIR OUT_JSON STATEMENT...

Starts a fresh local Spark session with Hive support whose metastore is ``URI``, runs each
statement with ``spark.sql(...).collect()`` (``table:NAME``: ``spark.table(NAME).collect()``,
``count:NAME``: ``spark.table(NAME).count()``, ``tableExists:NAME``,
``listColumns:NAME`` and ``listTables:DB``: those of ``spark.catalog``) and writes ``[{"sql", "rows"} |
{"sql", "error"}, ...]`` to ``OUT_JSON``. Independent of the test suite (its own interpreter); Spark
logs go to stderr.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    uri, warehouse, out_json, *statements = sys.argv[1:]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").appName("plain-spark-statements")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "1")
             .config("spark.sql.warehouse.dir", warehouse)
             .config("spark.hadoop.hive.metastore.uris", uri)
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    for sql in statements:
        try:
            if sql.startswith("table:"):
                found = spark.table(sql[len("table:"):]).collect()
            elif sql.startswith("count:"):
                found = [(spark.table(sql[len("count:"):]).count(),)]
            elif sql.startswith("tableExists:"):
                found = [(spark.catalog.tableExists(sql[len("tableExists:"):]),)]
            elif sql.startswith("listColumns:"):
                found = [(c.name, c.dataType, c.isPartition) for c in
                         spark.catalog.listColumns(sql[len("listColumns:"):])]
            elif sql.startswith("listTables:"):
                found = [(x.name, x.tableType) for x in
                         spark.catalog.listTables(sql[len("listTables:"):])]
            else:
                found = spark.sql(sql).collect()
            rows = [list(row) for row in found]
            results.append({"sql": sql, "rows": rows})
        except Exception as err:       # the statement's failure is the result
            results.append({"sql": sql, "error": f"{type(err).__name__}: {err}"})
    spark.stop()
    with open(out_json, "w") as f:
        json.dump(results, f, default=str)


if __name__ == "__main__":
    main()
