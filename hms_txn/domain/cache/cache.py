"""A ValidWriteIdList-aware metadata cache, kept current by tailing the notification log.

Each server process keeps tables (and, for ``get_partitions_by_names``, partitions) in
memory. Several processes on one database stay consistent without talking to each other:
every change is in the notification log, written in the change's own database transaction
with dense, commit-ordered ids, and a background *tailer* applies the log in order.

What an entry holds
-------------------
An entry for table K is the table document read from the database at log position ``pos``
(the last event id visible to the read's snapshot, read in the same repeatable-read
transaction), together with K's write-id state at that position: the highest allocated
write id, the write ids of open transactions and those of aborted ones. The tailer moves
the state forward (ALLOC_WRITE_ID_EVENT adds open ids, COMMIT_TXN removes them, ABORT_TXN
marks them aborted) and drops the entry when an event changes K's metadata (CREATE/ALTER/
DROP_TABLE, ADD/ALTER/DROP_PARTITION, and the two that name K only in their message: the
ALTER_TABLE of a rename, whose row names the new name, and a COMMIT_TXN whose keyValue set
a parameter of K, for which Hive writes no ALTER_TABLE) after ``pos``; it then reloads the
entry from the database. Events at or below an entry's ``pos`` are already in it and are skipped, so the
entry only moves forward: reads served from one process are monotonic.

The validity rule
-----------------
A read of a transactional table that carries a ValidWriteIdList S is answered from the
cache only when S is *equivalent* to the entry's write-id state W: both make the same write
ids valid. Aborted ids (in either) never make metadata visible and are ignored; an id open
in W and above S's high watermark is invalid in both, so "HWM 5, 6 open" equals "HWM 5".
When S sees a commit W has not applied yet (the reader committed a write, or read a
snapshot taken after one, before this process's tailer got there) S is *ahead* and the read
goes to the database; when S is older than W it is *behind* and goes to the database too.
So a snapshot that includes a committed write never gets metadata older than that write,
a reader sees its own writes (inside its transaction its own write id is valid in S and
open in W), and after the tailer catches up the new snapshot hits the cache again.

Non-transactional and external tables have no write ids: reads (with or without a list)
get the cached copy, which the tailer keeps eventually consistent (within the tail
interval) across processes. Writes made through *this* process evict their tables at
commit (a hook on the database connection), so a client always sees its own change on the
process it made it through. A transactional table read without a list goes to the
database; ``get_table_req`` can be made to reject it instead (``strict``). Databases are
cached like non-transactional tables (CREATE/ALTER/DROP_DATABASE drop an entry): query
planning asks for one nearly as often as for a table.

Filling from the database
-------------------------
A miss reads the table, its write-id state and the log position in one repeatable-read
transaction. The result is installed only if the table is not cached yet, the read's
position is not behind the tailer (else the tailer may already have passed, and skipped, an
event that the read does not reflect) and not behind a local write to that table. Existing
entries advance only through the tailer.

Metrics (``counters()``): hits, misses and misses by reason, events applied, fills,
evictions, entries, estimated bytes, tailer position and lag in events and seconds.

Where the cache reads from is its ``TableSource`` (``cache_source``): our database, or in
extension mode the upstream metastore. The thread that reads the log and hands it over a
batch at a time (``apply``) is its ``Tailer`` (``tailer``). Extension mode refines the
cache through the hooks ``admit``, ``expired``, ``forget`` and ``applied``
(``extension.ExtensionCache``).

This module never imports Thrift: a reader may keep what it derives from an entry (the
service layer's converted struct) in a weak mapping keyed by the entry (entries are weakly
referable), so it is dropped with the entry.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Iterable

from orc_acid.valid_ids import ValidIdListError, ValidWriteIdList

from hms_txn.common.errors import InvalidInput
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.events.event_messages import ALTERED_TABLES_KEY, other_changed_tables
from hms_txn.domain.events.event_messages.formats import JSON_MESSAGE_FORMAT, decode
from hms_txn.domain.cache.cache_entries import (AHEAD, BEHIND, BYTES_FACTOR, DATABASE_EVENTS,
                                                EXPIRED, HIT, MISS_REASONS, RELOAD_EVENTS,
                                                TABLE_EVENTS, CacheEntry, DatabaseEntry,
                                                DatabaseRead, Doc, Key, Loaded, TableRead, compare)
from hms_txn.domain.cache.cache_source import Reader, TableSource, canonical_names
from hms_txn.domain.cache.tailer import Tailer
from hms_txn.domain.model.catalog import is_external, is_transactional

log = logging.getLogger(__name__)

__all__ = ["AHEAD", "BEHIND", "HIT", "MetadataCache", "compare"]

_VERDICT_MEMO = 64       # snapshot strings remembered per write-id state


# ------------------------------------------------------------------------------ the cache

class MetadataCache:
    def __init__(self, config, read: Reader, source: TableSource):
        self._read = read
        self.source = source
        self.enabled = bool(config["hms_txn.cache.enabled"])
        interval = max(0.005, float(config["hms_txn.cache.tail.interval"]))
        self.max_entries = int(config["hms_txn.cache.max.entries"])
        self.max_bytes = int(config["hms_txn.cache.max.bytes"])
        self.strict = bool(config["hms_txn.cache.strict.writeids"])
        # The thread that applies the log (its pause hook is fb303's, see service.fb303).
        self.tailer = Tailer(self, read, interval,
                             pausable=bool(config["hms_txn.cache.tailer.pausable"]))
        # Non-transactional reads stop using the cache when the tailer has not completed a
        # poll for this long (a lost database, a wedged thread, a paused tailer).
        self.stale_after = max(5.0, 50 * interval)

        self._lock = threading.RLock()       # entries, txn map, position
        self._entries: dict[Key, CacheEntry] = {}
        self._txn_map: dict[int, set[tuple[Key, int]]] = {}
        self._local: dict[Key, int] = {}     # key -> id of a local write's event
        self._databases: dict[str, DatabaseEntry] = {}
        self._local_dbs: dict[str, int] = {}  # database -> id of a local write's event
        self._bytes = 0
        self._ticks = itertools.count(1)
        self.pos = 0
        self._running = False
        self._stats_lock = threading.Lock()
        self._stats: dict[str, int] = {"hits": 0, "misses": 0, "events_applied": 0,
                                       "fills": 0, "evictions": 0, "reloads": 0, "resets": 0,
                                       "local_evictions": 0}
        for reason in MISS_REASONS:
            self._stats["misses." + reason] = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "MetadataCache":
        if not self.enabled or self.tailer.started:
            return self
        start_pos = self._read(notifications.current_event_id)
        with self._lock:
            self.pos = start_pos
            self._running = True
            self.tailer.start(start_pos)
        log.info("metadata cache started at notification event %d", start_pos)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.tailer.stop(timeout)
        with self._lock:
            self._running = False
            self._entries.clear()
            self._databases.clear()
            self._txn_map.clear()
            self._bytes = 0

    @property
    def running(self) -> bool:
        return self._running

    # ------------------------------------------------------------------ counters

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[name] += n

    def _miss(self, reason: str) -> None:
        with self._stats_lock:
            self._stats["misses"] += 1
            self._stats["misses." + reason] += 1

    def counters(self) -> dict[str, int]:
        with self._stats_lock:
            out = {f"hms_txn.cache.{k}": int(v) for k, v in self._stats.items()}
        out.update({
            "hms_txn.cache.enabled": int(self.enabled),
            "hms_txn.cache.running": int(self._running),
            "hms_txn.cache.paused": int(self.tailer.paused),
            "hms_txn.cache.entries": len(self._entries),
            "hms_txn.cache.databases": len(self._databases),
            "hms_txn.cache.bytes": int(self._bytes),
            "hms_txn.cache.position": int(self.tailer.reported_pos),
            "hms_txn.cache.lag.events": int(self.tailer.lag_events),
            "hms_txn.cache.lag.seconds": int(self.tailer.lag_seconds),
            "hms_txn.cache.lag.ms": int(self.tailer.lag_seconds * 1000),
        })
        return out

    # ------------------------------------------------------------------ reads

    def get_table(self, db: str, name: str, valid_write_ids: str | None = None, *,
                  require_write_ids: bool = False) -> TableRead:
        """The table as of the reader's snapshot (see the module docstring for the rule).

        ``require_write_ids``: the caller is ``get_table_req``; with the strict setting a
        transactional table without a ValidWriteIdList is refused.
        """
        key = (names.lower(db), names.lower(name))
        snapshot = self._parse(key, valid_write_ids)
        if not self._running:
            doc = self.source.table(db, name)
            self._check_strict(doc, snapshot, require_write_ids)
            return TableRead(doc)
        entry = self._entries.get(key)
        if entry is not None:
            reason = self.verdict(entry, valid_write_ids, snapshot)
            if reason == HIT:
                entry.tick = next(self._ticks)
                self._count("hits")
                return TableRead(entry.doc, entry)
            if reason == "no_writeid_list":
                self._check_strict(entry.doc, snapshot, require_write_ids)
        else:
            reason = "cold"
        self._miss(reason)
        loaded = self.source.load(key, None)
        self._check_strict(loaded.doc, snapshot, require_write_ids)
        self._install(loaded)
        return TableRead(loaded.doc)

    def get_database(self, name: str) -> DatabaseRead:
        """The database, from the cache while the tailer is current (like a plain table:
        within the tail interval across processes, at once for writes through this one)."""
        key = names.lower(name)
        if not self._running:
            return DatabaseRead(self.source.database(key)[1])
        entry = self._databases.get(key)
        if entry is None:
            reason = "cold"
        elif time.monotonic() - self.tailer.last_poll > self.stale_after:
            reason = "tailer_stale"
        else:
            self._count("hits")
            return DatabaseRead(entry.doc, entry)
        self._miss(reason)
        pos, doc = self.source.database(key)
        with self._lock:
            # As _install: a read behind the tailer or behind a local write could be stale.
            if (self._running and pos >= self.pos and pos >= self._local_dbs.get(key, 0)
                    and key not in self._databases):
                if len(self._databases) >= self.max_entries:
                    self._databases.clear()
                self._databases[key] = DatabaseEntry(key, doc, pos)
                self._count("fills")
        return DatabaseRead(doc)

    def get_partitions_by_names(self, db: str, name: str, part_names: Iterable[str],
                                valid_write_ids: str | None = None
                                ) -> tuple[Doc, list[tuple[str, Doc]]]:
        """The table and its named partitions (in name order) as of the reader's snapshot."""
        key = (names.lower(db), names.lower(name))
        snapshot = self._parse(key, valid_write_ids)
        part_names = list(part_names or [])
        if not self._running:
            return self.source.partitions(db, name, part_names)
        entry = self._entries.get(key)
        reason = "cold" if entry is None else self.verdict(entry, valid_write_ids, snapshot)
        if reason != HIT:
            self._miss(reason)
            wanted = self._normalize(None, part_names)
            loaded = self.source.load(key, wanted)
            self._install(loaded)
            return loaded.doc, [(n, d) for n, d in sorted(loaded.parts.items()) if d is not None]
        entry.tick = next(self._ticks)
        wanted = self._normalize(entry.doc, part_names, entry.parts)
        missing = [n for n in wanted if n not in entry.parts]
        if missing:
            self._miss("cold")
            self._fill_partitions(entry, missing)
            parts = {n: entry.parts.get(n) for n in wanted}
            if any(n not in entry.parts for n in wanted):   # could not be installed
                return self.source.partitions(db, name, part_names)
        else:
            self._count("hits")
            parts = {n: entry.parts[n] for n in wanted}
        return entry.doc, [(n, d) for n, d in sorted(parts.items()) if d is not None]

    def _normalize(self, table: Doc | None, part_names: list[str],
                   known: dict | None = None) -> list[str]:
        """The canonical, sorted, distinct names of ``part_names``. A name already among
        ``known`` (the entry's cached partitions, stored under canonical names) is canonical
        as it stands, so only the others are parsed and rebuilt."""
        if table is None:
            return part_names
        known = known or {}
        return sorted({n for n in part_names if n in known}
                      | set(canonical_names(table, [n for n in part_names if n not in known])))

    @staticmethod
    def _parse(key: Key, text: str | None) -> ValidWriteIdList | None:
        if text is None:
            return None
        try:
            return ValidWriteIdList.parse(text)
        except ValidIdListError as err:
            raise InvalidInput(f"invalid validWriteIdList for {key[0]}.{key[1]}: {err}") from None

    def _check_strict(self, doc: Doc, snapshot, require: bool) -> None:
        if (require and self.strict and snapshot is None and is_transactional(doc)
                and not is_external(doc)):
            raise InvalidInput(
                f"get_table_req on transactional table {doc.get('dbName')}.{doc.get('tableName')} "
                f"needs a validWriteIdList: hms_txn.cache.strict.writeids=true requires readers "
                f"of transactional tables to say which snapshot they read, so the metadata "
                f"cache can tell whether its copy is current for it")

    def verdict(self, entry: CacheEntry, text: str | None, snapshot) -> str:
        """Why ``entry`` cannot answer a reader with snapshot ``snapshot`` (its text:
        ``text``), or HIT."""
        if self.expired(entry):
            with self._lock:
                if self._entries.get(entry.key) is entry:
                    self.drop(entry.key)
            return EXPIRED
        if not entry.transactional:
            if time.monotonic() - self.tailer.last_poll > self.stale_after:
                return "tailer_stale"
            return HIT
        if snapshot is None:
            return "no_writeid_list"
        state, memo = entry.snap
        verdict = memo.get(text)
        if verdict is None:
            table = snapshot.table_name
            if table is not None and table.lower() != f"{entry.key[0]}.{entry.key[1]}":
                verdict = "other_table"
            else:
                verdict = compare(state, snapshot)
            if len(memo) >= _VERDICT_MEMO:
                memo.clear()
            memo[text] = verdict
        return verdict

    # ------------------------------------------------------------------ filling

    def _install(self, loaded: Loaded) -> bool:
        """Put a database read into the cache if that cannot let a stale copy in."""
        key = loaded.key
        with self._lock:
            if (not self._running or loaded.pos < self.pos
                    or loaded.pos < self._local.get(key, 0) or key in self._entries
                    or not self.admit(loaded)):
                return False
            nbytes = BYTES_FACTOR * (loaded.raw_len + loaded.parts_len)
            entry = CacheEntry(key, loaded.doc, loaded.pos, loaded.state, nbytes)
            if loaded.parts:
                entry.parts.update(loaded.parts)
            entry.tick = next(self._ticks)
            self._entries[key] = entry
            self._bytes += nbytes
            for txn_id, wid in loaded.open_txns.items():
                self._txn_map.setdefault(txn_id, set()).add((key, wid))
            self._count("fills")
            self._enforce_bounds()
            return True

    def _fill_partitions(self, entry: CacheEntry, wanted: list[str]) -> None:
        """Read partitions for a cached table; keep them only if no event changed the table's
        partitions between the entry's position and the read."""
        found = self.source.partitions_since(entry, wanted)
        if found is None:
            return
        parts, size = found
        with self._lock:
            if self._entries.get(entry.key) is not entry:
                return
            entry.parts.update(parts)
            self._charge(entry, BYTES_FACTOR * size)

    def _enforce_bounds(self) -> None:
        if len(self._entries) <= self.max_entries and self._bytes <= self.max_bytes:
            return
        ordered = sorted(self._entries.values(), key=lambda e: e.tick)
        target_n = int(self.max_entries * 0.9)
        target_b = int(self.max_bytes * 0.9)
        for entry in ordered:
            if len(self._entries) <= target_n and self._bytes <= target_b:
                break
            self.drop(entry.key)

    def drop(self, key: Key) -> CacheEntry | None:
        """Remove a table's entry (caller holds ``lock``); the entry, if there was one."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.bytes
            self._count("evictions")
            self.forget(key)
        return entry

    def _charge(self, entry: CacheEntry, nbytes: int) -> None:
        """Count ``nbytes`` more held by ``entry`` (caller holds ``lock``), evicting the
        least recently used entries beyond the bounds."""
        entry.bytes += nbytes
        self._bytes += nbytes
        self._enforce_bounds()

    # ------------------------------------------------------------------ for refinements

    @property
    def lock(self) -> threading.RLock:
        """Guards the entries; what changes an entry's contents holds it."""
        return self._lock

    def entry(self, key: Key) -> CacheEntry | None:
        return self._entries.get(key)

    def keys(self) -> list[Key]:
        return list(self._entries)

    def touch(self, entry: CacheEntry) -> None:
        """Mark ``entry`` used (least recently used entries go first)."""
        entry.tick = next(self._ticks)

    def charge(self, entry: CacheEntry, nbytes: int) -> bool:
        """Count ``nbytes`` more held by ``entry`` if it is still the installed entry of
        its table (taking ``lock``); whether it was."""
        with self._lock:
            if self._entries.get(entry.key) is not entry:
                return False
            self._charge(entry, nbytes)
            return True

    def count(self, name: str, n: int = 1) -> None:
        self._count(name, n)

    def add_counters(self, names_: Iterable[str]) -> None:
        """Declare counters a refinement keeps (they start at 0)."""
        with self._stats_lock:
            for name in names_:
                self._stats.setdefault(name, 0)

    def admit(self, loaded: Loaded) -> bool:
        """Hook: whether a read may be installed (besides the cache's own rules)."""
        return True

    def expired(self, entry: CacheEntry) -> bool:
        """Hook: whether an entry must be read again before it answers."""
        return False

    def forget(self, key: Key) -> None:
        """Hook: an entry was dropped (caller holds ``lock``)."""

    def applied(self, event: notifications.Event) -> None:
        """Hook: the tailer applied ``event`` (caller holds ``lock``)."""

    # ------------------------------------------------------------------ local writes

    def record_local_writes(self, written: Iterable[notifications.Written]) -> None:
        """Events this process wrote (the unit of work hands them over as the writing
        transaction commits): evict the tables they touch, and refuse fills read before
        them (read-your-own-writes here)."""
        if not self._running:
            return
        with self._lock:
            for event_type, db, tbl, event_id, also in written:
                if event_type in DATABASE_EVENTS and db:
                    name = db.lower()
                    self._local_dbs[name] = max(event_id, self._local_dbs.get(name, 0))
                    if self._databases.pop(name, None) is not None:
                        self._count("local_evictions")
                    continue
                keys = list(also)
                if event_type in TABLE_EVENTS and db and tbl:
                    keys.append((db.lower(), tbl.lower()))
                for key in keys:
                    if event_id > self._local.get(key, 0):
                        self._local[key] = event_id
                    if self.drop(key) is not None:
                        self._count("local_evictions")

    # ------------------------------------------------------------------ the log

    def apply(self, events: list[notifications.Event]) -> list[Key] | None:
        """Apply a batch of events the tailer read after ``pos``, in order: the keys of the
        entries it dropped that are worth reloading now; None when the batch came too late
        (the tailer was paused or the cache stopped while it was read)."""
        reload: list[Key] = []
        with self._lock:
            if self.tailer.paused or not self._running:
                return None
            if events and events[0].event_id != self.pos + 1:
                # Ids are dense: a gap means events were purged before we read them.
                log.warning("metadata cache: notification events %d..%d were purged before "
                            "they were applied; dropping the cache", self.pos + 1,
                            events[0].event_id - 1)
                self._reset()
            for ev in events:
                self._apply(ev, reload)
                self.applied(ev)
                self.pos = ev.event_id
            if events:
                self._count("events_applied", len(events))
                self._local = {k: v for k, v in self._local.items() if v > self.pos}
                self._local_dbs = {k: v for k, v in self._local_dbs.items() if v > self.pos}
        return reload

    def reload(self, key: Key) -> None:
        """Read a table the log changed into the cache again, if the install rule lets it."""
        try:
            if self._install(self.source.load(key, None)):
                self._count("reloads")
        except Exception:   # dropped meanwhile, or a hiccup: the next read fills it
            log.debug("metadata cache: reloading %s.%s failed", *key, exc_info=True)

    def _reset(self) -> None:
        self._entries.clear()
        self._databases.clear()
        self._txn_map.clear()
        self._bytes = 0
        self._count("resets")

    def _changed(self, ev: notifications.Event, key: Key, reload: list[Key] | None) -> None:
        """``ev`` changed table ``key``: drop its entry if older (and reload it when
        ``reload`` is given)."""
        entry = self._entries.get(key)
        if entry is not None and ev.event_id > entry.pos:
            self.drop(key)
            if reload is not None:
                reload.append(key)

    def _apply(self, ev: notifications.Event, reload: list[Key]) -> None:
        etype = ev.event_type
        if etype in TABLE_EVENTS:
            if ev.db_name and ev.tbl_name:
                self._changed(ev, (ev.db_name.lower(), ev.tbl_name.lower()),
                              reload if etype in RELOAD_EVENTS else None)
            if etype == "ALTER_TABLE" and self._entries:      # a rename: the old name too
                for key in other_changed_tables(etype, _message(ev), ev.db_name, ev.tbl_name):
                    self._changed(ev, key, None)
        elif etype == "ALLOC_WRITE_ID_EVENT":
            msg = _message(ev)
            key = ((msg.get("dbName") or "").lower(), (msg.get("tableName") or "").lower())
            entry = self._entries.get(key)
            if entry is None or ev.event_id <= entry.pos:
                return
            pairs = list(zip(msg.get("txnIdList") or [], msg.get("writeIdList") or []))
            entry.set_state(entry.state.allocated(w for _, w in pairs))
            for txn_id, wid in pairs:
                self._txn_map.setdefault(int(txn_id), set()).add((key, int(wid)))
        elif etype in ("COMMIT_TXN", "ABORT_TXN"):
            altered = etype == "COMMIT_TXN" and (ev.message_format != JSON_MESSAGE_FORMAT
                                                 or ALTERED_TABLES_KEY in ev.message)
            if not self._txn_map and not altered:
                return
            msg = _message(ev)
            for key in other_changed_tables(etype, msg, None, None):
                self._changed(ev, key, reload)
            txn_id = msg.get("txnid")
            if txn_id is None:
                return
            for key, wid in self._txn_map.pop(int(txn_id), ()):
                entry = self._entries.get(key)
                if entry is None or ev.event_id <= entry.pos:
                    continue
                state = entry.state
                entry.set_state(state.committed(wid) if etype == "COMMIT_TXN"
                                else state.aborted_id(wid))
        elif etype in DATABASE_EVENTS and ev.db_name:
            db = ev.db_name.lower()
            entry = self._databases.get(db)
            if entry is not None and ev.event_id > entry.pos:
                del self._databases[db]
            if etype == "DROP_DATABASE":
                for key in [k for k, e in self._entries.items()
                            if k[0] == db and ev.event_id > e.pos]:
                    self.drop(key)


def _message(ev: notifications.Event) -> dict:
    """The message of an event, in whichever format it was written."""
    return decode(ev.message, ev.message_format)
