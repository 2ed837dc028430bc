"""Messages with holes, for the database to finish: the JSON text of a Hive 4 message, built
by this package's builders (so its keys, their order and every value are theirs), cut
where a value goes that only the database knows when it writes the event (the ids it hands
out, the transaction it aborts, the compaction it finds). PostgreSQL's transaction
functions (hms_txn.store.pg_functions) fill each hole with the value's JSON text
(``hms_fill``: ``parts[0] + value[0] + parts[1] + ...``) and encode the message in the
log's format, so the text they write is the text the Python path writes for the same
values (tests/hms_txn/test_pg_functions.py holds both to it). A template travels as one
text, its parts joined by U+001F, a control character JSON text never holds unescaped
(one text parameter costs the driver a fraction of what a text array does).

A template is built from the message a builder returns for sentinel values, which are cut
out; it changes only with the message's timestamp (seconds), so each kind is built once a
second, not per call.
"""

from __future__ import annotations

import threading
from typing import Callable

from hms_txn.domain.events.event_messages import transactions as tm
from hms_txn.domain.events.event_messages.base import MessageContext
from hms_txn.domain.events.event_messages.formats import to_json

SEPARATOR = "\x1f"
# Sentinels no real value equals: numbers past any id, strings no name contains.
_N = [7311911000000000001 + i for i in range(6)]
_S = [f"\u27e6HOLE{i}\u27e7" for i in range(6)]


def cut(text: str, holes: list[str]) -> list[str]:
    """``text`` cut at each of ``holes`` (in this order, each exactly once)."""
    parts = []
    rest = text
    for hole in holes:
        before, found, rest = rest.partition(hole)
        if not found or hole in before or hole in rest:
            raise AssertionError(f"message template: {hole!r} is not in {text!r} exactly once")
        parts.append(before)
    parts.append(rest)
    return parts


class Templates:
    """The templates of the transaction events, per ``MessageContext``, cached by second."""

    def __init__(self, ctx: MessageContext):
        self.ctx = ctx
        self._cache: dict[object, tuple[int, str]] = {}
        self._lock = threading.Lock()

    def _get(self, key, build: Callable[[], list[str]]) -> str:
        now = self.ctx.now()
        found = self._cache.get(key)
        if found is not None and found[0] == now:
            return found[1]
        parts = build()
        if any(SEPARATOR in part for part in parts):
            raise AssertionError(f"message template holds its separator: {parts!r}")
        template = SEPARATOR.join(parts)
        with self._lock:
            if len(self._cache) > 1000:          # allocation templates of many tables
                self._cache.clear()
            self._cache[key] = (now, template)
        return template

    def open_txns(self) -> str:
        """OPEN_TXN; holes: fromTxnId, toTxnId."""
        return self._get("open", lambda: cut(
            to_json(tm.open_txns(self.ctx, _N[0], _N[1]).message), [str(_N[0]), str(_N[1])]))

    def commit_txn(self) -> str:
        """COMMIT_TXN (without altered tables); hole: txnid."""
        return self._get("commit", lambda: cut(
            to_json(tm.commit_txn(self.ctx, _N[0]).message), [str(_N[0])]))

    def abort_txn(self) -> str:
        """ABORT_TXN; hole: txnid."""
        return self._get("abort", lambda: cut(
            to_json(tm.abort_txn(self.ctx, _N[0]).message), [str(_N[0])]))

    def commit_compaction(self) -> str:
        """COMMIT_COMPACTION_EVENT; holes: txnid, compactionId, type, dbname, tableName,
        partName (strings: their JSON text, quotes included; partName may be null)."""
        def build() -> list[str]:
            message = tm.commit_compaction(self.ctx, _N[0], _N[1], _S[2], _S[3], _S[4],
                                           _S[5]).message
            return cut(to_json(message), [str(_N[0]), str(_N[1])]
                       + [to_json(s) for s in _S[2:6]])
        return self._get("compaction", build)

    def alloc_write_ids(self, db: str, table: str) -> str:
        """ALLOC_WRITE_ID_EVENT of ``db``.``table``; holes: txnIdList, writeIdList (JSON
        arrays)."""
        return self._get(("alloc", db, table), lambda: cut(
            to_json(tm.alloc_write_ids(self.ctx, db, table, [(_N[0], _N[1])]).message),
            [f"[{_N[0]}]", f"[{_N[1]}]"]))
