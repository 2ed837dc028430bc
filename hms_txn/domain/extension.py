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

``ExtensionNotificationLog`` resolves tables and partitions from the upstream for
INSERT/ACID_WRITE events and writes the events of catalog changes forwarded through us
(CREATE/ALTER/DROP_TABLE, ADD/ALTER/DROP_PARTITION, CREATE/ALTER/DROP_DATABASE) with the
objects the upstream returned, so our cache and notification readers see them.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from typing import Any

from orc_acid.layout import escape_path_name

from hms_txn.common import errors
from hms_txn.domain import names, notifications, partition_filter
from hms_txn.domain.cache import _BYTES_FACTOR, HIT, TABLE_EVENTS, MetadataCache, _Loaded
from hms_txn.domain.notifications import NotificationLog

log = logging.getLogger(__name__)

Doc = dict[str, Any]
EXPIRED = "expired"


DATABASE_EVENTS = frozenset({"CREATE_DATABASE", "ALTER_DATABASE", "DROP_DATABASE"})
# Events that may change the list of a database's table names (ALTER_TABLE: a rename).
TABLE_NAME_EVENTS = frozenset({"CREATE_TABLE", "DROP_TABLE", "ALTER_TABLE"})
# Hive 2.x logs CREATE/DROP_FUNCTION; ALTER_FUNCTION is ours (and newer Hives').
FUNCTION_EVENTS = frozenset({"CREATE_FUNCTION", "ALTER_FUNCTION", "DROP_FUNCTION"})


class FunctionSnapshot:
    """Every function of the upstream (``get_all_functions``) at one time."""

    __slots__ = ("docs", "by_db", "memo")

    def __init__(self, docs: list[Doc] | None):
        self.docs = docs            # the upstream's answer, its order (None: no list)
        # By the names as stored: Hive 2.x keeps a function name's case but looks names up
        # trimmed and lower-cased (so a mixed-case function is listed, never found).
        self.by_db: dict[str, dict[str, Doc]] = {}
        for doc in docs or []:
            self.by_db.setdefault(doc.get("dbName") or "", {})[doc.get("functionName") or ""] = doc
        self.memo: dict = {}        # the handler's converted forms

    def names(self, db: str, pattern: str | None) -> list[str]:
        """``get_functions(db, pattern)``: the matching names in name order (Hive sorts
        them; its patterns are the metastore's name patterns, matched ignoring case; a
        blank pattern matches nothing, no pattern everything)."""
        if pattern is not None and not pattern.strip():
            return []
        found = self.by_db.get(names.lower(db).strip(), {})
        return sorted(n for n in found if names.matches(pattern, n))

    def get(self, db: str, name: str) -> Doc | None:
        """The function, or None (the caller asks the upstream, for its own answer)."""
        return self.by_db.get(names.lower(db).strip(), {}).get(names.lower(name).strip())


class UpstreamFunctions:
    """The upstream's functions, read through with the table TTL.

    Clients list functions on every session or statement (Spark: ``get_functions`` when it
    resolves a name; Hive: ``get_all_functions`` at start-up); the answer is tiny and so
    cheap for the upstream that forwarding it costs more than the call. One
    ``get_all_functions`` loads every database's functions; the snapshot is dropped on any
    function event (ours, or the upstream's log when it is read) and otherwise lives
    ``hms_txn.upstream.cache.ttl``. A read that started before an invalidation does not
    install its answer. An upstream without ``get_all_functions`` (Hive < 2.1) is never
    cached: ``snapshot()`` answers None and the caller forwards."""

    def __init__(self, source, ttl: float):
        self.source = source
        self.ttl = ttl
        self._lock = threading.Lock()
        self._generation = 0
        self._snapshot: tuple[float, FunctionSnapshot] | None = None
        self.unsupported = False

    def snapshot(self) -> FunctionSnapshot | None:
        if self.unsupported or self.ttl <= 0:
            return None
        now = time.monotonic()
        with self._lock:
            hit = self._snapshot
            if hit is not None and now - hit[0] <= self.ttl:
                return hit[1]
            generation = self._generation
        try:
            docs = self.source.list_functions()
        except errors.Unsupported:
            self.unsupported = True
            return None
        snap = FunctionSnapshot(docs)
        with self._lock:
            if generation == self._generation:
                self._snapshot = (now, snap)
        return snap

    def invalidate(self) -> None:
        with self._lock:
            self._generation += 1
            self._snapshot = None


class PartitionListing:
    """All partitions of one upstream table, in the upstream's order (``get_partitions``:
    by partition name), with their names. Kept on the table's cache entry
    (``CacheEntry.listing``) and dropped with it."""

    __slots__ = ("rows", "index", "sizes")

    def __init__(self, keys: list[str], docs: list[Doc]):
        self.rows = [(names.make_partition_name(keys, d.get("values") or []), d) for d in docs]
        self.index = dict(self.rows)
        self.sizes = {n: len(json.dumps(d)) for n, d in self.rows}   # JSON length, by name

    @property
    def size(self) -> int:
        return sum(self.sizes.values())


