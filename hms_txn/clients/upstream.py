"""Connections to the upstream metastore of extension mode (see docs/extension-mode.md).

This is a client-side module: it holds the generated Thrift *client* and is used by the
forwarding handler (``hms_txn.handler.forwarding_calls``) and, through ``UpstreamTables``
(plain documents, domain errors), by the metadata cache and the notification log of
``hms_txn.extension``.

``UpstreamPool.call(method, *args)`` runs one call on a pooled connection:

* Connections go to the URIs of ``hms_txn.upstream.uris`` in order, starting with the one
  that answered last (failover: a URI that refuses is skipped).
* A call on a re-used connection that fails at the transport level (the upstream
  restarted, the socket went stale) is retried at once on a fresh connection, and every
  idle connection is dropped (they are stale too). When no URI can be reached the attempt
  is repeated ``hms_txn.upstream.retries`` times, ``retry.delay`` apart, then the call
  fails with ``UpstreamUnavailable`` ("upstream metastore thrift://... unreachable: ...",
  a MetaException on the wire). A fresh connection that fails in the middle of a call is
  not retried: the upstream may have applied it.
* The upstream's declared exceptions (MetaException, NoSuchObjectException, ...) and
  ``TApplicationException`` are raised unchanged and the connection is kept.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

from thrift.Thrift import TApplicationException, TException
from thrift.transport import TTransport

from hms_txn.common import errors
from hms_txn.common.kerberos_names import server_principal
from hms_txn.domain.extension import upstream_table_form
from hms_txn.domain.model import names
from hms_txn.wire.client import (ClientOptions, Endpoint, SaslGssapi, SaslPlain, describe,
                                 open_endpoint, parse_uris, table_request)
from hms_txn.wire.tls import TlsClient, TlsSetupError
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

log = logging.getLogger(__name__)


class UpstreamUnavailable(errors.MetastoreError):
    """No upstream metastore could be reached (mapped to MetaException)."""




_TRANSPORT_ERRORS = (TTransport.TTransportException, OSError, EOFError)


class _Conn:
    __slots__ = ("client", "transport", "endpoint", "generation", "used")

    def __init__(self, client, transport, endpoint: Endpoint, generation: int):
        self.client = client
        self.transport = transport
        self.endpoint = endpoint
        self.generation = generation
        self.used = False

    def close(self) -> None:
        try:
            self.transport.close()
        except Exception:  # pragma: no cover - closing a broken socket
            pass


def upstream_kerberos(config) -> SaslGssapi | None:
    """Kerberos towards the upstream (``hms_txn.upstream.kerberos.principal`` names its
    principal) as this server's own principal from its keytab, else the ticket cache."""
    service = config["hms_txn.upstream.kerberos.principal"]
    if not service:
        return None
    keytab = config["hive.metastore.kerberos.keytab.file"]
    principal = config["hive.metastore.kerberos.principal"] if keytab else None
    return SaslGssapi(service, server_principal(principal, "0.0.0.0") if principal else None,
                      keytab or None, config["hadoop.rpc.protection"])


