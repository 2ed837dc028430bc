"""The server transport: the listening socket and the connections.

Each client connection gets a thread that runs the dispatcher until the client hangs up,
which is how Hive clients use the metastore (one long-lived connection each); or, for the
embedded default, the event loop (``event_loop.CallLoop``) serves every connection from
one thread. We run our own accept loop rather than thrift's ``TThreadedServer`` so that
``stop()`` can stop accepting, let in-flight calls finish, and return; the stock loop
cannot be stopped.

Defaults match the Java metastore: unframed buffered transport with the binary protocol
(the accelerated C codec). Framed transport, the compact protocol and SASL are opt-in.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TCompactProtocol import TCompactProtocolAcceleratedFactory
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport import TSocket, TTransport

from hms_txn.wire.dispatch import Dispatcher
from hms_txn.wire.encoded import BinaryProtocolFactory
from hms_txn.wire.event_loop import CallLoop, CallRouter
from hms_txn.wire.sasl import AuthenticationFailed, SaslServer
from hms_txn.wire.session import set_authenticated_user

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransportOptions:
    host: str
    port: int
    framed: bool = False
    compact: bool = False
    max_message: int = 100 * 1024 * 1024
    idle_timeout: float | None = None
    max_connections: int = 1000
    # serve from one event-loop thread (unframed binary protocol without SASL only)
    event_loop: bool = False
    spin: float = 0.0


class ThriftServer:
    """Serves ``dispatcher`` on a socket; ``router`` steers the event loop's calls."""

    def __init__(self, dispatcher: Dispatcher, router: CallRouter, options: TransportOptions,
                 *, sasl: SaslServer | None = None):
        self.dispatcher = dispatcher
        self.router = router
        self.options = options
        self.host = options.host
        self.framed = options.framed
        self.compact = options.compact
        self.max_message = options.max_message
        self.idle_timeout = options.idle_timeout
        # SASL (PLAIN, or DIGEST-MD5 with a delegation token) wraps every message in a
        # length-prefixed frame after the handshake.
        self.sasl = sasl
        limits = {"string_length_limit": self.max_message,
                  "container_length_limit": self.max_message}
        self.protocol_factory = (TCompactProtocolAcceleratedFactory(**limits) if self.compact
                                 else BinaryProtocolFactory(**limits))
        self.max_connections = options.max_connections
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._rejecters = threading.BoundedSemaphore(16)
        self._listener: socket.socket | None = None
        self._clients: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._accept_thread: threading.Thread | None = None
        self.loop: CallLoop | None = None
        self.use_loop = (options.event_loop and not self.framed and not self.compact
                         and self.sasl is None)
        self.port: int | None = None

    @property
    def address(self) -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"thrift://{shown}:{self.port}"

    def bind(self) -> None:
        """Open the listening socket (nothing is accepted until ``serve``)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.options.port))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]

    def serve(self) -> None:
        """Start the event loop (if used) and the accept loop; returns at once."""
        if self.use_loop:
            self.loop = CallLoop(self.dispatcher, self.router, self.protocol_factory,
                                 max_message=self.max_message, idle_timeout=self.idle_timeout,
                                 pool_size=self.max_connections,
                                 on_close=self._connection_closed,
                                 spin=self.options.spin).start()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="hms-accept",
                                               daemon=True)
        self._accept_thread.start()
        log.info("listening on %s (%s transport, %s protocol)", self.address,
                 "framed" if self.framed else "buffered", "compact" if self.compact else "binary")

    def counters(self) -> dict[str, int]:
        return self.loop.counters() if self.loop is not None else {}

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
                set_idle_timeout(sock, self.idle_timeout)
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
            set_idle_timeout(sock, self.idle_timeout)
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
        """Stop accepting, let in-flight calls finish, close the connections."""
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
        log.info("stopped")




def set_idle_timeout(sock: socket.socket, seconds: float | None) -> None:
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


