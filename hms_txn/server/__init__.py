"""A metastore server process: the metastore's services on a Thrift transport.

``MetastoreServer`` ties a ``Metastore`` (the store, domain objects, services and background
threads of one process) to the transport (``hms_txn.wire.server``) and the metrics endpoint,
and starts and stops them in order.
"""

from __future__ import annotations

import logging
import os

from hms_txn.common.config import Config, ConfigError
from hms_txn.server import iceberg_rest
from hms_txn.server.metastore import Metastore
from hms_txn.server.observability import MetricsServer
from hms_txn.service.handler import ServiceRouter, build_dispatcher
from hms_txn.wire.codec import object_json
from hms_txn.server.authentication import kerberos_server, sasl_server
from hms_txn.wire.sasl import KerberosServer
from hms_txn.wire.server import ThriftServer, TransportOptions
from hms_txn.wire.tls import TlsServer, TlsSetupError

log = logging.getLogger(__name__)


class MetastoreServer:
    def __init__(self, ms: Metastore, *, host: str | None = None, port: int | None = None,
                 kerberos: KerberosServer | None = None):
        self.ms = ms
        config = ms.config
        idle = config["hms_txn.connection.idle.timeout"]
        tls = server_tls(config)
        options = TransportOptions(
            host=host or config["hive.metastore.bind.host"],
            port=config["hive.metastore.port"] if port is None else port,
            framed=config["hive.metastore.thrift.framed.transport.enabled"],
            compact=config["hive.metastore.thrift.compact.protocol.enabled"],
            max_message=config["hive.metastore.server.max.message.size"],
            idle_timeout=idle if idle > 0 else None,
            max_connections=config["hive.metastore.server.max.threads"],
            # The event loop runs SQLite's transaction calls in shared batches (see
            # hms_txn.wire.event_loop); with PostgreSQL a thread per connection.
            event_loop=config["hms_txn.server.txn.loop"] and ms.store.is_sqlite,
            spin=config["hms_txn.server.txn.loop.spin"], tls=tls)
        sasl = sasl_server(config, ms.token_service.sasl_credential,
                           kerberos if kerberos is not None else kerberos_server(config))
        handler = ms.handler()
        self.dispatcher = build_dispatcher(
            handler, metrics=ms.observability.calls,
            hive2_open_txns=config["hms_txn.hive2.open.txns.as.set"])
        # Extension mode forwards catalog reads to another metastore: not in the loop.
        router = ServiceRouter(handler, ms.units, inline_reads=ms.upstream is None)
        self.transport = ThriftServer(self.dispatcher, router, options, sasl=sasl)
        self.metrics: MetricsServer | None = None
        # The Iceberg REST catalog (metastore.catalog.servlet.port; hms_txn.rest), bound in
        # start() beside the Thrift port.
        self._tls = tls
        self.rest = None
        self._stopped = False

    @property
    def port(self) -> int | None:
        return self.transport.port

    @property
    def address(self) -> str:
        return self.transport.address

    def start(self) -> "MetastoreServer":
        """Bind, start background work, then serve; returns at once."""
        config = self.ms.config
        cpus = config["hms_txn.server.cpu.affinity"]
        if cpus:
            pin_process(cpus)
        self.transport.bind()
        if iceberg_rest.enabled(config):
            host = self.transport.host or "0.0.0.0"
            try:
                self.rest = iceberg_rest.open_listener(self.ms, host, self._tls)
            except OSError as err:
                port = config["metastore.catalog.servlet.port"]
                raise ConfigError(f"cannot listen on {host}:{port} (metastore.catalog.servlet."
                                  f"port): {err.strerror or err}") from None
        self.ms.start()
        self.transport.serve()
        if self.rest is not None:
            self.rest.start()
            if not self.rest.wait_started():
                raise ConfigError(f"{config.source}: the Iceberg REST catalog did not start "
                                  f"on port {self.rest.port}")
            log.info("Iceberg REST catalog on %s", self.rest_address)
        self.ms.counter_sources.append(self.transport.counters)
        if config["hms_txn.metrics.enabled"]:
            self.metrics = MetricsServer(self.ms.observability, self.ms.health,
                                         self.transport.host, config["hms_txn.metrics.port"]).start()
            log.info("metrics on http://%s:%d/metrics", self.transport.host, self.metrics.port)
        return self

    @property
    def rest_address(self) -> str | None:
        """The Iceberg REST catalog's base URI (None when it is off)."""
        if self.rest is None:
            return None
        path = self.ms.config["metastore.iceberg.catalog.servlet.path"].strip("/")
        return f"{self.rest.scheme}://{self.rest.host}:{self.rest.port}/{path}"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (in-flight calls finish), then the metastore."""
        if self._stopped:
            return
        self._stopped = True
        if self.rest is not None:
            self.rest.stop(timeout)
        self.transport.stop(timeout)
        if self.metrics is not None:
            self.metrics.stop()
        self.ms.close()


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


def server_tls(config: Config) -> TlsServer | None:
    """The server's TLS setting, its certificate and key loaded once to check them
    (ConfigError naming the key when they cannot be used)."""
    try:
        tls = TlsServer.from_config(config)
        if tls is not None:
            tls.context()
    except TlsSetupError as err:
        raise ConfigError(f"{config.source}: {err}") from None
    return tls


def create_server(config: Config, *, data_dir: str = "metastore_data", host: str | None = None,
                  port: int | None = None) -> MetastoreServer:
    server_tls(config)       # an unusable certificate stops start-up before the database
    iceberg_rest.check(config, extension_mode=bool(config["hms_txn.upstream.uris"]))
    kerberos = kerberos_server(config)        # and so does an unusable keytab,
    sasl_server(config, None, kerberos)       # SASL with framed transport or without users
    upstream = None
    if config["hms_txn.upstream.uris"]:   # extension mode (docs/extension-mode.md)
        from hms_txn.clients.upstream import UpstreamPool
        upstream = UpstreamPool.from_config(config)
    ms = Metastore(config, data_dir=data_dir, object_json=object_json, upstream=upstream)
    try:
        return MetastoreServer(ms, host=host, port=port, kerberos=kerberos)
    except BaseException:      # a configuration error of the transport: nothing started
        ms.close()
        raise
