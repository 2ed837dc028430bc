"""The one way this project opens a Thrift connection to a metastore.

Every client in the project (the CLI commands, the streaming ingest client, extension
mode's upstream pool, ``spark.hive_acid``, the benchmark) connects through ``connect``, so
transports, SASL and failover behave the same everywhere:

* ``uri`` is ``thrift://host:port`` or a comma-separated list of them, as Hive's
  ``hive.metastore.uris`` takes it. The URIs are tried in order until one accepts the
  connection (Hive's client does the same; it shuffles only when asked to). A URI without
  a port means Hive's default, 9083.
* Transports as the Java metastore offers them: buffered (the default), framed
  (``framed=True``), SASL (``sasl=SaslPlain(...)`` or ``SaslDigest(...)``: every message in
  a length-prefixed SASL frame after the handshake); binary protocol (the accelerated C
  codec) or compact (``compact=True``).
* ``timeout`` bounds every socket operation, the connect included.
* ``connect_failover`` (the CLI and the streaming client use it) returns a client that
  also fails over during its life, the way Hive's ``RetryingMetaStoreClient`` over
  ``HiveMetaStoreClient`` does (2.3: RetryingMetaStoreClient.invoke,
  HiveMetaStoreClient.open and reconnect): a call that fails on the connection is retried
  ``failure_retries`` times (``hive.metastore.failure.retries``, 1), each after
  ``retry_delay`` seconds (``hive.metastore.client.connect.retry.delay``, 1 s) and a
  reconnect that first swaps the first URI with a random other one (the first is likely
  the one that died) and then tries them in order, ``connect_retries`` rounds
  (``hive.metastore.connect.retries``, 3). Retried: transport and protocol errors, a
  ``TApplicationException`` other than types 1, 3, 9 and 10, and a ``MetaException``
  naming a JDO, TProtocol or TTransport exception; never ``lock`` (``IMetaStoreClient.lock``
  is ``@RetrySemantics.CannotRetry``: a retried lock would enqueue a second one). With
  ``lifetime`` (``hive.metastore.client.socket.lifetime``, off by default) a call first
  reconnects, the same way, once the connection is that old: clients spread over the
  servers again after a failover moved them all to one.

A ``MetastoreClient`` is the generated ``ThriftHiveMetastore.Client`` plus the transport
it owns: ``close()`` (or a ``with`` block) closes the socket. It is not thread-safe, like
the generated client.
"""

from __future__ import annotations

import logging
import random
import re
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from thrift.Thrift import TApplicationException
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.protocol.TProtocol import TProtocolException
from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.transport import TSocket, TTransport

from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.thrift_gen.hive_metastore.ttypes import MetaException

DEFAULT_PORT = 9083
log = logging.getLogger(__name__)

# thrift's TSocket logs every refused connect with a traceback, before raising the error
# that ``connect`` reports itself (with the URI): its records would only repeat it.
logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)


