"""A throw-away PostgreSQL server for the test suite.

Uses the server binaries of Debian's ``postgresql`` package: ``initdb`` into a temporary
directory and ``pg_ctl start`` on a free loopback port. PostgreSQL refuses to run as
root, so when the suite runs as root (CI) the server runs as the unprivileged
``postgres`` user that the Debian package creates.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading


from hms_bench.servers import create_pg_database, pg_bindir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``durable=True``: fsync and synchronous_commit left on (the suite's default server
    has both off, for speed), and the WAL writer slowed to its slowest, so that what a
    lazy commit (``synchronous_commit = off``) left in WAL buffers stays there until a
    synchronous commit flushes it: ``crash_and_restart`` then takes it back."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.bindir = pg_bindir()
        self.root = tempfile.mkdtemp(prefix="hms-pg-")
        self.datadir = os.path.join(self.root, "data")
        self.port = free_port()
        self.user = "hms"
        self._run_as: str | None = None
        self._counter = 0
        self._lock = threading.Lock()
        if os.geteuid() == 0:
            self._run_as = "postgres"
            pw = pwd.getpwnam(self._run_as)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)

    def _run(self, *argv: str) -> None:
        cmd = list(argv)
        if self._run_as:
            cmd = ["runuser", "-u", self._run_as, "--"] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.root)

    def start(self) -> "PostgresServer":
        self._run(os.path.join(self.bindir, "initdb"), "-D", self.datadir, "-A", "trust",
                  "-U", self.user, "--no-sync", "-E", "UTF8")
        self._pg_ctl_start()
        return self

    def _pg_ctl_start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
        if self.durable:
            options += "-c wal_writer_delay=10000 "
        else:
            options += "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        options += "-c max_connections=300"
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-o", options,
                  "-l", os.path.join(self.root, "server.log"), "-w", "-t", "60", "start")

    def crash_and_restart(self) -> None:
        """A crash of the database server: ``pg_ctl stop -m immediate`` (no checkpoint,
        WAL buffers not written), then a start, which replays the WAL on disk."""
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", "immediate",
                  "-w", "stop")
        self._pg_ctl_start()

    def stop(self) -> None:
        try:
            self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", "immediate",
                      "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, prefix: str = "hms") -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        with self._lock:
            self._counter += 1
            name = f"{prefix}_{os.getpid()}_{self._counter}"
        create_pg_database(self.port, self.user, name)
        return self.url(name)

    def url(self, dbname: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def jdbc_url(self, dbname: str) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{dbname}"
