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
                         heap: str = "1g", extra_conf: dict[str, str] | None = None) -> JavaMetastore:
    """Start Hive Metastore 2.3 on ``port`` with its Derby database under ``workdir``."""
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
    log = open(os.path.join(workdir, "hms.log"), "ab")
    cmd = [
        java, f"-Xmx{heap}",
        "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector",
        f"-Dlog4j.configurationFile={conf_dir}/log4j2.properties",
        f"-Dderby.stream.error.file={workdir}/derby.log",
        "-cp", f"{conf_dir}:{pyspark_jars()}/*",
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
