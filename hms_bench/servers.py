"""Servers a benchmark run starts: hms-txn (as a separate process), PostgreSQL, Java HMS.

Our server always runs as its own ``hms-txn serve`` process, never inside the benchmark's
process: sharing one interpreter (one GIL) with the load-generating code would slow both
and make the numbers meaningless.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from xml.sax.saxutils import escape



def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def connect(port: int, host: str = "127.0.0.1", timeout_ms: int = 600_000):
    """The generated client over TBufferedTransport + TBinaryProtocolAccelerated (for both
    servers), from the project's one client factory."""
    from hms_txn.wire.client import Endpoint, connect as open_client
    return open_client(Endpoint(host, port), timeout=timeout_ms / 1000)


def rss_bytes(pid: int) -> int | None:
    """Resident set size of a process (from /proc), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User+system CPU time a process has used so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, IndexError, ValueError):
        return None


def write_site_xml(path: str, values: dict[str, str]) -> str:
    props = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>"
        for k, v in values.items())
    with open(path, "w") as f:
        f.write(f'<?xml version="1.0"?>\n<configuration>\n{props}\n</configuration>\n')
    return path


# The checkout this module belongs to: a server started from another directory must still
# run its code (not whatever copy of hms_txn is installed).
CHECKOUT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def checkout_env() -> dict[str, str]:
    """Environment for a child process that must run this checkout's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (CHECKOUT_ROOT, env.get("PYTHONPATH")) if p)
    return env


def start_serve_process(site: str, data_dir: str, log, log_path: str, *, port: int = 0,
                        log_level: str | None = None, env: dict | None = None,
                        host: str = "127.0.0.1", new_session: bool = False
                        ) -> tuple[subprocess.Popen, int]:
    """``hms-txn serve`` with ``site`` as a child process on ``host`` (loopback), its
    stderr to ``log``; (the process, the port it listens on) once it prints its address."""
    args = [sys.executable, "-m", "hms_txn.cli"]
    if log_level:
        args += ["--log-level", log_level]
    args += ["serve", "--conf", site, "--data-dir", data_dir, "--port", str(port),
             "--host", host]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, cwd=data_dir, env=env,
                            start_new_session=new_session)
    line = proc.stdout.readline().decode()
    match = re.search(r"listening on thrift://[\d.]+:(\d+)", line)
    if not match:
        proc.kill()
        proc.wait()
        with open(log_path, errors="replace") as f:
            tail = f.read()[-4000:]
        raise RuntimeError(f"hms-txn did not start ({line!r}); log tail:\n{tail}")
    return proc, int(match.group(1))


class OurServer:
    """``hms-txn serve`` as a child process with a hive-site.xml written for it."""

    kind = "hms-txn"

    def __init__(self, name: str, data_dir: str, conf: dict[str, str]):
        os.makedirs(data_dir, exist_ok=True)
        self.name = name
        self.data_dir = data_dir
        self.conf = dict(conf)
        self.conf.setdefault("hive.metastore.warehouse.dir", os.path.join(data_dir, "warehouse"))
        site = write_site_xml(os.path.join(data_dir, "hive-site.xml"), self.conf)
        self.log_path = os.path.join(data_dir, "serve.log")
        self._log = open(self.log_path, "ab")
        self.proc, self.port = start_serve_process(site, data_dir, self._log, self.log_path,
                                                   log_level="WARNING", env=checkout_env())
        # With the Iceberg REST catalog on, serve prints its address on the next line.
        self.rest: str | None = None
        if self.conf.get("metastore.catalog.servlet.port", "-1") != "-1":
            self.rest = self.proc.stdout.readline().decode().strip().rsplit(" ", 1)[-1]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


class ServerGroup:
    """Several ``hms-txn serve`` processes on one database (PostgreSQL), sharing one
    warehouse directory; a cell's clients are spread over them (``ports``)."""

    kind = "hms-txn"

    def __init__(self, name: str, data_dir: str, conf: dict[str, str], count: int):
        conf = dict(conf)
        conf.setdefault("hive.metastore.warehouse.dir", os.path.join(data_dir, "warehouse"))
        self.name = name
        # One after the other: the first creates the schema before the next starts.
        self.members = [OurServer(f"{name}-{i}", os.path.join(data_dir, str(i)), conf)
                        for i in range(count)]

    @property
    def port(self) -> int:
        return self.members[0].port

    @property
    def ports(self) -> list[int]:
        return [m.port for m in self.members]

    @property
    def pid(self) -> int:
        return self.members[0].pid

    @property
    def pids(self) -> list[int]:
        return [m.pid for m in self.members]

    def stop(self) -> None:
        for member in self.members:
            member.stop()


