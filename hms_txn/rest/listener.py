"""The Iceberg REST catalog's HTTP listener: uvicorn serving the ASGI application on a
socket of its own, on a thread of its own (its event loop), inside ``hms-txn serve``.

The socket is bound before the metastore starts serving, so a port in use stops start-up
and port 0 has its number at once (``port``). Handlers are synchronous: FastAPI runs them
on its thread pool, where the services' database work happens. TLS uses the Thrift
server's certificate settings (``hms_txn.wire.tls.TlsServer``).
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from typing import Callable

import uvicorn

log = logging.getLogger("hms_txn.rest")


class RestListener:
    def __init__(self, app, host: str, port: int,
                 tls: Callable[[], ssl.SSLContext] | None = None):
        self.app = app
        self.host = host
        self.tls = tls
        self.sock = socket.create_server((host, port), reuse_port=False, backlog=1024)
        # Accepted connections inherit it: a response's headers and body are two writes,
        # and Nagle would hold the body for the client's delayed ACK (40 ms).
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port: int = self.sock.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def start(self) -> "RestListener":
        factory = None
        if self.tls is not None:
            make = self.tls
            factory = lambda _config, _default: make()    # noqa: E731 - uvicorn's signature
        config = uvicorn.Config(self.app, log_level="warning", access_log=False,
                                lifespan="off", ssl_context_factory=factory,
                                timeout_keep_alive=60, server_header=False,
                                # idle TLS keep-alive connections would hold shutdown
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self.sock]},
                                        name="iceberg-rest", daemon=True)
        self._thread.start()
        return self

    def wait_started(self, timeout: float = 30.0) -> bool:
        """Whether uvicorn is accepting requests (it starts on its thread)."""
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._server is not None and self._server.started:
                return True
            if self._thread is not None and not self._thread.is_alive():
                return False
            time.sleep(0.01)
        return False

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting; requests in flight get up to 1 s to finish (uvicorn then
        closes what is left)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.sock.close()
