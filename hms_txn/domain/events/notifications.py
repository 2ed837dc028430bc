"""The notification log: one event per metastore change, written in the change's own
database transaction so a reader of the log never sees an event for a rolled-back change
nor misses one for a committed change.

Event ids come from a single-row counter updated under a row lock; the lock is held until
the writing transaction commits, so ids are dense and appear in commit order even with
several server processes writing at once.
"""

from __future__ import annotations

import time
from typing import Iterable, NamedTuple, Sequence

from sqlalchemy import bindparam, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from hms_txn.domain.events.event_messages import (DEFAULT_CATALOG, LogEntry, WriteNotification,
                                                  other_changed_tables)
from hms_txn.domain.events.event_messages.base import join_write_event_files
from hms_txn.domain.events.event_messages.formats import encode
from hms_txn.store.prepared import Prepared
from hms_txn.store.sql import insert_numbered, reserve_ids
from hms_txn.store.schema import (notification_log, notification_sequence,
                                  txn_write_notification_log)

# Connection.info key: the events appended in the connection's open transaction (take_written).
_WRITTEN_KEY = "hms_txn.notifications.written"


class Written(NamedTuple):
    """An event appended by this process: what the metadata cache needs to evict. ``also``:
    the other tables the event changes (``event_messages.other_changed_tables``: a
    rename's old name, the tables a commit's keyValue changed)."""
    event_type: str
    db_name: str | None
    tbl_name: str | None
    event_id: int
    also: tuple[tuple[str, str], ...] = ()


class Event(NamedTuple):
    """One notification event. A named tuple: the metadata cache's tailer reads every
    event of the log, and building a frozen dataclass per row cost it more than the read."""
    event_id: int
    event_time: int
    event_type: str
    db_name: str | None
    tbl_name: str | None
    message: str
    message_format: str | None
    cat_name: str | None


def _next_ids(conn: Connection, count: int) -> int:
    """Reserve ``count`` event ids; returns the first (the counter row stays locked until
    the caller commits, which keeps ids dense and in commit order)."""
    return reserve_ids(conn, notification_sequence, count, column="next_event_id")


def append(conn: Connection, message_format: str, *entries: LogEntry | None) -> list[int]:
    """Write the events of ``entries`` (built by ``event_messages``; None, a builder's "no
    event", is skipped) in the caller's transaction, their messages encoded in
    ``message_format``; returns their ids."""
    events = [e for e in entries if e is not None]
    if not events:
        return []
    now = int(time.time())
    rows = [{"event_time": now, "event_type": e.event_type, "cat_name": e.cat_name,
             "db_name": e.db_name, "tbl_name": e.tbl_name,
             "message": encode(e.message, message_format), "message_format": message_format}
            for e in events]
    event_id = None
    if len(rows) == 1:
        # One statement for the id and the row where the store can (PostgreSQL): the
        # sequence's row lock is then held from this statement to the COMMIT only.
        event_id = insert_numbered(conn, notification_log, "event_id", rows[0],
                                   notification_sequence, "next_event_id")
        if event_id is not None:
            rows[0]["event_id"] = event_id
    if event_id is None:
        first = _next_ids(conn, len(rows))
        for offset, row in enumerate(rows):
            row["event_id"] = first + offset
        _INSERT_EVENT.execute(conn, rows[0] if len(rows) == 1 else rows)
    # Remembered on the connection until the unit of work takes them (take_written).
    conn.info.setdefault(_WRITTEN_KEY, []).extend(
        Written(e.event_type, e.db_name, e.tbl_name, r["event_id"],
                tuple(other_changed_tables(e.event_type, e.message, e.db_name, e.tbl_name)))
        for e, r in zip(events, rows))
    return [r["event_id"] for r in rows]


def note_written(conn: Connection, event_type: str, db_name: str | None, tbl_name: str | None,
                 event_ids: Iterable[int]) -> None:
    """Events of ``event_type`` that the database wrote in the call on ``conn`` (the
    transaction functions of PostgreSQL: hms_txn.domain.txn.one_statement), remembered as
    ``append`` remembers its own."""
    conn.info.setdefault(_WRITTEN_KEY, []).extend(
        Written(event_type, db_name, tbl_name, int(i)) for i in event_ids if i is not None)


