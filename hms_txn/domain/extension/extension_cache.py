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
* partition reads without a ValidWriteIdList (``get_partitions``, ``get_partition_names``,
  the ``_ps``/by-name/by-filter reads) of a non-transactional table are answered from the
  table's entry: the first one reads all of the table's partitions (``PartitionListing``,
  in the upstream's order, at most ``hms_txn.upstream.cache.max.partitions``) and they
  live and die with the entry; ``select_partitions`` applies the call's limits and
  filters, or says the upstream must answer (a filter or partial spec whose Hive
  semantics we do not reproduce exactly); a ``_ps`` read matching several partitions,
  whose order only the upstream knows, is answered by the upstream and that answer is
  memoized on the entry (``ExtensionCache.select``, ``CacheEntry.memos``), so the same
  read again needs no round trip until the entry is dropped;
* the upstream's functions (``UpstreamFunctions``) are read through like databases.

"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from hms_txn.common import errors
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.cache.cache import MetadataCache
from hms_txn.domain.cache.cache_entries import (BYTES_FACTOR, DATABASE_EVENTS, EXPIRED, HIT,
                                                TABLE_EVENTS, CacheEntry, Doc, Key, Loaded)
from hms_txn.domain.cache.cache_source import Reader, canonical_names, read_write_id_state
from hms_txn.domain.extension.upstream_catalog import (TOO_LARGE, FUNCTION_EVENTS, MAX_MEMOS,
                                                       TABLE_NAME_EVENTS, PartitionListing,
                                                       UpstreamAnswer, UpstreamDatabases,
                                                       UpstreamFunctions, selection)

log = logging.getLogger(__name__)


class UpstreamSource:
    """The cache's ``TableSource`` in extension mode: an entry's log position and write-id
    state from OUR database in one snapshot (write ids are ours), then the table document
    from the upstream (after the position: see the module docstring)."""

    def __init__(self, read: Reader, tables):
        self.read = read
        self.tables = tables      # clients.upstream.UpstreamTables: documents, domain errors

    def load(self, key: Key, part_names: list[str] | None = None) -> Loaded:
        db, name = key
        started = time.monotonic()
        pos, (state, open_txns) = self.read(lambda conn: (
            notifications.current_event_id(conn), read_write_id_state(conn, db, name)))
        doc = self.tables.get_table(db, name)
        parts = None
        parts_len = 0
        if part_names is not None:
            wanted = canonical_names(doc, part_names)
            keys = [k["name"].lower() for k in doc.get("partitionKeys") or []]
            parts = {n: None for n in wanted}
            for part in self.tables.get_partitions_by_names(db, name, wanted):
                pname = names.make_partition_name(keys, part.get("values") or [])
                parts[pname] = part
                parts_len += len(json.dumps(part))
        return Loaded(key, pos, doc, len(json.dumps(doc)), state, open_txns, 0, parts,
                      parts_len, started)

    def database(self, name: str) -> tuple[int, Doc]:
        pos = self.read(notifications.current_event_id)
        return pos, self.tables.get_database(name)

    @staticmethod
    def partitions_since(entry: CacheEntry, wanted: list[str]):
        return None     # the caller reads them from the upstream

    def table(self, db: str, name: str) -> Doc:
        return self.tables.get_table(db, name)

    def partitions(self, db: str, name: str, part_names: list[str]):
        return self.tables.list_partitions(db, name, part_names=part_names)


class ExtensionCache(MetadataCache):
    """``MetadataCache`` over ``UpstreamSource``, refined through the cache's hooks (see the
    module docstring): entries expire after the TTL, upstream changes invalidate them, and
    partition listings and upstream answers live on the entries."""

    def __init__(self, config, read: Reader, tables):
        super().__init__(config, read, UpstreamSource(read, tables))
        self.tables = tables
        self.ttl = float(config["hms_txn.upstream.cache.ttl"])
        self.events_enabled = bool(config["hms_txn.upstream.events.enabled"])
        self.events_interval = max(0.05, float(config["hms_txn.upstream.events.interval"]))
        self._loaded_at: dict[tuple[str, str], float] = {}
        self._invalidated: dict[tuple[str, str], float] = {}
        self.upstream_pos: int | None = None
        self._events_thread: threading.Thread | None = None
        self._events_stop = threading.Event()
        self.databases = UpstreamDatabases(tables, self.ttl)
        self.functions = UpstreamFunctions(tables, self.ttl)
        self.max_listing = min(32766, int(config["hms_txn.upstream.cache.max.partitions"]))
        self.add_counters(["misses." + EXPIRED, "upstream_events", "upstream_evictions",
                           "partition_listing_hits", "partition_listing_fills",
                           "partition_listing_too_large", "partition_memo_hits",
                           "partition_memo_fills"])

    # ------------------------------------------------------------------ hooks

    def admit(self, loaded: Loaded) -> bool:
        """Not a read that started before the table was invalidated (an admitted read is
        installed at once: it starts its TTL)."""
        if loaded.started < self._invalidated.get(loaded.key, float("-inf")):
            return False
        self._loaded_at[loaded.key] = loaded.started
        return True

    def forget(self, key: Key) -> None:
        self._loaded_at.pop(key, None)

    def expired(self, entry: CacheEntry) -> bool:
        loaded_at = self._loaded_at.get(entry.key)
        return loaded_at is None or time.monotonic() - loaded_at > self.ttl

    def applied(self, event: notifications.Event) -> None:
        if event.event_type in DATABASE_EVENTS:   # through another hms-txn process
            self.databases.invalidate(event.db_name)
        elif event.event_type in FUNCTION_EVENTS:
            self.functions.invalidate()
        elif event.event_type in TABLE_NAME_EVENTS:
            self.databases.invalidate_tables(event.db_name)

    # ------------------------------------------------------------------ partition reads

    def partitions(self, db: str, name: str) -> tuple[Doc, PartitionListing] | None:
        """(table, all its partitions) from the table's entry, for partition reads that
        carry no ValidWriteIdList; None when the upstream must answer: the cache is off,
        the table is missing (the upstream's own answer), transactional (those reads have
        no snapshot to check the entry against) or has too many partitions.

        The partitions are read once per entry, after it (so at least as new as it), and
        kept only if the entry is still the installed one: every event that drops the
        entry (ours, the upstream's, the TTL) drops them too."""
        found = self._listed_entry(db, name)
        return None if found is None else (found[0].doc, found[1])

    def select(self, db: str, name: str, *, with_auth: bool = False, memo=None, **how):
        """A partition read of ``db.name`` answered from its entry: the matching (name,
        partition) pairs (``select_partitions(**how)``), an ``UpstreamAnswer``, or None
        when the upstream must answer (as for ``partitions``; also ``with_auth`` reads of a
        table with PARTITION_LEVEL_PRIVILEGE=true, whose answer carries the caller's
        privileges).

        ``memo`` is ``(key, fetch)`` for the reads whose matches only the upstream can
        order (the ``_ps`` reads with more than one match): the upstream's own answer,
        ``fetch()``, is kept on the entry under ``key`` (which must name the method and
        every argument but the table) and returned for the same read until the entry is
        dropped (our events, the upstream's, the TTL: the rules of the listing). At most
        ``MAX_MEMOS`` per entry, least recently used dropped. Errors are never kept; an
        answer whose read started before the entry was dropped is not installed."""
        found = self._listed_entry(db, name)
        if found is None:
            return None
        entry, listing = found
        if with_auth and str((entry.doc.get("parameters") or {}).get(
                "PARTITION_LEVEL_PRIVILEGE", "")).lower() == "true":
            return None
        rows, ordered = selection(entry.doc, listing, **how)
        if ordered or rows is None:
            return rows
        if memo is None:
            return None
        key, fetch = memo
        return UpstreamAnswer(self._memoized(entry, listing, rows, key, fetch))

    def _memoized(self, entry, listing: PartitionListing, rows, key, fetch):
        with self.lock:
            memos = entry.memos
            hit = memos.get(key) if memos is not None else None
            if hit is not None:
                memos.move_to_end(key)
                self.touch(entry)
        if hit is not None:
            self.count("partition_memo_hits")
            return hit[0]
        value = fetch()       # the upstream's answer; an exception is passed on, not kept
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            size = sum(len(v) + 8 for v in value)          # partition names
        else:
            size = sum(listing.sizes.get(n, 0) for n, _ in rows)
        size *= BYTES_FACTOR
        with self.lock:
            # as the listing: only onto the entry the read started from, still installed
            # (any invalidation since dropped or replaced it)
            if self.entry(entry.key) is entry:
                if entry.memos is None:
                    entry.memos = OrderedDict()
                memos = entry.memos
                old = memos.pop(key, None)
                delta = size - (old[1] if old is not None else 0)
                memos[key] = (value, size)
                while len(memos) > MAX_MEMOS:
                    _, (_, dropped) = memos.popitem(last=False)
                    delta -= dropped
                self.count("partition_memo_fills")
                self.charge(entry, delta)
        return value

    def _listed_entry(self, db: str, name: str) -> tuple[Any, PartitionListing] | None:
        if not self.running or self.max_listing <= 0 or self.ttl <= 0:
            return None
        key = (names.lower(db), names.lower(name))
        entry = self.entry(key)
        verdict = "cold" if entry is None else self.verdict(entry, None, None)
        if verdict in ("cold", EXPIRED):
            try:
                self.get_table(db, name)           # loads and installs the entry
            except errors.NoSuchObject:
                return None
            entry = self.entry(key)
            verdict = "cold" if entry is None else self.verdict(entry, None, None)
        if verdict != HIT:
            return None
        listing = entry.listing
        if listing is None:
            listing = self._fill_listing(entry)
        elif listing is not TOO_LARGE:
            self.touch(entry)
            self.count("partition_listing_hits")
        if listing is None or listing is TOO_LARGE:
            return None
        return entry, listing

    def _fill_listing(self, entry):
        table = entry.doc
        try:
            docs = self.tables.get_partitions(table.get("dbName") or entry.key[0],
                                              table.get("tableName") or entry.key[1],
                                              self.max_listing + 1)
        except errors.NoSuchObject:
            return None
        if len(docs) > self.max_listing:
            listing, size = TOO_LARGE, 0
            self.count("partition_listing_too_large")
        else:
            keys = [k["name"].lower() for k in table.get("partitionKeys") or []]
            listing = PartitionListing(keys, docs)
            size = listing.size
            self.count("partition_listing_fills")
        with self.lock:
            if self.entry(entry.key) is entry and entry.listing is None:
                entry.listing = listing
                self.charge(entry, BYTES_FACTOR * size)
        return listing

    def invalidate(self, db: str, name: str | None) -> None:
        """Drop a table (all of a database's with ``name`` None) changed on the upstream;
        loads that started before are not installed."""
        if name is None:
            self.databases.invalidate(db)
        else:
            self.databases.invalidate_tables(db)
        now = time.monotonic()
        with self.lock:
            if name is None:
                keys = [k for k in self.keys() if k[0] == db.lower()]
            else:
                keys = [(db.lower(), name.lower())]
            for key in keys:
                self._invalidated[key] = now
                if self.drop(key) is not None:
                    self.count("upstream_evictions")
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
        self._events_stop.set()
        if self._events_thread is not None and self._events_thread is not threading.current_thread():
            self._events_thread.join(timeout)
        with self.lock:
            self._loaded_at.clear()

    def _events_loop(self) -> None:
        while not self._events_stop.is_set():
            try:
                more = self.poll_upstream_once()
            except Exception as err:  # the upstream is down: TTL keeps entries bounded
                log.debug("upstream notification log: %s", err)
                more = False
            if not more:
                self._events_stop.wait(self.events_interval)

    def poll_upstream_once(self, batch: int = 1000) -> bool:
        if self.upstream_pos is None:
            self.upstream_pos = self.tables.current_event_id()
            return False
        events = self.tables.events_after(self.upstream_pos, batch)
        for event_id, event_type, db, table in events:
            if event_type in TABLE_EVENTS and db and table:
                self.invalidate(db, table)
            elif event_type == "DROP_DATABASE" and db:
                self.invalidate(db, None)
            elif event_type in DATABASE_EVENTS:
                self.databases.invalidate(db)
            elif event_type in FUNCTION_EVENTS:
                self.functions.invalidate()
            self.upstream_pos = max(self.upstream_pos, event_id)
        if events:
            self.count("upstream_events", len(events))
        return len(events) >= batch

    def counters(self) -> dict[str, int]:
        out = super().counters()
        out["hms_txn.cache.upstream.position"] = int(self.upstream_pos or 0)
        return out


