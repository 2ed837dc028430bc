"""Issue 30: Spark's own Hive client and ``spark.hive_acid`` talk to hms-txn over TLS.

Hive 2.3's ``HiveMetaStoreClient.open`` (the client inside Spark 4) opens an SSL socket
when ``hive.metastore.use.SSL`` is true and SASL is off, trusting the JKS truststore of
``hive.metastore.truststore.path`` / ``.password`` (``HiveAuthUtils.getSSLSocket``); SASL
and TLS together are not offered by that client (its SASL branch comes first). The job
(``spark_tls_job.py``, its own interpreter and JVM) sets exactly these keys on the session;
``hive_acid`` reads the same ``spark.hadoop.*`` keys for its own connection, including the
JKS truststore. The server refuses plaintext, so every call of the run went over TLS.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from hms_txn.wire.client import connect
from hms_txn.wire.tls import TlsClient
from tests.support.certs import JKS_PASSWORD, make_certs
from tests.support.requirements import require
from tests.support.servers import REPO_ROOT, InProcessServer

pytestmark = [pytest.mark.spark]

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark_tls_job.py")


@pytest.fixture
def tls_server(tmp_path):
    require(shutil.which("java") is not None, "java is not installed (Spark needs Java 17)")
    require(importlib.util.find_spec("pyspark") is not None, "pyspark is not installed")
    certs = make_certs(str(tmp_path / "certs"))
    server = InProcessServer(str(tmp_path / "data"), {
        "hive.metastore.use.SSL": "true",
        "hive.metastore.keystore.path": certs.server,
        "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp_path}/metastore.sqlite",
    })
    server.certs = certs
    yield server
    server.stop()


def test_spark_hive_client_and_hive_acid_over_tls(tls_server, tmp_path):
    truststore = tls_server.certs.truststore_jks()
    workdir = tmp_path / "job"
    workdir.mkdir()
    out_json = str(workdir / "out.json")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH"))
                                          if p))
    with open(workdir / "spark.log", "wb") as log:
        proc = subprocess.run([sys.executable, JOB, tls_server.uri, str(workdir / "spark-wh"),
                               out_json, truststore, JKS_PASSWORD], stdout=subprocess.PIPE,
                              stderr=log, cwd=workdir, env=env, timeout=600)
    spark_log = (workdir / "spark.log").read_text(errors="replace")
    assert proc.returncode == 0 and os.path.exists(out_json), spark_log[-6000:]
    result = json.loads(open(out_json).read())
    assert result["error"] is None, (result["error"], result["error_chain"], spark_log[-6000:])
    rows = {r["sql"]: r["rows"] for r in result["results"]}
    assert rows["SELECT id, name FROM tls_db.people ORDER BY id"] == [
        [1, "ada"], [2, "grace"], [3, "edsger"]]
    assert rows["SHOW TABLES IN tls_db"] == [["tls_db", "people", False]]
    assert result["acid_rows"] == [[1, 10], [2, 21]]          # hive_acid wrote and read

    # What the run made is in our metastore (asked over TLS, trusting the PEM CA).
    with connect(tls_server.uri, tls=TlsClient(tls_server.certs.ca)) as client:
        assert sorted(client.get_all_tables("tls_db")) == ["acid_orders", "people"]
        acid = client.get_table_acid_aware("tls_db", "acid_orders")
        assert acid.parameters["transactional"] == "true"
