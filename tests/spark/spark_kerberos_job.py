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

import sys

from tests.spark.spark_sasl_job import session
from tests.spark.spark_tls_job import sql_then_hive_acid


def main(argv: list[str]) -> int:
    uri, warehouse, out_json, principal, keytab, service = argv[1:7]
    spark = session(uri, warehouse, {
        "spark.kerberos.principal": principal,
        "spark.kerberos.keytab": keytab,
        "spark.hadoop.hive.metastore.sasl.enabled": "true",
        "spark.hadoop.hive.metastore.kerberos.principal": service,
    })
    ugi = spark.sparkContext._jvm.org.apache.hadoop.security.UserGroupInformation
    return sql_then_hive_acid(spark, "krb_db", out_json,
                              {"user": str(ugi.getCurrentUser().getUserName())})


if __name__ == "__main__":
    sys.exit(main(sys.argv))
