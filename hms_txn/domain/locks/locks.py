"""Shared/exclusive locks on databases, tables and partitions (Hive's DbLockManager).

A lock request is a list of components that share one lock id ("external" id; each
component has an internal id 1..n). The request is granted all at once or not at all:
every component is checked against the locks that came before it (smaller lock id,
acquired or still waiting: a fair queue) on overlapping objects, using Hive 4's conflict
matrix; locks of one transaction never conflict with each other.

Granting must never let two conflicting locks be ACQUIRED together, even with two server
processes on one PostgreSQL database: ``lock`` and ``check_lock`` run their decision while
holding the ``locks`` mutex row (``SELECT ... FOR UPDATE``), so decisions are made one at a
time and each sees every lock inserted or granted before it. Releasing (commit, abort,
unlock, timeouts) needs no mutex: it can only make later decisions more permissive.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Sequence

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import InvalidInput, NoSuchLock, TxnOpen
from hms_txn.store.prepared import Prepared
from hms_txn.store.schema import hive_locks, next_lock_id, txn_components, txn_to_write_id
from hms_txn.domain.txn.txn_records import (DataOp, TxnType, heartbeat_txn_in, java_str,
                                            lock_id_str, now_ms, require_open_heartbeat, txn_id_str)
from hms_txn.store.sql import lock_mutex, reserve_ids

log = logging.getLogger(__name__)


class LockType(enum.IntEnum):
    SHARED_READ = 1
    SHARED_WRITE = 2
    EXCLUSIVE = 3
    EXCL_WRITE = 4


class LockState(enum.IntEnum):
    ACQUIRED = 1
    WAITING = 2
    ABORT = 3
    NOT_ACQUIRED = 4


class LockLevel(enum.IntEnum):
    DB = 1
    TABLE = 2
    PARTITION = 3


# show_locks order: acquired first, then the stronger type, then by id.
_TYPE_RANK = {LockType.EXCLUSIVE: 0, LockType.EXCL_WRITE: 1, LockType.SHARED_WRITE: 2,
              LockType.SHARED_READ: 3}


@dataclass
class LockComponent:
    type: int
    level: int
    dbname: str
    tablename: str | None = None
    partitionname: str | None = None
    operation_type: int | None = None          # None: not sent (an old client)
    is_transactional: bool | None = None       # None: not sent (an old client)
    is_dynamic_partition_write: bool | None = None


@dataclass
class LockRequest:
    components: list[LockComponent]
    txn_id: int = 0
    user: str = ""
    hostname: str = ""
    agent_info: str | None = None
    zero_wait_read: bool = False
    exclusive_ctas: bool = False


@dataclass
class LockResult:
    lock_id: int
    state: LockState
    error_message: str | None = None


@dataclass
class LockInfo:
    """One component of a lock, as show_locks reports it."""
    lock_id: int
    lock_id_internal: int
    txn_id: int
    dbname: str
    tablename: str | None
    partname: str | None
    state: LockState
    type: LockType
    last_heartbeat_ms: int
    acquired_ms: int | None
    user: str
    hostname: str
    heartbeat_count: int
    agent_info: str | None
    blocked_by_ext_id: int | None
    blocked_by_int_id: int | None


@dataclass
class _Row:
    ext_id: int
    int_id: int
    txn_id: int
    db: str
    tbl: str | None
    part: str | None
    state: int
    type: int
    extra: dict = field(default_factory=dict)


def lock_info_text(r: _Row) -> str:
    """One lock component as Hive's ``LockInfo.toString`` prints it in its messages."""
    return (f"{lock_id_str(r.ext_id)} intLockId:{r.int_id} {txn_id_str(r.txn_id)} "
            f"db:{java_str(r.db)} table:{java_str(r.tbl)} partition:{java_str(r.part)} "
            f"state:{LockState(r.state).name} type:{LockType(r.type).name}")


def _overlap(a: _Row, b: _Row) -> bool:
    if a.db != b.db:
        return False
    if a.tbl is None or b.tbl is None:
        return True
    if a.tbl != b.tbl:
        return False
    return a.part is None or b.part is None or a.part == b.part


