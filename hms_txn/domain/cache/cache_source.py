"""Where the metadata cache reads what it does not hold: ``TableSource``.

``CatalogSource`` reads our own database: a table, its write-id state and the log position
in one repeatable-read transaction (the position first, so the document is at least as
new as it). Extension mode gives the cache another source (``extension.UpstreamSource``:
the same state from our database, the document from the upstream metastore).
"""

from __future__ import annotations

import json
import time
from typing import Callable, Protocol, TypeVar

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.cache.cache_entries import (TABLE_EVENTS, CacheEntry, Doc, Key, Loaded,
                                                WriteIdState)
from hms_txn.domain.model.catalog import (get_table, list_partitions, partition_keys,
                                          require_database, require_table)
from hms_txn.domain.txn.txn_records import ABORTED, COMMITTED, OPEN
from hms_txn.store.schema import next_write_id, notification_log, partitions, tbls, txn_to_write_id, txns

T = TypeVar("T")
# Runs a function in a read-only transaction (the service layer's UnitOfWork.read).
Reader = Callable[[Callable[[Connection], T]], T]


class TableSource(Protocol):
    def load(self, key: Key, part_names: list[str] | None) -> Loaded:
        """The table (and the named partitions) with its write-id state and log position."""

    def database(self, name: str) -> tuple[int, Doc]:
        """(log position, database document)."""

    def partitions_since(self, entry: CacheEntry, wanted: list[str]
                         ) -> tuple[dict[str, Doc | None], int] | None:
        """More partitions of a cached table, with their size; None when they cannot be
        added to the entry (its partitions changed since the entry's position)."""

    def table(self, db: str, name: str) -> Doc:
        """The table, read without the cache."""

    def partitions(self, db: str, name: str, part_names: list[str]
                   ) -> tuple[Doc, list[tuple[str, Doc]]]:
        """The table and its named partitions, read without the cache."""


def canonical_names(table: Doc, part_names: list[str]) -> list[str]:
    keys = partition_keys(table)
    return sorted({names.make_partition_name(keys, names.partition_values_from_name(keys, n))
                   for n in part_names})


def read_write_id_state(conn: Connection, db: str, name: str
                        ) -> tuple[WriteIdState, dict[int, int]]:
    """A table's write-id state, and the write ids of its open transactions by txn id."""
    nxt = conn.execute(select(next_write_id.c.next_id)
                       .where(next_write_id.c.db_name == db, next_write_id.c.tbl_name == name)
                       ).scalar()
    hwm = 0 if nxt is None else max(0, int(nxt) - 1)
    open_ids: set[int] = set()
    aborted: set[int] = set()
    open_txns: dict[int, int] = {}
    if hwm > 0:
        t2w = txn_to_write_id.c
        rows = conn.execute(
            select(t2w.txn_id, t2w.write_id, txns.c.state)
            .select_from(txn_to_write_id.join(txns, txns.c.txn_id == t2w.txn_id))
            .where(t2w.db_name == db, t2w.tbl_name == name, txns.c.state != COMMITTED))
        for txn_id, wid, state in rows:
            if state == OPEN:
                open_ids.add(int(wid))
                open_txns[int(txn_id)] = int(wid)
            elif state == ABORTED:
                aborted.add(int(wid))
    return WriteIdState(hwm, frozenset(open_ids), frozenset(aborted)), open_txns


def _read_parts(conn: Connection, tbl_id: int, wanted: list[str]
                ) -> tuple[dict[str, Doc | None], int]:
    parts: dict[str, Doc | None] = {n: None for n in wanted}
    size = 0
    for i in range(0, len(wanted), 500):
        chunk = wanted[i:i + 500]
        for pname, raw in conn.execute(select(partitions.c.part_name, partitions.c.doc)
                                       .where(partitions.c.tbl_id == tbl_id,
                                              partitions.c.part_name.in_(chunk))):
            parts[pname] = json.loads(raw)
            size += len(raw)
    return parts, size


class CatalogSource:
    """Tables of our own catalog (see the module docstring)."""

    def __init__(self, read: Reader):
        self.read = read

    def load(self, key: Key, part_names: list[str] | None = None) -> Loaded:
        db, name = key
        started = time.monotonic()

        def work(conn: Connection) -> Loaded:
            pos = notifications.current_event_id(conn)
            row = conn.execute(select(tbls.c.tbl_id, tbls.c.doc)
                               .where(tbls.c.db_name == db, tbls.c.tbl_name == name)).first()
            if row is None:
                require_table(conn, db, name)   # raises the right NoSuchObject
            doc = json.loads(row.doc)
            state, open_txns = read_write_id_state(conn, db, name)
            parts = None
            parts_len = 0
            if part_names is not None:
                parts, parts_len = _read_parts(conn, row.tbl_id, canonical_names(doc, part_names))
            return Loaded(key, pos, doc, len(row.doc), state, open_txns, row.tbl_id, parts,
                          parts_len, started)

        return self.read(work)

    def database(self, name: str) -> tuple[int, Doc]:
        return self.read(lambda conn: (notifications.current_event_id(conn),
                                       require_database(conn, name)))

    def partitions_since(self, entry: CacheEntry, wanted: list[str]
                         ) -> tuple[dict[str, Doc | None], int] | None:
        db, name = entry.key

        def work(conn: Connection):
            pos = notifications.current_event_id(conn)
            changed = conn.execute(
                select(func.count()).select_from(notification_log)
                .where(notification_log.c.event_id > entry.pos,
                       notification_log.c.event_id <= pos,
                       notification_log.c.db_name == db, notification_log.c.tbl_name == name,
                       notification_log.c.event_type.in_(sorted(TABLE_EVENTS)))).scalar_one()
            if changed:
                return None
            tbl_id = conn.execute(select(tbls.c.tbl_id).where(
                tbls.c.db_name == db, tbls.c.tbl_name == name)).scalar()
            if tbl_id is None:
                return None
            return _read_parts(conn, tbl_id, wanted)

        return self.read(work)

    def table(self, db: str, name: str) -> Doc:
        return self.read(lambda conn: get_table(conn, db, name))

    def partitions(self, db: str, name: str, part_names: list[str]
                   ) -> tuple[Doc, list[tuple[str, Doc]]]:
        return self.read(lambda conn: list_partitions(conn, db, name, part_names=part_names))
