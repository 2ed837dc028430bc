"""What the metadata cache holds: entries, their write-id state, and the rule that says
whether a reader's snapshot may be answered from an entry (``compare``; see
``domain.cache.cache`` for the whole design)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from orc_acid.valid_ids import ValidWriteIdList

from hms_txn.domain.model.catalog import is_external, is_transactional

Doc = dict[str, Any]
Key = tuple[str, str]

# Column statistics events: they change COLUMN_STATS_ACCURATE and the write id of a table
# or partition.
STATS_EVENTS = frozenset({"UPDATE_TBL_COL_STAT_EVENT", "DELETE_TBL_COL_STAT_EVENT",
                          "UPDATE_PART_COL_STAT_EVENT", "DELETE_PART_COL_STAT_EVENT"})
# Events that change a table's document or its partitions.
TABLE_EVENTS = frozenset({"CREATE_TABLE", "ALTER_TABLE", "DROP_TABLE",
                          "ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"}) | STATS_EVENTS
# After these the table still exists: the tailer reloads a dropped entry at once.
RELOAD_EVENTS = frozenset({"ALTER_TABLE", "ADD_PARTITION", "ALTER_PARTITION",
                           "DROP_PARTITION"}) | STATS_EVENTS

# Events that change a database's document.
DATABASE_EVENTS = frozenset({"CREATE_DATABASE", "ALTER_DATABASE", "DROP_DATABASE"})

HIT, AHEAD, BEHIND = "hit", "snapshot_ahead", "snapshot_behind"
# A miss reason of refinements whose entries expire (extension mode's TTL).
EXPIRED = "expired"
MISS_REASONS = ("cold", AHEAD, BEHIND, "no_writeid_list", "other_table", "tailer_stale",
                "not_running")

BYTES_FACTOR = 4         # JSON text length -> estimated resident bytes (dicts + wire form)


# ------------------------------------------------------------------------------ write ids

@dataclass(frozen=True)
class WriteIdState:
    """A table's write ids at one log position."""
    hwm: int = 0
    open: frozenset = frozenset()
    aborted: frozenset = frozenset()

    def allocated(self, write_ids: Iterable[int]) -> "WriteIdState":
        ids = frozenset(int(w) for w in write_ids)
        if not ids:
            return self
        return WriteIdState(max(self.hwm, max(ids)), self.open | ids, self.aborted)

    def committed(self, write_id: int) -> "WriteIdState":
        return WriteIdState(max(self.hwm, write_id), self.open - {write_id}, self.aborted)

    def aborted_id(self, write_id: int) -> "WriteIdState":
        return WriteIdState(max(self.hwm, write_id), self.open - {write_id},
                            self.aborted | {write_id})


def _top_valid(hwm: int, invalid, ignore) -> int:
    """Highest id <= hwm that is valid and not ignored (0 when none)."""
    h = hwm
    while h > 0 and (h in invalid or h in ignore):
        h -= 1
    return h


def compare(state: WriteIdState, snapshot: ValidWriteIdList) -> str:
    """HIT when ``snapshot`` makes the same write ids valid as ``state`` (aborted ids ignored);
    otherwise AHEAD (the snapshot sees a commit the state does not) or BEHIND."""
    ignore = state.aborted | frozenset(snapshot.aborted_ids)
    s_invalid = frozenset(snapshot.exceptions)
    w_invalid = state.open | state.aborted
    h_s = _top_valid(snapshot.high_watermark, s_invalid, ignore)
    h_w = _top_valid(state.hwm, w_invalid, ignore)
    if h_s != h_w:
        return AHEAD if h_s > h_w else BEHIND
    s_open = {x for x in s_invalid if x < h_s and x not in ignore}
    w_open = {x for x in state.open if x < h_w and x not in ignore}
    if s_open == w_open:
        return HIT
    # Some id is open on one side and valid on the other.
    return AHEAD if (w_open - s_open) else BEHIND


# ------------------------------------------------------------------------------ entries

class CacheEntry:
    """One cached table. ``doc`` and ``state`` are never mutated in place (readers hold
    them without a lock); ``parts`` only grows. Weakly referable: a reader may keep what it
    derives from an entry (the service layer's converted Thrift struct) keyed by the entry,
    for as long as the entry lives."""

    __slots__ = ("key", "doc", "pos", "transactional", "snap", "parts", "bytes", "tick",
                 "listing", "memos", "__weakref__")

    def __init__(self, key: Key, doc: Doc, pos: int, state: WriteIdState, nbytes: int):
        self.key = key
        self.doc = doc
        self.pos = pos
        self.transactional = is_transactional(doc) and not is_external(doc)
        self.snap: tuple[WriteIdState, dict[str, str]] = (state, {})
        self.parts: dict[str, Doc | None] = {}
        self.bytes = nbytes
        self.tick = 0
        # Extension mode: all of the table's partitions, set once (extension.PartitionListing)
        self.listing: Any = None
        # Extension mode: the upstream's own answers to reads the listing cannot order
        # (ExtensionCache.select), most recently used last; created on first use
        self.memos: Any = None

    @property
    def state(self) -> WriteIdState:
        return self.snap[0]

    def set_state(self, state: WriteIdState) -> None:
        self.snap = (state, {})


@dataclass
class TableRead:
    """A table document and, when it came from the cache, its entry."""
    doc: Doc
    entry: CacheEntry | None = None

    @property
    def cached(self) -> bool:
        return self.entry is not None


class DatabaseEntry:
    """One cached database: its document as read at log position ``pos`` (weakly
    referable, as ``CacheEntry``)."""

    __slots__ = ("name", "doc", "pos", "__weakref__")

    def __init__(self, name: str, doc: Doc, pos: int):
        self.name = name
        self.doc = doc
        self.pos = pos


@dataclass(frozen=True)
class DatabaseRead:
    """A database document and, when it came from the cache, its entry."""
    doc: Doc
    entry: DatabaseEntry | None = None


@dataclass
class Loaded:
    """A table read by a ``TableSource``: its document, write-id state and open write ids
    of transactions (``open_txns``: txn id -> write id) as of log position ``pos``, and the
    partitions asked for (name -> document, None for a missing one). ``started``: when the
    read began (monotonic clock)."""
    key: Key
    pos: int
    doc: Doc
    raw_len: int
    state: WriteIdState
    open_txns: dict[int, int]
    tbl_id: int
    parts: dict[str, Doc | None] | None = None
    parts_len: int = 0
    started: float = 0.0