def conflicts(req: _Row, ex: _Row) -> bool:
    """Does the requested component ``req`` have to wait for the earlier lock ``ex``?

    Hive 4's matrix (request type x existing type) on overlapping objects, with the DB-level
    SHARED_READ exception, and never between two locks of one transaction.
    """
    if not _overlap(req, ex):
        return False
    if req.txn_id != 0 and req.txn_id == ex.txn_id:
        return False
    rt, et = req.type, ex.type
    if rt == LockType.SHARED_READ:
        # an EXCLUSIVE on a table/partition does not block a DB-level read
        return et == LockType.EXCLUSIVE and not (ex.tbl is not None and req.tbl is None)
    if rt == LockType.EXCLUSIVE:
        # a DB-level read does not block a table/partition EXCLUSIVE
        return not (ex.tbl is None and et == LockType.SHARED_READ and req.tbl is not None)
    if rt == LockType.SHARED_WRITE:
        return et in (LockType.EXCL_WRITE, LockType.EXCLUSIVE)
    if rt == LockType.EXCL_WRITE:
        return et != LockType.SHARED_READ
    return True


def _rows(conn: Connection, query: "Prepared", params: dict) -> list[_Row]:
    return [_Row(r.ext_id, r.int_id, r.txn_id, r.db_name, r.tbl_name, r.part_name, r.state,
                 r.lock_type) for r in query.execute(conn, params)]


# Statements of lock/check_lock/unlock, built once and executed with bound values (see
# hms_txn.txn: building a Core statement per call costs more than executing it).
_hl = hive_locks.c
_lock_rows = select(hive_locks).where(_hl.ext_id == bindparam("p_ext"))
_LOCK_ROWS = Prepared(_lock_rows)
_LOCK_ROWS_LOCKED = Prepared(_lock_rows.with_for_update())
_earlier_locks = select(hive_locks).where(_hl.ext_id < bindparam("p_ext"))
_order = (_hl.ext_id, _hl.int_id)
# The locks a request queues behind: those on the databases of its components (one
# database, the usual case, has its own statement: an IN list needs SQLAlchemy's expansion).
_EARLIER_LOCKS_DB = Prepared(_earlier_locks.where(_hl.db_name == bindparam("p_db"))
                             .order_by(*_order))
_EARLIER_LOCKS_DBS = Prepared(_earlier_locks
                              .where(_hl.db_name.in_(bindparam("p_dbs", expanding=True)))
                              .order_by(*_order))
_INSERT_LOCKS = Prepared(insert(hive_locks))
_GRANT = Prepared(update(hive_locks).where(_hl.ext_id == bindparam("p_ext"))
                  .values(state=int(LockState.ACQUIRED), acquired_ms=bindparam("p_now"),
                          blocked_by_ext_id=None, blocked_by_int_id=None))
_BLOCKED_BY = Prepared(update(hive_locks).where(_hl.ext_id == bindparam("p_ext"))
                       .where(_hl.int_id == bindparam("p_int"))
                       .values(blocked_by_ext_id=bindparam("p_by_ext"),
                               blocked_by_int_id=bindparam("p_by_int")))
_DELETE_LOCK = Prepared(delete(hive_locks).where(_hl.ext_id == bindparam("p_ext")))
_HEARTBEAT_LOCK = Prepared(update(hive_locks).where(_hl.ext_id == bindparam("p_ext"))
                           .values(last_heartbeat_ms=bindparam("p_now"),
                                   heartbeat_count=_hl.heartbeat_count + 1))
_TXN_WRITE_ID = Prepared(select(txn_to_write_id.c.write_id)
                         .where(txn_to_write_id.c.txn_id == bindparam("p_txn"))
                         .where(txn_to_write_id.c.db_name == bindparam("p_db"))
                         .where(txn_to_write_id.c.tbl_name == bindparam("p_tbl")))
_INSERT_COMPONENTS = Prepared(insert(txn_components))


def heartbeat_lock_in(conn: Connection, lock_id: int, now: int | None = None) -> None:
    """Refresh a lock's heartbeat (what keeps a txn-less lock alive)."""
    now = now_ms() if now is None else now
    done = _HEARTBEAT_LOCK.execute(conn, {"p_ext": lock_id, "p_now": now}).rowcount
    if done < 1:
        raise NoSuchLock(f"No such lock: {lock_id_str(lock_id)}")


# -- lock / check_lock ---------------------------------------------------------------------


def check_request(request: LockRequest) -> None:
    """Refuse a malformed lock request (both forms of ``lock``)."""
    if not request.components:
        raise InvalidInput("a lock request needs at least one component")
    for c in request.components:
        if not c.dbname:
            raise InvalidInput("every lock component needs a dbname")
        if c.type not in LockType._value2member_map_:
            raise InvalidInput(f"unknown lock type {c.type}")


def lock_rows(request: LockRequest) -> list[tuple[int, str, str | None, str | None, int | None]]:
    """The request's components as its lock rows name them: (type, database, table,
    partition, operation type), names lower-cased as Hive stores them."""
    return [(int(c.type), c.dbname.lower(), c.tablename.lower() if c.tablename else None,
             c.partitionname or None,
             None if c.operation_type is None else int(c.operation_type))
            for c in request.components]