class MetastoreUnreachable(ConnectionError):
    """No URI of the list accepted a connection; the message names each and why."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"


def parse_uris(text: str) -> list[Endpoint]:
    """The endpoints of ``thrift://h1:p1,thrift://h2:p2`` (``h:p`` without the scheme is
    accepted too); ValueError naming the bad item otherwise."""
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        parts = urlsplit(item if "://" in item else f"thrift://{item}")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"not a thrift://host:port URI: {item!r} (bad port)") from None
        if parts.scheme != "thrift" or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"not a thrift://host:port URI: {item!r}")
        out.append(Endpoint(parts.hostname, port or DEFAULT_PORT))
    if not out:
        raise ValueError("no metastore URI given")
    return out


@dataclass(frozen=True)
class SaslPlain:
    """SASL PLAIN with a user name and password."""
    user: str
    password: str

    def mechanism(self, host: str) -> "PureSaslClient":
        return PureSaslClient(host, "PLAIN", self.user, self.password)


@dataclass(frozen=True)
class SaslDigest:
    """SASL DIGEST-MD5 with a Hive delegation token (its SASL user name and password, see
    ``hms_txn.domain.token_codec.Token``)."""
    user: str
    password: str

    def mechanism(self, host: str) -> "PureSaslClient":
        return PureSaslClient(host, "DIGEST-MD5", self.user, self.password)


Sasl = SaslPlain | SaslDigest


@dataclass(frozen=True)
class ClientOptions:
    """How to connect: transport, protocol, authentication, socket timeout (seconds)."""
    sasl: Sasl | None = None
    framed: bool = False
    compact: bool = False
    timeout: float = 60.0


class MetastoreClient(ThriftHiveMetastore.Client):
    """The generated client, owning its transport."""

    def __init__(self, transport: TTransport.TTransportBase, protocol: Any, endpoint: Endpoint):
        super().__init__(protocol)
        self.transport = transport
        self.endpoint = endpoint

    def close(self) -> None:
        try:
            self.transport.close()
        except Exception:       # closing a socket that already failed
            pass

    def __enter__(self) -> "MetastoreClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_endpoint(endpoint: Endpoint, options: ClientOptions = ClientOptions()) -> MetastoreClient:
    """A connected client to one endpoint; raises what the transport raises."""
    sock = TSocket.TSocket(endpoint.host, endpoint.port)
    sock.setTimeout(int(options.timeout * 1000))
    if options.sasl is not None:
        from thrift_sasl import TSaslClientTransport
        sasl, host = options.sasl, endpoint.host
        transport = TSaslClientTransport(lambda: sasl.mechanism(host),
                                         "DIGEST-MD5" if isinstance(sasl, SaslDigest) else "PLAIN",
                                         sock)
    elif options.framed:
        transport = TTransport.TFramedTransport(sock)
    else:
        transport = TTransport.TBufferedTransport(sock)
    transport.open()
    try:
        sock.handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):   # not a TCP socket
        pass
    protocol = (TCompactProtocolAccelerated(transport) if options.compact
                else TBinaryProtocolAccelerated(transport))
    return MetastoreClient(transport, protocol, endpoint)


def connect(uri: str | Endpoint | list[Endpoint], *, sasl: Sasl | None = None,
            framed: bool = False, compact: bool = False, timeout: float = 60.0,
            options: ClientOptions | None = None) -> MetastoreClient:
    """A client connected to the first URI of ``uri`` that accepts (see the module
    docstring). ``options`` replaces the keyword arguments when given. Raises
    ``MetastoreUnreachable`` when none does, ``ValueError`` for a malformed URI."""
    if options is None:
        options = ClientOptions(sasl=sasl, framed=framed, compact=compact, timeout=timeout)
    if isinstance(uri, Endpoint):
        endpoints = [uri]
    elif isinstance(uri, list):
        endpoints = uri
    else:
        endpoints = parse_uris(uri)
    failures = []
    for endpoint in endpoints:
        try:
            return open_endpoint(endpoint, options)
        except Exception as err:     # refused, timed out, SASL refused: try the next one
            failures.append(f"{endpoint.uri}: {describe(err)}")
    raise MetastoreUnreachable("cannot connect to " + "; ".join(failures))


def connect_failover(uri: str | list[Endpoint], *, options: ClientOptions = ClientOptions(),
                     failure_retries: int = 1, retry_delay: float = 1.0,
                     connect_retries: int = 3, lifetime: float = 0.0) -> "FailoverClient":
    """A client connected like ``connect`` that keeps failing over to the other URIs while
    it is used (see the module docstring). Raises ``MetastoreUnreachable`` when no URI
    accepts in ``connect_retries`` rounds, ``ValueError`` for a malformed URI."""
    endpoints = list(uri) if isinstance(uri, list) else parse_uris(uri)
    return FailoverClient(endpoints, options, failure_retries=failure_retries,
                          retry_delay=retry_delay, connect_retries=connect_retries,
                          lifetime=lifetime)


# TApplicationException types RetryingMetaStoreClient rethrows at once: UNKNOWN_METHOD,
# WRONG_METHOD_NAME, and 9 and 10 (unsupported client type, loadshedding).
_FINAL_APPLICATION_ERRORS = frozenset({1, 3, 9, 10})
_RETRIED_META_ERROR = re.compile(r"(JDO[a-zA-Z]*|TProtocol|TTransport)Exception")
_CANNOT_RETRY = frozenset({"lock"})
_METHODS = frozenset(name for name in dir(ThriftHiveMetastore.Iface) if not name.startswith("_"))


def retryable(err: BaseException) -> bool:
    """Whether Hive's RetryingMetaStoreClient reconnects and retries after ``err``."""
    if isinstance(err, TApplicationException):
        return err.type not in _FINAL_APPLICATION_ERRORS
    if isinstance(err, MetaException):
        return bool(_RETRIED_META_ERROR.search(err.message or ""))
    return isinstance(err, (TTransport.TTransportException, TProtocolException, OSError,
                            EOFError))