def take_written(conn: Connection) -> list[Written]:
    """The events ``append`` wrote on ``conn`` since the last call, forgetting them. The
    unit of work takes them after each call's work (hms_txn.service.units): committed, they
    tell the metadata cache what this process changed; rolled back, they are dropped."""
    return conn.info.pop(_WRITTEN_KEY, None) or []


_INSERT_EVENT = Prepared(insert(notification_log))


_nl = notification_log.c
# The columns of an Event, in its field order.
_EVENT_COLUMNS = (_nl.event_id, _nl.event_time, _nl.event_type, _nl.db_name, _nl.tbl_name,
                  _nl.message, _nl.message_format, _nl.cat_name)
# The tailer's query (next_events without filters), built once.
_NEXT_EVENTS = Prepared(select(*_EVENT_COLUMNS).where(_nl.event_id > bindparam("p_after"))
                         .order_by(_nl.event_id).limit(bindparam("p_limit")))


def _event(row) -> Event:
    return Event._make(row)


def next_events(conn: Connection, last_event: int, max_events: int | None = None,
                skip_types: Iterable[str] = (), *, cat_name: str | None = None,
                db_name: str | None = None, table_names: Sequence[str] | None = None,
                event_types: Sequence[str] | None = None) -> list[Event]:
    """The events after ``last_event`` in id order, at most ``max_events`` (None: all),
    filtered as Hive 4's ``getNextNotification`` filters (exact matches, so a filter on
    the catalog or database leaves out the transaction events, whose columns are NULL):
    ``cat_name``, ``db_name`` (lower-cased), ``table_names`` (any of them; an empty list
    does not filter), ``event_types`` (any of them; empty does not filter) and
    ``skip_types`` (none of them)."""
    skip = list(skip_types)
    filtered = skip or cat_name is not None or db_name is not None or table_names or event_types
    if not filtered and max_events is not None and max_events > 0:
        rows = _NEXT_EVENTS.execute(conn, {"p_after": last_event, "p_limit": max_events})
        return list(map(Event._make, rows))
    query = select(*_EVENT_COLUMNS).where(_nl.event_id > last_event)
    if cat_name is not None:
        query = query.where(_nl.cat_name == cat_name.strip().lower())
    if db_name is not None:
        query = query.where(_nl.db_name == db_name.strip().lower())
    if table_names:
        query = query.where(_nl.tbl_name.in_([t.strip().lower() for t in table_names]))
    if event_types:
        query = query.where(_nl.event_type.in_(list(event_types)))
    if skip:
        query = query.where(_nl.event_type.not_in(skip))
    query = query.order_by(_nl.event_id)
    if max_events is not None and max_events > 0:
        query = query.limit(max_events)
    return list(map(Event._make, conn.execute(query)))


def current_event_id(conn: Connection) -> int:
    """The id of the last event written (0 before the first).

    Read from the id counter rather than ``max(event_id)`` so the answer survives a purge
    that emptied the log (Hive answers from NOTIFICATION_SEQUENCE too). In a repeatable-read
    transaction it is the position of that transaction's snapshot: the counter is bumped in
    the writing transaction, so the snapshot sees exactly the events 1..N and the changes
    they describe.
    """
    value = conn.execute(select(notification_sequence.c.next_event_id)
                         .where(notification_sequence.c.id == 1)).scalar()
    if value is not None:
        return int(value) - 1
    return conn.execute(select(func.max(notification_log.c.event_id))).scalar() or 0


