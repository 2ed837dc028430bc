"""A Spark job against a metastore that serves TLS only (issue 30).

    python tests/spark/spark_tls_job.py URI WAREHOUSE OUT_JSON TRUSTSTORE PASSWORD

Starts a fresh local Spark session with ``spark.hadoop.hive.metastore.use.SSL=true`` and a
JKS truststore (``hive.metastore.truststore.path`` / ``.password``), the keys Hive 2.3's
``HiveMetaStoreClient.open`` reads for TLS. Spark's own Hive client runs the SQL
statements of ``spark_sasl_job`` (catalog calls through our TLS server); then
``spark.hive_acid``, configured by the very same session keys (its driver reads the JKS
truststore), creates a full-ACID table, appends to it and reads it back. Writes
``{"results": [...], "acid_rows": [...], "error", "error_chain"}`` to ``OUT_JSON``.
"""

from __future__ import annotations

import json
import sys

from tests.spark.spark_sasl_job import DB, STATEMENTS, java_causes, jsonable, session

def main(argv: list[str]) -> int:
    uri, warehouse, out_json, truststore, password = argv[1:6]
    spark = session(uri, warehouse, {
        "spark.hadoop.hive.metastore.use.SSL": "true",
        "spark.hadoop.hive.metastore.truststore.path": truststore,
        "spark.hadoop.hive.metastore.truststore.password": password,
    })
    return sql_then_hive_acid(spark, "tls_db", out_json)


def sql_then_hive_acid(spark, db: str, out_json: str, out: dict | None = None) -> int:
    """The statements of ``spark_sasl_job`` in database ``db``, then ``hive_acid`` on the
    same session: a full-ACID table ``db.acid_orders`` created, appended to, updated and
    read. ``out`` (with its ``results``, ``acid_rows``, ``error``, ``error_chain``) goes to
    ``out_json``; the session is stopped."""
    out = {"results": [], "acid_rows": [], "error": None, "error_chain": [], **(out or {})}
    acid_table = f"{db}.acid_orders"
    try:
        for sql in [s.replace(DB, db) for s in STATEMENTS]:
            df = spark.sql(sql)
            rows = [[jsonable(v) for v in row] for row in df.collect()]
            out["results"].append({"sql": sql, "columns": list(df.columns), "rows": rows})
        from spark import hive_acid
        hive_acid.register(spark)
        hive_acid.create_table(spark, acid_table, "id INT, qty INT")
        spark.createDataFrame([(1, 10), (2, 20)], "id INT, qty INT").write \
            .format("hive_acid").mode("append").save(acid_table)
        hive_acid.sql(spark, f"UPDATE {acid_table} SET qty = qty + 1 WHERE id = 2")
        rows = spark.read.format("hive_acid").load(acid_table).orderBy("id").collect()
        out["acid_rows"] = [[r.id, r.qty] for r in rows]
        hive_acid.shutdown()
    except Exception as err:  # the caller decides whether this failure was expected
        out["error"] = f"{type(err).__name__}: {err}"
        out["error_chain"] = java_causes(err)
    finally:
        with open(out_json, "w") as f:
            json.dump(out, f, indent=1)
        spark.stop()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
