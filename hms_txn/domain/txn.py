"""Transactions: open, commit, abort, snapshots, heartbeats and timeouts.

Semantics follow Hive's ``TxnHandler`` (see ``shared/spec/hms-wire-facts.md``, "Server
semantics"); this module is plain Python in, plain Python out, with no Thrift types.

Every public operation is one database transaction that also writes its notification
events, so a change and its event are committed together or not at all.

Cross-process safety (two servers on one PostgreSQL database):

* transaction ids come from the single row of ``next_txn_id``, read ``FOR UPDATE`` and
  bumped in the transaction that inserts the new ``txns`` rows;
* a transaction's row is locked ``FOR UPDATE`` by whatever changes its state (commit,
  abort, heartbeat, lock, write id allocation), so a commit and a timeout abort of the same
  transaction cannot both win;
* a commit that carries UPDATE/DELETE components also locks ``next_txn_id``: its commit id is
  the highest id handed out so far, and the write-write conflict check runs while no other
  such commit and no ``open_txns`` can interleave (the ordering Hive relies on).

Row locks are always taken in the same order (transaction rows by id, then counters, then
lock rows, then the notification sequence), so the database never has to break a deadlock
between two of our own operations; if it does anyway, ``Store.transaction`` retries.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from sqlalchemy import (Integer, bindparam, delete, func, insert, or_, select,
                        type_coerce, update)
from sqlalchemy.engine import Connection

from hms_txn.domain import notifications
from hms_txn.domain.catalog import set_table_parameter_in
from hms_txn.common.errors import Internal, InvalidInput, NoSuchTxn, TxnAborted
from hms_txn.store import Store
from hms_txn.store.hot import Hot
from hms_txn.store.sql import insert_ignore, reserve_ids  # noqa: F401  (re-exported)
from hms_txn.store.schema import (completed_txn_components, hive_locks, next_txn_id, txn_components, txn_mutex, txn_to_write_id, txns, write_set)

log = logging.getLogger(__name__)

OPEN, ABORTED, COMMITTED = "o", "a", "c"
# Table parameters a commit may set through CommitTxnRequest.keyValue (Hive's TXN_KEY_START).
TXN_KEY_PREFIX = "_meta"


class TxnState(enum.IntEnum):
    COMMITTED = 1
    ABORTED = 2
    OPEN = 3


STATE_CODE_TO_ENUM = {OPEN: TxnState.OPEN, ABORTED: TxnState.ABORTED,
                      COMMITTED: TxnState.COMMITTED}


class TxnType(enum.IntEnum):
    DEFAULT = 0
    REPL_CREATED = 1
    READ_ONLY = 2
    COMPACTION = 3
    MATER_VIEW_REBUILD = 4
    SOFT_DELETE = 5
    REBALANCE_COMPACTION = 6


class DataOp(enum.IntEnum):
    """Thrift ``DataOperationType``."""
    SELECT = 1
    INSERT = 2
    UPDATE = 3
    DELETE = 4
    UNSET = 5
    NO_TXN = 6


WRITE_OPS = (DataOp.INSERT, DataOp.UPDATE, DataOp.DELETE, DataOp.UNSET)
UPDATE_DELETE = (int(DataOp.UPDATE), int(DataOp.DELETE))
_OP_LETTER = {int(DataOp.UPDATE): "u", int(DataOp.DELETE): "d", int(DataOp.INSERT): "i"}


def now_ms() -> int:
    return int(time.time() * 1000)


def txn_id_str(txn_id: int) -> str:
    """Hive's ``JavaUtils.txnIdToString``."""
    return f"txnid:{txn_id}"


def lock_id_str(lock_id: int) -> str:
    """Hive's ``JavaUtils.lockIdToString``."""
    return f"lockid:{lock_id}"


# ------------------------------------------------------------------------ shared SQL helpers

# Statements of the hot paths, built once and executed with bound values: building a Core
# statement per call costs several times more than executing it, and on SQLite a ``Hot``
# statement also skips SQLAlchemy's per-execution overhead (see hms_txn.store.hot).
_next_txn_id = select(next_txn_id.c.next_id).where(next_txn_id.c.id == 1)
_NEXT_TXN_ID = Hot(_next_txn_id)
_NEXT_TXN_ID_LOCKED = Hot(_next_txn_id.with_for_update())
# Row 2 of ``next_txn_id``: the highest transaction id that a lazily committed
# ``open_txns`` may have handed out (see "Lazy open_txns" in TxnManager).
_RESERVED_ROW = 2
_next_id = next_txn_id.c.next_id     # the counter column of both rows
_RESERVED = Hot(select(_next_id).where(next_txn_id.c.id == _RESERVED_ROW))
_SET_RESERVED = Hot(update(next_txn_id).where(next_txn_id.c.id == _RESERVED_ROW)
                    .values(next_id=bindparam("p_reserved", type_=_next_id.type)))