class JavaServer:
    """The reference Hive Metastore 2.3 (embedded Derby, or a database of ``postgres``),
    wrapped like OurServer."""

    kind = "java"

    def __init__(self, name: str, workdir: str, *, heap: str = "1g",
                 postgres: "BenchPostgres | None" = None):
        from hms_bench.javahms import (POSTGRES_JDBC_JAR, create_postgres_txn_tables,
                                       postgres_conf, start_java_metastore)
        self.name = name
        self.workdir = workdir
        self.port = free_port()
        # Hive 2.3's TxnHandler serializes lock() on Derby with a JVM lock held while it
        # takes a pooled connection; with the default pool of 10 connections, 16 concurrent
        # lockers deadlock the server (every pooled connection is held by a thread waiting
        # for the JVM lock). A bigger pool avoids that and is the fair setting.
        conf = {"datanucleus.connectionPool.maxPoolSize": "64"}
        classpath: tuple[str, ...] = ()
        if postgres is not None:
            url = postgres.create_database("java")
            create_postgres_txn_tables(postgres.port, postgres.user, url.rsplit("/", 1)[1])
            conf.update(postgres_conf(url, postgres.user))
            classpath = (POSTGRES_JDBC_JAR,)
        self._ms = start_java_metastore(self.port, workdir, heap=heap, extra_conf=conf,
                                        extra_classpath=classpath)

    @property
    def pid(self) -> int:
        return self._ms.process.pid

    def stop(self) -> None:
        self._ms.stop()


def pg_bindir() -> str:
    """Directory of the PostgreSQL server binaries (Debian's postgresql package)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if candidates:
        return os.path.dirname(candidates[0])
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(os.path.realpath(initdb))
    raise RuntimeError("PostgreSQL server binaries not found (install Debian's postgresql package)")


def create_pg_database(port: int, user: str, name: str) -> None:
    """CREATE DATABASE ``name`` on the loopback PostgreSQL server at ``port``."""
    import psycopg
    conn = psycopg.connect(host="127.0.0.1", port=port, user=user, dbname="postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    conn.close()


class BenchPostgres:
    """A throw-away PostgreSQL cluster for benchmarks, with durability settings left ON.

    Unlike the test suite's server (fsync off for speed), this one keeps PostgreSQL's
    defaults (fsync=on, synchronous_commit=on, full_page_writes=on) so that commit costs
    are honest. Runs as the ``postgres`` user when we are root (PostgreSQL refuses root).
    """

    def __init__(self, root: str | None = None):
        self.bindir = pg_bindir()
        self.root = tempfile.mkdtemp(prefix="hms-bench-pg-", dir=root)
        self.datadir = os.path.join(self.root, "data")
        self.port = free_port()
        self.user = "hms"
        self._run_as = None
        if os.geteuid() == 0:
            self._run_as = "postgres"
            pw = pwd.getpwnam(self._run_as)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._dbs = 0

    def _run(self, *argv: str) -> None:
        cmd = list(argv)
        if self._run_as:
            cmd = ["runuser", "-u", self._run_as, "--"] + cmd
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.root)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                               f"{proc.stdout.decode(errors='replace')[-2000:]}")

    def start(self) -> "BenchPostgres":
        self._run(os.path.join(self.bindir, "initdb"), "-D", self.datadir, "-A", "trust",
                  "-U", self.user, "-E", "UTF8")
        # Connections: up to 12 of our server processes (--pg-servers 1,2,4, with and
        # without cache), each a pool of 10 plus overflow under 16 clients, and Java's 64:
        # 300 ran out (FATAL: sorry, too many clients already) in the 4-process cells.
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   f"-c max_connections=1000 -c shared_buffers=256MB")
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-o", options,
                  "-l", os.path.join(self.root, "server.log"), "-w", "-t", "60", "start")
        return self

    def settings(self) -> dict[str, str]:
        import psycopg
        conn = psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres")
        try:
            with conn.cursor() as cur:
                out = {}
                for name in ("server_version", "fsync", "synchronous_commit", "full_page_writes",
                             "shared_buffers"):
                    cur.execute(f"SHOW {name}")
                    out[name] = cur.fetchone()[0]
                return out
        finally:
            conn.close()

    def create_database(self, prefix: str = "bench") -> str:
        """A new empty database; returns its JDBC URL (what a hive-site.xml carries)."""
        self._dbs += 1
        name = f"{prefix}_{self._dbs}"
        create_pg_database(self.port, self.user, name)
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", "fast",
                      "-w", "stop")
        except RuntimeError:
            pass
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
