"""Issue 9: Spark connects to hms-txn with SASL enabled, with a Hive delegation token.

Spark's built-in Hive 2.3 client never uses SASL PLAIN: with
``hive.metastore.sasl.enabled=true`` it authenticates with DIGEST-MD5 and a Hive delegation
token from its UGI, or else tries Kerberos. So the test does what a user does:

1. start our server with SASL on and a configured user;
2. ``hms-txn delegation-token`` (SASL PLAIN as that user) writes a Hadoop credentials file;
3. a separate Python process starts a fresh local PySpark session whose JVM has
   ``HADOOP_TOKEN_FILE_LOCATION`` pointing at that file, and runs CREATE DATABASE, CREATE
   TABLE, INSERT, SELECT and SHOW TABLES through our metastore.

The server must have authenticated every Spark connection as the token's owner with
DIGEST-MD5. Negative runs: the same job with the token cancelled, and with no token at all
(Hive then tries Kerberos), fail with an authentication error and create nothing.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import threading

import pytest

from hms_txn.cli import main as cli_main
from hms_txn.domain.security.token_codec import KIND, read_credentials
from tests.hms_txn.test_security import SASL_CONF, sasl_client
from tests.spark.spark_sasl_job import DB, STATEMENTS
from tests.support.requirements import require
from tests.support.servers import REPO_ROOT, InProcessServer

pytestmark = [pytest.mark.spark]

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark_sasl_job.py")


class _Records(logging.Handler):
    """Log records of the server's logger, collected from every thread."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self._lock_records = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock_records:
            self.records.append(record)

    def messages(self) -> list[str]:
        with self._lock_records:
            return [r.getMessage() for r in self.records]

    def clear(self) -> None:
        with self._lock_records:
            self.records.clear()


@pytest.fixture
def server_log():
    handler = _Records()
    logger = logging.getLogger("hms_txn.wire.server")
    previous = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)


@pytest.fixture
def sasl_server(tmp_path):
    require(shutil.which("java") is not None, "java is not installed (Spark needs Java 17)")
    require(importlib.util.find_spec("pyspark") is not None, "pyspark is not installed")
    server = InProcessServer(str(tmp_path / "data"), {
        **SASL_CONF,
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp_path}/metastore.sqlite",
        "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
    })
    yield server
    server.stop()


def _run_job(uri: str, workdir: str, token_file: str | None, timeout: float = 300.0) -> dict:
    os.makedirs(workdir, exist_ok=True)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p))
    env.pop("HADOOP_TOKEN_FILE_LOCATION", None)
    env.pop("HADOOP_TOKEN", None)
    # no Kerberos configuration, whatever the machine has in /etc/krb5.conf (the job hands
    # KRB5_CONFIG to its JVM as java.security.krb5.conf)
    env["KRB5_CONFIG"] = os.devnull
    if token_file is not None:
        env["HADOOP_TOKEN_FILE_LOCATION"] = token_file
    out_json = os.path.join(workdir, "out.json")
    log_path = os.path.join(workdir, "spark.log")
    with open(log_path, "wb") as log:
        proc = subprocess.run([sys.executable, JOB, uri, os.path.join(workdir, "spark-wh"), out_json],
                              stdout=subprocess.PIPE, stderr=log, cwd=workdir, env=env,
                              timeout=timeout)
    spark_log = open(log_path, errors="replace").read()
    assert proc.returncode == 0 and os.path.exists(out_json), (
        f"the Spark job crashed:\n{spark_log[-6000:]}")
    with open(out_json) as f:
        result = json.load(f)
    result["log"] = spark_log
    return result


def _get_token(server: InProcessServer, tmp_path, name: str) -> str:
    password_file = tmp_path / "alice.password"
    password_file.write_text("s3cret\n")
    output = str(tmp_path / f"{name}.token")
    assert cli_main(["delegation-token", "--uri", server.uri, "--user", "alice",
                     "--password-file", str(password_file), "--output", output]) == 0
    return output