_SET_NEXT_TXN_ID = Hot(update(next_txn_id).where(next_txn_id.c.id == 1)
                       .values(next_id=bindparam("p_next", type_=_next_id.type)))
# How far ahead of the ids handed out a durable commit reserves: one extra fsync per this
# many lazily opened transactions, and at most this many ids skipped after a power cut.
RESERVE_AHEAD = 1000
_txn_row = select(txns).where(txns.c.txn_id == bindparam("p_txn"))
_TXN_ROW = Hot(_txn_row)
_TXN_ROW_LOCKED = Hot(_txn_row.with_for_update())
_INSERT_TXNS = Hot(insert(txns))
_COUNT_OPEN = Hot(select(func.count()).select_from(txns).where(txns.c.state == OPEN))
_heartbeat_open = (update(txns).where(txns.c.txn_id == bindparam("p_txn"))
                   .where(txns.c.state == OPEN)
                   .values(last_heartbeat_ms=bindparam("p_now"),
                           heartbeat_count=txns.c.heartbeat_count + 1))
_HEARTBEAT_OPEN = Hot(_heartbeat_open)
# Heartbeat and lock an open transaction's row in one statement, returning its type.
_HEARTBEAT_OPEN_RETURNING = Hot(_heartbeat_open.returning(txns.c.txn_type))
_TXN_COMPONENTS = Hot(select(txn_components)
                      .where(txn_components.c.txn_id == bindparam("p_txn"))
                      .order_by(txn_components.c.id))
# commit_txn's first look on SQLite: the transaction's row and whether it has write
# components and write ids, in one statement (three on a read-only query's commit before).
# SQLite only: there the write transaction excludes every other writer, so the flags are
# current. On PostgreSQL a SELECT ... FOR UPDATE that waited for another transaction
# returns the row as that one left it but evaluates an EXISTS on its own older snapshot,
# so there the row is locked first and the components read by a statement of their own.
# (The flags are typed as integers: a Boolean column has a result processor on SQLite,
# which would keep the statement off Hot's direct path.)
_TXN_TO_COMMIT = Hot(
    select(txns,
           type_coerce(select(txn_components.c.id)
                       .where(txn_components.c.txn_id == txns.c.txn_id).exists(),
                       Integer).label("has_components"),
           type_coerce(select(txn_to_write_id.c.write_id)
                       .where(txn_to_write_id.c.txn_id == txns.c.txn_id).exists(),
                       Integer).label("has_write_ids"))
    .where(txns.c.txn_id == bindparam("p_txn")))
_DELETE_TXN_COMPONENTS = Hot(delete(txn_components)
                             .where(txn_components.c.txn_id == bindparam("p_txn")))
_INSERT_COMPLETED = Hot(insert(completed_txn_components))
_INSERT_WRITE_SET = Hot(insert(write_set))
_MARK_COMMITTED = Hot(update(txns).where(txns.c.txn_id == bindparam("p_txn"))
                      .values(state=COMMITTED, commit_id=bindparam("p_commit_id"),
                              ended_ms=bindparam("p_now")))
_RELEASE_TXN_LOCKS = Hot(delete(hive_locks).where(hive_locks.c.txn_id == bindparam("p_txn")))
_MUTEX_ROW_LOCKED = Hot(select(txn_mutex.c.name).where(txn_mutex.c.name == bindparam("p_name"))
                        .with_for_update())
# Every reader's snapshot runs this, and it returns a row per open or aborted transaction.
# Two equalities, not IN: an IN list is an expanding parameter, which keeps a statement off
# hms_txn.store.hot's direct path (SQLite turns the OR into the same index lookups).
_OPEN_AND_ABORTED = Hot(select(txns.c.txn_id, txns.c.state, txns.c.txn_type)
                        .where(or_(txns.c.state == OPEN, txns.c.state == ABORTED))
                        .where(txns.c.txn_id <= bindparam("p_hwm")).order_by(txns.c.txn_id))


def current_hwm(conn: Connection) -> int:
    """Highest transaction id handed out so far (0 when none)."""
    value = _NEXT_TXN_ID.execute(conn).scalar()
    return 0 if value is None else int(value) - 1