def lock(conn: Connection, request: LockRequest) -> LockResult:
    check_request(request)
    txn_id = int(request.txn_id or 0)
    lock_mutex(conn, "locks")
    now = now_ms()
    txn_type = None
    if txn_id:
        # Also what lets commit_txn skip releasing locks of a transaction that never
        # heartbeated: this must stay in the transaction that inserts the locks.
        txn_type = require_open_heartbeat(conn, txn_id, now)
    ext_id = reserve_ids(conn, next_lock_id, 1)
    rows = [
        {"ext_id": ext_id, "int_id": i, "txn_id": txn_id, "db_name": db, "tbl_name": table,
         "part_name": part, "state": int(LockState.WAITING), "lock_type": lock_type,
         "operation_type": op,
         # a transaction's locks live as long as the transaction: only txn-less
         # locks are heartbeated on their own (Hive stores 0 for the others)
         "last_heartbeat_ms": 0 if txn_id else now, "heartbeat_count": 0,
         "user_name": request.user or "", "host": request.hostname or "",
         "agent_info": request.agent_info if request.agent_info is not None
         else "Unknown"}
        for i, (lock_type, db, table, part, op) in enumerate(lock_rows(request), start=1)
    ]
    _INSERT_LOCKS.execute(conn, rows[0] if len(rows) == 1 else rows)
    if txn_id and txn_type != TxnType.READ_ONLY:
        _record_components(conn, txn_id, request.components)
    mine = [_Row(ext_id, r["int_id"], txn_id, r["db_name"], r["tbl_name"],
                 r["part_name"], r["state"], r["lock_type"]) for r in rows]
    return _check(conn, ext_id, txn_id, request.zero_wait_read,
           request.exclusive_ctas, now, mine=mine)


def _record_components(conn: Connection, txn_id: int,
                       components: Sequence[LockComponent]) -> None:
    """Remember what the transaction writes, with its write id on each table."""
    rows = [{"txn_id": txn_id, "db_name": db, "tbl_name": table, "part_name": part,
             "operation_type": op,
             "write_id": None if table is None else _TXN_WRITE_ID.execute(
                 conn, {"p_txn": txn_id, "p_db": db, "p_tbl": table}).scalar()}
            for db, table, part, op in written_components(components)]
    if rows:
        _INSERT_COMPONENTS.execute(conn, rows[0] if len(rows) == 1 else rows)


def written_components(components: Sequence[LockComponent]
                       ) -> list[tuple[str, str | None, str | None, int]]:
    """The components a transaction's lock records as written (Hive's TXN_COMPONENTS
    rules), once each: (database, table, partition, operation type)."""
    out = []
    seen = set()
    for c in components:
        if c.is_transactional is False:
            continue  # a non-ACID object: locked but not tracked
        op = c.operation_type
        if op is None:
            record = True  # an old client: be conservative, as Hive is
        elif op in (DataOp.INSERT, DataOp.UPDATE, DataOp.DELETE):
            record = c.is_dynamic_partition_write is not True
        elif op == DataOp.UNSET:
            record = True
        else:  # SELECT, NO_TXN
            record = False
        if not record:
            continue
        key = (c.dbname.lower(), c.tablename.lower() if c.tablename else None,
               c.partitionname or None, int(op) if op is not None else int(DataOp.UNSET))
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def check_lock(conn: Connection, lock_id: int, *, txn_id: int | None = None,
               elapsed_ms: int | None = None) -> LockResult:
    lock_mutex(conn, "locks")
    now = now_ms()
    rows = _rows(conn, _LOCK_ROWS, {"p_ext": lock_id})
    if not rows:
        raise NoSuchLock(f"No such lock {lock_id_str(lock_id)}")
    owner = rows[0].txn_id
    if owner:
        heartbeat_txn_in(conn, owner, now)
    else:
        heartbeat_lock_in(conn, lock_id, now)
    if all(r.state == LockState.ACQUIRED for r in rows):
        return LockResult(lock_id, LockState.ACQUIRED)
    return _check(conn, lock_id, owner, False, False, now, mine=rows)


