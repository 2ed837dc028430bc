"""The Thrift server: listening socket, transports, protocols and connection threads.

Each client connection gets a thread that runs the generated Processor until the client
hangs up, which is how Hive clients use the metastore (one long-lived connection each).
We run our own accept loop rather than thrift's ``TThreadedServer`` so that ``stop()`` can
stop accepting, let in-flight calls finish, and return; the stock loop cannot be stopped.

Defaults match the Java metastore: unframed buffered transport with the binary protocol
(the accelerated C codec). Framed transport and the compact protocol are opt-in through
``hive.metastore.thrift.framed.transport.enabled`` and
``hive.metastore.thrift.compact.protocol.enabled``, as on the Java server.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAcceleratedFactory
from thrift.protocol.TCompactProtocol import TCompactProtocolAcceleratedFactory
from thrift.transport import TSocket, TTransport

from .config import Config
from .handler import make_processor
from .handler.wire import object_json
from .metastore import Metastore

log = logging.getLogger(__name__)


class MetastoreServer:
    def __init__(self, ms: Metastore, *, host: str | None = None, port: int | None = None):
        self.ms = ms
        config = ms.config
        self.host = host or config["hive.metastore.bind.host"]
        self.requested_port = config["hive.metastore.port"] if port is None else port
        self.framed = config["hive.metastore.thrift.framed.transport.enabled"]
        self.compact = config["hive.metastore.thrift.compact.protocol.enabled"]
        self.transport_factory = (TTransport.TFramedTransportFactory() if self.framed
                                  else TTransport.TBufferedTransportFactory())
        self.protocol_factory = (TCompactProtocolAcceleratedFactory() if self.compact
                                 else TBinaryProtocolAcceleratedFactory())
        self.processor = make_processor(ms)
        self._slots = threading.BoundedSemaphore(config["hive.metastore.server.max.threads"])
        self._listener: socket.socket | None = None
        self._clients: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._accept_thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def address(self) -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"thrift://{shown}:{self.port}"

    def start(self) -> "MetastoreServer":
        """Bind, start background work and the accept loop; returns at once."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.requested_port))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self.ms.start()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="hms-accept", daemon=True)
        self._accept_thread.start()
        log.info("listening on %s (%s transport, %s protocol)", self.address,
                 "framed" if self.framed else "buffered", "compact" if self.compact else "binary")
        return self

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            self._slots.acquire()
            try:
                sock, peer = self._listener.accept()
            except OSError:
                self._slots.release()
                if self._stopping.is_set():
                    return
                log.exception("accept failed")
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            worker = threading.Thread(target=self._serve_client, args=(sock, peer),
                                      name=f"hms-client-{peer[1]}", daemon=True)
            with self._lock:
                self._clients.add(sock)
                self._workers.add(worker)
            worker.start()

    def _serve_client(self, sock: socket.socket, peer: Any) -> None:
        client = TSocket.TSocket()
        client.setHandle(sock)
        itrans = self.transport_factory.getTransport(client)
        otrans = self.transport_factory.getTransport(client)
        iprot = self.protocol_factory.getProtocol(itrans)
        oprot = self.protocol_factory.getProtocol(otrans)
        try:
            while not self._stopping.is_set():
                self.processor.process(iprot, oprot)
        except TTransport.TTransportException:
            pass  # the client hung up
        except (ConnectionError, OSError):
            pass
        except Exception:  # a malformed message: drop this connection, keep serving others
            log.warning("closing connection from %s after a protocol error", peer, exc_info=True)
        finally:
            itrans.close()
            with self._lock:
                self._clients.discard(sock)
                self._workers.discard(threading.current_thread())
            self._slots.release()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, let in-flight calls finish, close connections and the service."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        with self._lock:
            clients, workers = list(self._clients), list(self._workers)
        for sock in clients:
            try:
                # Reads end (idle connections wake up with EOF); a call being processed
                # still writes its answer.
                sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        for worker in workers:
            worker.join(timeout)
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        self.ms.close()
        log.info("stopped")


def create_server(config: Config, *, data_dir: str = "metastore_data", host: str | None = None,
                  port: int | None = None) -> MetastoreServer:
    ms = Metastore(config, data_dir=data_dir, object_json=object_json)
    return MetastoreServer(ms, host=host, port=port)