def lock_mutex(conn: Connection, name: str) -> None:
    """Serialize a critical section across server processes (a no-op cost on SQLite)."""
    if conn.dialect.name == "sqlite":
        return  # every SQLite write transaction is already exclusive
    params = {"p_name": name}
    if _MUTEX_ROW_LOCKED.execute(conn, params).first() is None:
        insert_ignore(conn, txn_mutex, {"name": name})
        _MUTEX_ROW_LOCKED.execute(conn, params).first()


def txn_row(conn: Connection, txn_id: int, *, for_update: bool = True):
    return (_TXN_ROW_LOCKED if for_update else _TXN_ROW).execute(conn, {"p_txn": txn_id}).first()


def _wrote_nothing(row, comps) -> bool:
    """Whether committing this open transaction (``row`` from ``_TXN_TO_COMMIT``, SQLite)
    records no write (``comps``: its write components). A READ_ONLY transaction can have
    no write id (allocation refuses it)."""
    if comps or row.txn_type not in (TxnType.DEFAULT, TxnType.READ_ONLY):
        return False
    return row.txn_type == TxnType.READ_ONLY or not row.has_write_ids


def raise_not_open(state: str | None, txn_id: int) -> None:
    """Raise what Hive raises for a transaction that is not open (``raiseTxnUnexpectedState``)."""
    if state == ABORTED:
        raise TxnAborted(f"Transaction {txn_id_str(txn_id)} already aborted")
    if state == COMMITTED:
        raise NoSuchTxn(f"Transaction {txn_id_str(txn_id)} is already committed.")
    raise NoSuchTxn(f"No such transaction {txn_id_str(txn_id)}")


def require_open(conn: Connection, txn_id: int):
    """Lock the transaction's row and return it; raise unless it is open."""
    row = txn_row(conn, txn_id)
    if row is None or row.state != OPEN:
        raise_not_open(None if row is None else row.state, txn_id)
    return row


def heartbeat_txn_in(conn: Connection, txn_id: int, now: int | None = None) -> None:
    """Refresh an open transaction's heartbeat; raise as Hive does if it is not open."""
    now = now_ms() if now is None else now
    done = _HEARTBEAT_OPEN.execute(conn, {"p_txn": txn_id, "p_now": now}).rowcount
    if done < 1:
        row = txn_row(conn, txn_id, for_update=False)
        raise_not_open(None if row is None else row.state, txn_id)


def require_open_heartbeat(conn: Connection, txn_id: int, now: int) -> int:
    """``require_open`` + ``heartbeat_txn_in`` in one statement: lock the transaction's row,
    refresh its heartbeat and return its type; raise as Hive does if it is not open.

    Also what marks a transaction as one that may hold locks: ``heartbeat_count`` > 0
    (``commit_txn`` relies on it, see there).
    """
    txn_type = _HEARTBEAT_OPEN_RETURNING.execute(conn, {"p_txn": txn_id, "p_now": now}).scalar()
    if txn_type is None:
        row = txn_row(conn, txn_id, for_update=False)
        raise_not_open(None if row is None else row.state, txn_id)
    return txn_type


def abort_in(conn: Connection, txn_ids: Iterable[int], *, now: int | None = None,
             reason: str | None = None) -> list[int]:
    """Abort those of ``txn_ids`` that are open, release their locks, write ABORT_TXN events.

    Returns the ids actually aborted. Their components stay in ``txn_components`` (the
    compactor's cleaner needs to know where aborted data may lie).
    """
    ids = sorted(set(int(t) for t in txn_ids))
    if not ids:
        return []
    now = now_ms() if now is None else now
    aborted: list[int] = []
    for chunk in _chunks(ids, 500):
        rows = conn.execute(
            select(txns.c.txn_id).where(txns.c.txn_id.in_(chunk)).where(txns.c.state == OPEN)
            .order_by(txns.c.txn_id).with_for_update()
        ).all()
        found = [r.txn_id for r in rows]
        if not found:
            continue
        values = {"state": ABORTED, "ended_ms": now}
        if reason:
            values["meta_info"] = reason[:1024]
        conn.execute(update(txns).where(txns.c.txn_id.in_(found)).values(**values))
        conn.execute(delete(hive_locks).where(hive_locks.c.txn_id.in_(found)))
        aborted.extend(found)
    if aborted:
        ts = now // 1000
        notifications.append_many(conn, [
            ("ABORT_TXN", {"server": "", "servicePrincipal": "", "timestamp": ts,
                           "txnid": t, "dbsUpdated": []}, None, None)
            for t in aborted
        ])
    return aborted


