"""Running hms-txn servers for tests: in-process (fast) or as a real `hms-txn serve` process."""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from typing import Iterator


from hms_txn.common.config import load
from hms_txn.server import MetastoreServer, create_server
from hms_bench.servers import checkout_env, start_serve_process, write_site_xml
from hms_txn.wire import client as wire_client
from hms_txn.wire.client import MetastoreClient


def connect(port: int, host: str = "127.0.0.1", *, framed: bool = False, compact: bool = False,
            timeout_ms: int = 60000) -> MetastoreClient:
    """A client from our generated code (``hms_txn.wire.client``), connected; the caller
    closes it."""
    return wire_client.connect(wire_client.Endpoint(host, port), framed=framed, compact=compact,
                               timeout=timeout_ms / 1000)


@contextmanager
def client_for(port: int, **kwargs) -> Iterator[MetastoreClient]:
    client = connect(port, **kwargs)
    try:
        yield client
    finally:
        client.close()


class InProcessServer:
    """A MetastoreServer running in this process on a free port."""

    def __init__(self, data_dir: str, overrides: dict[str, str], host: str = "127.0.0.1"):
        self.data_dir = data_dir
        self.overrides = overrides
        config = load(None, overrides)
        self.server: MetastoreServer = create_server(config, data_dir=data_dir, host=host, port=0)
        self.server.start()
        self.host = host
        self.port = self.server.port
        self.uri = f"thrift://{host}:{self.port}"

    @property
    def ms(self):
        return self.server.ms

    def client(self, **kwargs):
        kwargs.setdefault("host", self.host)
        return connect(self.port, **kwargs)

    def stop(self) -> None:
        self.server.stop()


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ServerProcess:
    """`hms-txn serve` as a child process (for restart, kill -9 and multi-process tests)."""

    def __init__(self, data_dir: str, overrides: dict[str, str] | None = None, port: int = 0):
        os.makedirs(data_dir, exist_ok=True)
        self.data_dir = data_dir
        conf = write_site_xml(os.path.join(data_dir, "hive-site.xml"), overrides or {})
        self.log_path = os.path.join(data_dir, "serve.log")
        self._log = open(self.log_path, "ab")
        self.proc, self.port = start_serve_process(conf, data_dir, self._log, self.log_path,
                                                   port=port, env=checkout_env())
        self.uri = f"thrift://127.0.0.1:{self.port}"

    def client(self, **kwargs):
        return connect(self.port, **kwargs)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        self._log.close()