def _check(conn: Connection, ext_id: int, txn_id: int, zero_wait_read: bool,
           exclusive_ctas: bool, now: int, mine: list[_Row] | None = None) -> LockResult:
    """Grant all components of ``ext_id`` or none; caller holds the ``locks`` mutex."""
    if mine is None:
        mine = _rows(conn, _LOCK_ROWS, {"p_ext": ext_id})
    dbs = sorted({r.db for r in mine})
    if len(dbs) == 1:
        earlier = _rows(conn, _EARLIER_LOCKS_DB, {"p_db": dbs[0], "p_ext": ext_id})
    else:
        earlier = _rows(conn, _EARLIER_LOCKS_DBS, {"p_dbs": dbs, "p_ext": ext_id})
    for req in mine:
        for ex in earlier:
            if not conflicts(req, ex):
                continue
            if (zero_wait_read and req.type == LockType.SHARED_READ or exclusive_ctas) \
                    and txn_id:
                _DELETE_LOCK.execute(conn, {"p_ext": ext_id})
                what = lock_info_text(ex)
                msg = (f"Failed to initiate a concurrent CTAS operation with the same table "
                       f"name, lockInfo : {what}" if exclusive_ctas else
                       f"Unable to acquire read lock due to an existing exclusive lock "
                       f"{{{what}}}")
                return LockResult(ext_id, LockState.NOT_ACQUIRED, msg)
            _BLOCKED_BY.execute(conn, {"p_ext": ext_id, "p_int": req.int_id,
                                       "p_by_ext": ex.ext_id, "p_by_int": ex.int_id})
            return LockResult(ext_id, LockState.WAITING)
    _GRANT.execute(conn, {"p_ext": ext_id, "p_now": now})
    return LockResult(ext_id, LockState.ACQUIRED)


# -- unlock / show ---------------------------------------------------------------------

def unlock(conn: Connection, lock_id: int) -> bool:
    """Release a txn-less lock, or a transaction's lock that is still waiting.

    A missing lock is not an error (it may have timed out). Returns whether anything was
    removed.
    """
    rows = _rows(conn, _LOCK_ROWS_LOCKED, {"p_ext": lock_id})
    if not rows:
        log.info("unlock(%s): no such lock; nothing to do", lock_id_str(lock_id))
        return False
    owner = rows[0].txn_id
    if owner and any(r.state == LockState.ACQUIRED for r in rows):
        raise TxnOpen(f"Unlocking locks associated with transaction not permitted.  "
                      f"{lock_info_text(rows[0])}")
    _DELETE_LOCK.execute(conn, {"p_ext": lock_id})
    return True


def show_locks(conn: Connection, *, dbname: str | None = None, tablename: str | None = None,
               partname: str | None = None, txn_id: int | None = None) -> list[LockInfo]:
    c = hive_locks.c
    query = select(hive_locks)
    if dbname:
        query = query.where(c.db_name == dbname.lower())
    if tablename:
        query = query.where(c.tbl_name == tablename.lower())
    if partname:
        query = query.where(c.part_name == partname)
    if txn_id:
        query = query.where(c.txn_id == txn_id)
    rows = conn.execute(query).all()
    out = [LockInfo(
        lock_id=r.ext_id, lock_id_internal=r.int_id, txn_id=r.txn_id, dbname=r.db_name,
        tablename=r.tbl_name, partname=r.part_name, state=LockState(r.state),
        type=LockType(r.lock_type), last_heartbeat_ms=r.last_heartbeat_ms,
        acquired_ms=r.acquired_ms, user=r.user_name, hostname=r.host,
        heartbeat_count=r.heartbeat_count, agent_info=r.agent_info,
        blocked_by_ext_id=r.blocked_by_ext_id, blocked_by_int_id=r.blocked_by_int_id,
    ) for r in rows]
    out.sort(key=lambda i: (i.state != LockState.ACQUIRED, _TYPE_RANK.get(i.type, 9),
                            i.lock_id, i.lock_id_internal))
    return out


# -- timeouts --------------------------------------------------------------------------

def remove_timed_out(conn: Connection, timeout_s: float) -> list[int]:
    """Remove txn-less locks whose last heartbeat is older than the timeout."""
    cutoff = now_ms() - int(timeout_s * 1000)
    ids = sorted({r.ext_id for r in conn.execute(
        select(hive_locks.c.ext_id).where(hive_locks.c.txn_id == 0)
        .where(hive_locks.c.last_heartbeat_ms < cutoff)
    )})
    if ids:
        conn.execute(delete(hive_locks).where(hive_locks.c.ext_id.in_(ids))
                     .where(hive_locks.c.txn_id == 0)
                     .where(hive_locks.c.last_heartbeat_ms < cutoff))
    removed = ids
    if removed:
        log.info("removed %d timed-out txn-less lock(s): %s", len(removed),
                 ", ".join(lock_id_str(i) for i in removed[:20]))
    return removed
