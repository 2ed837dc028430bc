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

from .catalog import Catalog
from .config import Config
from .store import Store, ensure_schema
from .warehouse import Warehouse

log = logging.getLogger(__name__)


class Metastore:
    def __init__(self, config: Config, *, data_dir: str = "metastore_data",
                 object_json: Callable[[str, dict], str] | None = None):
        self.config = config
        self.data_dir = os.path.abspath(data_dir)
        url = config.database_url(self.data_dir)
        if url.startswith("sqlite"):
            os.makedirs(os.path.dirname(url[len("sqlite:///"):]) or ".", exist_ok=True)
        self.store = Store(url, pool_size=config["hms_txn.db.pool.size"])
        self.schema_found = ensure_schema(self.store, auto_upgrade=config["hms_txn.schema.auto.upgrade"])
        self.warehouse = Warehouse(config.warehouse_dir(self.data_dir))
        os.makedirs(self.warehouse.root, exist_ok=True)
        self.catalog = Catalog(self.store, self.warehouse, object_json=object_json)
        self.catalog.ensure_default_database()
        self.started_at = time.time()
        self.db_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, self.store.url.split("@")[-1]))
        self._threads: list[Any] = []
        self._stop = threading.Event()

    # Read paths that a later layer (the metadata cache) may answer from memory.
    def get_table(self, db: str, name: str, *, valid_write_ids: str | None = None) -> dict:
        return self.catalog.get_table(db, name)

    def start(self) -> None:
        """Start background work (housekeeping); idempotent."""

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            stop = getattr(thread, "stop", None)
            if stop:
                stop()
        self.store.dispose()
