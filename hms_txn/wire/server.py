"""The server transport: the listening socket and the connections.

Each client connection gets a thread that runs the dispatcher until the client hangs up,
which is how Hive clients use the metastore (one long-lived connection each); or, for the
embedded default, the event loop (``event_loop.CallLoop``) serves every connection from
one thread. We run our own accept loop rather than thrift's ``TThreadedServer`` so that
``stop()`` can stop accepting, let in-flight calls finish, and return; the stock loop
cannot be stopped.

Defaults match the Java metastore: unframed buffered transport with the binary protocol
(the accelerated C codec). Framed transport, the compact protocol, SASL and TLS
(``wire.tls``) are opt-in. With TLS every connection must begin with a TLS handshake; one
that begins with a Thrift message or a SASL handshake instead is answered, in its own
protocol, with an error saying that the metastore requires TLS (``refuse``).
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TCompactProtocol import TCompactProtocol, TCompactProtocolAcceleratedFactory
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport import TSocket, TTransport

from hms_txn.wire.dispatch import Dispatcher
from hms_txn.wire.encoded import BinaryProtocolFactory
from hms_txn.wire.event_loop import CallLoop, CallRouter
from hms_txn.wire.sasl import COMPLETE as SASL_COMPLETE
from hms_txn.wire.sasl import START as SASL_START
from hms_txn.wire.sasl import AuthenticationFailed, SaslServer, begins_handshake, error_frame
from hms_txn.wire.sasl_gssapi import KerberosFailure
from hms_txn.wire.sasl_layer import SecurityLayerTransport
from hms_txn.wire.session import set_authenticated_user
from hms_txn.wire.tls import TLS_HANDSHAKE_RECORD, TlsServer

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
    # serve from one event-loop thread (unframed binary protocol without SASL or TLS only)
    event_loop: bool = False
    spin: float = 0.0
    tls: TlsServer | None = None


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
        # TLS: the context is built here, so a certificate that cannot be loaded stops
        # start-up (wire.tls.TlsSetupError).
        self.tls = options.tls.context() if options.tls is not None else None
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
                         and self.sasl is None and self.tls is None)
        self.port: int | None = None

    @property
    def address(self) -> str:
        """A URI a client on this machine connects to (loopback for a wildcard bind)."""
        shown = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}.get(
            self.host, f"[{self.host}]" if ":" in self.host else self.host)
        return f"thrift://{shown}:{self.port}"

    @property
    def listen_address(self) -> str:
        """The address the socket is bound to, as it is (0.0.0.0: every IPv4 interface)."""
        host = self.host or "0.0.0.0"
        return f"thrift://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def loopback_only(self) -> bool:
        return self.host in ("localhost", "::1") or self.host.startswith("127.")

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
                                 refuse_sasl=self.refuse_sasl,
                                 spin=self.options.spin).start()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="hms-accept",
                                               daemon=True)
        self._accept_thread.start()
        log.info("listening on %s (%s transport, %s protocol%s%s)", self.listen_address,
                 "framed" if self.framed else "buffered", "compact" if self.compact else "binary",
                 ", SASL" if self.sasl is not None else "", ", TLS" if self.tls is not None else "")
        if not self.loopback_only and self.sasl is None and self.tls is None:
            log.warning(
                "listening on %s, reachable from other hosts, with neither SASL "
                "(hive.metastore.sasl.enabled) nor TLS (hive.metastore.use.SSL): anyone who can "
                "reach this port can read and change every database, table and transaction "
                "without authenticating, and every call crosses the network in clear text; "
                "bind to 127.0.0.1 (--host) or enable SASL and/or TLS", self.listen_address)

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

    def _start_tls(self, sock: socket.socket, peer: Any) -> ssl.SSLSocket | None:
        """The TLS connection of ``sock`` (handshake done), or None when the client does not
        speak TLS (it is told so) or the handshake fails (logged)."""
        sock.settimeout(TLS_HANDSHAKE_TIMEOUT)
        first = sock.recv(1, socket.MSG_PEEK)
        if not first:
            return None
        if first[0] != TLS_HANDSHAKE_RECORD:
            log.warning("refused a connection from %s that does not use TLS "
                        "(hive.metastore.use.SSL is on)", _peer(peer))
            refuse(sock, "this metastore accepts TLS connections only (hive.metastore.use.SSL"
                         "=true on the server): connect with TLS")
            return None
        try:
            tls = self.tls.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError) as err:
            log.warning("TLS handshake with %s failed: %s", _peer(peer), err)
            return None
        with self._lock:
            self._clients.discard(sock)
            self._clients.add(tls)
        return tls

    def _begins_sasl(self, sock: socket.socket, peer: Any) -> bool:
        """Whether the client begins with a SASL message; a Thrift call instead is answered,
        in the client's protocol, that this metastore requires SASL (a plain client would
        otherwise read the SASL error frame as a Thrift message of absurd length)."""
        sock.settimeout(TLS_HANDSHAKE_TIMEOUT)     # the first bytes, as for a TLS hello
        first = sock.recv(1, socket.MSG_PEEK)
        if not first or first[0] in SASL_STATUSES:
            return True       # the handshake reports a closed or malformed exchange itself
        log.warning("refused a connection from %s that does not use SASL "
                    "(hive.metastore.sasl.enabled is on)", _peer(peer))
        refuse(sock, "this metastore requires SASL (hive.metastore.sasl.enabled=true on the "
                     f"server): authenticate with SASL {self.sasl.describe_offer()}")
        return False

    def _begins_sasl_unasked(self, sock: socket.socket, peer: Any) -> bool:
        """Whether a client of this server without SASL begins a SASL handshake (it is told
        so); a Thrift server would read it as a message with a 16 MiB name and wait for it
        (Java's does), and the client for its answer. Peeked within the idle timeout: a
        pooled connection may well wait before its first call."""
        set_idle_timeout(sock, self.idle_timeout)
        try:
            first = sock.recv(6, socket.MSG_PEEK)
            if first[:1] != bytes([SASL_START]):
                return False
            deadline = time.monotonic() + SASL_PEEK_WAIT
            while len(first) < 6 and time.monotonic() < deadline:
                time.sleep(0.01)            # the rest of the START message
                first = sock.recv(6, socket.MSG_PEEK)
        except OSError:
            return False          # idle past the timeout or gone: the connection ends anyway
        if not begins_handshake(first):
            return False
        self.refuse_sasl(sock, peer)
        return True

    def refuse_sasl(self, sock: socket.socket, peer: Any) -> None:
        """Answer a SASL handshake on this server without SASL with a SASL ERROR saying so
        (a blocking socket whose START the server has read or peeked), then close."""
        log.warning("refused a connection from %s that begins a SASL handshake "
                    "(hive.metastore.sasl.enabled is off)", _peer(peer))
        try:
            sock.settimeout(5)
            sock.sendall(error_frame(NOT_SASL))
        except OSError:
            pass
        _close_after_answer(sock)

    def _serve_client(self, sock: socket.socket, peer: Any) -> None:
        client = TSocket.TSocket()
        itrans = otrans = None
        try:
            if self.tls is not None:
                tls = self._start_tls(sock, peer)
                if tls is None:
                    return
                sock = tls
            client.setHandle(sock)
            if self.sasl is None and self.tls is None and self._begins_sasl_unasked(sock, peer):
                return
            if self.sasl is not None:
                if self.tls is None and not self._begins_sasl(sock, peer):
                    return
                who = self.sasl.handshake(sock)
                log.info("%s authenticated as %s with SASL %s%s", _peer(peer), who.user,
                         who.mechanism, f" ({who.detail})" if who.detail else "")
                set_authenticated_user(who.user, who.mechanism, principal=who.principal,
                                       address=_address(peer))
            else:
                who = None
                set_authenticated_user(None)
            set_idle_timeout(sock, self.idle_timeout)
            if who is not None and who.layer is not None:
                itrans = otrans = SecurityLayerTransport(client, who.layer, self.max_message)
            else:
                itrans, otrans = self._transports(client, self.framed or self.sasl is not None)
            iprot = self.protocol_factory.getProtocol(itrans)
            oprot = self.protocol_factory.getProtocol(otrans)
            while not self._stopping.is_set():
                self.dispatcher.process(iprot, oprot)
        except AuthenticationFailed as err:
            log.warning("refused connection from %s: %s", _peer(peer), err)
        except KerberosFailure as err:       # a wrapped message that does not unwrap
            log.warning("closing connection from %s: %s", _peer(peer), err)
        except TTransport.TTransportException:
            pass  # the client hung up, or was idle past the timeout
        except (ConnectionError, OSError):
            pass
        except Exception:  # a malformed message: drop this connection, keep serving others
            log.warning("closing connection from %s after a protocol error", peer, exc_info=True)
        finally:
            set_authenticated_user(None)
            client.close()
            sock.close()
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
                refuse(sock, f"hms-txn is at its connection limit ({self.max_connections}, "
                             f"hive.metastore.server.max.threads); try again later")
            finally:
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




TLS_HANDSHAKE_TIMEOUT = 30.0
SASL_PEEK_WAIT = 2.0        # for the rest of a START message after its first byte
NOT_SASL = ("this metastore does not use SASL (hive.metastore.sasl.enabled=false on the "
            "server): connect without SASL (no --user, hive.metastore.sasl.enabled=false)")
SASL_STATUSES = range(SASL_START, SASL_COMPLETE + 1)   # the first byte of a SASL message
_COMPACT_PROTOCOL_ID = 0x82
_BINARY_VERSION_BYTE = 0x80


def refuse(sock: socket.socket, message: str) -> None:
    """Answer the first thing a client sends with an error carrying ``message``, in the
    client's own protocol, then close: a SASL handshake gets a SASL ERROR, a Thrift call
    (binary or compact, framed or not) a TApplicationException. What the client sent is
    read with small limits; whatever it was, it only gets the refusal."""
    try:
        peek = sock.recv(5, socket.MSG_PEEK)
        if peek[:1] == bytes([SASL_START]):
            sock.sendall(error_frame(message))
            return
        handle = TSocket.TSocket()
        handle.setHandle(sock)
        # an unframed message begins with the protocol's byte, a framed one with its length
        framed = peek[:1] not in (bytes([_BINARY_VERSION_BYTE]), bytes([_COMPACT_PROTOCOL_ID]))
        trans = (TTransport.TFramedTransport(handle) if framed
                 else TTransport.TBufferedTransport(handle))
        head = peek[4:5] if framed else peek[:1]
        limits = {"string_length_limit": 4096, "container_length_limit": 64}
        proto = (TCompactProtocol(trans, **limits) if head == bytes([_COMPACT_PROTOCOL_ID])
                 else TBinaryProtocol(trans, **limits))
        name, _mtype, seqid = proto.readMessageBegin()
        proto.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
        TApplicationException(TApplicationException.INTERNAL_ERROR, message).write(proto)
        proto.writeMessageEnd()
        trans.flush()
    except Exception:      # not a message we can parse: the client only sees the close
        pass
    finally:
        _close_after_answer(sock)


def _close_after_answer(sock: socket.socket) -> None:
    """Close after an answer without discarding it: closing a socket with unread input
    resets the connection, and a reset can reach the client before it read the answer. So
    end our side, read (a little) until the client closes, then close."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2)
        for _ in range(16):
            if not sock.recv(65536):
                break
    except OSError:
        pass
    finally:
        sock.close()


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


def _address(peer: Any) -> str | None:
    try:
        return str(peer[0])
    except (TypeError, IndexError):
        return None


def _peer(peer: Any) -> str:
    try:
        return f"{peer[0]}:{peer[1]}"
    except (TypeError, IndexError):
        return str(peer)


