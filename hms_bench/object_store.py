"""Local object stores for the benchmark and the tests: moto's S3 server and Azurite.

``MotoS3`` runs ``python -m moto.server`` (an S3-compatible HTTP server from PyPI that the
AWS SDK inside pyarrow talks to unchanged) as a child process and counts the HTTP requests
it serves from its request log (one line per request): pyarrow's S3 file system has no
request counter, and the server's own log counts what actually went over the wire.

``Azurite`` runs Microsoft's Azure Storage emulator from npm (``npm install azurite``); its
blob endpoint serves pyarrow's AzureFileSystem.

Both give the Hadoop-style options (``fs.s3a.*``, ``fs.azure.*``) the project's file-system
layer (``orc_acid.fs``) reads, as hive-site.xml or a Spark conf would carry them.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from hms_bench.servers import free_port

ACCESS_KEY, SECRET_KEY, REGION = "hms-txn-test", "hms-txn-test-secret", "us-east-1"
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+) (\S+) HTTP/')


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: str,
               timeout: float = 60.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {_tail(log)}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f}s: "
                       f"{_tail(log)}")


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()[-2000:]
    except OSError:
        return ""


class _LocalServer:
    """A server process of the tests' on a free local port, its output in ``log``."""

    name = "server"

    def __init__(self, workdir: str | None = None, host: str = "127.0.0.1"):
        self.workdir = workdir or tempfile.mkdtemp(prefix=f"hms-{self.name}-")
        self.host = host         # the address it listens on (another than loopback: a
        self.port = free_port(host)      # test cluster's bridge, hms_bench.cluster)
        self.log = os.path.join(self.workdir, f"{self.name}.log")
        self.proc: subprocess.Popen | None = None

    def _launch(self, cmd: list[str]) -> None:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        _wait_port(self.port, self.proc, self.name, self.log, host=self.host)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


class MotoS3(_LocalServer):
    """moto's standalone S3 server on a free local port."""

    name = "moto"

    def start(self) -> "MotoS3":
        self._launch([sys.executable, "-m", "moto.server", "-H", self.host,
                      "-p", str(self.port)])
        return self


    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def options(self) -> dict[str, str]:
        """The S3A keys of hive-site.xml (or ``spark.hadoop.*``) that reach this server."""
        return {"fs.s3a.endpoint": self.endpoint, "fs.s3a.path.style.access": "true",
                "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY,
                "fs.s3a.endpoint.region": REGION}

    def create_bucket(self, name: str) -> None:
        import pyarrow.fs as pafs
        from orc_acid.fs import s3_options
        pafs.S3FileSystem(allow_bucket_creation=True,
                          **s3_options(self.options(), name)).create_dir(name)

    # -- request counting (moto's request log) ------------------------------------------

    def mark(self) -> int:
        """A position in the request log; ``requests_since(mark)`` counts from there."""
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def requests_since(self, mark: int) -> collections.Counter:
        """HTTP requests served since ``mark``, by kind: ``LIST`` (GET on a bucket with a
        query), ``GET``, ``HEAD``, ``PUT``, ``POST``, ``DELETE``; ``total`` = all."""
        counts: collections.Counter = collections.Counter()
        with open(self.log, "rb") as fh:
            fh.seek(mark)
            text = fh.read().decode("utf-8", "replace")
        for m in _REQUEST.finditer(text):
            method, target = m.group(1), m.group(2)
            path, _, query = target.partition("?")
            if method == "GET" and path.strip("/").count("/") == 0 and "list-type" in query:
                method = "LIST"
            counts[method] += 1
            counts["total"] += 1
        return counts


AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's well-known development account key (documented by Microsoft; not a secret).
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")


def azurite_command() -> list[str] | None:
    """How to run Azurite's blob service: an ``azurite-blob`` on PATH, in
    ``$AZURITE_HOME/node_modules/.bin`` or in ``~/.cache/hms-txn-azurite`` (where
    ``npm install azurite`` put it); None when absent."""
    found = shutil.which("azurite-blob")
    if found:
        return [found]
    for home in (os.environ.get("AZURITE_HOME"),
                 os.path.expanduser("~/.cache/hms-txn-azurite")):
        if home:
            cand = os.path.join(home, "node_modules", ".bin", "azurite-blob")
            if os.path.exists(cand):
                return [cand]
    return None


class Azurite(_LocalServer):
    """Azurite's blob service on a free local port (in-memory, no disk persistence)."""

    name = "azurite"

    def start(self) -> "Azurite":
        cmd = azurite_command()
        if cmd is None:
            raise RuntimeError("azurite not found: npm install azurite (in "
                               "~/.cache/hms-txn-azurite or $AZURITE_HOME)")
        self._launch(cmd + ["--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                            "--inMemoryPersistence", "--skipApiVersionCheck",
                            "--loose", "--silent"])
        return self


    def options(self) -> dict[str, str]:
        host = f"{AZURITE_ACCOUNT}.dfs.core.windows.net"
        return {f"fs.azure.account.key.{host}": AZURITE_KEY,
                "fs.azure.storage.blob.endpoint": f"http://127.0.0.1:{self.port}",
                "fs.azure.storage.dfs.endpoint": f"http://127.0.0.1:{self.port}"}

    def location(self, container: str, path: str = "") -> str:
        return f"abfs://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/{path}".rstrip("/")

    def create_container(self, name: str) -> None:
        from orc_acid.fs import filesystem_for
        fs, path = filesystem_for(self.location(name), self.options())
        fs.create_dir(path)
