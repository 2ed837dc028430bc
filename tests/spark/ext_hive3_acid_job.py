"""Spark on a Hive 3 ACID table that lives in a Hive 2.x upstream in its upstream form.

    HIVE3_ACID_UPSTREAM=thrift://... HIVE3_ACID_TABLE=db.t \\
        python tests/spark/ext_hive3_acid_job.py EXT_URI WAREHOUSE_DIR OUT_JSON

One local Spark session whose own catalog (Spark's built-in Hive 2.3 client) is the
upstream metastore itself, and whose ``hive_acid`` data source goes through hms-txn in
extension mode (``EXT_URI``). It appends rows with ``hive_acid`` and reads them back, then
tries what a Hive 2.3 client does with the table straight on the upstream (list, describe,
select, insert, drop) and writes every outcome to ``OUT_JSON``. Run by
tests/hms_txn/test_extension_hive3_acid.py (through ``tests.support.spark.run_scenario``),
in its own interpreter; prints only ``DONE`` on stdout.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    ext, warehouse, out = sys.argv[1:4]
    upstream = os.environ["HIVE3_ACID_UPSTREAM"]
    table = os.environ["HIVE3_ACID_TABLE"]
    db = table.split(".")[0]
    from pyspark.sql import SparkSession
    from spark import hive_acid
    spark = (SparkSession.builder.master("local[2]").appName("ext-hive3-acid")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.warehouse.dir", warehouse)
             .config("spark.hadoop.hive.metastore.uris", upstream)
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    hive_acid.register(spark, ext)
    results: list[dict] = []

    def attempt(what, fn):
        try:
            results.append({"what": what, "ok": True, "result": fn()})
        except Exception as err:  # noqa: BLE001 - the outcome is the result
            results.append({"what": what, "ok": False, "error": f"{type(err).__name__}: {err}"[:3000]})

    def acid_rows():
        return sorted([r["id"], r["name"]] for r in
                      spark.read.format("hive_acid").load(table).collect())

    schema = "id INT, name STRING"
    attempt("hive_acid append", lambda: spark.createDataFrame(
        [(1, "a"), (2, "b")], schema).write.format("hive_acid").mode("append").save(table))
    attempt("hive_acid append 2", lambda: spark.createDataFrame(
        [(3, "c")], schema).write.format("hive_acid").mode("append").save(table))
    attempt("hive_acid read", acid_rows)
    # tables hive_acid creates itself (through us): full ACID partitioned, insert-only Parquet
    parted, io = f"{db}.sparked_parted", f"{db}.sparked_io"
    attempt("create parted", lambda: hive_acid.create_table(
        spark, parted, "id INT, name STRING, p STRING", partition_by=["p"]))
    attempt("append parted", lambda: spark.createDataFrame(
        [(1, "a", "x"), (2, "b", "y"), (3, "c", "x")], "id INT, name STRING, p STRING")
        .write.format("hive_acid").mode("append").save(parted))
    attempt("delete parted", lambda: hive_acid.delete(spark, parted, "id = 3"))
    attempt("read parted", lambda: sorted(list(r) for r in spark.read.format("hive_acid")
                                          .load(parted).collect()))
    attempt("create io", lambda: hive_acid.create_table(
        spark, io, "id INT, v STRING", insert_only=True, file_format="parquet"))
    attempt("append io", lambda: spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING")
            .write.format("hive_acid").mode("append").save(io))
    attempt("read io", lambda: sorted(list(r) for r in spark.read.format("hive_acid")
                                      .load(io).collect()))
    attempt("select parted", lambda: spark.sql(f"SELECT * FROM {parted}").collect() and None)
    attempt("select io", lambda: spark.sql(f"SELECT * FROM {io}").collect() and None)
    # Spark's own Hive 2.3 client, straight on the upstream
    attempt("show tables", lambda: sorted(r[1] for r in spark.sql(f"SHOW TABLES IN {db}").collect()))
    attempt("describe", lambda: [list(r) for r in spark.sql(f"DESCRIBE TABLE {table}").collect()])
    attempt("select", lambda: [list(r) for r in spark.sql(f"SELECT * FROM {table}").collect()])
    attempt("insert", lambda: spark.sql(f"INSERT INTO {table} VALUES (9, 'z')").collect() and None)
    attempt("drop", lambda: spark.sql(f"DROP TABLE {table}").collect() and None)
    attempt("hive_acid read after", acid_rows)
    hive_acid.shutdown()
    spark.stop()
    with open(out, "w") as f:
        json.dump(results, f)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