class UpstreamPool:
    def __init__(self, endpoints: list[Endpoint], *, sasl: bool = False, user: str | None = None,
                 password: str | None = None, framed: bool = False, timeout: float = 60.0,
                 retries: int = 2, retry_delay: float = 0.2, max_idle: int = 16,
                 tls: TlsClient | None = None, kerberos: SaslGssapi | None = None):
        self.endpoints = list(endpoints)
        self.tls = tls
        self.sasl = sasl or kerberos is not None
        self.kerberos = kerberos
        self.user = user
        self.password = password
        self.framed = framed or sasl
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self.max_idle = max_idle
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()
        self._generation = 0
        self._preferred = 0
        self._closed = False
        self.last_error: str | None = None
        self.calls = 0
        # Per method: tests and operators can tell catalog calls from the event poller's.
        self.calls_by_method: collections.Counter[str] = collections.Counter()
        self.failures = 0
        self.reconnects = 0
        self.tables = UpstreamTables(self)
        # Methods the upstream answered with UNKNOWN_METHOD (an older Hive): not asked again.
        self.missing_methods: set[str] = set()

    @classmethod
    def from_config(cls, config) -> "UpstreamPool":
        from hms_txn.common.config import ConfigError
        try:
            endpoints = parse_uris(config["hms_txn.upstream.uris"])
        except ValueError as err:
            raise ConfigError(f"{config.source}: hms_txn.upstream.uris: {err}") from None
        sasl = config["hms_txn.upstream.sasl.enabled"]
        kerberos = upstream_kerberos(config) if sasl else None
        if sasl and kerberos is None and not config["hms_txn.upstream.sasl.user"]:
            raise ConfigError(f"{config.source}: hms_txn.upstream.sasl.enabled needs "
                              f"hms_txn.upstream.sasl.user (and .password), or "
                              f"hms_txn.upstream.kerberos.principal for Kerberos")
        tls = None
        if config["hms_txn.upstream.use.SSL"]:
            tls = TlsClient(config["hms_txn.upstream.truststore.path"],
                            config["hms_txn.upstream.truststore.password"],
                            truststore_key="hms_txn.upstream.truststore.path")
            try:
                tls.context()
            except TlsSetupError as err:
                raise ConfigError(f"{config.source}: {err}") from None
        return cls(endpoints, sasl=sasl, user=config["hms_txn.upstream.sasl.user"], tls=tls,
                   password=config["hms_txn.upstream.sasl.password"],
                   framed=config["hms_txn.upstream.framed"],
                   timeout=config["hms_txn.upstream.socket.timeout"],
                   retries=config["hms_txn.upstream.retries"],
                   retry_delay=config["hms_txn.upstream.retry.delay"],
                   max_idle=config["hms_txn.upstream.pool.size"], kerberos=kerberos)

    @property
    def uris(self) -> str:
        return ",".join(e.uri for e in self.endpoints)

    # ------------------------------------------------------------------ connections

    def _open(self, endpoint: Endpoint, generation: int) -> _Conn:
        sasl = self.kerberos or (SaslPlain(self.user, self.password or "") if self.sasl else None)
        client = open_endpoint(endpoint, ClientOptions(sasl=sasl, framed=self.framed,
                                                        timeout=self.timeout, tls=self.tls))
        return _Conn(client, client.transport, endpoint, generation)

    def _connect(self) -> _Conn:
        """A new connection to the first URI (from the preferred one) that accepts."""
        failures = []
        n = len(self.endpoints)
        start = self._preferred
        generation = self._generation
        for i in range(n):
            index = (start + i) % n
            endpoint = self.endpoints[index]
            try:
                conn = self._open(endpoint, generation)
            except Exception as err:  # refused, timed out, SASL refused
                failures.append((endpoint, err))
                continue
            if index != self._preferred:
                log.warning("upstream metastore: failing over to %s", endpoint.uri)
                self._preferred = index
            return conn
        raise UpstreamUnavailable("; ".join(
            f"upstream metastore {e.uri} unreachable: {describe(err)}" for e, err in failures))

    def _borrow(self) -> _Conn:
        with self._lock:
            if self._closed:
                raise UpstreamUnavailable("upstream connection pool is closed")
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _release(self, conn: _Conn) -> None:
        conn.used = True
        with self._lock:
            if (not self._closed and conn.generation == self._generation
                    and len(self._idle) < self.max_idle):
                self._idle.append(conn)
                return
        conn.close()

    def _discard_idle(self) -> None:
        with self._lock:
            self._generation += 1
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._discard_idle()

    # ------------------------------------------------------------------ calls

    def call(self, method: str, *args: Any) -> Any:
        self.calls += 1
        self.calls_by_method[method] += 1
        attempts = 0
        while True:
            try:
                conn = self._borrow()
            except UpstreamUnavailable as err:
                if attempts >= self.retries or self._closed:
                    self._failed(str(err))
                    raise
                attempts += 1
                time.sleep(self.retry_delay)
                continue
            try:
                result = getattr(conn.client, method)(*args)
            except _TRANSPORT_ERRORS as err:
                conn.close()
                self._discard_idle()
                if conn.used:       # a stale pooled connection: retry on a fresh one
                    self.reconnects += 1
                    continue
                message = f"upstream metastore {conn.endpoint.uri} unreachable: {describe(err)}"
                self._failed(message)
                raise UpstreamUnavailable(message) from None
            except (TApplicationException, TException):
                # a declared exception or an unknown method: the connection is still in sync
                self._release(conn)
                self.last_error = None
                raise
            except BaseException:
                conn.close()       # out of sync (a decoding failure): never re-use it
                raise
            self._release(conn)
            if self.last_error is not None:
                log.info("upstream metastore %s is reachable again", conn.endpoint.uri)
                self.last_error = None
            return result

    def _failed(self, message: str) -> None:
        self.failures += 1
        if self.last_error is None:
            log.warning("%s", message)
        self.last_error = message

    def health(self) -> dict:
        return {"uris": self.uris, "status": "unavailable" if self.last_error else "ok",
                **({"error": self.last_error} if self.last_error else {}),
                "calls": self.calls, "failures": self.failures, "reconnects": self.reconnects}






