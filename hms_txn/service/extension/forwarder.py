"""What extension mode's forwarding services share (``Forwarder``): calls to the upstream
metastore (and the fallback when it does not know a method), the notification events and
cache evictions of the changes they forward, and reads of the upstream's objects for those
events. The rules of what is forwarded and how are ``forwarding``'s.
"""

from __future__ import annotations

import logging

from thrift.Thrift import TApplicationException

from hms_txn.domain.extension.extension_cache import ExtensionCache
from hms_txn.domain.extension.extension_events import ForwardedEvents
from hms_txn.domain.model import names
from hms_txn.service.catalog.table_access import TableAccess
from hms_txn.service.units import UnitOfWork

log = logging.getLogger("hms_txn.handler")


class Forwarder:
    """What the forwarding services share: calls to the upstream, and the events and cache
    evictions of the changes they forward."""

    def __init__(self, units: UnitOfWork, upstream, cache: ExtensionCache,
                 events: ForwardedEvents, access: TableAccess):
        self.units = units
        self.upstream = upstream          # clients.upstream.UpstreamPool
        self.cache = cache
        self.events = events
        self.access = access     # the same rules as for our own tables
        self._hive3 = None

    def takes_hive3_acid(self) -> bool:
        """Whether the upstream takes Hive 3/4 ACID tables as they are: Hive 3 and later
        (they have catalogs; ``get_catalogs`` is an unknown method to Hive 2.x). A Hive 2.x
        upstream gets them in their upstream form (``forwarding_table_form``)."""
        if self._hive3 is None:
            self._hive3 = self.up_or("get_catalogs", (), lambda: None) is not None
        return self._hive3

    def up(self, method: str, *args):
        return self.upstream.call(method, *args)

    def up_or(self, method: str, args: tuple, fallback):
        """``method`` on the upstream, or ``fallback()`` when the upstream does not know it."""
        missing = self.upstream.missing_methods
        if method not in missing:
            try:
                return self.up(method, *args)
            except TApplicationException as err:
                if err.type != TApplicationException.UNKNOWN_METHOD:
                    raise
                missing.add(method)
        return fallback()

    def record(self, what: str, db: str, table: str | None, fn, *args, evict: bool = True) -> None:
        """Write the event of a forwarded change. The upstream has applied the change, so a
        failure here must not fail the call: the table is dropped from this process's cache
        and other processes see the change within the cache TTL."""
        try:
            self.units.write(lambda conn: fn(conn, *args))
        except Exception:
            log.warning("extension mode: could not log %s of %s.%s in the notification log",
                        what, db, table, exc_info=True)
            if db and evict:
                self.cache.invalidate(db, table)

    def fetch_table(self, db: str, name: str) -> dict | None:
        try:
            return self.upstream.tables.get_table(db, name)
        except Exception:
            return None

    def fetch_database(self, name: str) -> dict | None:
        try:
            return self.upstream.tables.get_database(name)
        except Exception:
            return None

    def fetch_partitions(self, table: dict, values_list: list[list[str]]) -> list[dict | None]:
        """The upstream's partitions of ``table`` with these values (None for one it does
        not have or when it cannot be asked), in the order asked."""
        keys = [k["name"] for k in table.get("partitionKeys") or []]
        try:
            wanted = [names.make_partition_name(keys, [str(v) for v in vals])
                      for vals in values_list]
            got = self.upstream.tables.get_partitions_by_names(table["dbName"],
                                                               table["tableName"], wanted)
        except Exception:
            return [None] * len(values_list)
        by_values = {tuple(p.get("values") or ()): p for p in got}
        return [by_values.get(tuple(str(v) for v in vals)) for vals in values_list]

    def table_doc(self, db: str, name: str) -> dict | None:
        """The table for an event message (cache first)."""
        try:
            return self.cache.get_table(db, name).doc
        except Exception:
            return None

    def stats_written(self, method: str, args: tuple) -> None:
        """Drop the table whose statistics a forwarded call changed (its parameters carry
        COLUMN_STATS_ACCURATE) from the cache."""
        if method.startswith("delete_"):
            db, table = args[0], args[1]
        else:
            first = args[0]
            stats = first.colStats[0] if getattr(first, "colStats", None) else first
            desc = getattr(stats, "statsDesc", None)
            db, table = (desc.dbName, desc.tableName) if desc else (None, None)
        if db and table:
            self.cache.invalidate(db, table)
