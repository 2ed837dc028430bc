"""A Spark SQL job against a metastore that requires SASL (issue 9).

    HADOOP_TOKEN_FILE_LOCATION=creds python tests/spark/spark_sasl_job.py URI WAREHOUSE OUT_JSON

Starts a fresh local Spark session whose built-in Hive 2.3 client talks to ``URI`` with
``hive.metastore.sasl.enabled=true``: with a Hive delegation token in the UGI (loaded by
Hadoop from ``HADOOP_TOKEN_FILE_LOCATION`` at login) that client authenticates with SASL
DIGEST-MD5. Runs the statements below and writes to ``OUT_JSON``::

    {"tokens": [kinds of the UGI's tokens], "results": [{"sql", "columns", "rows"}, ...],
     "error": null or the text of the first failure,
     "error_chain": [toString() of the Java exception and its causes]}

A failing statement ends the run (exit code 0: the caller judges the error). The script
runs in its own interpreter, independent of the test suite; Spark logs go to stderr.
"""

from __future__ import annotations

import json
import os
import sys

DB = "sasl_db"
STATEMENTS = [
    f"CREATE DATABASE {DB}",
    f"CREATE TABLE {DB}.people (id INT, name STRING) STORED AS PARQUET",
    f"INSERT INTO {DB}.people VALUES (1, 'ada'), (2, 'grace'), (3, 'edsger')",
    f"SELECT id, name FROM {DB}.people ORDER BY id",
    f"SHOW TABLES IN {DB}",
]


SASL = {"spark.hadoop.hive.metastore.sasl.enabled": "true"}


def session(uri: str, warehouse: str, conf: dict[str, str] = SASL):
    """A fresh local Spark session whose Hive client uses ``uri`` with ``conf`` (SASL by
    default; spark_tls_job.py gives TLS keys instead)."""
    from pyspark.sql import SparkSession

    scratch = os.path.abspath(os.path.join(warehouse, "..", "spark-scratch"))
    os.makedirs(scratch, exist_ok=True)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    return (
        builder
        .master("local[1]")
        .appName("hms-txn-spark-sasl")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.warehouse.dir", os.path.abspath(warehouse))
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        # Fail fast when authentication is refused (the negative runs).
        .config("spark.hadoop.hive.metastore.connect.retries", "1")
        .config("spark.hadoop.hive.metastore.failure.retries", "1")
        .config("spark.hadoop.hive.metastore.client.connect.retry.delay", "1s")
        .config("spark.hadoop.hive.exec.scratchdir", os.path.join(scratch, "hive"))
        .config("spark.local.dir", os.path.join(scratch, "local"))
        # Kerberos configuration: the krb5.conf the caller gives this process (KRB5_CONFIG),
        # else none at all -- never the machine's /etc/krb5.conf (Java ignores KRB5_CONFIG)
        .config("spark.driver.extraJavaOptions",
                f"-Dderby.system.home={scratch} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                f"-Djava.security.krb5.conf={os.environ.get('KRB5_CONFIG') or os.devnull}")
        .enableHiveSupport()
        .getOrCreate()
    )


def jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def java_causes(err: Exception) -> list[str]:
    """``toString()`` of the Java exception behind ``err`` and of each of its causes."""
    chain, throwable = [], getattr(err, "_origin", None)
    while throwable is not None and len(chain) < 30:
        chain.append(str(throwable.toString()))
        throwable = throwable.getCause()
    return chain


def main(argv: list[str]) -> int:
    uri, warehouse, out_json = argv[1:4]
    out = {"tokens": [], "results": [], "error": None, "error_chain": []}
    spark = session(uri, warehouse)
    try:
        ugi = spark.sparkContext._jvm.org.apache.hadoop.security.UserGroupInformation
        out["tokens"] = [str(t.getKind()) for t in ugi.getCurrentUser().getTokens().toArray()]
        for sql in STATEMENTS:
            df = spark.sql(sql)
            rows = [[jsonable(v) for v in row] for row in df.collect()]
            out["results"].append({"sql": sql, "columns": list(df.columns), "rows": rows})
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
