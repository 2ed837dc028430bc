"""The one-statement form of the transaction calls (PostgreSQL): each call is one statement,
a function of hms_txn.store.pg_functions, run on psycopg's reused cursor
(``prepared.DriverSQL``) on the connection ``Store.one_statement`` gives (autocommit).

Plain values in and out: the caller (hms_txn.domain.txn.one_statement) passes the call's
arguments as the domain prepared them and turns the rows into the domain's values. An
error the function raises (SQLSTATE ``HMnnn``, see pg_functions/common.sql) becomes the
``hms_txn.common.errors`` exception with the function's text, which the service layer's
declared-error mapping turns into the Thrift exception, as on the Python path.

Whether a call may commit without a flush is the unit of work's decision
(hms_txn.service.units); it reaches the function as ``p_lazy``, read from the connection
(``postgres.is_lazy``).

``Store.functions`` is an instance where the store has these functions (PostgreSQL with
psycopg 3), None elsewhere: the store, which knows the dialect, makes that choice.
"""

from __future__ import annotations

import json
from typing import NamedTuple, Sequence

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from hms_txn.common import errors
from hms_txn.store.postgres import is_lazy
from hms_txn.store.prepared import DriverSQL

# SQLSTATE -> the error it stands for (pg_functions/common.sql).
ERRORS = {"HM001": errors.NoSuchTxn, "HM002": errors.TxnAborted, "HM003": errors.NoSuchLock,
          "HM004": errors.TxnOpen, "HM005": errors.InvalidInput, "HM006": errors.Internal}


class Opened(NamedTuple):
    first: int | None            # None: refused, ``open_count`` or more were open
    raised_reservation: bool
    open_count: int | None       # when asked to count
    event_id: int | None


class Committed(NamedTuple):
    outcome: str                 # "c" committed, "a" committed before, "x" conflict (aborted)
    commit_id: int | None
    conflict: str | None
    event_ids: list[int]


class Allocated(NamedTuple):
    pairs: list[tuple[int, int]]
    event_id: int | None


class LockAnswer(NamedTuple):
    lock_id: int
    state: int
    message: str | None


def _call(name: str, params: str) -> DriverSQL:
    return DriverSQL(f"SELECT * FROM {name}({params})")


_OPEN = _call("hms_open_txns", "%(count)s::int, %(type)s::int, %(now)s::bigint, %(user)s::text, "
              "%(host)s::text, %(agent)s::text, %(lazy)s::boolean, %(ahead)s::bigint, "
              "%(refuse_at)s::bigint, %(event)s::text, %(format)s::text")
_COMMIT = _call("hms_commit_txn", "%(txn)s::bigint, %(now)s::bigint, %(check)s::boolean, "
                "%(lazy)s::boolean, %(commit_event)s::text, %(abort_event)s::text, "
                "%(compaction_event)s::text, %(format)s::text")
_ABORT = _call("hms_abort_txn", "%(txn)s::bigint, %(now)s::bigint, %(reason)s::text, "
               "%(event)s::text, %(format)s::text")
_ABORT_MANY = _call("hms_abort_txns", "%(txns)s::bigint[], %(now)s::bigint, %(event)s::text, "
                    "%(format)s::text")
_HEARTBEAT = _call("hms_heartbeat", "%(lock)s::bigint, %(txn)s::bigint, %(now)s::bigint")
_HEARTBEAT_RANGE = _call("hms_heartbeat_txn_range", "%(min)s::bigint, %(max)s::bigint, "
                         "%(now)s::bigint")
_SNAPSHOT = _call("hms_open_txns_snapshot", "")
_INFO = _call("hms_open_txns_info", "")
_ALLOCATE = _call("hms_allocate_write_ids", "%(db)s::text, %(tbl)s::text, %(txns)s::bigint[], "
                  "%(now)s::bigint, %(event)s::text, %(format)s::text")
_SNAPSHOT_WRITE_IDS = _call("hms_snapshot_write_ids", "%(dbs)s::text, %(tbls)s::text")
_VALID_WRITE_IDS = _call("hms_valid_write_ids", "%(dbs)s::text, %(tbls)s::text, %(hwm)s::bigint, "
                        "%(txns)s::bigint[]")
_LOCK = _call("hms_lock", "%(txn)s::bigint, %(user)s::text, %(host)s::text, %(agent)s::text, "
              "%(now)s::bigint, %(zero_wait_read)s::boolean, %(exclusive_ctas)s::boolean, "
              "%(components)s::text, %(records)s::text")
_CHECK_LOCK = _call("hms_check_lock", "%(lock)s::bigint, %(now)s::bigint")
_CLAIM = _call("hms_claim_compaction", "%(worker)s::text, %(version)s::text, %(pool)s::text, "
               "%(before)s::bigint, %(now)s::bigint")


# Lists of names travel as JSON text: psycopg dumps a text array with a regular
# expression per element, which cost more of our CPU than the call's statement.
_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _rows(conn: Connection, statement: DriverSQL, params: dict) -> list:
    try:
        return statement.rows(conn, params)
    except DBAPIError as err:
        error = ERRORS.get(getattr(err.orig, "sqlstate", None))
        if error is None:
            raise
        raise error(err.orig.diag.message_primary) from None


