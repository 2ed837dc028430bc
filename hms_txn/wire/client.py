"""The one way this project opens a Thrift connection to a metastore.

Every client in the project (the CLI commands, the streaming ingest client, extension
mode's upstream pool, ``spark.hive_acid``, the benchmark) connects through ``connect``, so
transports, SASL and failover behave the same everywhere:

* ``uri`` is ``thrift://host:port`` or a comma-separated list of them, as Hive's
  ``hive.metastore.uris`` takes it. The URIs are tried in order until one accepts the
  connection (Hive's client does the same; it shuffles only when asked to). A URI without
  a port means Hive's default, 9083.
* Transports as the Java metastore offers them: buffered (the default), framed
  (``framed=True``), SASL (``sasl=SaslPlain(...)``, ``SaslDigest(...)`` or
  ``SaslGssapi(...)``, Kerberos: every message in a length-prefixed SASL frame after the
  handshake, GSS-wrapped with a security layer); binary protocol (the accelerated C
  codec) or compact (``compact=True``); any of them over TLS (``tls=TlsClient(...)``,
  ``wire.tls``: the server's certificate and host name are verified).
* ``timeout`` bounds every socket operation, the connect included; a SASL negotiation gets
  at most ``SASL_NEGOTIATION_TIMEOUT``: a server without SASL never answers one (a Thrift
  server reads its START as a message with a 16 MiB name and waits for the rest), so a
  SASL client fails within it, and is not retried (``SaslNegotiationFailed``).
* ``wire.failover.connect_failover`` (the CLI and the streaming client use it) returns a
  client that also fails over during its life, the way Hive's ``RetryingMetaStoreClient``
  does.

A ``MetastoreClient`` is the generated ``ThriftHiveMetastore.Client`` plus the transport
it owns: ``close()`` (or a ``with`` block) closes the socket. It is not thread-safe, like
the generated client.

The project's clients understand ACID tables and say so: they read tables with
``get_table_acid_aware`` (``table_request``, ``tables_request``), which declares Hive 3's
``ClientCapabilities [INSERT_ONLY_TABLES]`` and Hive 4's processor capabilities. A metastore
with a client capability check refuses insert-only tables to a plain ``get_table`` (Hive
3/4) or hands ACID tables in a form no reader can read (hms-txn).
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.transport import TSocket, TTransport
from thrift.transport.TTransport import TTransportException

from hms_txn.common.kerberos_names import server_principal
from hms_txn.wire.sasl_gssapi import ClientNegotiation, KerberosFailure, client_credentials
from hms_txn.wire.sasl_layer import GssapiMechanism, client_transport
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.tls import TlsClient
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

DEFAULT_PORT = 9083

# thrift's TSocket logs every refused connect with a traceback, before raising the error
# that ``connect`` reports itself (with the URI): its records would only repeat it.
logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)


# What this project's clients declare on table reads: Hive 3's capability (every Hive 3/4
# client sends it) and Hive 4's processor capabilities for full-ACID, insert-only and
# external tables, with MANAGERAWMETADATA: the tables as stored, not translated for us.
CLIENT_CAPABILITIES = (t.ClientCapability.INSERT_ONLY_TABLES,)
PROCESSOR_CAPABILITIES = ("HIVEFULLACIDREAD", "HIVEFULLACIDWRITE", "HIVEMANAGEDINSERTREAD",
                          "HIVEMANAGEDINSERTWRITE", "EXTREAD", "EXTWRITE", "MANAGERAWMETADATA")
PROCESSOR_IDENTIFIER = "hms-txn"


def table_request(db: str, name: str, **fields: Any) -> t.GetTableRequest:
    """A get_table_req request declaring this project's capabilities."""
    return t.GetTableRequest(
        dbName=db, tblName=name, capabilities=t.ClientCapabilities(list(CLIENT_CAPABILITIES)),
        processorCapabilities=list(PROCESSOR_CAPABILITIES),
        processorIdentifier=PROCESSOR_IDENTIFIER, **fields)


