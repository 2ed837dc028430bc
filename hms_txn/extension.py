"""Extension mode's domain side: the metadata cache and the notification log over tables
that live in an upstream metastore (see docs/extension-mode.md).

Thrift-free: the upstream is reached through a *table source* with plain documents and
domain errors (``hms_txn.upstream.UpstreamTables``): ``get_table``, ``list_partitions``,
``get_partitions_by_names``, ``get_partition`` and, for the upstream's own log,
``current_event_id``/``events_after``.

``ExtensionCache`` is ``MetadataCache`` with a different loader: an entry's log position
and write-id state are read from OUR database in one snapshot (write ids are ours), and
then the table document from the upstream. Reading the position first keeps the cache's
invariant ("the document is at least as new as its position"): a change made through us
is applied upstream before its event is logged, so any event after the position drops
the entry. On top of the base class's rules:

* entries older than ``hms_txn.upstream.cache.ttl`` are dropped on read and re-read
  (changes made directly on the upstream, without us, are seen within the TTL);
* with ``hms_txn.upstream.events.enabled`` a second tailer reads the upstream's own
  notification log and drops the tables it reports changed;
* partitions are not cached beyond what a cold ``get_partitions_by_names`` load returns;
  a read of other partitions goes to the upstream.

``ExtensionNotificationLog`` resolves tables and partitions from the upstream for
INSERT/ACID_WRITE events and writes the events of catalog changes forwarded through us
(CREATE/ALTER/DROP_TABLE, ADD/ALTER/DROP_PARTITION, CREATE/ALTER/DROP_DATABASE) with the
objects the upstream returned, so our cache and notification readers see them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from . import names, notifications
from .cache import TABLE_EVENTS, MetadataCache, _Loaded
from .notifications import NotificationLog

log = logging.getLogger(__name__)

Doc = dict[str, Any]
EXPIRED = "expired"


DATABASE_EVENTS = frozenset({"CREATE_DATABASE", "ALTER_DATABASE", "DROP_DATABASE"})
# Events that may change the list of a database's table names (ALTER_TABLE: a rename).
TABLE_NAME_EVENTS = frozenset({"CREATE_TABLE", "DROP_TABLE", "ALTER_TABLE"})


class UpstreamDatabases:
    """The upstream's databases and the names of their tables, read through with the
    table TTL.

    Clients ask for these on nearly every statement (Spark: ``get_database`` before each
    table lookup, ``get_tables`` to resolve names); forwarding each of those tiny calls
    adds a whole network hop to a call that costs the upstream almost nothing. Entries live
    ``hms_txn.upstream.cache.ttl`` at most and are dropped at once when an event (ours, or
    the upstream's own log when it is read) names their database. A read that started
    before an invalidation does not install its answer (the generation check), so a change
    made through us is never hidden by a slower read of the old state. Missing databases
    are not cached."""

    def __init__(self, source, ttl: float):
        self.source = source
        self.ttl = ttl
        self._lock = threading.Lock()
        self._generation = 0
        self._docs: dict[str, tuple[float, Doc, dict]] = {}
        self._names: tuple[float, list[str]] | None = None
        self._tables: dict[str, tuple[float, list[str]]] = {}

    def get(self, name: str) -> tuple[Doc, dict]:
        """(document, memo) of database ``name``; the memo is a per-entry dict on which the
        caller may keep a converted form (entries are never changed, only replaced)."""
        key = name.lower()
        now = time.monotonic()
        with self._lock:
            hit = self._docs.get(key)
            if hit is not None and now - hit[0] <= self.ttl:
                return hit[1], hit[2]
            generation = self._generation
        doc = self.source.get_database(name)
        memo: dict = {}
        with self._lock:
            if generation == self._generation:
                self._docs[key] = (now, doc, memo)
        return doc, memo

    def names(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            if self._names is not None and now - self._names[0] <= self.ttl:
                return list(self._names[1])
            generation = self._generation
        found = list(self.source.list_databases())
        with self._lock:
            if generation == self._generation:
                self._names = (now, found)
        return list(found)

    def table_names(self, db: str) -> list[str]:
        """``get_all_tables(db)`` of the upstream (sorted, as the metastore returns it)."""
        key = db.lower()
        now = time.monotonic()
        with self._lock:
            hit = self._tables.get(key)
            if hit is not None and now - hit[0] <= self.ttl:
                return list(hit[1])
            generation = self._generation
        found = list(self.source.list_tables(db))
        with self._lock:
            if generation == self._generation:
                self._tables[key] = (now, found)
        return list(found)

    def invalidate(self, name: str | None = None) -> None:
        """Forget database ``name`` (all of them with None), its table names and the list
        of database names."""
        with self._lock:
            self._generation += 1
            self._names = None
            if name is None:
                self._docs.clear()
                self._tables.clear()
            else:
                self._docs.pop(name.lower(), None)
                self._tables.pop(name.lower(), None)

    def invalidate_tables(self, db: str | None) -> None:
        """Forget the table names of ``db`` (of every database with None)."""
        with self._lock:
            self._generation += 1
            if db is None:
                self._tables.clear()
            else:
                self._tables.pop(db.lower(), None)


class ExtensionCache(MetadataCache):
    def __init__(self, store, source, config):
        # ``catalog`` of the base class: get_table / list_partitions when the cache is off
        super().__init__(store, source, config)
        self.source = source
        self.ttl = float(config["hms_txn.upstream.cache.ttl"])
        self.events_enabled = bool(config["hms_txn.upstream.events.enabled"])
        self.events_interval = max(0.05, float(config["hms_txn.upstream.events.interval"]))
        self._loaded_at: dict[tuple[str, str], float] = {}
        self._invalidated: dict[tuple[str, str], float] = {}
        self._stats.update({"misses." + EXPIRED: 0, "upstream_events": 0, "upstream_evictions": 0})
        self.upstream_pos: int | None = None
        self._events_thread: threading.Thread | None = None
        self.databases = UpstreamDatabases(source, self.ttl)

    # ------------------------------------------------------------------ loading

    def _load(self, key, part_names=None) -> _Loaded:
        db, name = key
        started = time.monotonic()
        with self.store.read() as conn:
            pos = notifications.current_event_id(conn)
            state, open_txns = self._load_state(conn, db, name)
        doc = self.source.get_table(db, name)   # after the position: see the module doc
        parts = None
        parts_len = 0
        if part_names is not None:
            keys = [k["name"].lower() for k in doc.get("partitionKeys") or []]
            wanted = sorted({names.make_partition_name(keys, names.partition_values_from_name(keys, n))
                             for n in part_names})
            parts = {n: None for n in wanted}
            for part in self.source.get_partitions_by_names(db, name, wanted):
                pname = names.make_partition_name(keys, part.get("values") or [])
                parts[pname] = part
                parts_len += len(json.dumps(part))
        loaded = _Loaded(key, pos, doc, len(json.dumps(doc)), state, open_txns, 0, parts, parts_len)
        loaded.started = started   # type: ignore[attr-defined]
        return loaded

    def _install(self, loaded: _Loaded) -> bool:
        started = getattr(loaded, "started", time.monotonic())
        with self._lock:
            if started < self._invalidated.get(loaded.key, float("-inf")):
                return False
            if not super()._install(loaded):
                return False
            self._loaded_at[loaded.key] = started
            return True

    def _drop(self, key):
        entry = super()._drop(key)
        if entry is not None:
            self._loaded_at.pop(key, None)
        return entry

    def _fill_partitions(self, entry, wanted) -> None:
        return None   # the caller reads them from the upstream

    def _verdict(self, entry, text, snapshot) -> str:
        loaded_at = self._loaded_at.get(entry.key)
        if loaded_at is None or time.monotonic() - loaded_at > self.ttl:
            with self._lock:
                if self._entries.get(entry.key) is entry:
                    self._drop(entry.key)
            return EXPIRED
        return super()._verdict(entry, text, snapshot)

    def _apply(self, ev, reload) -> None:
        super()._apply(ev, reload)
        if ev.event_type in DATABASE_EVENTS:   # through another hms-txn process
            self.databases.invalidate(ev.db_name)
        elif ev.event_type in TABLE_NAME_EVENTS:
            self.databases.invalidate_tables(ev.db_name)

    def invalidate(self, db: str, name: str | None) -> None:
        """Drop a table (all of a database's with ``name`` None) changed on the upstream;
        loads that started before are not installed."""
        if name is None:
            self.databases.invalidate(db)
        else:
            self.databases.invalidate_tables(db)
        now = time.monotonic()
        with self._lock:
            if name is None:
                keys = [k for k in self._entries if k[0] == db.lower()]
            else:
                keys = [(db.lower(), name.lower())]
            for key in keys:
                self._invalidated[key] = now
                if self._drop(key) is not None:
                    self._count("upstream_evictions")
            if len(self._invalidated) > 4 * max(1, self.max_entries):
                horizon = now - 600
                self._invalidated = {k: v for k, v in self._invalidated.items() if v > horizon}

    # ------------------------------------------------------------------ the upstream's log

    def start(self) -> "ExtensionCache":
        super().start()
        if self.enabled and self.events_enabled and self._events_thread is None:
            self._events_thread = threading.Thread(target=self._events_loop,
                                                   name="hms-upstream-events", daemon=True)
            self._events_thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self._events_thread is not None and self._events_thread is not threading.current_thread():
            self._events_thread.join(timeout)
        with self._lock:
            self._loaded_at.clear()

    def _events_loop(self) -> None:
        while not self._stop.is_set():
            try:
                more = self.poll_upstream_once()
            except Exception as err:  # the upstream is down: TTL keeps entries bounded
                log.debug("upstream notification log: %s", err)
                more = False
            if not more:
                self._stop.wait(self.events_interval)

    def poll_upstream_once(self, batch: int = 1000) -> bool:
        if self.upstream_pos is None:
            self.upstream_pos = self.source.current_event_id()
            return False
        events = self.source.events_after(self.upstream_pos, batch)
        for event_id, event_type, db, table in events:
            if event_type in TABLE_EVENTS and db and table:
                self.invalidate(db, table)
            elif event_type == "DROP_DATABASE" and db:
                self.invalidate(db, None)
            elif event_type in DATABASE_EVENTS:
                self.databases.invalidate(db)
            self.upstream_pos = max(self.upstream_pos, event_id)
        if events:
            self._count("upstream_events", len(events))
        return len(events) >= batch

    def counters(self) -> dict[str, int]:
        out = super().counters()
        out["hms_txn.cache.upstream.position"] = int(self.upstream_pos or 0)
        return out


class ExtensionNotificationLog(NotificationLog):
    """Our notification log, with tables and partitions resolved from the upstream."""

    def __init__(self, store, catalog, source):
        super().__init__(store, catalog)
        self.source = source

    def _objects(self, conn, db: str, table: str, partition_values):
        table_doc = self.source.get_table(names.lower(db), names.lower(table))
        part_doc = None
        if partition_values:
            part_doc = self.source.get_partition(table_doc["dbName"], table_doc["tableName"],
                                                 [str(v) for v in partition_values])
        return table_doc, part_doc

    # ------------------------------------------------------------------ forwarded changes

    def _log(self, event_type: str, db: str, table: str | None, message: Doc) -> int:
        message = {"server": "", "servicePrincipal": "", **message}
        message.setdefault("timestamp", int(time.time()))
        db = names.lower(db)
        table = names.lower(table) if table else None
        return self.store.transaction(
            lambda conn: notifications.append(conn, event_type, message, db_name=db, tbl_name=table))

    @staticmethod
    def _keys(table: Doc) -> list[str]:
        return [k["name"].lower() for k in table.get("partitionKeys") or []]

    def database_changed(self, event_type: str, name: str) -> int:
        return self._log(event_type, name, None, {"db": names.lower(name)})

    def table_created(self, table: Doc) -> int:
        message = {"db": table["dbName"], "table": table["tableName"],
                   "tableType": table.get("tableType")}
        obj = self._obj_json("Table", table)
        if obj is not None:
            message["tableObjJson"] = obj
        return self._log("CREATE_TABLE", table["dbName"], table["tableName"], message)

    def table_altered(self, db: str, name: str, before: Doc | None, after: Doc | None) -> list[int]:
        """ALTER_TABLE on the old name (and, for a rename, on the new one too, so caches
        holding either name drop it)."""
        message: Doc = {"db": names.lower(db), "table": names.lower(name),
                        "tableType": (before or after or {}).get("tableType"),
                        "isTruncateOp": "false",
                        "writeId": int((after or {}).get("writeId") or -1)}
        if before is not None and after is not None and self.catalog.object_json:
            message["tableObjBeforeJson"] = self._obj_json("Table", before)
            message["tableObjAfterJson"] = self._obj_json("Table", after)
        ids = [self._log("ALTER_TABLE", db, name, message)]
        if after is not None and (names.lower(after.get("dbName")), names.lower(after.get("tableName"))) \
                != (names.lower(db), names.lower(name)):
            ids.append(self._log("ALTER_TABLE", after["dbName"], after["tableName"], message))
        return ids

    def table_dropped(self, db: str, name: str, table: Doc | None) -> int:
        message: Doc = {"db": names.lower(db), "table": names.lower(name)}
        obj = self._obj_json("Table", table)
        if obj is not None:
            message["tableObjJson"] = obj
        return self._log("DROP_TABLE", db, name, message)

    def partitions_added(self, table: Doc, parts: list[Doc]) -> int | None:
        if not parts:
            return None
        keys = self._keys(table)
        message: Doc = {"db": table["dbName"], "table": table["tableName"],
                        "partitions": [dict(zip(keys, p.get("values") or [])) for p in parts]}
        if self.catalog.object_json:
            message["tableObjJson"] = self._obj_json("Table", table)
            message["partitionListJson"] = [self._obj_json("Partition", p) for p in parts]
        return self._log("ADD_PARTITION", table["dbName"], table["tableName"], message)

    def partitions_altered(self, db: str, name: str, parts: list[Doc]) -> list[int]:
        ids = []
        for part in parts:
            message: Doc = {"db": names.lower(db), "table": names.lower(name),
                            "isTruncateOp": "false", "values": list(part.get("values") or [])}
            obj = self._obj_json("Partition", part)
            if obj is not None:
                message["partitionObjAfterJson"] = obj
            ids.append(self._log("ALTER_PARTITION", db, name, message))
        return ids

    def partitions_dropped(self, db: str, name: str, values: list[list[str]],
                           table: Doc | None = None) -> int:
        keys = self._keys(table) if table else []
        message: Doc = {"db": names.lower(db), "table": names.lower(name),
                        "partitions": [dict(zip(keys, v)) if keys else {"values": v} for v in values]}
        return self._log("DROP_PARTITION", db, name, message)
