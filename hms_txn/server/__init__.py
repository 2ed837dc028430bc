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
import os
import socket
import struct
import threading
from typing import Any

from thrift.protocol.TCompactProtocol import TCompactProtocolAcceleratedFactory
from thrift.transport import TSocket, TTransport

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType

from hms_txn.wire.sasl import AuthenticationFailed, PasswordBook, SaslServer
from hms_txn.common.config import Config, ConfigError
from hms_txn.wire.encoded import BinaryProtocolFactory
from hms_txn.service.handler import ServiceRouter, build_dispatcher
from hms_txn.wire.session import set_authenticated_user
from hms_txn.wire.codec import object_json
from hms_txn.server.metastore import Metastore
from hms_txn.server.observability import MetricsServer
from hms_txn.wire.event_loop import CallLoop

log = logging.getLogger(__name__)


class MetastoreServer:
    def __init__(self, ms: Metastore, *, host: str | None = None, port: int | None = None):
        self.ms = ms
        config = ms.config
        self.host = host or config["hive.metastore.bind.host"]
        self.requested_port = config["hive.metastore.port"] if port is None else port
        self.framed = config["hive.metastore.thrift.framed.transport.enabled"]
        self.compact = config["hive.metastore.thrift.compact.protocol.enabled"]
        self.max_message = config["hive.metastore.server.max.message.size"]
        idle = config["hms_txn.connection.idle.timeout"]
        self.idle_timeout = idle if idle > 0 else None
        # SASL (PLAIN, or DIGEST-MD5 with a delegation token) wraps every message in a
        # length-prefixed frame after the handshake.
        self.sasl = (SaslServer(PasswordBook.from_config(config),
                                ms.token_service.sasl_credential)
                     if config.sasl_required() else None)
        limits = {"string_length_limit": self.max_message, "container_length_limit": self.max_message}
        self.protocol_factory = (TCompactProtocolAcceleratedFactory(**limits) if self.compact
                                 else BinaryProtocolFactory(**limits))
        handler = ms.handler()
        self.dispatcher = build_dispatcher(
            handler, metrics=ms.observability.calls,
            hive2_open_txns=config["hms_txn.hive2.open.txns.as.set"])
        # Extension mode forwards catalog reads to another metastore: not in the loop.
        self.router = ServiceRouter(handler, ms.units, inline_reads=ms.upstream is None)
        self.max_connections = config["hive.metastore.server.max.threads"]
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._rejecters = threading.BoundedSemaphore(16)
        self._listener: socket.socket | None = None
        self._clients: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._accept_thread: threading.Thread | None = None
        # The transaction loop (server_loop) for the embedded default; SASL, framing and
        # the compact protocol keep a thread per connection.
        self.loop: CallLoop | None = None
        self.use_loop = (config["hms_txn.server.txn.loop"] and ms.store.is_sqlite
                         and not self.framed and not self.compact and self.sasl is None)
        self.port: int | None = None
        self.metrics: MetricsServer | None = None

    @property
    def address(self) -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"thrift://{shown}:{self.port}"

    def start(self) -> "MetastoreServer":
        """Bind, start background work and the accept loop; returns at once."""
        cpus = self.ms.config["hms_txn.server.cpu.affinity"]
        if cpus:
            pin_process(cpus)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.requested_port))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self.ms.start()
        if self.use_loop:
            self.loop = CallLoop(self.dispatcher, self.router, self.protocol_factory,
                                 max_message=self.max_message, idle_timeout=self.idle_timeout,
                                 pool_size=self.max_connections,
                                 on_close=self._connection_closed,
                                 spin=self.ms.config["hms_txn.server.txn.loop.spin"]).start()
            self.ms.counter_sources.append(self.loop.counters)
        if self.ms.config["hms_txn.metrics.enabled"]:
            self.metrics = MetricsServer(self.ms.observability, self.ms.health, self.host,
                                         self.ms.config["hms_txn.metrics.port"]).start()
            log.info("metrics on http://%s:%d/metrics", self.host, self.metrics.port)
        self._accept_thread = threading.Thread(target=self._accept_loop, name="hms-accept", daemon=True)
        self._accept_thread.start()
        log.info("listening on %s (%s transport, %s protocol)", self.address,
                 "framed" if self.framed else "buffered", "compact" if self.compact else "binary")
        return self

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("accept failed")
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self._slots.acquire(blocking=False):
                self._reject(sock, peer)
                continue
            if self.loop is not None:
                _set_idle_timeout(sock, self.idle_timeout)
                with self._lock:
                    self._clients.add(sock)
                self.loop.add(sock, peer)
                continue
            worker = threading.Thread(target=self._serve_client, args=(sock, peer),
                                      name=f"hms-client-{peer[1]}", daemon=True)
            with self._lock:
                self._clients.add(sock)
                self._workers.add(worker)
            worker.start()

    def _transports(self, client: TSocket.TSocket, framed: bool):
        if framed:
            make = lambda: TTransport.TFramedTransport(client, max_frame_size=self.max_message)  # noqa: E731
        else:
            make = lambda: TTransport.TBufferedTransport(client)  # noqa: E731
        return make(), make()

    def _serve_client(self, sock: socket.socket, peer: Any) -> None:
        client = TSocket.TSocket()
        client.setHandle(sock)
        itrans = otrans = None
        try:
            if self.sasl is not None:
                who = self.sasl.handshake(sock)
                log.info("%s authenticated as %s with SASL %s%s", _peer(peer), who.user,
                         who.mechanism, f" ({who.detail})" if who.detail else "")
                set_authenticated_user(who.user, who.mechanism)
            else:
                set_authenticated_user(None)
            _set_idle_timeout(sock, self.idle_timeout)
            itrans, otrans = self._transports(client, self.framed or self.sasl is not None)
            iprot = self.protocol_factory.getProtocol(itrans)
            oprot = self.protocol_factory.getProtocol(otrans)
            while not self._stopping.is_set():
                self.dispatcher.process(iprot, oprot)
        except AuthenticationFailed as err:
            log.warning("refused connection from %s: %s", _peer(peer), err)
        except TTransport.TTransportException:
            pass  # the client hung up, or was idle past the timeout
        except (ConnectionError, OSError):
            pass
        except Exception:  # a malformed message: drop this connection, keep serving others
            log.warning("closing connection from %s after a protocol error", peer, exc_info=True)
        finally:
            set_authenticated_user(None)
            client.close()
            with self._lock:
                self._clients.discard(sock)
                self._workers.discard(threading.current_thread())
            self._slots.release()

    def _connection_closed(self, sock: socket.socket) -> None:
        """A connection of the loop ended."""
        with self._lock:
            self._clients.discard(sock)
        self._slots.release()

    def _reject(self, sock: socket.socket, peer: Any) -> None:
        """Answer a connection over the limit with a clear error instead of a hang."""
        log.warning("refusing connection from %s: %d connections are open (limit)", peer,
                    self.max_connections)
        if not self._rejecters.acquire(blocking=False):
            sock.close()
            return

        def answer() -> None:
            try:
                sock.settimeout(5)
                client = TSocket.TSocket()
                client.setHandle(sock)
                trans = TTransport.TBufferedTransport(client)
                proto = TBinaryProtocol(trans, string_length_limit=4096, container_length_limit=64)
                name, _mtype, seqid = proto.readMessageBegin()
                err = TApplicationException(
                    TApplicationException.INTERNAL_ERROR,
                    f"hms-txn is at its connection limit ({self.max_connections}, "
                    f"hive.metastore.server.max.threads); try again later")
                proto.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
                err.write(proto)
                proto.writeMessageEnd()
                trans.flush()
            except Exception:  # whatever the client sent, it only gets the refusal
                pass
            finally:
                sock.close()
                self._rejecters.release()

        threading.Thread(target=answer, name="hms-reject", daemon=True).start()

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
        if self.loop is not None:
            self.loop.stop(timeout)
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        if self.metrics is not None:
            self.metrics.stop()
        self.ms.close()
        log.info("stopped")


