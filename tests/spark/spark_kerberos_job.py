"""A Spark job against a Kerberized metastore (issue 39).

    KRB5_CONFIG=krb5.conf HADOOP_CONF_DIR=conf \\
        python tests/spark/spark_kerberos_job.py URI WAREHOUSE OUT_JSON PRINCIPAL KEYTAB SERVICE

A fresh local Spark session logs in from a keytab as a user would submit it
(``spark.kerberos.principal`` / ``spark.kerberos.keytab``; ``hadoop.security.authentication=
kerberos`` and ``hadoop.rpc.protection`` from ``$HADOOP_CONF_DIR/core-site.xml``; the JVM's
``java.security.krb5.conf`` from KRB5_CONFIG). Spark's built-in Hive 2.3 client runs the SQL
statements of ``spark_sasl_job`` through the metastore with SASL GSSAPI
(``hive.metastore.kerberos.principal`` = SERVICE); then ``spark.hive_acid`` on the same
session, from the same keys, creates a full-ACID table, appends, updates and reads it.
Writes ``{"user", "results", "acid_rows", "error", "error_chain"}`` to ``OUT_JSON``.
"""

from __future__ import annotations

import json
import sys

from tests.spark.spark_sasl_job import DB, STATEMENTS, java_causes, jsonable, session

KRB_DB = "krb_db"
ACID_TABLE = f"{KRB_DB}.acid_orders"


def main(argv: list[str]) -> int:
    uri, warehouse, out_json, principal, keytab, service = argv[1:7]
    out = {"user": None, "results": [], "acid_rows": [], "error": None, "error_chain": []}
    spark = session(uri, warehouse, {
        "spark.kerberos.principal": principal,
        "spark.kerberos.keytab": keytab,
        "spark.hadoop.hive.metastore.sasl.enabled": "true",
        "spark.hadoop.hive.metastore.kerberos.principal": service,
    })
    try:
        ugi = spark.sparkContext._jvm.org.apache.hadoop.security.UserGroupInformation
        out["user"] = str(ugi.getCurrentUser().getUserName())
        for sql in [s.replace(DB, KRB_DB) for s in STATEMENTS]:
            df = spark.sql(sql)
            rows = [[jsonable(v) for v in row] for row in df.collect()]
            out["results"].append({"sql": sql, "columns": list(df.columns), "rows": rows})
        from spark import hive_acid
        hive_acid.register(spark)
        hive_acid.create_table(spark, ACID_TABLE, "id INT, qty INT")
        spark.createDataFrame([(1, 10), (2, 20)], "id INT, qty INT").write \
            .format("hive_acid").mode("append").save(ACID_TABLE)
        hive_acid.sql(spark, f"UPDATE {ACID_TABLE} SET qty = qty + 1 WHERE id = 2")
        rows = spark.read.format("hive_acid").load(ACID_TABLE).orderBy("id").collect()
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
