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

from hms_txn.domain.catalog import Catalog
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
        self.catalog = Catalog(self.store, self.warehouse, object_json=object_json)
        self.catalog.ensure_default_database()
        # Every transaction the service layer runs goes through this unit of work; the
        # metadata cache (made below) learns of this process's writes from it.
        self.units = UnitOfWork(self.store)
        # Transactions, write ids, locks, compaction queue.
        self.txns = TxnManager(config)
        self._serving = False
        self.txn_service = TxnService(self.units, self.txns)
        self.lock_service = LockService(self.units)
        self.compaction_service = CompactionService(self.units)
        # Hive delegation tokens (get/renew/cancel_delegation_token, SASL DIGEST-MD5).
        self.token_service = TokenService(self.units, DelegationTokens.from_config(config))
        self.observability = Observability()
        # Notification calls and the metadata cache (hms_txn.notifications / hms_txn.cache).
        from hms_txn.domain.cache import MetadataCache
        from hms_txn.domain.notifications import NotificationLog
        if upstream is None:
            self.notifications = NotificationLog(self.store, self.catalog)
            self.cache = MetadataCache(self.store, self.catalog, config)
        else:
            from hms_txn.domain.extension import ExtensionCache, ExtensionNotificationLog
            self.notifications = ExtensionNotificationLog(self.store, self.catalog, upstream.tables)
            self.cache = ExtensionCache(self.store, upstream.tables, config)
        self.units.on_commit = self.cache.record_local_writes
        self.observability.add_provider(self._cache_stats)
        self.counter_sources: list = []
        self.started_at = time.time()
        self.db_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, self.store.url.split("@")[-1]))
        self._threads: list[Any] = []
        self._stop = threading.Event()

    def handler(self):
        """The Thrift handler over this metastore's services (``service.handler``)."""
        from hms_txn.service.catalog import CatalogCalls
        from hms_txn.service.fb303 import Fb303Service
        from hms_txn.service.handler import Handler
        from hms_txn.service.notifications import NotificationCalls
        legacy = []
        catalog_cls = CatalogCalls
        if self.upstream is not None:  # extension mode (docs/extension-mode.md)
            from hms_txn.service.forwarding import ForwardingCalls
            catalog_cls = ForwardingCalls
        for cls in (catalog_cls, NotificationCalls):
            obj = cls.__new__(cls)
            obj.ms = self
            legacy.append(obj)
        fb303 = Fb303Service(self.config, self.counters, self.cache, self.started_at,
                             self.db_uuid)
        services = [fb303, self.txn_service, self.lock_service, self.compaction_service,
                    *legacy, self.token_service]
        fallback = legacy[0] if self.upstream is not None else None
        return Handler(services, fallback=fallback)

    # Read paths the metadata cache answers from memory when it may (hms_txn.cache).
    def get_table(self, db: str, name: str, *, valid_write_ids: str | None = None) -> dict:
        return self.cache.get_table(db, name, valid_write_ids).doc

    def read_table(self, db: str, name: str, *, valid_write_ids: str | None = None,
                   require_write_ids: bool = False):
        """Like ``get_table`` but returns a ``cache.TableRead`` (the doc and, on a hit, its
        cache entry, on which the handler memoizes the converted Thrift struct)."""
        return self.cache.get_table(db, name, valid_write_ids, require_write_ids=require_write_ids)

    def read_database(self, name: str):
        """A ``cache.DatabaseRead`` (the doc and, on a hit, its cache entry)."""
        return self.cache.get_database(name)

    def get_partitions_by_names(self, db: str, name: str, part_names, *,
                                valid_write_ids: str | None = None):
        return self.cache.get_partitions_by_names(db, name, part_names, valid_write_ids)

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