def count_events(conn: Connection, from_event_id: int, db_name: str, *,
                 cat_name: str | None = None, to_event_id: int | None = None,
                 limit: int | None = None, table_names: Sequence[str] | None = None) -> int:
    """Hive 4's ``getNotificationEventsCount``: the events after ``from_event_id`` (up to
    ``to_event_id`` when given) of database ``db_name`` ("*": every database) in catalog
    ``cat_name`` (default "hive"), counting the events without a database or catalog (the
    transactions'), of the tables named when ``table_names`` is not empty; at most
    ``limit`` when given."""
    query = select(func.count()).select_from(notification_log).where(_nl.event_id > from_event_id)
    if db_name != "*":
        query = query.where(or_(_nl.db_name == db_name.lower(), _nl.db_name.is_(None)))
    query = query.where(or_(_nl.cat_name == (cat_name or DEFAULT_CATALOG), _nl.cat_name.is_(None)))
    if to_event_id is not None:
        query = query.where(_nl.event_id <= to_event_id)
    if table_names:
        query = query.where(_nl.tbl_name.in_([t.lower() for t in table_names]))
    count = conn.execute(query).scalar_one()
    return min(count, limit) if limit is not None else count


def purge_older_than(conn: Connection, ttl_seconds: float) -> int:
    """Delete the events older than ``ttl_seconds``, and the ACID write notifications too
    (Hive's cleaner purges both with the same time to live); returns how many events.

    There is no index on event_time (every commit would write it). An event's time is
    taken after its id is reserved, and ids are reserved in commit order, so the log is in
    time order by id: the first event in id order that is not old enough bounds the purge.
    Finding it reads only the events about to go. ``event_time < cutoff`` stays in the
    DELETE so that a clock stepped backwards never costs a recent event.
    """
    cutoff = int(time.time() - ttl_seconds)
    first_kept = conn.execute(select(_nl.event_id).where(_nl.event_time >= cutoff)
                              .order_by(_nl.event_id).limit(1)).scalar()
    purge = delete(notification_log).where(_nl.event_time < cutoff)
    if first_kept is not None:
        purge = purge.where(_nl.event_id < first_kept)
    purged = conn.execute(purge).rowcount
    conn.execute(delete(txn_write_notification_log).where(_wn.event_time < cutoff))
    return purged


def oldest_event(conn: Connection, after: int) -> Event | None:
    """The first event after ``after`` (for lag measurements)."""
    row = conn.execute(select(*_EVENT_COLUMNS).where(_nl.event_id > after)
                       .order_by(_nl.event_id).limit(1)).first()
    return None if row is None else _event(row)


# ------------------------------------------------------------------ ACID write notifications

_wn = txn_write_notification_log.c
_WN_COLUMNS = (_wn.txn_id, _wn.write_id, _wn.db_name, _wn.tbl_name, _wn.part_name,
               _wn.table_obj, _wn.partition_obj, _wn.files, _wn.event_time)


def add_write_notification(conn: Connection, row: WriteNotification) -> None:
    """Record an ACID write (``TxnHandler.addWriteNotificationLog``): one row per
    transaction, table and partition. A second write to the same one puts its files before
    the ones recorded and takes the newer objects; files already recorded (a retried call)
    change nothing."""
    key = (_wn.txn_id == row.txn_id, _wn.db_name == row.database, _wn.tbl_name == row.table,
           _wn.part_name == row.partition)
    existing = conn.execute(select(_wn.files).where(*key).with_for_update()).scalar()
    if existing is None:
        conn.execute(insert(txn_write_notification_log).values(dict(zip(
            (c.name for c in _WN_COLUMNS), row))))
    elif row.files not in existing:
        conn.execute(update(txn_write_notification_log).where(*key).values(
            table_obj=row.table_obj, partition_obj=row.partition_obj,
            files=join_write_event_files([row.files, existing]), event_time=row.event_time))


def write_notifications(conn: Connection, txn_id: int, db_name: str | None = None,
                        tbl_name: str | None = None) -> list[WriteNotification]:
    """``ObjectStore.getAllWriteEventInfo``: the writes of ``txn_id``, of one database and
    table when given ("*" or None: any), by database and table."""
    query = select(*_WN_COLUMNS).where(_wn.txn_id == txn_id)
    if db_name is not None and db_name != "*":
        query = query.where(_wn.db_name == db_name.lower())
    if tbl_name is not None and tbl_name != "*":
        query = query.where(_wn.tbl_name == tbl_name.lower())
    query = query.order_by(_wn.db_name, _wn.tbl_name, _wn.part_name)
    return [WriteNotification._make(r) for r in conn.execute(query)]
