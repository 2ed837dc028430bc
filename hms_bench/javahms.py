"""Start the reference Apache Hive Metastore (Java, 2.3) for side-by-side runs.

PySpark's wheel ships the Hive 2.3 metastore jars together with DataNucleus, Derby and
HikariCP, so the Java metastore can run from them with an embedded Derby database and
nothing downloaded. Differential tests and the benchmark suite use it as the peer.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

_SITE = """<?xml version="1.0"?>
<configuration>
{props}
</configuration>
"""

_LOG4J = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d %p %c{1}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
"""


def pyspark_jars() -> str:
    """The jars directory of the installed pyspark wheel, found without importing pyspark
    (only spark/ imports it)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed: the Java metastore runs from its jars")
    jars = os.path.join(list(spec.submodule_search_locations)[0], "jars")
    if not os.path.isdir(jars):
        raise RuntimeError(f"pyspark has no jars directory at {jars}")
    return jars


@dataclass
class JavaMetastore:
    process: subprocess.Popen
    port: int
    workdir: str

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_java_metastore(port: int, workdir: str, *, timeout: float = 180.0,
                         heap: str = "1g", extra_conf: dict[str, str] | None = None,
                         extra_classpath: tuple[str, ...] = (),
                         jvm_options: tuple[str, ...] = (),
                         core_site: dict[str, str] | None = None) -> JavaMetastore:
    """Start Hive Metastore 2.3 on ``port`` with its Derby database under ``workdir`` (or
    the database ``extra_conf`` names, with its JDBC driver on ``extra_classpath``).
    ``core_site``: Hadoop keys for a core-site.xml on its classpath (Kerberos:
    ``hadoop.security.authentication``, ``hadoop.rpc.protection``, proxy users), with
    ``jvm_options`` such as ``-Djava.security.krb5.conf``."""
    java = shutil.which("java")
    if not java:
        raise RuntimeError("java not found on PATH (Java 17 is needed for the reference metastore)")
    workdir = os.path.abspath(workdir)
    conf_dir = os.path.join(workdir, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    os.makedirs(os.path.join(workdir, "warehouse"), exist_ok=True)
    conf = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={workdir}/metastore_db;create=true",
        "datanucleus.schema.autoCreateAll": "true",
        "datanucleus.connectionPoolingType": "HikariCP",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": os.path.join(workdir, "warehouse"),
        "hive.support.concurrency": "true",
        "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
        "hive.in.test": "true",  # lets TxnDbUtil create the transaction tables on Derby
    }
    conf.update(extra_conf or {})
    props = "\n".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in conf.items())
    with open(os.path.join(conf_dir, "hive-site.xml"), "w") as f:
        f.write(_SITE.format(props=props))
    with open(os.path.join(conf_dir, "log4j2.properties"), "w") as f:
        f.write(_LOG4J)
    if core_site is not None:
        with open(os.path.join(conf_dir, "core-site.xml"), "w") as f:
            f.write(_SITE.format(props="\n".join(
                f"<property><name>{k}</name><value>{v}</value></property>"
                for k, v in core_site.items())))
    log = open(os.path.join(workdir, "hms.log"), "ab")
    cmd = [
        java, f"-Xmx{heap}", *jvm_options,
        "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector",
        f"-Dlog4j.configurationFile={conf_dir}/log4j2.properties",
        f"-Dderby.stream.error.file={workdir}/derby.log",
        "-cp", ":".join([conf_dir, f"{pyspark_jars()}/*", *extra_classpath]),
        "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port),
    ]
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _listening(port):
            return JavaMetastore(process, port, workdir)
        if process.poll() is not None:
            raise RuntimeError(f"the Java metastore exited; see {workdir}/hms.log")
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"the Java metastore did not listen on {port} within {timeout:.0f} s")


# Debian's libpostgresql-jdbc-java: the PostgreSQL JDBC driver for the Java metastore.
POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"


def postgres_conf(jdbc_url: str, user: str) -> dict[str, str]:
    """hive-site values that put the Java metastore on PostgreSQL: DataNucleus creates the
    catalog schema (``datanucleus.schema.autoCreateAll``, no schema verification); the
    transaction tables come from ``create_postgres_txn_tables`` (``hive.in.test`` off: its
    TxnDbUtil.prepDb would try Derby's DDL)."""
    return {"javax.jdo.option.ConnectionURL": jdbc_url,
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": user,
            "javax.jdo.option.ConnectionPassword": "",
            "datanucleus.rdbms.datastoreAdapterClassName":
                "org.datanucleus.store.rdbms.adapter.PostgreSQLAdapter",
            "hive.in.test": "false"}


# The transaction tables of Hive 2.3's TxnHandler on PostgreSQL (column names and types as
# its hive-txn-schema-2.3.0.postgres.sql script makes them; the Java metastore's own
# TxnDbUtil.prepDb only speaks Derby, and DataNucleus does not manage these tables).
_TXN_TABLES = {
    "TXNS": "TXN_ID bigint PRIMARY KEY, TXN_STATE char(1) NOT NULL, TXN_STARTED bigint NOT NULL,"
            " TXN_LAST_HEARTBEAT bigint NOT NULL, TXN_USER varchar(128) NOT NULL,"
            " TXN_HOST varchar(128) NOT NULL, TXN_AGENT_INFO varchar(128),"
            " TXN_META_INFO varchar(128), TXN_HEARTBEAT_COUNT integer",
    "TXN_COMPONENTS": "TC_TXNID bigint REFERENCES TXNS (TXN_ID), TC_DATABASE varchar(128) NOT NULL,"
                      " TC_TABLE varchar(128), TC_PARTITION varchar(767),"
                      " TC_OPERATION_TYPE char(1) NOT NULL",
    "COMPLETED_TXN_COMPONENTS": "CTC_TXNID bigint, CTC_DATABASE varchar(128) NOT NULL,"
                                " CTC_TABLE varchar(256), CTC_PARTITION varchar(767)",
    "NEXT_TXN_ID": "NTXN_NEXT bigint NOT NULL",
    "HIVE_LOCKS": "HL_LOCK_EXT_ID bigint NOT NULL, HL_LOCK_INT_ID bigint NOT NULL, HL_TXNID bigint,"
                  " HL_DB varchar(128) NOT NULL, HL_TABLE varchar(128), HL_PARTITION varchar(767),"
                  " HL_LOCK_STATE char(1) NOT NULL, HL_LOCK_TYPE char(1) NOT NULL,"
                  " HL_LAST_HEARTBEAT bigint NOT NULL, HL_ACQUIRED_AT bigint,"
                  " HL_USER varchar(128) NOT NULL, HL_HOST varchar(128) NOT NULL,"
                  " HL_HEARTBEAT_COUNT integer, HL_AGENT_INFO varchar(128),"
                  " HL_BLOCKEDBY_EXT_ID bigint, HL_BLOCKEDBY_INT_ID bigint,"
                  " PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID)",
    "NEXT_LOCK_ID": "NL_NEXT bigint NOT NULL",
    "COMPACTION_QUEUE": "CQ_ID bigint PRIMARY KEY, CQ_DATABASE varchar(128) NOT NULL,"
                        " CQ_TABLE varchar(128) NOT NULL, CQ_PARTITION varchar(767),"
                        " CQ_STATE char(1) NOT NULL, CQ_TYPE char(1) NOT NULL,"
                        " CQ_TBLPROPERTIES varchar(2048), CQ_WORKER_ID varchar(128),"
                        " CQ_START bigint, CQ_RUN_AS varchar(128), CQ_HIGHEST_TXN_ID bigint,"
                        " CQ_META_INFO bytea, CQ_HADOOP_JOB_ID varchar(32)",
    "NEXT_COMPACTION_QUEUE_ID": "NCQ_NEXT bigint NOT NULL",
    "COMPLETED_COMPACTIONS": "CC_ID bigint PRIMARY KEY, CC_DATABASE varchar(128) NOT NULL,"
                             " CC_TABLE varchar(128) NOT NULL, CC_PARTITION varchar(767),"
                             " CC_STATE char(1) NOT NULL, CC_TYPE char(1) NOT NULL,"
                             " CC_TBLPROPERTIES varchar(2048), CC_WORKER_ID varchar(128),"
                             " CC_START bigint, CC_END bigint, CC_RUN_AS varchar(128),"
                             " CC_HIGHEST_TXN_ID bigint, CC_META_INFO bytea,"
                             " CC_HADOOP_JOB_ID varchar(32)",
    "AUX_TABLE": "MT_KEY1 varchar(128) NOT NULL, MT_KEY2 bigint NOT NULL, MT_COMMENT varchar(255),"
                 " PRIMARY KEY (MT_KEY1, MT_KEY2)",
    "WRITE_SET": "WS_DATABASE varchar(128) NOT NULL, WS_TABLE varchar(128) NOT NULL,"
                 " WS_PARTITION varchar(767), WS_TXNID bigint NOT NULL,"
                 " WS_COMMIT_ID bigint NOT NULL, WS_OPERATION_TYPE char(1) NOT NULL",
}
_TXN_INDEXES = ("CREATE INDEX TC_TXNID_INDEX ON TXN_COMPONENTS USING hash (TC_TXNID)",
                "CREATE INDEX HL_TXNID_INDEX ON HIVE_LOCKS USING hash (HL_TXNID)")
_TXN_COUNTERS = ("NEXT_TXN_ID", "NEXT_LOCK_ID", "NEXT_COMPACTION_QUEUE_ID")


def create_postgres_txn_tables(port: int, user: str, dbname: str) -> None:
    """Create Hive 2.3's transaction tables in the PostgreSQL database ``dbname`` (loopback
    server at ``port``) before the Java metastore starts on it."""
    import psycopg
    conn = psycopg.connect(host="127.0.0.1", port=port, user=user, dbname=dbname)
    try:
        with conn, conn.cursor() as cur:
            for table, columns in _TXN_TABLES.items():
                cur.execute(f"CREATE TABLE {table} ({columns})")
            for sql in _TXN_INDEXES:
                cur.execute(sql)
            for table in _TXN_COUNTERS:
                cur.execute(f"INSERT INTO {table} VALUES (1)")
    finally:
        conn.close()