class TxnFunctions:
    """One method per call; ``conn`` from ``Store.one_statement``."""

    @staticmethod
    def open_txns(conn: Connection, *, count: int, txn_type: int, now: int, user: str,
                  host: str, agent: str, reserve_ahead: int, refuse_at: int | None,
                  event: str | None, message_format: str) -> Opened:
        [row] = _rows(conn, _OPEN, {
            "count": count, "type": txn_type, "now": now, "user": user, "host": host,
            "agent": agent, "lazy": is_lazy(conn), "ahead": reserve_ahead,
            "refuse_at": refuse_at, "event": event, "format": message_format})
        return Opened(*row)

    @staticmethod
    def commit_txn(conn: Connection, *, txn_id: int, now: int, check_conflicts: bool,
                   commit_event: str, abort_event: str, compaction_event: str,
                   message_format: str) -> Committed:
        [row] = _rows(conn, _COMMIT, {
            "txn": txn_id, "now": now, "check": check_conflicts, "lazy": is_lazy(conn),
            "commit_event": commit_event, "abort_event": abort_event,
            "compaction_event": compaction_event, "format": message_format})
        return Committed(*row)

    @staticmethod
    def abort_txn(conn: Connection, *, txn_id: int, now: int, reason: str | None,
                  event: str, message_format: str) -> tuple[bool, list[int]]:
        [row] = _rows(conn, _ABORT, {"txn": txn_id, "now": now, "reason": reason,
                                     "event": event, "format": message_format})
        return row[0], row[1]

    @staticmethod
    def abort_txns(conn: Connection, *, txn_ids: Sequence[int], now: int,
                   event: str, message_format: str) -> tuple[list[int], list[int]]:
        [row] = _rows(conn, _ABORT_MANY, {"txns": list(txn_ids), "now": now, "event": event,
                                          "format": message_format})
        return row[0], row[1]

    @staticmethod
    def heartbeat(conn: Connection, *, lock_id: int | None, txn_id: int | None,
                  now: int) -> None:
        _rows(conn, _HEARTBEAT, {"lock": lock_id, "txn": txn_id, "now": now})

    @staticmethod
    def heartbeat_txn_range(conn: Connection, *, min_id: int, max_id: int,
                            now: int) -> list[tuple[int, str]]:
        """(txn id, state) of the open and aborted transactions of the range."""
        return _rows(conn, _HEARTBEAT_RANGE, {"min": min_id, "max": max_id, "now": now})

    @staticmethod
    def open_txns_snapshot(conn: Connection) -> list[tuple]:
        """(next txn id, txn id, state, type) rows: none on a fresh database, one row of
        NULLs after the first when nothing is open or aborted."""
        return _rows(conn, _SNAPSHOT, {})

    @staticmethod
    def open_txns_info(conn: Connection) -> list:
        """The same with every column of the transactions (named rows)."""
        return _INFO.execute(conn, {}).all()

    @staticmethod
    def allocate_write_ids(conn: Connection, *, db: str, table: str, txn_ids: Sequence[int],
                           now: int, event: str, message_format: str) -> Allocated:
        [(txns, write_ids, event_id)] = _rows(conn, _ALLOCATE, {
            "db": db, "tbl": table, "txns": list(txn_ids), "now": now, "event": event,
            "format": message_format})
        return Allocated(list(zip(txns or (), write_ids or ())), event_id)

    @staticmethod
    def snapshot_write_ids(conn: Connection, dbs: Sequence[str],
                           tables: Sequence[str]) -> list[tuple]:
        """(kind, db, table, txn id, id, state) rows (pg_functions/write_ids.sql)."""
        return _rows(conn, _SNAPSHOT_WRITE_IDS, {"dbs": _json(list(dbs)),
                                                 "tbls": _json(list(tables))})

    @staticmethod
    def valid_write_ids(conn: Connection, dbs: Sequence[str], tables: Sequence[str],
                        hwm: int, exceptions: Sequence[int]) -> list[tuple]:
        """(db, table, next write id, txn id, write id) rows: a table's counter (no txn) or
        a write id of a transaction above ``hwm`` or among ``exceptions``."""
        return _rows(conn, _VALID_WRITE_IDS, {"dbs": _json(list(dbs)),
                                              "tbls": _json(list(tables)), "hwm": hwm,
                                              "txns": list(exceptions)})

    @staticmethod
    def lock(conn: Connection, *, txn_id: int, user: str, host: str, agent: str, now: int,
             zero_wait_read: bool, exclusive_ctas: bool,
             components: Sequence[tuple[int, str, str | None, str | None, int | None]],
             records: Sequence[tuple[str, str | None, str | None, int]]) -> LockAnswer:
        """``components``: (type, db, table, partition, operation type); ``records``: the
        transaction's written components (db, table, partition, operation type)."""
        [row] = _rows(conn, _LOCK, {
            "txn": txn_id, "user": user, "host": host, "agent": agent, "now": now,
            "zero_wait_read": zero_wait_read, "exclusive_ctas": exclusive_ctas,
            "components": _json(components), "records": _json(records)})
        return LockAnswer(*row)

    @staticmethod
    def check_lock(conn: Connection, *, lock_id: int, now: int) -> LockAnswer:
        [row] = _rows(conn, _CHECK_LOCK, {"lock": lock_id, "now": now})
        return LockAnswer(*row)

    @staticmethod
    def claim_compaction(conn: Connection, *, worker: str, version: str, pool: str | None,
                         enqueued_before: int | None, now: int):
        """The claimed compaction_queue row (named), or None."""
        return _CLAIM.execute(conn, {"worker": worker, "version": version, "pool": pool,
                                     "before": enqueued_before, "now": now}).first()