def tables_request(db: str, names: list[str]) -> t.GetTablesRequest:
    """A get_table_objects_by_name_req request declaring this project's capabilities."""
    return t.GetTablesRequest(
        dbName=db, tblNames=names, capabilities=t.ClientCapabilities(list(CLIENT_CAPABILITIES)),
        processorCapabilities=list(PROCESSOR_CAPABILITIES),
        processorIdentifier=PROCESSOR_IDENTIFIER)


class MetastoreUnreachable(ConnectionError):
    """No URI of the list accepted a connection; the message names each and why.
    ``transient``: whether connecting again may succeed (not after SASL negotiations that
    every URI refused or left unanswered)."""

    def __init__(self, message: str, *, transient: bool = True):
        super().__init__(message)
        self.transient = transient


class SaslNegotiationFailed(TTransport.TTransportException):
    """The server refused the SASL negotiation or did not answer it in time."""


# A SASL negotiation is a few small messages; a server that does not answer its START
# within this many seconds does not speak SASL.
SASL_NEGOTIATION_TIMEOUT = 5.0


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
    ``hms_txn.domain.security.token_codec.Token``)."""
    user: str
    password: str

    def mechanism(self, host: str) -> "PureSaslClient":
        # Hive's client (HadoopThriftAuthBridge.Client) names no protocol and the server
        # "default": digest-uri "null/default", which Hive's metastore insists on.
        return PureSaslClient("default", "DIGEST-MD5", self.user, self.password,
                              service="null")


@dataclass(frozen=True)
class SaslGssapi:
    """SASL GSSAPI (Kerberos) with the metastore's service principal ``service``
    (``hive/_HOST@REALM``: ``_HOST`` becomes the host of the URI, as Hive's client does).
    The client's identity: a ticket for ``principal`` from ``keytab``, else the ticket
    cache (kinit's). ``qops``: the protections this client accepts, preferred first
    (``hadoop.rpc.protection``: ``auth``, ``auth-int``, ``auth-conf``)."""
    service: str
    principal: str | None = None
    keytab: str | None = None
    qops: tuple[str, ...] = ("auth",)

    def mechanism(self, host: str) -> "GssapiMechanism":
        try:
            credentials = client_credentials(self.principal, self.keytab)
        except KerberosFailure as err:
            raise TTransportException(TTransportException.NOT_OPEN, str(err)) from None
        return GssapiMechanism(ClientNegotiation(server_principal(self.service, host),
                                                 credentials, self.qops))


Sasl = SaslPlain | SaslDigest | SaslGssapi
_MECHANISM_NAMES = {SaslPlain: "PLAIN", SaslDigest: "DIGEST-MD5", SaslGssapi: "GSSAPI"}


@dataclass(frozen=True)
class ClientOptions:
    """How to connect: transport, protocol, authentication, TLS, socket timeout (seconds)."""
    sasl: Sasl | None = None
    framed: bool = False
    compact: bool = False
    timeout: float = 60.0
    tls: TlsClient | None = None


class TlsSocket(TSocket.TSocket):
    """A TSocket that runs the TLS handshake (verifying the server) once connected."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext):
        super().__init__(host, port)
        self.context = context

    def open(self) -> None:
        super().open()
        try:
            self.handle = self.context.wrap_socket(self.handle, server_hostname=self.host)
        except BaseException:
            self.close()
            raise


class MetastoreClient(ThriftHiveMetastore.Client):
    """The generated client, owning its transport."""

    def __init__(self, transport: TTransport.TTransportBase, protocol: Any, endpoint: Endpoint):
        super().__init__(protocol)
        self.transport = transport
        self.endpoint = endpoint

    def get_table_acid_aware(self, db: str, name: str) -> t.Table:
        """The table, read as a client that understands ACID tables (``table_request``)."""
        return self.get_table_req(table_request(db, name)).table

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
    sock = (TlsSocket(endpoint.host, endpoint.port, options.tls.context()) if options.tls
            else TSocket.TSocket(endpoint.host, endpoint.port))
    sock.setTimeout(int(options.timeout * 1000))
    if options.sasl is not None:
        sasl, host = options.sasl, endpoint.host
        transport = client_transport(lambda: sasl.mechanism(host),
                                     _MECHANISM_NAMES[type(sasl)], sock)
    elif options.framed:
        transport = TTransport.TFramedTransport(sock)
    else:
        transport = TTransport.TBufferedTransport(sock)
    if options.sasl is not None:
        _negotiate(sock, transport, options.timeout)
    else:
        transport.open()
    try:
        sock.handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):   # not a TCP socket
        pass
    protocol = (TCompactProtocolAccelerated(transport) if options.compact
                else TBinaryProtocolAccelerated(transport))
    return MetastoreClient(transport, protocol, endpoint)


def _negotiate(sock: TSocket.TSocket, transport: Any, timeout: float) -> None:
    """Connect ``sock``, then run the SASL negotiation of ``transport`` on it within
    ``SASL_NEGOTIATION_TIMEOUT`` (``SaslNegotiationFailed`` with the server's reason, or
    saying that it did not answer)."""
    sock.open()
    limit = min(timeout, SASL_NEGOTIATION_TIMEOUT)
    sock.setTimeout(int(limit * 1000))
    try:
        transport.open()
    except (TTransport.TTransportException, OSError) as err:
        sock.close()
        text = str(err)
        if isinstance(err, TimeoutError) or getattr(err, "type", None) == \
                TTransport.TTransportException.TIMED_OUT or "timed out" in text:
            text = (f"no answer to the SASL negotiation within {limit:g} s: the metastore "
                    f"does not seem to use SASL (hive.metastore.sasl.enabled)")
        else:       # thrift_sasl shows the server's reason as a bytes literal
            text = re.sub(r"""\(b(['"])(.*)\1\)$""", r"(\2)", text)
        raise SaslNegotiationFailed(TTransport.TTransportException.NOT_OPEN, text) from None
    sock.setTimeout(int(timeout * 1000))


def connect(uri: str | Endpoint | list[Endpoint], *, sasl: Sasl | None = None,
            framed: bool = False, compact: bool = False, timeout: float = 60.0,
            tls: TlsClient | None = None, options: ClientOptions | None = None
            ) -> MetastoreClient:
    """A client connected to the first URI of ``uri`` that accepts (see the module
    docstring). ``options`` replaces the keyword arguments when given. Raises
    ``MetastoreUnreachable`` when none does, ``ValueError`` for a malformed URI."""
    if options is None:
        options = ClientOptions(sasl=sasl, framed=framed, compact=compact, timeout=timeout,
                                tls=tls)
    if isinstance(uri, Endpoint):
        endpoints = [uri]
    elif isinstance(uri, list):
        endpoints = uri
    else:
        endpoints = parse_uris(uri)
    failures, transient = [], False
    for endpoint in endpoints:
        try:
            return open_endpoint(endpoint, options)
        except Exception as err:     # refused, timed out, SASL refused: try the next one
            failures.append(f"{endpoint.uri}: {describe(err, options)}")
            transient = transient or not isinstance(err, SaslNegotiationFailed)
    raise MetastoreUnreachable("cannot connect to " + "; ".join(failures), transient=transient)


def describe(err: BaseException, options: ClientOptions | None = None) -> str:
    """A transport error as one line (thrift hides the OS error in ``inner``), with a hint
    when TLS is on one side only."""
    text = str(err) or type(err).__name__
    inner = getattr(err, "inner", None)
    if inner is not None and str(inner) not in text:
        text = f"{text} ({inner})"
    text = text.replace("\n", " ")
    if isinstance(err, ssl.SSLCertVerificationError):
        text += (" (the server's certificate is not trusted: set "
                 "hive.metastore.truststore.path to its CA)")
    elif isinstance(err, (ssl.SSLError, ConnectionResetError)) and options and options.tls:
        text += " (TLS handshake failed: does the metastore serve TLS, hive.metastore.use.SSL?)"
    elif options and not options.tls and "TLS connections only" in text:
        text += " (set hive.metastore.use.SSL=true)"
    return text


class PureSaslClient:
    """thrift-sasl expects the API of the old ``sasl`` package; this adapts pure-sasl's
    client (PLAIN, DIGEST-MD5) to it."""

    def __init__(self, host: str, mechanism: str, user: str, password: str, *,
                 service: str = "hive"):
        from puresasl.client import SASLClient
        self.mechanism = mechanism
        self.client = SASLClient(host, service, mechanism=mechanism, username=user,
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
