"""The metastore service: configuration, store and the domain objects, wired together.

One ``Metastore`` serves one server process. It owns the background threads (timeouts,
housekeeping) that belong to a running server; ``start()``/``close()`` bracket them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any, Callable

from sqlalchemy import text

from hms_txn.domain.cache.cache import MetadataCache
from hms_txn.domain.cache.cache_source import CatalogSource
from hms_txn.domain.catalog.constraints import Constraints
from hms_txn.domain.catalog.databases import Databases
from hms_txn.domain.events.event_messages import MessageContext
from hms_txn.domain.txn.dml_events import CatalogObjects, DmlEvents
from hms_txn.domain.extension.extension_cache import ExtensionCache
from hms_txn.domain.extension.extension_events import ForwardedEvents, UpstreamObjects
from hms_txn.domain.catalog.functions import Functions
from hms_txn.domain.catalog.partitions import Partitions
from hms_txn.domain.catalog.tables import Tables
from hms_txn.domain.security import roles
from hms_txn.service.security.authorization import AuthorizationService
from hms_txn.service.catalog.catalog import CatalogService
from hms_txn.service.catalog.constraints import ConstraintService
from hms_txn.domain.catalog import catalogs
from hms_txn.service.catalog.catalog_names import CatalogNames, ForeignCatalog
from hms_txn.service.catalog.catalogs import CatalogsService
from hms_txn.service.features_off import FeaturesOff
from hms_txn.service.extension.forwarding_requests import RequestForwarding
from hms_txn.service.catalog.partition_calls import PartitionCalls
from hms_txn.service.catalog.table_calls import TableCalls
from hms_txn.service.compactor.external_compactor import ExternalCompactorService
from hms_txn.service.fb303 import Fb303Service
from hms_txn.service.catalog.functions import FunctionService
from hms_txn.service.catalog.hive_records import (PartitionEventService, RuntimeStatsService,
                                                  TypeService)
from hms_txn.service.extension.forwarder import Forwarder
from hms_txn.service.extension.forwarding import ForwardingService, owned_methods
from hms_txn.service.extension.forwarding_partitions import PartitionForwarding
from hms_txn.service.extension.forwarding_table_form import WriteIdRecovery
from hms_txn.service.handler import Handler
from hms_txn.service.notifications import NotificationService
from hms_txn.service.catalog.statistics import StatisticsService
from hms_txn.service.catalog.table_access import TableAccess
from hms_txn.common.config import Config
from hms_txn.domain.security.delegation_tokens import DelegationTokens
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.server.authentication import user_names
from hms_txn.server.observability import Observability
from hms_txn.service.txn.locks import CompactionService, LockService
from hms_txn.service.security.token_store import TokenStoreService
from hms_txn.service.security.tokens import TokenService
from hms_txn.service.txn.transactions import TxnService
from hms_txn.service.units import UnitOfWork
from hms_txn.store import Store, ensure_schema
from hms_txn.domain.model.warehouse import Warehouse
from hms_txn.wire.codec import object_json as thrift_object_json

log = logging.getLogger(__name__)


def message_context(config: Config, object_json: Callable[[str, dict], str]) -> MessageContext:
    """The notification messages' context from the configuration: the ``server`` and
    ``servicePrincipal`` Hive's MessageBuilder takes from ``metastore.thrift.uris`` and
    ``metastore.kerberos.principal`` ("" when unset), the configured message format."""
    def setting(*keys: str) -> str:
        return next((v for v in map(config.lookup_string, keys) if v), "")

    return MessageContext(
        object_json, server=setting("metastore.thrift.uris", "hive.metastore.uris"),
        service_principal=setting("metastore.kerberos.principal",
                                  "hive.metastore.kerberos.principal"),
        message_format=config.event_message_format())


class Metastore:
    def __init__(self, config: Config, *, data_dir: str = "metastore_data",
                 object_json: Callable[[str, dict], str] | None = None, upstream: Any = None):
        self.config = config
        # Extension mode (docs/extension-mode.md): catalog objects live in ``upstream``
        # (an ``hms_txn.upstream.UpstreamPool``); None serves the catalog from our database.
        self.upstream = upstream
        self.data_dir = os.path.abspath(data_dir)
        url = config.database_url(self.data_dir)
        if url.startswith("sqlite"):
            os.makedirs(os.path.dirname(url[len("sqlite:///"):]) or ".", exist_ok=True)
        self.store = Store(url, pool_size=config["hms_txn.db.pool.size"],
                           sqlite_synchronous=config["hms_txn.sqlite.synchronous"])
        self.schema_found = ensure_schema(self.store, auto_upgrade=config["hms_txn.schema.auto.upgrade"])
        self.warehouse = Warehouse(config.warehouse_dir(self.data_dir),
                                   config.filesystem_options())
        self.warehouse.mkdirs(self.warehouse.database_location("default"))
        # Every transaction the service layer runs goes through this unit of work; the
        # metadata cache (made below) learns of this process's writes from it.
        self.units = UnitOfWork(self.store)
        # How every notification event is built and encoded (domain.events.event_messages).
        self.messages = message_context(config, object_json or thrift_object_json)
        # The catalog: changes (domain.catalog.databases/tables/partitions), reads through
        # the cache.
        self.constraints = Constraints(self.messages)
        self.functions = Functions(self.messages)
        self.tables = Tables(self.warehouse, self.messages, self.constraints)
        self.partitions = Partitions(self.warehouse, self.messages)
        self.databases = Databases(self.warehouse, self.tables, self.messages, self.functions)
        self.units.write(self._ensure_defaults).apply(self.warehouse)
        if upstream is None:
            # Roles admin and public, as Hive's metastore creates them at start.
            admins = [u.strip() for u in config["hive.users.in.admin.role"].split(",")
                      if u.strip()]
            self.units.write(lambda conn: roles.ensure_default_roles(conn, admins))
        # Transactions, write ids, locks, compaction queue.
        self.txns = TxnManager(config, self.messages)
        self._serving = False
        # The data changes clients report (INSERT events, ACID write notifications): the
        # tables and partitions they name are ours, or in extension mode the upstream's.
        dml_events = DmlEvents(CatalogObjects() if upstream is None
                               else UpstreamObjects(upstream.tables), self.messages,
                               record_commit_writes=config["hive.metastore.dml.events"])
        self.txn_service = TxnService(self.units, self.txns, dml_events)
        if upstream is not None:    # Hive 3/4 ACID tables whose write ids our database lost
            self.txn_service.write_id_recovery = WriteIdRecovery(self.units, upstream.tables)
        self.lock_service = LockService(self.units)
        self.compaction_service = CompactionService(self.units)
        # Hive delegation tokens (get/renew/cancel_delegation_token, SASL DIGEST-MD5).
        self.token_service = TokenService(
            self.units, DelegationTokens.from_config(config, short_name=user_names(config)))
        self.observability = Observability()
        # The metadata cache; in extension mode it reads the catalog from the upstream.
        if upstream is None:
            self.cache = MetadataCache(config, self.units.read, CatalogSource(self.units.read))
        else:
            self.cache = ExtensionCache(config, self.units.read, upstream.tables)
        self.notification_service = NotificationService(
            self.units, dml_events, max_events=config["hive.metastore.max.event.response"])
        # Which tables a client gets, by the capabilities it declared (Hive's client check).
        self.table_access = TableAccess(config["hive.metastore.client.capability.check"])
        self.catalog_service = CatalogService(self.units, self.cache, self.warehouse,
                                              self.databases, self.tables, self.partitions,
                                              self.table_access)
        self.function_service = FunctionService(self.units, self.functions)
        self.constraint_service = ConstraintService(self.units, self.warehouse, self.tables,
                                                    self.constraints)
        self.statistics_service = StatisticsService(self.units, self.messages)
        self.units.on_commit = self.cache.record_local_writes
        self.observability.add_provider(self._cache_stats)
        self.counter_sources: list = []
        self.started_at = time.time()
        self.db_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, self.store.url.split("@")[-1]))
        self._threads: list[Any] = []
        self._stop = threading.Event()

    def _ensure_defaults(self, conn):
        """The ``hive`` catalog and its ``default`` database, as Hive's first start makes
        them (one transaction at every start)."""
        catalogs.ensure_default(conn, self.warehouse.database_location("default"))
        return self.databases.ensure_default(conn)

    def handler(self) -> Handler:
        """The Thrift handler over this metastore's services (``service.handler``)."""
        fb303 = Fb303Service(self.config, self.counters, self.cache.tailer, self.started_at,
                             self.db_uuid)
        services = [fb303, self.txn_service, self.lock_service, self.compaction_service,
                    self.notification_service, self.token_service,
                    ExternalCompactorService(self.config, self.units)]
        if self.upstream is None:
            # Roles, privileges, HiveServer2's token store, runtime statistics, types and
            # partition marks: in extension mode the upstream's (forwarded).
            records = [AuthorizationService(self.units), TokenStoreService(self.units),
                       RuntimeStatsService(self.units), TypeService(self.units),
                       PartitionEventService(self.units)]
            # Catalog-qualified names: databases live in the hive catalog only.
            names = CatalogNames(ForeignCatalog(self.units))
            catalog = [PartitionCalls(self.catalog_service, self.messages),
                       TableCalls(self.catalog_service, self.messages),
                       CatalogsService(self.units, self.warehouse), FeaturesOff(),
                       self.catalog_service, self.function_service, self.constraint_service,
                       self.statistics_service]
            return Handler([*services, *catalog, *records], arguments=names.wrap)
        # Extension mode (docs/extension-mode.md): catalog calls go to the upstream, names
        # in other catalogs as they were sent.
        served = Handler(services).methods()
        fwd = Forwarder(self.units, self.upstream, self.cache, ForwardedEvents(self.messages),
                        self.table_access)
        forwarding = ForwardingService(fwd, owned_methods(served))
        partitions = PartitionForwarding(fwd)
        names = CatalogNames(lambda method, _cat, _db, args: fwd.up(method, *args))
        return Handler([*services, RequestForwarding(fwd, forwarding, partitions, self.messages),
                        partitions, forwarding], fallback=forwarding, arguments=names.wrap)

    def counters(self) -> dict[str, int]:
        """fb303 getCounters: the cache's, and those of the server's parts that add theirs
        to ``counter_sources`` (the transaction loop)."""
        out = self.cache.counters()
        for source in self.counter_sources:
            out.update(source())
        return out

    def _cache_stats(self) -> dict[str, float]:
        prefix = "hms_txn."
        return {k[len(prefix):].replace(".", "_"): v for k, v in self.cache.counters().items()}

    def start(self) -> None:
        """Start background work (housekeeping); idempotent."""
        from hms_txn.service.txn.housekeeping import Housekeeper
        if not self._serving:
            # Only a serving process hands out ids, so only it settles the reservation of
            # lazily opened transactions (hms_txn.txn.TxnManager); CLI commands do not.
            self.txn_service.recover_reserved_ids()
            if self.txn_service.write_id_recovery is not None:
                self.txn_service.write_id_recovery.on_start()
            # PostgreSQL: again whenever the database server restarts under this process.
            self.store.on_database_restart = self.txn_service.recover_reserved_ids_in
            self._serving = True
        if not any(isinstance(t, Housekeeper) for t in self._threads):
            self._threads.append(Housekeeper(self.config, self.units, self.txn_service,
                                             self.lock_service).start())
        if self.cache not in self._threads:
            self._threads.append(self.cache.start())
        # Initiator / workers / cleaner per hive.compactor.* (hms_txn.compactor).
        if not any(getattr(t, "is_compactor", False) for t in self._threads):
            from hms_txn.service.compactor import start_compactor
            tables = self.upstream.tables if self.upstream is not None else None  # extension mode
            self.compactor = start_compactor(self.config, self.units, self.txns, tables)
            self._threads.append(self.compactor)

    def health(self) -> dict:
        """Liveness of the service and its database, for /health."""
        try:
            with self.store.read() as conn:
                conn.execute(text("SELECT 1"))
            out = {"status": "ok", "database": self.store.dialect,
                   "uptime_seconds": round(time.time() - self.started_at, 1)}
            if self.upstream is not None:
                out["upstream"] = self.upstream.health()
            return out
        except Exception as err:  # report, do not raise: this is the health endpoint
            return {"status": "unavailable", "database": self.store.dialect, "error": str(err)}

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            stop = getattr(thread, "stop", None)
            if stop:
                stop()
        if self.upstream is not None:
            self.upstream.close()
        self._serving = False
        if self.txns.reserved_ids_used:
            try:
                self.txn_service.release_reserved_ids()
            except Exception:  # the next start skips the reserved ids instead
                log.warning("could not release reserved transaction ids", exc_info=True)
        self.store.dispose()
