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
from dataclasses import dataclass
from typing import Any, Iterable

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from .store.schema import notification_log, notification_sequence

MESSAGE_FORMAT = "json-0.2"


@dataclass(frozen=True)
class Event:
    event_id: int
    event_time: int
    event_type: str
    db_name: str | None
    tbl_name: str | None
    message: str
    message_format: str | None
    cat_name: str | None


def _next_ids(conn: Connection, count: int) -> int:
    """Reserve ``count`` event ids; returns the first."""
    row = conn.execute(
        select(notification_sequence.c.next_event_id)
        .where(notification_sequence.c.id == 1)
        .with_for_update()
    ).first()
    if row is None:
        first = 1
        conn.execute(insert(notification_sequence).values(id=1, next_event_id=1 + count))
    else:
        first = row[0]
        conn.execute(
            update(notification_sequence)
            .where(notification_sequence.c.id == 1)
            .values(next_event_id=first + count)
        )
    return first


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
    first = _next_ids(conn, len(events))
    now = int(time.time())
    rows = []
    for offset, (event_type, message, db_name, tbl_name) in enumerate(events):
        rows.append({
            "event_id": first + offset, "event_time": now, "event_type": event_type,
            "cat_name": cat_name, "db_name": db_name, "tbl_name": tbl_name,
            "message": json.dumps(message, separators=(",", ":")),
            "message_format": MESSAGE_FORMAT,
        })
    conn.execute(insert(notification_log), rows)
    return [r["event_id"] for r in rows]


def _event(row) -> Event:
    return Event(row.event_id, row.event_time, row.event_type, row.db_name, row.tbl_name,
                 row.message, row.message_format, row.cat_name)


def next_events(conn: Connection, last_event: int, max_events: int | None = None,
                skip_types: Iterable[str] = ()) -> list[Event]:
    query = select(notification_log).where(notification_log.c.event_id > last_event)
    skip = list(skip_types)
    if skip:
        query = query.where(notification_log.c.event_type.not_in(skip))
    query = query.order_by(notification_log.c.event_id)
    if max_events is not None and max_events > 0:
        query = query.limit(max_events)
    return [_event(row) for row in conn.execute(query)]


def current_event_id(conn: Connection) -> int:
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
    cutoff = int(time.time() - ttl_seconds)
    return conn.execute(delete(notification_log).where(notification_log.c.event_time < cutoff)).rowcount
