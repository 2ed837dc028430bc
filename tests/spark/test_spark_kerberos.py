"""Issue 39: Spark 4's built-in Hive client and ``spark.hive_acid`` on one session, logged
in from a keytab, against our Kerberized metastore (the suite's KDC,
tests/support/kerberos.py).

The job (``spark_kerberos_job.py``, its own interpreter and JVM) is configured as a user
submits a Kerberized job: ``spark.kerberos.principal`` / ``spark.kerberos.keytab`` (SparkSubmit
logs the UGI in from them), ``HADOOP_CONF_DIR`` with a core-site.xml
(``hadoop.security.authentication=kerberos``, ``hadoop.rpc.protection=privacy``),
``-Djava.security.krb5.conf``, ``spark.hadoop.hive.metastore.sasl.enabled=true`` and
``spark.hadoop.hive.metastore.kerberos.principal=hive/_HOST@REALM`` (Hive 2.3's
``HiveMetaStoreClient.open``: no delegation token in the UGI, so GSSAPI with that principal,
``_HOST`` from the URI). So Java's ``GssKrb5Client`` negotiates ``auth-conf`` and every
Thrift message is wrapped both ways. ``hive_acid``'s driver reads the same keys and
authenticates with the same keytab; its executors never call the metastore (they ask the
driver's coordinator), so no credential is shipped to them.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from hms_txn.wire.client import connect
from tests.hms_txn.test_kerberos import Lines, gssapi, kerberos_conf
from tests.support.kerberos import REALM, realm_environment
from tests.support.requirements import require
from tests.support.servers import REPO_ROOT, InProcessServer

pytestmark = [pytest.mark.spark]

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark_kerberos_job.py")
CORE_SITE = """<configuration>
<property><name>hadoop.security.authentication</name><value>kerberos</value></property>
<property><name>hadoop.rpc.protection</name><value>privacy</value></property>
</configuration>"""


@pytest.fixture
def krb_server(kdc, tmp_path):
    require(shutil.which("java") is not None, "java is not installed (Spark needs Java 17)")
    require(importlib.util.find_spec("pyspark") is not None, "pyspark is not installed")
    handler, logger = Lines(), logging.getLogger("hms_txn.wire.server")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    with realm_environment(kdc):
        server = InProcessServer(str(tmp_path / "data"), kerberos_conf(kdc, **{
            "hadoop.rpc.protection": "privacy",
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
            "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp_path}/metastore.sqlite"}))
        server.log = handler.lines
        try:
            yield server
        finally:
            logger.removeHandler(handler)
            server.stop()


def test_spark_sql_and_hive_acid_from_a_keytab(krb_server, kdc, tmp_path):
    workdir = tmp_path / "job"
    conf_dir = workdir / "hadoop-conf"
    conf_dir.mkdir(parents=True)
    (conf_dir / "core-site.xml").write_text(CORE_SITE)
    out_json = str(workdir / "out.json")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", HADOOP_CONF_DIR=str(conf_dir),
               PYTHONPATH=os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH"))
                                          if p),
               **kdc.env(str(workdir / "no-ticket.ccache")))
    env.pop("HADOOP_TOKEN_FILE_LOCATION", None)
    uri = f"thrift://localhost:{krb_server.port}"
    with open(workdir / "spark.log", "wb") as log:
        proc = subprocess.run([sys.executable, JOB, uri, str(workdir / "spark-wh"), out_json,
                               kdc.principal("alice"), kdc.keytab("alice"),
                               f"hive/_HOST@{REALM}"],
                              stdout=subprocess.PIPE, stderr=log, cwd=workdir, env=env,
                              timeout=600)
    spark_log = (workdir / "spark.log").read_text(errors="replace")
    assert proc.returncode == 0 and os.path.exists(out_json), spark_log[-6000:]
    result = json.loads(open(out_json).read())
    assert result["error"] is None, (result["error"], result["error_chain"], spark_log[-6000:])
    assert result["user"] == f"alice@{REALM}"
    rows = {r["sql"]: r["rows"] for r in result["results"]}
    assert rows["SELECT id, name FROM krb_db.people ORDER BY id"] == [
        [1, "ada"], [2, "grace"], [3, "edsger"]]
    assert rows["SHOW TABLES IN krb_db"] == [["krb_db", "people", False]]
    assert result["acid_rows"] == [[1, 10], [2, 21]]

    # every connection of the run, Spark's and hive_acid's: Kerberos as alice, encrypted
    logins = [m for m in krb_server.log if " authenticated as " in m]
    assert len(logins) >= 2, krb_server.log
    assert all(m.endswith(f"authenticated as alice with SASL GSSAPI (alice@{REALM}, auth-conf)")
               for m in logins), logins
    with connect(krb_server.uri, options=gssapi(kdc, qop="auth-conf")) as c:
        assert sorted(c.get_all_tables("krb_db")) == ["acid_orders", "people"]
        assert c.get_table("krb_db", "people").owner == "alice"        # Spark's short name
        acid = c.get_table_acid_aware("krb_db", "acid_orders")
        assert (acid.owner, acid.parameters["transactional"]) == ("alice", "true")
