"""The compactor's side of the compaction queue and the transaction tables (Hive's
``CompactionTxnHandler``): claiming requests, moving them through their states, the history,
what the Initiator scans, what blocks the Cleaner and what cleaning purges.

States (``hms_txn.domain.txn.compaction_queue``): initiated -> working -> ready for cleaning ->
succeeded, or failed / refused; the Initiator also records "attempted" (its check failed).
Finished entries move from ``compaction_queue`` to ``completed_compactions`` (the history),
which keeps the newest ``hive.compactor.history.retention.*`` entries of each kind per
table/partition.

Every function runs inside the caller's database transaction: the compactor's threads
(``hms_txn.service.compactor``) make each state change one unit of work of its own,
conditional on the entry still being in the state (and, for a worker, still owned by the
worker) the caller saw, so a worker declared dead (timed out) that comes back cannot
overwrite the state of the retried request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from hms_txn.domain.events import event_messages as em
from hms_txn.domain.txn.compaction_queue import (ABORTED, ATTEMPTED, DID_NOT_INITIATE, FAILED,
                                                 INITIATED, READY_FOR_CLEANING, REFUSED, SUCCEEDED,
                                                 WORKING, next_txn_id_now)
from hms_txn.domain.txn.txn_records import ABORTED as TXN_ABORTED
from hms_txn.domain.txn.txn_records import COMMITTED as TXN_COMMITTED
from hms_txn.domain.txn.txn_records import OPEN as TXN_OPEN
from hms_txn.domain.txn.txn_records import TxnType, abort_in, now_ms, txn_row
from hms_txn.store.schema import (compaction_queue, completed_compactions,
                                  completed_txn_components, hive_locks, next_compaction_id,
                                  txn_components, txn_to_write_id, txns)
from hms_txn.store.sql import lock_mutex, reserve_ids

Q = compaction_queue.c
_QUEUE_COLUMNS = [c.name for c in compaction_queue.columns]


@dataclass
class Entry:
    """A compaction_queue row."""
    id: int
    db: str
    table: str
    partition: str | None
    ctype: int
    state: str
    worker_id: str | None
    run_as: str | None
    txn_id: int | None
    highest_write_id: int | None
    next_txn_id: int | None
    commit_ms: int | None
    start_ms: int | None
    properties: str | None

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}" + (f"/{self.partition}" if self.partition else "")


def entry_of(r) -> Entry:
    return Entry(r.id, r.db_name, r.tbl_name, r.part_name, r.ctype, r.state, r.worker_id,
                 r.run_as, r.txn_id, r.highest_write_id, r.next_txn_id, r.commit_ms, r.start_ms,
                 r.properties)


def _object(table, db: str, tbl: str, part: str | None):
    c = table.c
    cond = (c.db_name == db) & (c.tbl_name == tbl)
    return cond & (c.part_name == part if part is not None else c.part_name.is_(None))


def get_entry(conn: Connection, entry_id: int) -> Entry | None:
    r = conn.execute(select(compaction_queue).where(Q.id == entry_id)).first()
    return None if r is None else entry_of(r)


# -- worker ------------------------------------------------------------------------------------

def any_initiated(conn: Connection) -> bool:
    """Whether a request waits for a worker (a read: idle polls stay read-only)."""
    return conn.execute(select(Q.id).where(Q.state == INITIATED).limit(1)).first() is not None


def claim_next(conn: Connection, worker_id: str, worker_version: str, *,
               pool_name: str | None = None, pool_timeout_ms: int | None = None,
               like: Entry | None = None) -> Entry | None:
    """Take the oldest initiated request: state working, owned by ``worker_id``.

    The one claim of the queue: our Workers and a Hive Worker running elsewhere
    (``find_next_compact2``) both take entries here, under the "compaction" mutex and only
    from state initiated, so no two ever take the same entry. ``pool_name``: only requests
    of that pool; ``pool_timeout_ms`` (without a pool): only requests of no pool or
    enqueued longer ago than that (Hive's NextCompactionFunction); ``like``: only requests
    of the same table and type as that entry (a worker that runs several in one Spark
    application)."""
    lock_mutex(conn, "compaction")
    query = select(compaction_queue).where(Q.state == INITIATED)
    if like is not None:
        query = query.where((Q.db_name == like.db) & (Q.tbl_name == like.table) &
                            (Q.ctype == like.ctype))
    if pool_name:
        query = query.where(Q.pool_name == pool_name)
    elif pool_timeout_ms is not None:
        query = query.where(or_(Q.pool_name.is_(None),
                                Q.enqueue_ms < now_ms() - pool_timeout_ms))
    r = conn.execute(query.order_by(Q.id).limit(1)).first()
    if r is None:
        return None
    conn.execute(update(compaction_queue).where(Q.id == r.id).values(
        state=WORKING, worker_id=worker_id, worker_version=worker_version,
        start_ms=now_ms(), txn_id=None, highest_write_id=None, error_message=None))
    return entry_of(conn.execute(select(compaction_queue).where(Q.id == r.id)).first())


def _mine(entry_id: int, worker_id: str):
    return (Q.id == entry_id) & (Q.state == WORKING) & (Q.worker_id == worker_id)


def set_worker_progress(conn: Connection, entry_id: int, worker_id: str, **values) -> bool:
    """Record txn_id / highest_write_id / hadoop_job_id ...; False if no longer ours."""
    return conn.execute(
        update(compaction_queue).where(_mine(entry_id, worker_id)).values(**values)
    ).rowcount > 0


def still_mine(conn: Connection, entry_id: int, worker_id: str) -> bool:
    return conn.execute(select(Q.id).where(_mine(entry_id, worker_id))).first() is not None


def mark_ready_for_cleaning(conn: Connection, entry_id: int, worker_id: str | None) -> bool:
    cond = _mine(entry_id, worker_id) if worker_id else (Q.id == entry_id)
    return conn.execute(update(compaction_queue).where(cond).values(
        state=READY_FOR_CLEANING, next_txn_id=next_txn_id_now(conn), commit_ms=now_ms(),
        error_message=None)).rowcount > 0


def requeue(conn: Connection, entry_id: int, worker_id: str) -> bool:
    """A worker gives its request back (shutting down): initiated again."""
    return conn.execute(
        update(compaction_queue).where(_mine(entry_id, worker_id)).values(
            state=INITIATED, worker_id=None, start_ms=None, txn_id=None, highest_write_id=None)
    ).rowcount > 0


def _to_history(conn: Connection, entry_id: int, state: str, message: str | None,
                retention: dict | None) -> bool:
    r = conn.execute(select(compaction_queue).where(Q.id == entry_id)).first()
    if r is None:
        return False
    values = {name: getattr(r, name) for name in _QUEUE_COLUMNS}
    values["state"] = state
    values["end_ms"] = now_ms()
    if message is not None:
        values["error_message"] = message[:4000]
    conn.execute(insert(completed_compactions).values(**values))
    conn.execute(delete(compaction_queue).where(Q.id == entry_id))
    if retention:
        _purge_object(conn, r.db_name, r.tbl_name, r.part_name, retention)
    return True


def finish(conn: Connection, entry_id: int, state: str, message: str | None = None, *,
           worker_id: str | None = None, expect_state: str | tuple[str, ...] | None = None,
           retention: dict | None = None) -> bool:
    """Move a queue entry to the history as failed / refused / succeeded; only if owned by
    ``worker_id`` / in (one of) ``expect_state``, when given."""
    cond = Q.id == entry_id
    if worker_id:
        cond = _mine(entry_id, worker_id)
    elif expect_state:
        states = (expect_state,) if isinstance(expect_state, str) else expect_state
        cond = cond & Q.state.in_(states)
    if conn.execute(select(Q.id).where(cond).with_for_update()).first() is None:
        return False
    return _to_history(conn, entry_id, state, message, retention)


def worker_cutoff_ms(timeout_s: float) -> int:
    """Requests 'working' since before this (ms since the epoch) have timed out."""
    return now_ms() - int(timeout_s * 1000)


def any_timed_out(conn: Connection, cutoff_ms: int) -> bool:
    """Whether a request is 'working' since before ``cutoff_ms`` (a read: in the common
    case nothing timed out and nothing is written)."""
    return conn.execute(select(Q.id).where(Q.state == WORKING).where(Q.start_ms < cutoff_ms)
                        .limit(1)).first() is not None


def revoke_timed_out(conn: Connection, cutoff_ms: int, *,
                     messages: em.MessageContext) -> list[tuple[int, str]]:
    """Hive's revokeTimedoutWorkers: requests 'working' since before ``cutoff_ms``
    (``worker_cutoff_ms``) go back to initiated (their compaction transaction, if still
    open, is aborted so the dead worker's output can never become visible: ``messages``
    builds its ABORT_TXN); one whose transaction did commit is ready for cleaning. Returns
    (id, new state) pairs."""
    lock_mutex(conn, "compaction")
    rows = conn.execute(select(compaction_queue).where(Q.state == WORKING)
                        .where(Q.start_ms < cutoff_ms).order_by(Q.id)).all()
    done = []
    for r in rows:
        state = None
        if r.txn_id:
            t = txn_row(conn, r.txn_id)
            state = None if t is None else t.state
            if state == TXN_OPEN:
                abort_in(conn, [r.txn_id], messages=messages,
                         reason=f"compaction {r.id} worker {r.worker_id} timed out")
                state = TXN_ABORTED
        if state == TXN_COMMITTED:
            conn.execute(update(compaction_queue).where(Q.id == r.id).values(
                state=READY_FOR_CLEANING, next_txn_id=next_txn_id_now(conn),
                commit_ms=now_ms()))
            done.append((r.id, READY_FOR_CLEANING))
        else:
            conn.execute(update(compaction_queue).where(Q.id == r.id).values(
                state=INITIATED, worker_id=None, start_ms=None, txn_id=None,
                highest_write_id=None,
                error_message=f"worker {r.worker_id} timed out; re-queued"))
            done.append((r.id, INITIATED))
    return done


# -- initiator ---------------------------------------------------------------------------------

def written_since(conn: Connection, since_ms: int) -> set[tuple[str, str, str | None]]:
    """Tables/partitions with writes committed at or after ``since_ms`` that no cleaned
    compaction has absorbed yet (cleaning deletes their completed_txn_components)."""
    c = completed_txn_components.c
    rows = conn.execute(select(c.db_name, c.tbl_name, c.part_name).distinct()
                        .where(c.tbl_name.is_not(None))
                        .where(or_(c.commit_ms >= since_ms, c.commit_ms.is_(None)))).all()
    return {(r.db_name, r.tbl_name, r.part_name) for r in rows}


def aborted_counts(conn: Connection) -> dict[tuple[str, str, str | None], int]:
    """Aborted transactions that wrote to each table/partition (still holding components)."""
    tc = txn_components.c
    rows = conn.execute(
        select(tc.db_name, tc.tbl_name, tc.part_name, func.count(func.distinct(tc.txn_id)))
        .select_from(txn_components.join(txns, txns.c.txn_id == tc.txn_id))
        .where(txns.c.state == TXN_ABORTED).where(tc.tbl_name.is_not(None))
        .group_by(tc.db_name, tc.tbl_name, tc.part_name)).all()
    return {(r[0], r[1], r[2]): int(r[3]) for r in rows}


def active_objects(conn: Connection) -> set[tuple[str, str, str | None]]:
    """Objects with an initiated or working request."""
    rows = conn.execute(select(Q.db_name, Q.tbl_name, Q.part_name)
                        .where(Q.state.in_((INITIATED, WORKING)))).all()
    return {(r.db_name, r.tbl_name, r.part_name) for r in rows}


def consecutive_failures(conn: Connection, db: str, tbl: str, part: str | None) -> int:
    """Failed compactions since the last success (history entries that are not outcomes of
    a compaction -- attempted, did not initiate, refused -- are skipped)."""
    cc = completed_compactions.c
    states = [r.state for r in conn.execute(
        select(cc.state).where(_object(completed_compactions, db, tbl, part))
        .where(cc.state.not_in((ATTEMPTED, DID_NOT_INITIATE, REFUSED)))
        .order_by(cc.id.desc()).limit(1000))]
    n = 0
    for s in states:
        if s != FAILED:
            break
        n += 1
    return n


def record_history(conn: Connection, db: str, tbl: str, part: str | None, ctype: int,
                   state: str, message: str, *, initiator_id: str | None = None,
                   initiator_version: str | None = None, retention: dict | None = None) -> int:
    """A history entry that never was in the queue (attempted / did not initiate)."""
    new_id = reserve_ids(conn, next_compaction_id, 1)
    now = now_ms()
    conn.execute(insert(completed_compactions).values(
        id=new_id, db_name=db, tbl_name=tbl, part_name=part, state=state, ctype=int(ctype),
        enqueue_ms=now, start_ms=now, end_ms=now, error_message=message[:4000],
        initiator_id=initiator_id, initiator_version=initiator_version))
    if retention:
        _purge_object(conn, db, tbl, part, retention)
    return new_id


# -- cleaner -----------------------------------------------------------------------------------

def ready_for_cleaning(conn: Connection) -> list[Entry]:
    """Entries ready for cleaning whose transaction is over: ``commit_ms`` set (by our
    Worker, or by the commit of the transaction a Hive Worker or ``submit_for_cleanup``
    recorded: ``compaction_committed``), or the recorded transaction no longer open (a
    failed CTAS's cleanup request, whose transaction aborted)."""
    open_txn = select(txns.c.txn_id).where(txns.c.txn_id == Q.txn_id) \
        .where(txns.c.state == TXN_OPEN).exists()
    rows = conn.execute(select(compaction_queue).where(Q.state == READY_FOR_CLEANING)
                        .where(or_(Q.commit_ms.is_not(None), ~open_txn)).order_by(Q.id)).all()
    return [entry_of(r) for r in rows]


def cleaning_blocker(conn: Connection, e: Entry) -> str | None:
    """Why the old files of ``e`` may still be read, or None when they may go: an open
    transaction (of any type, read-only ones included) that started before the compaction
    committed, or a transaction-less lock on the table/partition acquired before that."""
    t = conn.execute(
        select(txns.c.txn_id).where(txns.c.state == TXN_OPEN)
        .where(txns.c.txn_id < int(e.next_txn_id or 0))
        .where(txns.c.txn_id != int(e.txn_id or 0))
        .order_by(txns.c.txn_id).limit(1)).scalar()
    if t is not None:
        return f"open transaction txnid:{t} started before the compaction committed"
    lk = hive_locks.c
    cond = (lk.db_name == e.db) & (lk.txn_id == 0) & (lk.state == 1) & \
        or_(lk.tbl_name.is_(None), lk.tbl_name == e.table) & \
        (lk.acquired_ms <= int(e.commit_ms or 0))
    if e.partition is not None:
        cond = cond & or_(lk.part_name.is_(None), lk.part_name == e.partition)
    lock_id = conn.execute(select(lk.ext_id).where(cond).order_by(lk.ext_id).limit(1)).scalar()
    if lock_id is not None:
        return f"lock lockid:{lock_id} acquired before the compaction committed"
    return None


def mark_cleaner_start(conn: Connection, entry_id: int) -> None:
    conn.execute(update(compaction_queue).where(Q.id == entry_id)
                 .where(Q.cleaner_start_ms.is_(None)).values(cleaner_start_ms=now_ms()))


def mark_cleaned(conn: Connection, e: Entry, retention: dict | None = None) -> dict:
    """The compaction's old files are gone: history 'succeeded'; drop the bookkeeping they kept
    alive -- the completed_txn_components of the write ids the compaction absorbed, the
    txn_components of aborted transactions whose data it dropped, and those aborted
    transactions once nothing else of theirs remains (Hive's markCleaned +
    cleanEmptyAbortedTxns)."""
    hw = int(e.highest_write_id or 0)
    if conn.execute(select(Q.id).where(Q.id == e.id)
                    .where(Q.state == READY_FOR_CLEANING).with_for_update()).first() is None:
        return {"moved": False}
    t2w = txn_to_write_id.c
    absorbed_txns = select(t2w.txn_id).where(t2w.db_name == e.db) \
        .where(t2w.tbl_name == e.table).where(t2w.write_id <= hw)
    ctc = completed_txn_components
    n_ctc = conn.execute(delete(ctc).where(_object(ctc, e.db, e.table, e.partition)).where(
        or_(ctc.c.write_id <= hw,
            and_(ctc.c.write_id.is_(None), ctc.c.txn_id.in_(absorbed_txns))))).rowcount
    tc = txn_components
    aborted_ids = select(txns.c.txn_id).where(txns.c.state == TXN_ABORTED)
    victims = [r[0] for r in conn.execute(
        select(tc.c.txn_id).distinct().where(_object(tc, e.db, e.table, e.partition))
        .where(tc.c.txn_id.in_(aborted_ids))
        .where(or_(tc.c.write_id <= hw,
                   and_(tc.c.write_id.is_(None), tc.c.txn_id.in_(absorbed_txns)),
                   and_(tc.c.write_id.is_(None),
                        tc.c.txn_id.not_in(select(t2w.txn_id).where(t2w.db_name == e.db)
                                           .where(t2w.tbl_name == e.table))))))]
    n_tc = 0
    purged: list[int] = []
    for chunk in _chunks(victims, 500):
        n_tc += conn.execute(delete(tc).where(_object(tc, e.db, e.table, e.partition))
                             .where(tc.c.txn_id.in_(chunk))).rowcount
        left = {r[0] for r in conn.execute(select(tc.c.txn_id).distinct()
                                           .where(tc.c.txn_id.in_(chunk)))}
        gone = [t for t in chunk if t not in left]
        if gone:
            conn.execute(delete(txns).where(txns.c.txn_id.in_(gone))
                         .where(txns.c.state == TXN_ABORTED))
            purged.extend(gone)
    _to_history(conn, e.id, SUCCEEDED, None, retention)
    return {"moved": True, "completed_components": n_ctc, "aborted_components": n_tc,
            "purged_aborted_txns": purged}


def purge_empty_aborted_txns(conn: Connection, limit: int = 1000) -> int:
    """Aborted transactions that recorded no component and never got a write id wrote
    nothing: forget them (Hive's cleanEmptyAbortedTxns). Aborted compaction transactions are
    kept: their ``_vT`` output must stay recognisably aborted until it is deleted."""
    ids = [r[0] for r in conn.execute(
        select(txns.c.txn_id).where(txns.c.state == TXN_ABORTED)
        .where(txns.c.txn_type != int(TxnType.COMPACTION))
        .where(txns.c.txn_id.not_in(select(txn_components.c.txn_id)))
        .where(txns.c.txn_id.not_in(select(txn_to_write_id.c.txn_id)))
        .order_by(txns.c.txn_id).limit(limit))]
    if ids:
        conn.execute(delete(txns).where(txns.c.txn_id.in_(ids))
                     .where(txns.c.state == TXN_ABORTED))
    return len(ids)


# -- history -----------------------------------------------------------------------------------

def retention_of(config) -> dict:
    return {
        SUCCEEDED: config["hive.compactor.history.retention.succeeded"],
        FAILED: config["hive.compactor.history.retention.failed"],
        ATTEMPTED: config["hive.compactor.history.retention.attempted"],
        DID_NOT_INITIATE: config["hive.compactor.history.retention.did.not.initiate"],
    }


def _kind(state: str) -> str:
    if state in (REFUSED, DID_NOT_INITIATE):
        return DID_NOT_INITIATE
    if state == ABORTED:
        return FAILED
    return state


def _purge_object(conn: Connection, db: str, tbl: str, part: str | None, retention: dict) -> int:
    cc = completed_compactions.c
    rows = conn.execute(select(cc.id, cc.state).where(_object(completed_compactions, db, tbl, part))
                        .order_by(cc.id.desc())).all()
    return _delete_beyond(conn, rows, retention)


def _delete_beyond(conn: Connection, rows: Iterable, retention: dict) -> int:
    seen: dict[str, int] = {}
    doomed = []
    for r in rows:
        k = _kind(r.state)
        seen[k] = seen.get(k, 0) + 1
        if k in retention and seen[k] > retention[k]:
            doomed.append(r.id)
    for chunk in _chunks(doomed, 500):
        conn.execute(delete(completed_compactions).where(completed_compactions.c.id.in_(chunk)))
    return len(doomed)


def purge_history(conn: Connection, retention: dict) -> int:
    """Keep the newest N entries of each kind per table/partition (Hive's
    AcidCompactionHistoryService)."""
    cc = completed_compactions.c
    rows = conn.execute(select(cc.id, cc.state, cc.db_name, cc.tbl_name, cc.part_name)
                        .order_by(cc.id.desc())).all()
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.db_name, r.tbl_name, r.part_name), []).append(r)
    return sum(_delete_beyond(conn, g, retention) for g in groups.values())


def _chunks(seq, size):
    seq = list(seq)
    for i in range(0, len(seq), size):
        yield seq[i:i + size]
