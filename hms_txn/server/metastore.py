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

from hms_txn.domain.cache import MetadataCache
from hms_txn.domain.cache_source import CatalogSource
from hms_txn.domain.databases import Databases
from hms_txn.domain.dml_events import CatalogObjects, DmlEvents
from hms_txn.domain.extension_cache import ExtensionCache
from hms_txn.domain.extension_events import ForwardedEvents, UpstreamObjects
from hms_txn.domain.partitions import Partitions
from hms_txn.domain.tables import Tables
from hms_txn.service.catalog import CatalogService
from hms_txn.service.fb303 import Fb303Service
from hms_txn.service.forwarding import Forwarder, ForwardingService, owned_methods
from hms_txn.service.forwarding_partitions import PartitionForwarding
from hms_txn.service.handler import Handler
from hms_txn.service.notifications import NotificationService
from hms_txn.common.config import Config
from hms_txn.domain.delegation_tokens import DelegationTokens
from hms_txn.domain.txn import TxnManager
from hms_txn.server.observability import Observability
from hms_txn.service.locks import CompactionService, LockService
from hms_txn.service.tokens import TokenService
from hms_txn.service.transactions import TxnService
from hms_txn.service.units import UnitOfWork
from hms_txn.store import Store, ensure_schema
from hms_txn.domain.warehouse import Warehouse

log = logging.getLogger(__name__)


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
        self.warehouse = Warehouse(config.warehouse_dir(self.data_dir))
        os.makedirs(self.warehouse.root, exist_ok=True)
        # Every transaction the service layer runs goes through this unit of work; the
        # metadata cache (made below) learns of this process's writes from it.
        self.units = UnitOfWork(self.store)
        # The catalog: changes (domain.databases/tables/partitions), reads through the cache.
        self.tables = Tables(self.warehouse, object_json)
        self.partitions = Partitions(self.warehouse, object_json)
        self.databases = Databases(self.warehouse, self.tables)
        self.units.write(self.databases.ensure_default).apply(self.warehouse)
        # Transactions, write ids, locks, compaction queue.
        self.txns = TxnManager(config)
        self._serving = False
        self.txn_service = TxnService(self.units, self.txns)
        self.lock_service = LockService(self.units)
        self.compaction_service = CompactionService(self.units)
        # Hive delegation tokens (get/renew/cancel_delegation_token, SASL DIGEST-MD5).
        self.token_service = TokenService(self.units, DelegationTokens.from_config(config))
        self.observability = Observability()
        # The metadata cache and the notification calls; in extension mode both read the
        # catalog from the upstream.
        if upstream is None:
            self.cache = MetadataCache(config, self.units.read, CatalogSource(self.units.read))
            objects = CatalogObjects()
        else:
            self.cache = ExtensionCache(config, self.units.read, upstream.tables)
            objects = UpstreamObjects(upstream.tables)
        self.notification_service = NotificationService(self.units, DmlEvents(objects, object_json))
        self.catalog_service = CatalogService(self.units, self.cache, self.warehouse,
                                              self.databases, self.tables, self.partitions)
        self.units.on_commit = self.cache.record_local_writes
        self.observability.add_provider(self._cache_stats)
        self.counter_sources: list = []
        self.started_at = time.time()
        self.db_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, self.store.url.split("@")[-1]))
        self._object_json = object_json
        self._threads: list[Any] = []
        self._stop = threading.Event()

    def handler(self) -> Handler:
        """The Thrift handler over this metastore's services (``service.handler``)."""
        fb303 = Fb303Service(self.config, self.counters, self.cache, self.started_at,
                             self.db_uuid)
        services = [fb303, self.txn_service, self.lock_service, self.compaction_service,
                    self.notification_service, self.token_service]
        if self.upstream is None:
            return Handler([*services, self.catalog_service])
        # Extension mode (docs/extension-mode.md): catalog calls go to the upstream.
        served = Handler(services).methods()
        fwd = Forwarder(self.units, self.upstream, self.cache, ForwardedEvents(self._object_json))
        forwarding = ForwardingService(fwd, owned_methods(served))
        return Handler([*services, PartitionForwarding(fwd), forwarding], fallback=forwarding)

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
        from hms_txn.service.housekeeping import Housekeeper
        if not self._serving:
            # Only a serving process hands out ids, so only it settles the reservation of
            # lazily opened transactions (hms_txn.txn.TxnManager); CLI commands do not.
            self.txn_service.recover_reserved_ids()
            # PostgreSQL: again whenever the database server restarts under this process.
            self.store.on_database_restart = self.txns.recover_reserved_ids
            self._serving = True
        if not any(isinstance(t, Housekeeper) for t in self._threads):
            self._threads.append(Housekeeper(self.config, self.units, self.txn_service,
                                             self.lock_service).start())
        if self.cache not in self._threads:
            self._threads.append(self.cache.start())
        # Initiator / workers / cleaner per hive.compactor.* (hms_txn.compactor).
        if not any(getattr(t, "is_compactor", False) for t in self._threads):
            from hms_txn.service.compactor import start_compactor
            self.compactor = start_compactor(self.config, self.units, self.txns)
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