def _databases(server: InProcessServer) -> list[str]:
    client = sasl_client(server.port, "alice", "s3cret")
    try:
        return client.get_all_databases()
    finally:
        client.close()


def test_spark_sql_through_sasl_with_a_delegation_token(sasl_server, server_log, tmp_path):
    token_file = _get_token(sasl_server, tmp_path, "spark")
    [(_alias, token)] = read_credentials(open(token_file, "rb").read())
    assert token.kind == KIND
    seq = token.decode_identifier().sequence_number

    server_log.clear()
    result = _run_job(sasl_server.uri, str(tmp_path / "job"), token_file)
    assert result["error"] is None, (result["error"], result["error_chain"], result["log"][-6000:])
    assert result["tokens"] == [KIND]  # Hadoop loaded the file into the UGI at login

    rows = {r["sql"]: r["rows"] for r in result["results"]}
    assert list(rows) == STATEMENTS
    assert rows[f"SELECT id, name FROM {DB}.people ORDER BY id"] == [
        [1, "ada"], [2, "grace"], [3, "edsger"]]
    assert rows[f"SHOW TABLES IN {DB}"] == [[DB, "people", False]]

    # Everything went through our metastore, and every Spark connection authenticated
    # with DIGEST-MD5 as the token's owner.
    logins = [m for m in server_log.messages() if " authenticated as " in m]
    assert logins, server_log.messages()
    assert all(m.endswith(f"authenticated as alice with SASL DIGEST-MD5 (delegation token {seq})")
               for m in logins), logins
    client = sasl_client(sasl_server.port, "alice", "s3cret")
    try:
        assert DB in client.get_all_databases()
        table = client.get_table(DB, "people")
        assert [c.name for c in table.sd.cols] == ["id", "name"]
        assert table.sd.location.startswith("file:")
        assert os.listdir(table.sd.location.removeprefix("file:"))  # INSERT wrote data files
    finally:
        client.close()


def test_spark_without_a_valid_token_is_refused(sasl_server, server_log, tmp_path):
    token_file = _get_token(sasl_server, tmp_path, "cancelled")
    assert cli_main(["cancel-delegation-token", "--uri", sasl_server.uri, "--user", "alice",
                     "--password-file", str(tmp_path / "alice.password"),
                     "--token-file", token_file]) == 0

    # A cancelled token: the DIGEST-MD5 handshake reaches us and is refused with a reason.
    server_log.clear()
    cancelled = _run_job(sasl_server.uri, str(tmp_path / "cancelled"), token_file)
    assert cancelled["results"] == []
    assert cancelled["tokens"] == [KIND]
    chain = "\n".join(cancelled["error_chain"])
    assert "Peer indicated failure: DIGEST-MD5: delegation token" in chain, (
        cancelled["error_chain"], cancelled["log"][-6000:])
    assert "is not known to this metastore" in chain
    refusals = [m for m in server_log.messages() if m.startswith("refused connection")]
    assert refusals and all("DIGEST-MD5: delegation token" in m for m in refusals), refusals
    assert not any(" authenticated as " in m for m in server_log.messages())

    # No token at all: Hive's client falls back to Kerberos (GSSAPI), which fails in the
    # client before it sends anything (no Kerberos configuration for the job, even on a
    # machine with /etc/krb5.conf: "Cannot locate default realm"). Hive 2.3 then loses the cause
    # (its final MetaException stringifies a null TTransportException: an NPE), so the
    # reason is only in Spark's log.
    server_log.clear()
    none = _run_job(sasl_server.uri, str(tmp_path / "none"), None)
    assert none["results"] == [] and none["tokens"] == []
    assert any("Unable to instantiate org.apache.hadoop.hive.ql.metadata.SessionHiveMetaStoreClient"
               in c for c in none["error_chain"]), none["error_chain"]
    assert "Could not instantiate SASL transport" in none["log"], none["log"][-6000:]
    assert "GSSException" in none["log"]
    assert "Cannot locate default realm" in none["log"]     # not the machine's krb5.conf
    assert not any(" authenticated as " in m for m in server_log.messages())

    assert _databases(sasl_server) == ["default"]  # neither run created anything