class FailoverClient:
    """The metastore's Thrift methods over a connection that is replaced, and the call
    retried, when the server behind it goes away (``connect_failover``). Not thread-safe,
    like the generated client."""

    def __init__(self, endpoints: list[Endpoint], options: ClientOptions, *,
                 failure_retries: int = 1, retry_delay: float = 1.0, connect_retries: int = 3,
                 lifetime: float = 0.0):
        self.endpoints = list(endpoints)
        self.options = options
        self.failure_retries = failure_retries
        self.retry_delay = retry_delay
        self.connect_retries = max(1, connect_retries)
        self.lifetime = lifetime
        self.failovers = 0          # reconnects after a failed call
        self.client: MetastoreClient = self._open()
        self._connected_at = time.monotonic()

    def _open(self) -> MetastoreClient:
        for round_ in range(self.connect_retries):
            try:
                return connect(self.endpoints, options=self.options)
            except MetastoreUnreachable:
                if round_ == self.connect_retries - 1:
                    raise
                time.sleep(self.retry_delay)
        raise AssertionError("unreachable")

    def reconnect(self) -> None:
        """Close, put a random other URI first, connect again (HiveMetaStoreClient.reconnect)."""
        self.client.close()
        if len(self.endpoints) > 1:
            other = random.randrange(1, len(self.endpoints))
            self.endpoints[0], self.endpoints[other] = self.endpoints[other], self.endpoints[0]
        self.client = self._open()
        self._connected_at = time.monotonic()

    @property
    def endpoint(self) -> Endpoint:
        return self.client.endpoint

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "FailoverClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name not in _METHODS:
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.lifetime and time.monotonic() - self._connected_at > self.lifetime:
            self.reconnect()
        retries = 0
        while True:
            try:
                return getattr(self.client, name)(*args, **kwargs)
            except Exception as err:
                if (name in _CANNOT_RETRY or retries >= self.failure_retries
                        or not retryable(err)):
                    raise
                retries += 1
                log.warning("metastore call %s failed (%s); reconnecting and retrying",
                            name, describe(err))
                time.sleep(self.retry_delay)
                self.reconnect()
                self.failovers += 1


def describe(err: BaseException) -> str:
    """A transport error as one line (thrift hides the OS error in ``inner``)."""
    text = str(err) or type(err).__name__
    inner = getattr(err, "inner", None)
    if inner is not None and str(inner) not in text:
        text = f"{text} ({inner})"
    return text


class PureSaslClient:
    """thrift-sasl expects the API of the old ``sasl`` package; this adapts pure-sasl's
    client (PLAIN, DIGEST-MD5) to it."""

    def __init__(self, host: str, mechanism: str, user: str, password: str):
        from puresasl.client import SASLClient
        self.mechanism = mechanism
        self.client = SASLClient(host, "hive", mechanism=mechanism, username=user,
                                 password=password)

    def start(self, mechanism: str):
        # PLAIN sends its credentials at once; DIGEST-MD5 waits for the server's challenge.
        return True, mechanism, self.client.process() or b""

    def step(self, challenge: bytes):
        return True, self.client.process(challenge)

    def encode(self, data: bytes):
        return True, data

    def decode(self, data: bytes):
        return True, data

    def getError(self) -> str:
        return f"SASL {self.mechanism} failed"