def pin_process(cpus: tuple[int, ...]) -> None:
    """Pin every thread of this process to ``cpus`` (threads started later inherit it).
    Linux affinity is per thread, so each existing one is set by its id."""
    wanted = set(cpus)
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("hms_txn.server.cpu.affinity: CPU pinning is not available on "
                          "this platform (Linux only)")
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, wanted)
        except ProcessLookupError:
            pass            # the thread ended meanwhile
        except OSError as err:
            raise ConfigError(f"hms_txn.server.cpu.affinity={','.join(map(str, cpus))}: "
                              f"cannot pin to these CPUs ({err.strerror})") from None
    log.info("server threads pinned to CPU(s) %s", ",".join(map(str, cpus)))


def _set_idle_timeout(sock: socket.socket, seconds: float | None) -> None:
    """Close connections idle for ``seconds`` with the kernel's socket timeouts. Python's
    own timeout mode (``settimeout``) polls before every recv and send, two extra system
    calls on every metastore call; with SO_RCVTIMEO/SO_SNDTIMEO a blocking recv simply
    fails with EAGAIN once the client has been silent that long (the connection thread then
    closes the connection, as for a timeout)."""
    sock.settimeout(None)
    if not seconds:
        return
    whole = int(seconds)
    value = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


def _peer(peer: Any) -> str:
    try:
        return f"{peer[0]}:{peer[1]}"
    except (TypeError, IndexError):
        return str(peer)


def create_server(config: Config, *, data_dir: str = "metastore_data", host: str | None = None,
                  port: int | None = None) -> MetastoreServer:
    upstream = None
    if config["hms_txn.upstream.uris"]:   # extension mode (docs/extension-mode.md)
        from hms_txn.clients.upstream import UpstreamPool
        upstream = UpstreamPool.from_config(config)
    ms = Metastore(config, data_dir=data_dir, object_json=object_json, upstream=upstream)
    return MetastoreServer(ms, host=host, port=port)
