"""Transactions: open, commit, abort, snapshots, heartbeats and timeouts.

Semantics follow Hive's ``TxnHandler`` (see ``shared/spec/hms-wire-facts.md``, "Server
semantics"). Every function runs inside the caller's database transaction (the service
layer's unit of work) and writes its notification events in it, so a change and its event
are committed together or not at all. Plain Python in, plain Python out: no Thrift types.

Cross-process safety (two servers on one PostgreSQL database):

* transaction ids come from the single row of ``next_txn_id``, read ``FOR UPDATE`` and
  bumped in the transaction that inserts the new ``txns`` rows;
* a transaction's row is locked ``FOR UPDATE`` by whatever changes its state (commit,
  abort, heartbeat, lock, write id allocation), so a commit and a timeout abort of the same
  transaction cannot both win;
* a commit that carries UPDATE/DELETE components also locks ``next_txn_id``: its commit id is
  the highest id handed out so far, and the write-write conflict check runs while no other
  such commit and no ``open_txns`` can interleave (the ordering Hive relies on).

The id reservation (row 2 of ``next_txn_id``). Where ``open_txns`` commits without a flush
(``lazy_commit``, see ``hms_txn.service.txn``), its ids must never be handed out twice even
if a power cut takes the open back: an id is only handed out lazily when it is at most the
reservation, which only durable commits raise (by ``RESERVE_AHEAD`` at a time); at start-up
``recover_reserved_ids`` moves the counter past the reservation, so after a power cut it
skips every id that may have been handed out and lost (after a clean stop
``release_reserved_ids`` leaves no gap).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from sqlalchemy import and_, bindparam, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import Internal, InvalidInput
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.events.event_messages.templates import Templates
from hms_txn.domain.txn.txn_records import (ABORTED, COMMITTED, NEXT_TXN_ID_LOCKED, OPEN, TxnState,
                                        TxnType, abort_in, current_hwm, now_ms, raise_not_open,
                                        txn_id_str, txn_row)
from hms_txn.store.prepared import Prepared
from hms_txn.store.schema import (next_txn_id,
                                  txns)
from hms_txn.store.sql import (insert_ignore, reserve_ids, statements_are_round_trips,
                               writer_is_exclusive)

log = logging.getLogger(__name__)

STATE_CODE_TO_ENUM = {OPEN: TxnState.OPEN, ABORTED: TxnState.ABORTED,
                      COMMITTED: TxnState.COMMITTED}

# Row 2 of ``next_txn_id``: the highest transaction id that a lazily committed
# ``open_txns`` may have handed out (see the module docstring).
_RESERVED_ROW = 2
_next_id = next_txn_id.c.next_id     # the counter column of both rows
_RESERVED = Prepared(select(_next_id).where(next_txn_id.c.id == _RESERVED_ROW))
# A lazy open's id bump, which also reads the reservation: one statement instead of two.
# Only where the writer is exclusive (SQLite): on PostgreSQL a READ COMMITTED statement's
# snapshot predates its wait for the counter's row lock, so the reservation it read could
# be one that another process's release_reserved_ids lowered meanwhile; there the
# reservation is read by a statement of its own, after the lock.
_BUMP_READING_RESERVED = Prepared(
    update(next_txn_id).where(next_txn_id.c.id == 1)
    .values(next_id=_next_id + bindparam("p_count", type_=_next_id.type))
    .returning(_next_id, select(_next_id).where(next_txn_id.c.id == _RESERVED_ROW)
               .scalar_subquery().label("reserved")))
_SET_RESERVED = Prepared(update(next_txn_id).where(next_txn_id.c.id == _RESERVED_ROW)
                    .values(next_id=bindparam("p_reserved", type_=_next_id.type)))
_SET_NEXT_TXN_ID = Prepared(update(next_txn_id).where(next_txn_id.c.id == 1)
                       .values(next_id=bindparam("p_next", type_=_next_id.type)))
# How far ahead of the ids handed out a durable commit reserves: one extra fsync per this
# many lazily opened transactions, and at most this many ids skipped after a power cut.
RESERVE_AHEAD = 1000
_INSERT_TXNS = Prepared(insert(txns))
_INSERT_TXN_READING_RESERVED = Prepared(insert(txns).returning(
    select(_next_id).where(next_txn_id.c.id == _RESERVED_ROW).scalar_subquery()
    .label("reserved")))
_COUNT_OPEN = Prepared(select(func.count()).select_from(txns).where(txns.c.state == OPEN))
# Every reader's snapshot runs this, and it returns a row per open or aborted transaction.
# Two equalities, not IN: an IN list is an expanding parameter, which keeps a statement off
# hms_txn.store.prepared's direct path (SQLite turns the OR into the same index lookups).
_OPEN_AND_ABORTED = Prepared(select(txns.c.txn_id, txns.c.state, txns.c.txn_type)
                        .where(or_(txns.c.state == OPEN, txns.c.state == ABORTED))
                        .where(txns.c.txn_id <= bindparam("p_hwm")).order_by(txns.c.txn_id))
# The same with the high watermark, in one statement (get_open_txns, where statements are
# round trips): the counter's row joined to the transactions below it.
_SNAPSHOT = Prepared(
    select(next_txn_id.c.next_id, txns.c.txn_id, txns.c.state, txns.c.txn_type)
    .select_from(next_txn_id.outerjoin(txns, and_(
        txns.c.txn_id < next_txn_id.c.next_id,
        or_(txns.c.state == OPEN, txns.c.state == ABORTED))))
    .where(next_txn_id.c.id == 1).order_by(txns.c.txn_id))


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
class OpenRequest:
    """An ``open_txns`` request as both forms of the call run it (``TxnManager.open_request``)."""
    count: int
    txn_type: int
    user: str
    host: str
    agent: str


@dataclass
class Opened:
    """What ``open_txns`` did: the ids, and whether it raised the id reservation (then
    this commit must be durable even where the open could be lazy)."""
    txn_ids: list[int]
    raised_reservation: bool = False


# ---------------------------------------------------------------------------- the manager

class TxnManager:
    """Transaction bookkeeping (one per server process: it keeps the open-transaction
    count of Hive's ``hive.max.open.txns`` check). ``messages`` builds the notification
    events of transactions (``event_messages``)."""

    def __init__(self, config, messages: em.MessageContext):
        self.config = config
        self.messages = messages
        # The transaction events' messages with holes for the database to fill
        # (PostgreSQL's one-statement form: hms_txn.domain.txn.one_statement).
        self.templates = Templates(messages)
        # Hive's tooManyOpenTxns: once the limit is hit, refuse until below 90% of it.
        self._too_many_open = False
        self._flag_lock = threading.Lock()
        self._open_count = 0
        self._counted_at = float("-inf")
        self.reserved_ids_used = False    # this process opened transactions lazily

    # -- open ----------------------------------------------------------------------------

    def open_txns(self, conn: Connection, num_txns: int, user: str, hostname: str, *,
                  agent_info: str | None = None, txn_type: int = TxnType.DEFAULT,
                  repl_policy: str | None = None,
                  repl_src_txn_ids: Sequence[int] | None = None,
                  lazy_commit: bool = False) -> Opened:
        """Open ``num_txns`` transactions. ``lazy_commit``: the caller commits without a
        flush, so the ids must stay within the reservation (see the module docstring)."""
        request = self.open_request(num_txns, user, hostname, agent_info=agent_info,
                                    txn_type=txn_type, repl_policy=repl_policy,
                                    repl_src_txn_ids=repl_src_txn_ids)
        num_txns, txn_type = request.count, request.txn_type
        self._check_open_limit(conn, num_txns)
        bumped = (_BUMP_READING_RESERVED.execute(conn, {"p_count": num_txns}).first()
                   if lazy_commit and writer_is_exclusive(conn) else None)
        reserved = None
        if bumped is not None:
            first, reserved = int(bumped[0]) - num_txns, bumped[1]
        else:   # durable, PostgreSQL, or a fresh database without the counter row
            first = reserve_ids(conn, next_txn_id, num_txns)
        now = now_ms()
        ids = list(range(first, first + num_txns))
        rows = [
            {"txn_id": t, "state": OPEN, "txn_type": txn_type, "started_ms": now,
             "last_heartbeat_ms": now, "heartbeat_count": 0, "user_name": request.user,
             "host": request.host, "agent_info": request.agent}
            for t in ids
        ]
        if lazy_commit and bumped is None and num_txns == 1:
            # The row's INSERT also reads the reservation: a statement begun after the
            # counter's lock was granted, so it sees a release_reserved_ids that committed
            # while this call waited for that lock (one round trip less on PostgreSQL).
            reserved = _INSERT_TXN_READING_RESERVED.execute(conn, rows[0]).scalar()
        else:
            _INSERT_TXNS.execute(conn, rows[0] if num_txns == 1 else rows)
            if lazy_commit and bumped is None:
                reserved = _RESERVED.execute(conn).scalar()
        last = first + num_txns - 1
        raised = False
        if lazy_commit:
            self.reserved_ids_used = True
            if last > (reserved or 0):
                _raise_reservation(conn, last + RESERVE_AHEAD)
                raised = True
        if txn_type != TxnType.READ_ONLY:     # Hive logs no READ_ONLY transaction
            notifications.append(conn, self.messages.message_format,
                                 em.open_txns(self.messages, ids[0], ids[-1]))
        return Opened(ids, raised)

    def open_request(self, num_txns: int, user: str, hostname: str, *,
                     agent_info: str | None = None, txn_type: int | None = TxnType.DEFAULT,
                     repl_policy: str | None = None,
                     repl_src_txn_ids: Sequence[int] | None = None) -> OpenRequest:
        """An ``open_txns`` request checked and capped (both forms of the call)."""
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
        return OpenRequest(num_txns, int(txn_type if txn_type is not None else TxnType.DEFAULT),
                           user or "", hostname or "",
                           agent_info if agent_info is not None else "Unknown")

    @staticmethod
    def recover_reserved_ids(conn: Connection) -> None:
        """At start-up: move the id counter past every id a lazily committed open_txns may
        have handed out before a power cut, and release the reservation. (On PostgreSQL
        also after the database server restarted under running servers: ``Store``'s
        ``on_database_restart``.) The counter row is locked first: an open_txns of another
        process in flight compares its ids with the reservation under that lock."""
        nxt = NEXT_TXN_ID_LOCKED.execute(conn).scalar() or 1
        reserved = _RESERVED.execute(conn).scalar()
        if reserved is None:
            return
        if reserved >= nxt:
            log.info("transaction ids %d..%d may have been handed out before an unclean "
                     "stop; they are skipped", nxt, reserved)
            nxt = reserved + 1
            _SET_NEXT_TXN_ID.execute(conn, {"p_next": nxt})
        _SET_RESERVED.execute(conn, {"p_reserved": nxt - 1})

    @staticmethod
    def release_reserved_ids(conn: Connection) -> None:
        """At a clean stop: nothing beyond the ids handed out stays reserved, so the next
        start continues without a gap. Every id handed out is below the counter, so this
        never uncovers one (also with other processes on the same database: the counter
        row is locked first, so an open_txns in flight has committed its ids)."""
        nxt = NEXT_TXN_ID_LOCKED.execute(conn).scalar() or 1
        if _RESERVED.execute(conn).scalar() is not None:
            _SET_RESERVED.execute(conn, {"p_reserved": nxt - 1})

    def _check_open_limit(self, conn: Connection, opening: int) -> None:
        if self.open_limit(opening) is not None:
            self.counted_open(_COUNT_OPEN.execute(conn).scalar_one(), opening)

    def open_limit(self, opening: int) -> int | None:
        """Hive's ``hive.max.open.txns`` check, before opening ``opening`` transactions: None
        when no count is due (far below the limit and counted within the last second: the
        count kept here is bumped instead), else the open count at which the open is
        refused; the caller then counts and reports the count (``counted_open``)."""
        limit = self.config["hive.max.open.txns"]
        with self._flag_lock:
            # Far below the limit a recount per call is wasted work: recount at most once a
            # second then (Hive itself only recounts periodically).
            if (not self._too_many_open and self._open_count + opening < limit // 2
                    and time.monotonic() - self._counted_at < 1.0):
                self._open_count += opening
                return None
            return math.ceil(limit * 0.9) if self._too_many_open else limit

    def counted_open(self, count: int, opening: int) -> None:
        """The open count was ``count``: raise if the open is refused (once the limit is
        hit, until the count is below 90% of it)."""
        limit = self.config["hive.max.open.txns"]
        with self._flag_lock:
            self._open_count, self._counted_at = count + opening, time.monotonic()
            if not self._too_many_open and count >= limit:
                self._too_many_open = True
            if self._too_many_open:
                if count < limit * 0.9:
                    self._too_many_open = False
                else:
                    raise Internal(
                        f"Maximum allowed number of open transactions ({limit}) has been "
                        f"reached. Current number of open transactions: {count}")

    # -- abort ----------------------------------------------------------------------------

    def abort_txn(self, conn: Connection, txn_id: int, *, repl_policy: str | None = None,
                  error_code: int | None = None) -> bool:
        """Abort one transaction. Returns False when it was already aborted (a no-op)."""
        if repl_policy:
            log.info("abort_txn %s: replPolicy %r accepted and ignored", txn_id_str(txn_id),
                     repl_policy)
        row = txn_row(conn, txn_id)
        if row is None or row.state == COMMITTED:
            raise_not_open(None if row is None else row.state, txn_id)
        if row.state == ABORTED:
            log.info("abort_txn(%s): already aborted", txn_id_str(txn_id))
            return False
        reason = f"aborted by client (errorCode {error_code})" if error_code else None
        abort_in(conn, [txn_id], messages=self.messages, reason=reason)
        return True

    def abort_txns(self, conn: Connection, txn_ids: Sequence[int]) -> list[int]:
        """Best effort: aborts the open ones, ignores the rest (as Hive does)."""
        ids = list(txn_ids or ())
        aborted = abort_in(conn, ids, messages=self.messages)
        if len(aborted) != len(set(ids)):
            log.warning("abort_txns: %d of %d transactions were open and got aborted",
                        len(aborted), len(set(ids)))
        return aborted

    # -- snapshots --------------------------------------------------------------------------

    @staticmethod
    def get_open_txns(conn: Connection,
                      exclude_types: Iterable[int] | None = (TxnType.READ_ONLY,)) -> OpenTxns:
        if statements_are_round_trips(conn):
            # The high watermark and the transactions below it in one statement: no row
            # when there is no counter yet, a row of NULLs after it when none is open.
            rows = _SNAPSHOT.rows(conn)
            hwm = int(rows[0][0]) - 1 if rows else 0
            rows = [r[1:] for r in rows if r[1] is not None]
        else:
            hwm = current_hwm(conn)
            rows = _OPEN_AND_ABORTED.rows(conn, {"p_hwm": hwm})
        return TxnManager.open_txns_of(hwm, rows, exclude_types)

    @staticmethod
    def open_txns_of(hwm: int, rows: Iterable[tuple[int, str, int]],
                     exclude_types: Iterable[int] | None) -> OpenTxns:
        """A snapshot from the high watermark and the (id, state, type) rows of the open
        and aborted transactions below it, ascending, leaving out ``exclude_types``."""
        excluded = {int(t) for t in (exclude_types or ())}
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

    @staticmethod
    def get_open_txns_info(conn: Connection) -> tuple[int, list[TxnInfo]]:
        hwm = current_hwm(conn)
        rows = conn.execute(
            select(txns).where(txns.c.state.in_((OPEN, ABORTED)))
            .where(txns.c.txn_id <= hwm).order_by(txns.c.txn_id)
        ).all()
        return hwm, [_info(r) for r in rows]

    @staticmethod
    def get_txn(conn: Connection, txn_id: int) -> TxnInfo | None:
        row = txn_row(conn, txn_id, for_update=False)
        return None if row is None else _info(row)

    # -- heartbeats -------------------------------------------------------------------------

    @staticmethod
    def heartbeat_txn_range(conn: Connection, min_id: int, max_id: int
                            ) -> tuple[set[int], set[int]]:
        """Heartbeat every open transaction in [min, max]; returns (aborted, nosuch)."""
        if max_id < min_id:
            return set(), set()
        if max_id - min_id > 1_000_000:
            raise InvalidInput(f"heartbeat_txn_range: range {min_id}..{max_id} is too large")
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
        open_ids = {r.txn_id for r in rows if r.state == OPEN}
        aborted = {r.txn_id for r in rows if r.state == ABORTED}
        nosuch = set(range(min_id, max_id + 1)) - open_ids - aborted
        return aborted, nosuch

    # -- timeouts ---------------------------------------------------------------------------

    def abort_timed_out(self, conn: Connection, timeout_s: float, *,
                        batch: int = 1000) -> list[int]:
        """Abort up to ``batch`` open transactions whose last heartbeat is older than the
        timeout (the caller repeats, one transaction each, until fewer come back)."""
        cutoff = now_ms() - int(timeout_s * 1000)
        ids = [r.txn_id for r in conn.execute(
            select(txns.c.txn_id).where(txns.c.state == OPEN)
            .where(txns.c.last_heartbeat_ms < cutoff)
            .order_by(txns.c.txn_id).limit(batch)
        )]
        if not ids:
            return []
        # abort_in re-checks state under the row lock; re-check the heartbeat too so a
        # heartbeat that lands between the scan and the lock saves the txn.
        fresh = {r.txn_id for r in conn.execute(
            select(txns.c.txn_id).where(txns.c.txn_id.in_(ids))
            .where(txns.c.last_heartbeat_ms < cutoff).with_for_update()
        )}
        aborted = abort_in(conn, sorted(fresh), messages=self.messages, reason="timed out")
        if aborted:
            log.info("aborted %d timed-out transaction(s): %s", len(aborted),
                     ", ".join(txn_id_str(t) for t in aborted[:20]))
        return aborted


def seed_txn_id(conn: Connection, seed: int) -> None:
    """Hive's TxnHandler.seedTxnId (MSCK REPAIR of a transactional table whose files carry
    visibility ids the metastore never handed out): the next transaction id becomes
    ``seed``. Refused when an id at or above it was handed out already (the counter never
    goes back)."""
    hwm = reserve_ids(conn, next_txn_id, 1) - 1    # locks the counter row (the bump is reset)
    if hwm >= seed:
        raise InvalidInput(f"Invalid txnId seed {seed}, the highWaterMark is {hwm}")
    _SET_NEXT_TXN_ID.execute(conn, {"p_next": seed})
    log.info("transaction ids seeded: the next one is %d", seed)


def _raise_reservation(conn: Connection, to: int) -> None:
    current = _RESERVED.execute(conn).scalar()
    if current is None:
        insert_ignore(conn, next_txn_id, {"id": _RESERVED_ROW, "next_id": to})
    elif to > current:
        _SET_RESERVED.execute(conn, {"p_reserved": to})


def _info(row) -> TxnInfo:
    return TxnInfo(
        id=row.txn_id, state=STATE_CODE_TO_ENUM[row.state], user=row.user_name,
        hostname=row.host, agent_info=row.agent_info, heartbeat_count=row.heartbeat_count,
        meta_info=row.meta_info, started_ms=row.started_ms,
        last_heartbeat_ms=row.last_heartbeat_ms, txn_type=row.txn_type,
    )
