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
from hms_txn.store.sql import reserve_ids
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
    first = _next_ids(conn, len(events))
    now = int(time.time())
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


def _encode_file(path: str, subdir: str | None) -> str:
    """Hive's ``ReplChangeManager.encodeFileUri`` without a change-management root:
    ``<file>###<subdir>`` (the checksum is only written together with a cm root)."""
    return f"{path}###{subdir or ''}"


class NotificationLog:
    """The notification calls of the Thrift API over a ``Store``.

    ``catalog`` supplies table and partition look-ups and the Thrift-JSON rendering of
    objects (``Catalog.object_json``) for the INSERT and ACID_WRITE messages.
    """

    def __init__(self, store, catalog):
        self.store = store
        self.catalog = catalog

    # Clients keep event ids (they ask for "events after N"), so what they are shown must
    # not be taken back by a power cut: after reading, wait until every commit so far is
    # fsynced (a no-op unless open_txns committed lazily since; see hms_txn.txn). After
    # rather than before the read, so that a lazy commit landing in between is covered.

    def next_events(self, last_event: int, max_events: int | None = None,
                    skip_types: Iterable[str] = ()) -> list[Event]:
        with self.store.read() as conn:
            events = next_events(conn, last_event, max_events, skip_types)
        self.store.make_durable()
        return events

    def current_event_id(self) -> int:
        with self.store.read() as conn:
            event_id = current_event_id(conn)
        self.store.make_durable()
        return event_id

    def count(self, from_event_id: int, db_name: str, *, to_event_id: int | None = None,
              limit: int | None = None) -> int:
        with self.store.read() as conn:
            return count_events(conn, from_event_id, db_name, to_event_id=to_event_id, limit=limit)

    def purge(self, ttl_seconds: float) -> int:
        return self.store.transaction(lambda conn: purge_older_than(conn, ttl_seconds))

    def _objects(self, conn: Connection, db: str, table: str,
                 partition_values: list[str] | None) -> tuple[dict, dict | None]:
        from hms_txn.domain import names
        from hms_txn.common.errors import NoSuchObject
        cat = self.catalog
        tbl_id, table_doc = cat._require_table(conn, names.lower(db), names.lower(table))
        part_doc = None
        if partition_values:
            part_name = cat._partition_name(table_doc, [str(v) for v in partition_values])
            rows = cat._partition_rows(conn, tbl_id, [part_name])
            if not rows:
                raise NoSuchObject(f"partition {part_name} of table "
                                   f"{table_doc['dbName']}.{table_doc['tableName']} does not exist")
            part_doc = rows[0][1]
        return table_doc, part_doc

    def _obj_json(self, kind: str, doc: dict | None) -> str | None:
        if doc is None or self.catalog.object_json is None:
            return None
        return self.catalog.object_json(kind, doc)

    def fire_insert(self, db: str, table: str,
                    inserts: list[tuple[list[str] | None, bool, list[str], list[str] | None]]) -> list[int]:
        """Write one INSERT event per ``(partition values, replace, files, subdirs)``.

        Messages follow Hive's ``JSONInsertMessage``: server, servicePrincipal, cat, db,
        table, tableType, tableObjJson, ptnObjJson (partitioned inserts), timestamp,
        replace ("true"/"false") and files.
        """
        def work(conn: Connection) -> list[int]:
            batch = []
            for part_vals, replace, files, subdirs in inserts:
                table_doc, part_doc = self._objects(conn, db, table, part_vals)
                message: dict[str, Any] = {
                    "server": "", "servicePrincipal": "", "cat": table_doc.get("catName") or "hive",
                    "db": table_doc["dbName"], "table": table_doc["tableName"],
                    "tableType": table_doc.get("tableType"),
                }
                obj = self._obj_json("Table", table_doc)
                if obj is not None:
                    message["tableObjJson"] = obj
                pobj = self._obj_json("Partition", part_doc)
                if pobj is not None:
                    message["ptnObjJson"] = pobj
                message["timestamp"] = int(time.time())
                message["replace"] = "true" if replace else "false"
                message["files"] = [_encode_file(f, subdirs[i] if subdirs and i < len(subdirs) else None)
                                    for i, f in enumerate(files)]
                batch.append(("INSERT", message, table_doc["dbName"], table_doc["tableName"]))
            return append_many(conn, batch)
        return self.store.transaction(work)

    def add_write_notification(self, txn_id: int, write_id: int, db: str, table: str,
                               files: list[str], subdirs: list[str] | None,
                               partition_values: list[str] | None) -> int:
        """An ACID_WRITE_EVENT for a write inside an open transaction (Hive's
        ``add_write_notification_log``), fields as Hive's ``JSONAcidWriteMessage``."""
        from hms_txn.domain.txn_records import require_open

        def work(conn: Connection) -> int:
            require_open(conn, txn_id)
            table_doc, part_doc = self._objects(conn, db, table, partition_values)
            part_name = None
            if part_doc is not None:
                part_name = self.catalog._partition_name(table_doc, part_doc["values"])
            message: dict[str, Any] = {
                "txnid": txn_id, "writeId": write_id, "timestamp": int(time.time()),
                "server": "", "servicePrincipal": "",
                "database": table_doc["dbName"], "table": table_doc["tableName"],
                "partition": part_name,
                "tableObjJson": self._obj_json("Table", table_doc),
                "partitionObjJson": self._obj_json("Partition", part_doc),
                "files": [_encode_file(f, subdirs[i] if subdirs and i < len(subdirs) else None)
                          for i, f in enumerate(files)],
            }
            return append(conn, "ACID_WRITE_EVENT", message, db_name=table_doc["dbName"],
                          tbl_name=table_doc["tableName"])
        return self.store.transaction(work)
