"""Extension mode's read-through copies of what lives in the upstream metastore, besides
tables: databases and their table names (``UpstreamDatabases``), functions
(``UpstreamFunctions``), and the answer of partition reads from a table's listing
(``PartitionListing``, ``select_partitions``). See docs/extension-mode.md.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from orc_acid.layout import escape_path_name

from hms_txn.common import errors
from hms_txn.domain.model import names, partition_filter

Doc = dict[str, Any]

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


TOO_LARGE = "too_large"     # CacheEntry.listing of a table with too many partitions
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
    rows, ordered = selection(table, listing, limit=limit, partial_values=partial_values,
                               filter_text=filter_text, part_names=part_names)
    return rows if ordered else None


def selection(table: Doc, listing: PartitionListing, *, limit: int | None = -1,
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