# ---------------------------------------------------------------------- documents

class UpstreamTables:
    """The upstream's tables and partitions as plain documents (the shape our catalog
    stores) with domain errors, for the Thrift-free extension-mode domain objects.

    A missing object is ``errors.NoSuchObject`` with the upstream's message; other
    upstream exceptions are raised unchanged."""

    def __init__(self, pool: UpstreamPool):
        self.pool = pool

    def _call(self, method: str, *args):
        try:
            return self.pool.call(method, *args)
        except (t.NoSuchObjectException, t.UnknownTableException, t.UnknownDBException) as err:
            raise errors.NoSuchObject(err.message or f"{method}: no such object") from None

    def get_table(self, db: str, name: str, *, stored: bool = False) -> dict:
        """The table as its Hive 3/4 client created it (``upstream_table_form``), or with
        ``stored`` as the upstream stores it. Asked for as a client that understands ACID
        tables (an upstream with Hive's client capability check refuses insert-only tables
        to a plain get_table); an upstream before Hive 2.3 gets the plain call."""
        from hms_txn.wire.codec import to_doc
        doc = None
        if "get_table_req" not in self.pool.missing_methods:
            try:
                doc = to_doc(self._call("get_table_req", table_request(db, name)).table)
            except TApplicationException as err:
                if err.type != TApplicationException.UNKNOWN_METHOD:
                    raise
                self.pool.missing_methods.add("get_table_req")
        if doc is None:
            doc = to_doc(self._call("get_table", db, name))
        return doc if stored else upstream_table_form.table_from_upstream(doc)

    def get_database(self, name: str) -> dict:
        from hms_txn.wire.codec import to_doc
        return to_doc(self._call("get_database", name))

    def list_databases(self) -> list[str]:
        return list(self._call("get_all_databases"))

    def list_tables(self, db: str) -> list[str]:
        return list(self._call("get_all_tables", db))

    def get_partitions_by_names(self, db: str, name: str, part_names: list[str]) -> list[dict]:
        from hms_txn.wire.codec import to_doc
        if not part_names:
            return []
        return [to_doc(p) for p in self._call("get_partitions_by_names", db, name, list(part_names))]

    def get_partition(self, db: str, name: str, values: list[str]) -> dict:
        from hms_txn.wire.codec import to_doc
        return to_doc(self._call("get_partition", db, name, list(values)))

    def list_partitions(self, db: str, name: str, *, part_names: list[str]):
        """``Catalog.list_partitions`` for named partitions: (table, [(name, doc)]) by name."""
        table = self.get_table(db, name)
        keys = [k["name"].lower() for k in table.get("partitionKeys") or []]
        rows = []
        for doc in self.get_partitions_by_names(db, name, part_names):
            rows.append((names.make_partition_name(keys, doc.get("values") or []), doc))
        return table, sorted(rows, key=lambda r: r[0])

    def get_partitions(self, db: str, name: str, max_parts: int) -> list[dict]:
        """``get_partitions(db, name, max_parts)``: the upstream's order (by name)."""
        from hms_txn.wire.codec import to_doc
        return [to_doc(p) for p in self._call("get_partitions", db, name, max_parts)]

    def list_functions(self) -> list[dict] | None:
        """Every database's functions (``get_all_functions``), in the upstream's order; None
        when it answered without a list. ``errors.Unsupported`` when the upstream predates
        the call (Hive < 2.1)."""
        from hms_txn.wire.codec import to_doc
        try:
            rsp = self._call("get_all_functions")
        except TApplicationException as err:
            if err.type != TApplicationException.UNKNOWN_METHOD:
                raise
            raise errors.Unsupported("the upstream metastore has no get_all_functions") from None
        return None if rsp.functions is None else [to_doc(f) for f in rsp.functions]

    # the upstream's own notification log (when it has one)
    def current_event_id(self) -> int:
        return int(self.pool.call("get_current_notificationEventId").eventId)

    def events_after(self, last: int, limit: int) -> list[tuple[int, str, str | None, str | None]]:
        rsp = self.pool.call("get_next_notification",
                             t.NotificationEventRequest(lastEvent=last, maxEvents=limit))
        return [(e.eventId, e.eventType, e.dbName, e.tableName) for e in rsp.events or []]