class UpstreamAnswer:
    """The upstream's own answer to a partition read that the listing cannot order
    (``ExtensionCache.select``), memoized on the table's entry; ``value`` is returned as
    the upstream gave it."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


_TOO_LARGE = "too_large"     # CacheEntry.listing of a table with too many partitions
MAX_MEMOS = 64               # upstream answers kept per table entry (CacheEntry.memos)
# Hive's partial-spec match (the _ps calls) is a regular expression over the escaped
# partition name; a value with characters it would not take literally goes upstream.
_PS_UNSAFE = re.compile(r"[.+()$|}%]")
_STRING_TYPES = frozenset({"string"})
_INTEGRAL_TYPES = frozenset({"tinyint", "smallint", "int", "integer", "bigint"})


def _filter_is_exact(filter_text: str, key_types: dict[str, str]) -> bool:
    """Whether ``partition_filter`` evaluates ``filter_text`` as Hive 2.x's direct SQL
    does: string keys compared with string literals, integral keys with whole numbers, no
    LIKE (Hive's is a regular expression) and no NOT (which Hive's grammar refuses)."""
    if any(t not in _STRING_TYPES and t not in _INTEGRAL_TYPES for t in key_types.values()):
        return False
    try:
        tokens = partition_filter._tokens(filter_text)
    except errors.InvalidInput:
        return False
    for i, (kind, value) in enumerate(tokens):
        if kind in ("like", "not"):     # Hive's LIKE is a regex; NOT alone is no Hive syntax
            return False
        if kind != "op" or i == 0 or i + 1 >= len(tokens):
            continue
        left, right = tokens[i - 1], tokens[i + 1]
        word, lit = (left, right) if left[0] == "word" else (right, left)
        if word[0] != "word" or lit[0] not in ("str", "num"):
            return False
        key_type = key_types.get(word[1].strip("`").lower())
        if key_type is None:
            return False
        if key_type in _STRING_TYPES and lit[0] != "str":
            return False
        if key_type in _INTEGRAL_TYPES and (lit[0] != "num" or "." in lit[1]):
            return False
    return True


def select_partitions(table: Doc, listing: PartitionListing, *, limit: int | None = -1,
                      partial_values: list[str] | None = None, filter_text: str | None = None,
                      part_names: list[str] | None = None) -> list[tuple[str, Doc]] | None:
    """The (name, partition) pairs of ``listing`` a partition read asks for, in the
    upstream's order: ``partial_values`` (the ``_ps`` calls: "" matches any value; only
    when at most one partition matches, since Hive 2.x lists more in its database's row
    order, which the objects do not carry), ``filter_text`` (``get_partitions_by_filter``),
    ``part_names`` (exact names, as the upstream compares them), then the first ``limit``
    (all when negative; 0 goes upstream, whose calls differ on it). None when the upstream
    must answer: arguments it refuses, or semantics we do not reproduce exactly."""
    rows, ordered = _selection(table, listing, limit=limit, partial_values=partial_values,
                               filter_text=filter_text, part_names=part_names)
    return rows if ordered else None


def _selection(table: Doc, listing: PartitionListing, *, limit: int | None = -1,
               partial_values: list[str] | None = None, filter_text: str | None = None,
               part_names: list[str] | None = None) -> tuple[list[tuple[str, Doc]] | None, bool]:
    """``select_partitions`` as (rows, ordered): (None, False) when the upstream must
    answer for any reason; (every match, False) when the matches are right but only the
    upstream knows their order (a ``_ps`` read with more than one match, before its
    limit): only then may the upstream's answer be memoized (``ExtensionCache.select``)."""
    if limit == 0:
        return None, False    # Hive 2.x: "all" for some calls, none for others; let it say
    rows = listing.rows
    keys = [k["name"].lower() for k in table.get("partitionKeys") or []]
    if part_names is not None:
        wanted = set(part_names)
        rows = [r for r in rows if r[0] in wanted]
    if partial_values is not None:
        if not partial_values or len(partial_values) > len(keys):
            return None, False    # the upstream's error
        fixed = [(i, v) for i, v in enumerate(partial_values) if v]
        if any(_PS_UNSAFE.search(escape_path_name(v)) for _, v in fixed):
            return None, False
        if fixed:
            rows = [r for r in rows if all(r[1]["values"][i] == v for i, v in fixed)]
        if len(rows) > 1:
            # Hive 2.x answers these in its database's row order (creation order, as
            # measured on Derby), not by name; that order is not in the objects.
            return list(rows), False
    if filter_text is not None and filter_text.strip():
        types = {k["name"].lower(): (k.get("type") or "string").split("(")[0].strip().lower()
                 for k in table.get("partitionKeys") or []}
        if not _filter_is_exact(filter_text, types):
            return None, False
        try:
            predicate = partition_filter.parse(filter_text, types)
        except errors.InvalidInput:
            return None, False
        rows = [r for r in rows if predicate(dict(zip(keys, r[1]["values"])))]
    if limit is not None and limit >= 0:
        rows = rows[:limit]
    return list(rows), True


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
        self.functions = UpstreamFunctions(source, self.ttl)
        self.max_listing = min(32766, int(config["hms_txn.upstream.cache.max.partitions"]))
        self._stats.update({"partition_listing_hits": 0, "partition_listing_fills": 0,
                            "partition_listing_too_large": 0, "partition_memo_hits": 0,
                            "partition_memo_fills": 0})

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
        rows, ordered = _selection(entry.doc, listing, **how)
        if ordered or rows is None:
            return rows
        if memo is None:
            return None
        key, fetch = memo
        return UpstreamAnswer(self._memoized(entry, listing, rows, key, fetch))

    def _memoized(self, entry, listing: PartitionListing, rows, key, fetch):
        with self._lock:
            memos = entry.memos
            hit = memos.get(key) if memos is not None else None
            if hit is not None:
                memos.move_to_end(key)
                entry.tick = next(self._ticks)
        if hit is not None:
            self._count("partition_memo_hits")
            return hit[0]
        value = fetch()       # the upstream's answer; an exception is passed on, not kept
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            size = sum(len(v) + 8 for v in value)          # partition names
        else:
            size = sum(listing.sizes.get(n, 0) for n, _ in rows)
        size *= _BYTES_FACTOR
        with self._lock:
            # as the listing: only onto the entry the read started from, still installed
            # (any invalidation since dropped or replaced it)
            if self._entries.get(entry.key) is entry:
                if entry.memos is None:
                    entry.memos = OrderedDict()
                memos = entry.memos
                old = memos.pop(key, None)
                if old is not None:
                    entry.bytes -= old[1]
                    self._bytes -= old[1]
                memos[key] = (value, size)
                entry.bytes += size
                self._bytes += size
                while len(memos) > MAX_MEMOS:
                    _, (_, dropped) = memos.popitem(last=False)
                    entry.bytes -= dropped
                    self._bytes -= dropped
                self._count("partition_memo_fills")
                self._enforce_bounds()
        return value

    def _listed_entry(self, db: str, name: str) -> tuple[Any, PartitionListing] | None:
        if not self._running or self.max_listing <= 0 or self.ttl <= 0:
            return None
        key = (names.lower(db), names.lower(name))
        entry = self._entries.get(key)
        verdict = "cold" if entry is None else self._verdict(entry, None, None)
        if verdict in ("cold", EXPIRED):
            try:
                self.get_table(db, name)           # loads and installs the entry
            except errors.NoSuchObject:
                return None
            entry = self._entries.get(key)
            verdict = "cold" if entry is None else self._verdict(entry, None, None)
        if verdict != HIT:
            return None
        listing = entry.listing
        if listing is None:
            listing = self._fill_listing(entry)
        elif listing is not _TOO_LARGE:
            entry.tick = next(self._ticks)
            self._count("partition_listing_hits")
        if listing is None or listing is _TOO_LARGE:
            return None
        return entry, listing

    def _fill_listing(self, entry):
        table = entry.doc
        try:
            docs = self.source.get_partitions(table.get("dbName") or entry.key[0],
                                              table.get("tableName") or entry.key[1],
                                              self.max_listing + 1)
        except errors.NoSuchObject:
            return None
        if len(docs) > self.max_listing:
            listing, size = _TOO_LARGE, 0
            self._count("partition_listing_too_large")
        else:
            keys = [k["name"].lower() for k in table.get("partitionKeys") or []]
            listing = PartitionListing(keys, docs)
            size = listing.size
            self._count("partition_listing_fills")
        with self._lock:
            if self._entries.get(entry.key) is entry and entry.listing is None:
                entry.listing = listing
                added = _BYTES_FACTOR * size
                entry.bytes += added
                self._bytes += added
                self._enforce_bounds()
        return listing

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
        elif ev.event_type in FUNCTION_EVENTS:
            self.functions.invalidate()
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
            elif event_type in FUNCTION_EVENTS:
                self.functions.invalidate()
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

    def function_changed(self, event_type: str, db: str, name: str, function: Doc | None) -> int:
        """CREATE/ALTER/DROP_FUNCTION (Hive's messages: db, functionObjJson or
        functionName)."""
        message: Doc = {"db": names.lower(db), "functionName": names.lower(name)}
        obj = self._obj_json("Function", function)
        if obj is not None:
            message["functionObjJson"] = obj
        return self._log(event_type, db, None, message)

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