def _chunks(seq: Sequence[int], size: int):
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


# ------------------------------------------------------------------------------- values

@dataclass
class TxnInfo:
    id: int
    state: TxnState
    user: str
    hostname: str
    agent_info: str | None
    heartbeat_count: int
    meta_info: str | None
    started_ms: int
    last_heartbeat_ms: int
    txn_type: int = 0


@dataclass
class OpenTxns:
    """What ``get_open_txns`` returns: the ingredients of a reader's ValidTxnList."""
    hwm: int
    txn_ids: list[int]            # open and aborted ids <= hwm, ascending
    aborted: set[int]             # the aborted ones among txn_ids
    min_open: int | None          # smallest open id, None when none is open


@dataclass
class WriteEvent:
    """One entry of commit_txn's ``writeEventInfos``."""
    write_id: int
    database: str
    table: str
    files: str
    partition: str | None = None
    table_obj: str | None = None
    partition_obj: str | None = None


@dataclass
class CommitResult:
    txn_id: int
    already_committed: bool = False
    commit_id: int | None = None
    event_ids: list[int] = field(default_factory=list)


class _Conflict(Exception):
    def __init__(self, message: str):
        self.message = message


# ---------------------------------------------------------------------------- the manager

class TxnManager:
    """Transaction bookkeeping for one server process.

    Lazy ``open_txns`` (SQLite with fsynced commits, ``Store.lazy_commits``). Opening a
    transaction is the one call whose loss in a power cut (not a process crash: a lazy
    commit survives ``kill -9``) does no harm, provided its id is never handed out twice,
    so it commits without an fsync, which makes it about twice as fast:

    * a lost open transaction never did anything durable: write ids, locks, commits and
      aborts of it are durable commits, and fsyncing the WAL makes every earlier commit,
      its open included, durable too. Its client's next call gets "No such transaction",
      as for a transaction aborted and cleaned up; its id, below the high-water mark and
      absent from TXNS, reads as committed with nothing written, which is what it is;
    * ids are never reused: an id is only handed out lazily when it is at most row 2 of
      ``next_txn_id`` (the reservation), which only durable commits raise (by
      ``RESERVE_AHEAD`` at a time); on start-up ``recover_reserved_ids`` moves the counter
      past the reservation, so after a power cut it skips every id that may have been
      handed out and lost (after a clean ``close`` the reservation is released: no gap);
    * the OPEN_TXN events of lazy opens are only served to clients once durable
      (``Store.make_durable`` in the notification reads), since event ids must not be
      reused under a client that has seen them.

    Lazy ``commit_txn`` of a transaction that wrote nothing (the commit of every read-only
    query): no write id, no write component (from ``lock`` or ``add_dynamic_partitions``),
    no ``writeEventInfos``, no ``keyValue``, and of type DEFAULT or READ_ONLY. Lost in a
    power cut, such a transaction is back open (or, if its open was lost too, unknown) and
    the reaper aborts it after ``hive.txn.timeout``, releasing any read locks it held.
    Committed or aborted, it changed no data, so no reader's view differs; anything that
    depended on the commit having happened durably is itself a durable commit (another
    client's lock granted in its place, a compaction cleaning past it), which fsyncs the
    WAL and the lazy commit with it; its COMMIT_TXN event is served only once durable, as
    above. Every other commit is fsynced before it is answered.
    """

    def __init__(self, store: Store, config):
        self.store = store
        self.config = config
        # Hive's tooManyOpenTxns: once the limit is hit, refuse until below 90% of it.
        self._too_many_open = False
        self._flag_lock = threading.Lock()
        self._open_count = 0
        self._counted_at = float("-inf")
        self.reserved_ids_used = False    # this process opened transactions lazily

    # -- open ----------------------------------------------------------------------------

    def open_txns(self, num_txns: int, user: str, hostname: str, *, agent_info: str | None = None,
                  txn_type: int = TxnType.DEFAULT, repl_policy: str | None = None,
                  repl_src_txn_ids: Sequence[int] | None = None) -> list[int]:
        if num_txns is None or num_txns <= 0:
            raise InvalidInput(f"Invalid input for number of txns: {num_txns}")
        max_batch = self.config["hive.txn.max.open.batch"]
        if num_txns > max_batch:
            log.info("open_txns asked for %d transactions; capped at hive.txn.max.open.batch=%d",
                     num_txns, max_batch)
            num_txns = max_batch
        if repl_policy or repl_src_txn_ids:
            log.info("open_txns: replication fields (replPolicy=%r, %d source txn ids) are "
                     "accepted and ignored", repl_policy, len(repl_src_txn_ids or ()))
        txn_type = int(txn_type if txn_type is not None else TxnType.DEFAULT)
        agent = agent_info if agent_info is not None else "Unknown"

        lazy = self.store.lazy_commits
        reserve_to = 0     # > 0: the ids were not covered by the reservation

        def work(conn: Connection) -> list[int]:
            nonlocal reserve_to
            self._check_open_limit(conn, num_txns)
            first = reserve_ids(conn, next_txn_id, num_txns)
            last = first + num_txns - 1
            reserve_to = 0
            if lazy and last > (_RESERVED.execute(conn).scalar() or 0):
                reserve_to = last + RESERVE_AHEAD
            now = now_ms()
            ids = list(range(first, first + num_txns))
            rows = [
                {"txn_id": t, "state": OPEN, "txn_type": txn_type, "started_ms": now,
                 "last_heartbeat_ms": now, "heartbeat_count": 0, "user_name": user or "",
                 "host": hostname or "", "agent_info": agent}
                for t in ids
            ]
            _INSERT_TXNS.execute(conn, rows[0] if num_txns == 1 else rows)
            notifications.append(conn, "OPEN_TXN", {
                "server": "", "servicePrincipal": "", "timestamp": now // 1000,
                "txnIds": ids, "fromTxnId": ids[0], "toTxnId": ids[-1],
            })
            return ids

        ids = self.store.transaction(work, durable=not lazy)
        if lazy:
            self.reserved_ids_used = True
        if reserve_to:
            # Durable, and it makes the open above durable with it (one fsync of the WAL).
            self.store.transaction(lambda conn: self._raise_reservation(conn, reserve_to))
        return ids

    @staticmethod
    def _raise_reservation(conn: Connection, to: int) -> None:
        current = _RESERVED.execute(conn).scalar()
        if current is None:
            insert_ignore(conn, next_txn_id, {"id": _RESERVED_ROW, "next_id": to})
        elif to > current:
            _SET_RESERVED.execute(conn, {"p_reserved": to})

    def recover_reserved_ids(self) -> None:
        """At start-up: move the id counter past every id a lazily committed open_txns may
        have handed out before a power cut, and release the reservation."""
        def work(conn: Connection) -> None:
            reserved = _RESERVED.execute(conn).scalar()
            if reserved is None:
                return
            nxt = _NEXT_TXN_ID.execute(conn).scalar() or 1
            if reserved >= nxt:
                log.info("transaction ids %d..%d may have been handed out before an unclean "
                         "stop; they are skipped", nxt, reserved)
                nxt = reserved + 1
                _SET_NEXT_TXN_ID.execute(conn, {"p_next": nxt})
            _SET_RESERVED.execute(conn, {"p_reserved": nxt - 1})

        self.store.transaction(work)

    def release_reserved_ids(self) -> None:
        """At a clean stop: nothing beyond the ids handed out stays reserved, so the next
        start continues without a gap. Every id handed out is below the counter, so this
        never uncovers one (also with other processes on the same database)."""
        def work(conn: Connection) -> None:
            if _RESERVED.execute(conn).scalar() is not None:
                _SET_RESERVED.execute(conn, {"p_reserved": (_NEXT_TXN_ID.execute(conn).scalar()
                                                            or 1) - 1})

        self.store.transaction(work)

    def _check_open_limit(self, conn: Connection, opening: int) -> None:
        limit = self.config["hive.max.open.txns"]
        now = time.monotonic()
        with self._flag_lock:
            # Far below the limit a recount per call is wasted work: recount at most once a
            # second then (Hive itself only recounts periodically).
            if (not self._too_many_open and self._open_count + opening < limit // 2
                    and now - self._counted_at < 1.0):
                self._open_count += opening
                return
        count = _COUNT_OPEN.execute(conn).scalar_one()
        with self._flag_lock:
            self._open_count, self._counted_at = count + opening, now
            if not self._too_many_open and count >= limit:
                self._too_many_open = True
            if self._too_many_open:
                if count < limit * 0.9:
                    self._too_many_open = False
                else:
                    raise Internal(
                        f"Maximum allowed number of open transactions ({limit}) has been "
                        f"reached. Current number of open transactions: {count}")

    # -- commit ---------------------------------------------------------------------------

    def commit_txn(self, txn_id: int, *, write_events: Sequence[WriteEvent] = (),
                   excl_write_enabled: bool | None = None, repl_policy: str | None = None,
                   key_value: tuple[int, str, str] | None = None) -> CommitResult:
        """Commit; idempotent for a committed transaction.

        ``excl_write_enabled`` is the 4.x request field: True means writers were serialized by
        EXCL_WRITE locks and the write-write conflict check is skipped; False or None (the field
        absent, as from a 3.x client) runs the check.
        """
        if repl_policy:
            log.info("commit_txn %s: replPolicy %r accepted and ignored", txn_id_str(txn_id),
                     repl_policy)
        if key_value is not None and not key_value[1].startswith(TXN_KEY_PREFIX):
            raise InvalidInput(
                f"commit_txn {txn_id_str(txn_id)}: keyValue key {key_value[1]!r} must start "
                f"with {TXN_KEY_PREFIX!r} (table id {key_value[0]})")
        check_conflicts = excl_write_enabled is not True
        # A commit that records writes is always durable; one that may have written
        # nothing finds out in the database (see "Lazy commit_txn" above), and only where
        # commits can be lazy at all (not on PostgreSQL): elsewhere the look costs a query.
        may_be_lazy = self.store.lazy_commits and not write_events and key_value is None
        sqlite = self.store.is_sqlite

        def work(conn: Connection) -> CommitResult:
            row = (_TXN_TO_COMMIT if sqlite else _TXN_ROW_LOCKED).execute(
                conn, {"p_txn": txn_id}).first()
            if row is None:
                raise_not_open(None, txn_id)
            if row.state == COMMITTED:
                return CommitResult(txn_id, already_committed=True, commit_id=row.commit_id)
            if row.state == ABORTED:
                raise_not_open(ABORTED, txn_id)
            now = now_ms()
            if key_value is not None:
                # Recorded atomically with the commit (Hive's CommitTxnKeyValue): an ingest
                # job stores its progress marker so a replay after a crash can skip work
                # that this commit already made visible.
                set_table_parameter_in(conn, key_value[0], key_value[1], key_value[2],
                                       must_exist=True)
            read_only = row.txn_type == TxnType.READ_ONLY
            comps = (_TXN_COMPONENTS.execute(conn, {"p_txn": txn_id}).all()
                     if not read_only and (not sqlite or row.has_components) else [])
            if may_be_lazy and not _wrote_nothing(row, comps):
                self.store.insist_durable(conn)
            upd_del = [c for c in comps if c.operation_type in UPDATE_DELETE and c.tbl_name]
            commit_id = None
            if upd_del:
                # Lock the txn counter: orders this commit against open_txns and other
                # update/delete commits (see the module docstring).
                commit_id = _NEXT_TXN_ID_LOCKED.execute(conn).scalar_one() - 1
                if check_conflicts:
                    conflict = self._find_conflict(conn, txn_id, commit_id, upd_del)
                    if conflict is not None:
                        abort_in(conn, [txn_id], now=now, reason=conflict)
                        raise _Conflict(conflict)
                seen = set()
                ws_rows = []
                for c in upd_del:
                    key = (c.db_name, c.tbl_name, c.part_name, c.operation_type)
                    if key in seen:
                        continue
                    seen.add(key)
                    ws_rows.append({"db_name": c.db_name, "tbl_name": c.tbl_name,
                                    "part_name": c.part_name, "txn_id": txn_id,
                                    "commit_id": commit_id, "operation_type": c.operation_type})
                _INSERT_WRITE_SET.execute(conn, ws_rows)
            if comps:
                flag = "Y" if upd_del else "N"
                _INSERT_COMPLETED.execute(conn, [
                    {"txn_id": txn_id, "db_name": c.db_name, "tbl_name": c.tbl_name,
                     "part_name": c.part_name, "write_id": c.write_id, "update_delete": flag,
                     "commit_ms": now}
                    for c in comps
                ])
                _DELETE_TXN_COMPONENTS.execute(conn, {"p_txn": txn_id})
            _MARK_COMMITTED.execute(conn, {"p_txn": txn_id, "p_commit_id": commit_id,
                                           "p_now": now})
            if row.heartbeat_count:
                # Only lock() creates a transaction's locks, and it heartbeats the
                # transaction in the same database transaction (require_open_heartbeat): a
                # transaction never heartbeated holds no locks and needs no release.
                _RELEASE_TXN_LOCKS.execute(conn, {"p_txn": txn_id})
            ts = now // 1000
            events = []
            for w in write_events:
                events.append(("ACID_WRITE_EVENT", {
                    "server": "", "servicePrincipal": "", "timestamp": ts, "txnid": txn_id,
                    "writeId": w.write_id, "database": w.database, "table": w.table,
                    "partition": w.partition, "files": w.files, "tableObj": w.table_obj,
                    "partitionObj": w.partition_obj,
                }, w.database, w.table))
            events.append(("COMMIT_TXN", {
                "server": "", "servicePrincipal": "", "timestamp": ts, "txnid": txn_id,
                "writeIds": [w.write_id for w in write_events],
                "databases": [w.database for w in write_events],
                "tables": [w.table for w in write_events],
                "partitions": [w.partition for w in write_events],
                "tableObjs": [w.table_obj for w in write_events],
                "partitionObjs": [w.partition_obj for w in write_events],
                "files": [w.files for w in write_events],
            }, None, None))
            ids = notifications.append_many(conn, events)
            return CommitResult(txn_id, commit_id=commit_id, event_ids=ids)

        holder: list[str] = []

        def guarded(conn: Connection):
            try:
                return work(conn)
            except _Conflict as c:
                holder.append(c.message)
                return None  # commit the abort, then raise below

        result = self.store.transaction(guarded, durable=not may_be_lazy)
        if holder:
            raise TxnAborted(holder[0])
        return result

    @staticmethod
    def _find_conflict(conn: Connection, txn_id: int, commit_id: int, upd_del) -> str | None:
        for c in upd_del:
            part_cond = (write_set.c.part_name == c.part_name if c.part_name is not None
                         else write_set.c.part_name.is_(None))
            hit = conn.execute(
                select(write_set)
                .where(write_set.c.db_name == c.db_name)
                .where(write_set.c.tbl_name == c.tbl_name)
                .where(part_cond)
                .where(write_set.c.commit_id >= txn_id)
                .where(write_set.c.txn_id != txn_id)
                .where(write_set.c.operation_type.in_(UPDATE_DELETE))
                .order_by(write_set.c.commit_id)
                .limit(1)
            ).first()
            if hit is not None:
                resource = f"{c.db_name}/{c.tbl_name}"
                if c.part_name is not None:
                    resource += f"/{c.part_name}"
                return (f"Aborting [{txn_id_str(txn_id)},{commit_id}] due to a write conflict on "
                        f"{resource} committed by [{txn_id_str(hit.txn_id)},{hit.commit_id}] "
                        f"{_OP_LETTER.get(c.operation_type, '?')}/"
                        f"{_OP_LETTER.get(hit.operation_type, '?')}")
        return None

    # -- abort ----------------------------------------------------------------------------

    def abort_txn(self, txn_id: int, *, repl_policy: str | None = None,
                  error_code: int | None = None) -> bool:
        """Abort one transaction. Returns False when it was already aborted (a no-op)."""
        if repl_policy:
            log.info("abort_txn %s: replPolicy %r accepted and ignored", txn_id_str(txn_id),
                     repl_policy)

        def work(conn: Connection) -> bool:
            row = txn_row(conn, txn_id)
            if row is None or row.state == COMMITTED:
                raise_not_open(None if row is None else row.state, txn_id)
            if row.state == ABORTED:
                log.info("abort_txn(%s): already aborted", txn_id_str(txn_id))
                return False
            reason = f"aborted by client (errorCode {error_code})" if error_code else None
            abort_in(conn, [txn_id], reason=reason)
            return True

        return self.store.transaction(work)

    def abort_txns(self, txn_ids: Sequence[int], *, error_code: int | None = None) -> list[int]:
        """Best effort: aborts the open ones, ignores the rest (as Hive does)."""
        ids = list(txn_ids or ())
        aborted = self.store.transaction(lambda conn: abort_in(conn, ids))
        if len(aborted) != len(set(ids)):
            log.warning("abort_txns: %d of %d transactions were open and got aborted",
                        len(aborted), len(set(ids)))
        return aborted

    # -- snapshots --------------------------------------------------------------------------

    def get_open_txns(self, exclude_types: Iterable[int] | None = (TxnType.READ_ONLY,)) -> OpenTxns:
        excluded = {int(t) for t in (exclude_types or ())}
        with self.store.read() as conn:
            hwm = current_hwm(conn)
            rows = _OPEN_AND_ABORTED.rows(conn, {"p_hwm": hwm})
        ids: list[int] = []
        aborted: set[int] = set()
        min_open = None
        for txn_id, state, txn_type in rows:
            if txn_type in excluded:
                continue
            ids.append(txn_id)
            if state == ABORTED:
                aborted.add(txn_id)
            elif min_open is None:
                min_open = txn_id
        return OpenTxns(hwm, ids, aborted, min_open)

    def get_open_txns_info(self) -> tuple[int, list[TxnInfo]]:
        with self.store.read() as conn:
            hwm = current_hwm(conn)
            rows = conn.execute(
                select(txns).where(txns.c.state.in_((OPEN, ABORTED)))
                .where(txns.c.txn_id <= hwm).order_by(txns.c.txn_id)
            ).all()
        return hwm, [_info(r) for r in rows]

    def get_txn(self, txn_id: int) -> TxnInfo | None:
        with self.store.read() as conn:
            row = txn_row(conn, txn_id, for_update=False)
        return None if row is None else _info(row)

    def txn_state(self, txn_id: int) -> TxnState | None:
        info = self.get_txn(txn_id)
        return None if info is None else info.state

    # -- heartbeats -------------------------------------------------------------------------

    def heartbeat(self, *, lock_id: int | None = None, txn_id: int | None = None) -> None:
        def work(conn: Connection) -> None:
            now = now_ms()
            if lock_id:
                from hms_txn.domain.locks import heartbeat_lock_in
                heartbeat_lock_in(conn, lock_id, now)
            if txn_id:
                heartbeat_txn_in(conn, txn_id, now)

        self.store.transaction(work)

    def heartbeat_txn_range(self, min_id: int, max_id: int) -> tuple[set[int], set[int]]:
        """Heartbeat every open transaction in [min, max]; returns (aborted, nosuch)."""
        if max_id < min_id:
            return set(), set()
        if max_id - min_id > 1_000_000:
            raise InvalidInput(f"heartbeat_txn_range: range {min_id}..{max_id} is too large")

        def work(conn: Connection):
            now = now_ms()
            conn.execute(
                update(txns).where(txns.c.txn_id.between(min_id, max_id))
                .where(txns.c.state == OPEN)
                .values(last_heartbeat_ms=now, heartbeat_count=txns.c.heartbeat_count + 1)
            )
            rows = conn.execute(
                select(txns.c.txn_id, txns.c.state)
                .where(txns.c.txn_id.between(min_id, max_id))
                .where(txns.c.state.in_((OPEN, ABORTED)))
            ).all()
            return rows

        rows = self.store.transaction(work)
        open_ids = {r.txn_id for r in rows if r.state == OPEN}
        aborted = {r.txn_id for r in rows if r.state == ABORTED}
        nosuch = set(range(min_id, max_id + 1)) - open_ids - aborted
        return aborted, nosuch

    # -- timeouts ---------------------------------------------------------------------------

    def abort_timed_out(self, timeout_s: float | None = None, *, batch: int = 1000) -> list[int]:
        """Abort open transactions whose last heartbeat is older than the timeout."""
        timeout_s = self.config["hive.txn.timeout"] if timeout_s is None else timeout_s
        aborted_all: list[int] = []
        while True:
            cutoff = now_ms() - int(timeout_s * 1000)

            def work(conn: Connection) -> list[int]:
                ids = [r.txn_id for r in conn.execute(
                    select(txns.c.txn_id).where(txns.c.state == OPEN)
                    .where(txns.c.last_heartbeat_ms < cutoff)
                    .order_by(txns.c.txn_id).limit(batch)
                )]
                if not ids:
                    return []
                # abort_in re-checks state under the row lock; re-check the heartbeat too so
                # a heartbeat that lands between the scan and the lock saves the txn.
                fresh = {r.txn_id for r in conn.execute(
                    select(txns.c.txn_id).where(txns.c.txn_id.in_(ids))
                    .where(txns.c.last_heartbeat_ms < cutoff).with_for_update()
                )}
                return abort_in(conn, sorted(fresh), reason="timed out")

            aborted = self.store.transaction(work)
            if aborted:
                log.info("aborted %d timed-out transaction(s): %s", len(aborted),
                         ", ".join(txn_id_str(t) for t in aborted[:20]))
            aborted_all.extend(aborted)
            if len(aborted) < batch:
                return aborted_all


def _info(row) -> TxnInfo:
    return TxnInfo(
        id=row.txn_id, state=STATE_CODE_TO_ENUM[row.state], user=row.user_name,
        hostname=row.host, agent_info=row.agent_info, heartbeat_count=row.heartbeat_count,
        meta_info=row.meta_info, started_ms=row.started_ms,
        last_heartbeat_ms=row.last_heartbeat_ms, txn_type=row.txn_type,
    )
