"""Spark with Hive support lists the tables of a database (issue 43: an Iceberg table made
through the Iceberg REST catalog is a metastore table Spark's Hive client sees).

    python tests/spark/iceberg_listing_job.py URI WAREHOUSE OUT_JSON

Writes ``[{"sql", "columns", "rows"}]`` of ``SHOW TABLES IN cross_door`` to ``OUT_JSON``.
"""

from __future__ import annotations

import json
import sys

from tests.spark.spark_sasl_job import jsonable, session

DATABASE = "cross_door"


def main(argv: list[str]) -> int:
    uri, warehouse, out_json = argv[1:4]
    database = DATABASE
    spark = session(uri, warehouse, {})
    try:
        sql = f"SHOW TABLES IN {database}"
        df = spark.sql(sql)
        rows = [[jsonable(v) for v in row] for row in df.collect()]
        with open(out_json, "w") as f:
            json.dump([{"sql": sql, "columns": list(df.columns), "rows": rows}], f)
    finally:
        spark.stop()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
