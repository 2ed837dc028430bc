"""The notification log: one event per metastore change, written in the change's own
database transaction so a reader of the log never sees an event for a rolled-back change
nor misses one for a committed change.

Event ids come from a single-row counter updated under a row lock; the lock is held until
the writing transaction commits, so ids are dense and appear in commit order even with
several server processes writing at once.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, NamedTuple

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.engine import Connection

from hms_txn.store.prepared import Prepared
from hms_txn.store.sql import insert_numbered, reserve_ids
from hms_txn.store.schema import notification_log, notification_sequence

MESSAGE_FORMAT = "json-0.2"
# Connection.info key: the events appended in the connection's open transaction (take_written).
_WRITTEN_KEY = "hms_txn.notifications.written"


class Written(NamedTuple):
    """An event appended by this process: what the metadata cache needs to evict."""
    event_type: str
    db_name: str | None
    tbl_name: str | None
    event_id: int


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


def append(conn: Connection, event_type: str, message: dict[str, Any], *,
           db_name: str | None = None, tbl_name: str | None = None,
           cat_name: str | None = "hive") -> int:
    """Write one event in the caller's transaction; returns its id."""
    return append_many(conn, [(event_type, message, db_name, tbl_name)], cat_name=cat_name)[0]


def append_many(conn: Connection,
                events: Iterable[tuple[str, dict[str, Any], str | None, str | None]],
                *, cat_name: str | None = "hive") -> list[int]:
    events = list(events)
    if not events:
        return []
    now = int(time.time())
    if len(events) == 1:
        # One statement for the id and the row where the store can (PostgreSQL): the
        # sequence's row lock is then held from this statement to the COMMIT only.
        event_type, message, db_name, tbl_name = events[0]
        row = {"event_time": now, "event_type": event_type, "cat_name": cat_name,
               "db_name": db_name, "tbl_name": tbl_name, "message": _dumps(message),
               "message_format": MESSAGE_FORMAT}
        event_id = insert_numbered(conn, notification_log, "event_id", row,
                                   notification_sequence, "next_event_id")
        if event_id is not None:
            conn.info.setdefault(_WRITTEN_KEY, []).append(
                Written(event_type, db_name, tbl_name, event_id))
            return [event_id]
    first = _next_ids(conn, len(events))
    rows = []
    for offset, (event_type, message, db_name, tbl_name) in enumerate(events):
        rows.append({
            "event_id": first + offset, "event_time": now, "event_type": event_type,
            "cat_name": cat_name, "db_name": db_name, "tbl_name": tbl_name,
            "message": _dumps(message), "message_format": MESSAGE_FORMAT,
        })
    _INSERT_EVENT.execute(conn, rows[0] if len(rows) == 1 else rows)
    # Remembered on the connection until the unit of work takes them (take_written).
    conn.info.setdefault(_WRITTEN_KEY, []).extend(
        Written(r["event_type"], r["db_name"], r["tbl_name"], r["event_id"]) for r in rows)
    return [r["event_id"] for r in rows]


def take_written(conn: Connection) -> list[Written]:
    """The events ``append`` wrote on ``conn`` since the last call, forgetting them. The
    unit of work takes them after each call's work (hms_txn.service.units): committed, they
    tell the metadata cache what this process changed; rolled back, they are dropped."""
    return conn.info.pop(_WRITTEN_KEY, None) or []


_INSERT_EVENT = Prepared(insert(notification_log))
_dumps = json.JSONEncoder(separators=(",", ":")).encode


_nl = notification_log.c
# The columns of an Event, in its field order.
_EVENT_COLUMNS = (_nl.event_id, _nl.event_time, _nl.event_type, _nl.db_name, _nl.tbl_name,
                  _nl.message, _nl.message_format, _nl.cat_name)
# The tailer's query (next_events without skip_types), built once.
_NEXT_EVENTS = Prepared(select(*_EVENT_COLUMNS).where(_nl.event_id > bindparam("p_after"))
                         .order_by(_nl.event_id).limit(bindparam("p_limit")))


def _event(row) -> Event:
    return Event._make(row)


def next_events(conn: Connection, last_event: int, max_events: int | None = None,
                skip_types: Iterable[str] = ()) -> list[Event]:
    skip = list(skip_types)
    if not skip and max_events is not None and max_events > 0:
        rows = _NEXT_EVENTS.execute(conn, {"p_after": last_event, "p_limit": max_events})
        return list(map(Event._make, rows))
    query = select(*_EVENT_COLUMNS).where(_nl.event_id > last_event)
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
                 to_event_id: int | None = None, limit: int | None = None) -> int:
    query = (select(notification_log.c.event_id)
             .where(notification_log.c.event_id > from_event_id)
             .where(func.lower(notification_log.c.db_name) == db_name.lower()))
    if to_event_id is not None:
        query = query.where(notification_log.c.event_id <= to_event_id)
    if limit is not None and limit > 0:
        query = query.limit(limit)
    return conn.execute(select(func.count()).select_from(query.subquery())).scalar_one()


def purge_older_than(conn: Connection, ttl_seconds: float) -> int:
    """Delete the events older than ``ttl_seconds``; returns how many.

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
    return conn.execute(purge).rowcount


def oldest_event(conn: Connection, after: int) -> Event | None:
    """The first event after ``after`` (for lag measurements)."""
    row = conn.execute(select(*_EVENT_COLUMNS).where(_nl.event_id > after)
                       .order_by(_nl.event_id).limit(1)).first()
    return None if row is None else _event(row)
