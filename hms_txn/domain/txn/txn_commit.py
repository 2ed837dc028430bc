"""Committing a transaction: recording its writes, the write-write conflict check, and
the COMMIT_TXN event, followed by COMMIT_COMPACTION_EVENT for a compaction's transaction
(Hive's ``TxnHandler.commitTxn`` and ``createCommitNotificationEvent``; see ``txn`` for
the ordering rules the commit relies on)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import Integer, bindparam, delete, insert, select, type_coerce, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import InvalidInput
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.model.catalog import set_table_parameter_in
from hms_txn.domain.txn.compaction_queue import CompactionType, compaction_committed
from hms_txn.domain.txn.txn_records import (ABORTED, COMMITTED, NEXT_TXN_ID_LOCKED, TXN_ROW_LOCKED,
                                            UPDATE_DELETE, DataOp, TxnType, abort_in, now_ms,
                                            raise_not_open, txn_id_str)
from hms_txn.store.prepared import Prepared
from hms_txn.store.schema import (compaction_queue, completed_txn_components, hive_locks,
                                  txn_components, txn_to_write_id, txns, write_set)
from hms_txn.store.sql import writer_is_exclusive

log = logging.getLogger(__name__)

# Table parameters a commit may set through CommitTxnRequest.keyValue (Hive's TXN_KEY_START).
TXN_KEY_PREFIX = "_meta"
_OP_LETTER = {int(DataOp.UPDATE): "u", int(DataOp.DELETE): "d", int(DataOp.INSERT): "i"}
_TXN_COMPONENTS = Prepared(select(txn_components)
                      .where(txn_components.c.txn_id == bindparam("p_txn"))
                      .order_by(txn_components.c.id))
# commit_txn's first look where the writer is exclusive (SQLite): the transaction's row
# and whether it has write components and write ids, in one statement (three on a
# read-only query's commit before). Only there are the flags current: on PostgreSQL a
# SELECT ... FOR UPDATE that waited for another transaction returns the row as that one
# left it but evaluates an EXISTS on its own older snapshot, so there the row is locked
# first and the rest read by statements of their own. (The flags are typed as integers: a
# Boolean column has a result processor on SQLite, which would keep the statement off
# Prepared's direct path.)
_has_write_ids = select(txn_to_write_id.c.write_id).where(
    txn_to_write_id.c.txn_id == txns.c.txn_id).exists()
_TXN_TO_COMMIT = Prepared(
    select(txns,
           type_coerce(select(txn_components.c.id)
                       .where(txn_components.c.txn_id == txns.c.txn_id).exists(),
                       Integer).label("has_components"),
           type_coerce(_has_write_ids, Integer).label("has_write_ids"))
    .where(txns.c.txn_id == bindparam("p_txn")))
_DELETE_TXN_COMPONENTS = Prepared(delete(txn_components)
                             .where(txn_components.c.txn_id == bindparam("p_txn")))
_INSERT_COMPLETED = Prepared(insert(completed_txn_components))
_INSERT_WRITE_SET = Prepared(insert(write_set))
_MARK_COMMITTED = Prepared(update(txns).where(txns.c.txn_id == bindparam("p_txn"))
                      .values(state=COMMITTED, commit_id=bindparam("p_commit_id"),
                              ended_ms=bindparam("p_now")))
# The same, also reading whether the transaction has write ids (commit_txn on PostgreSQL,
# where the row carries no flags: one round trip instead of two).
_MARK_COMMITTED_READING_WRITE_IDS = Prepared(
    update(txns).where(txns.c.txn_id == bindparam("p_txn"))
    .values(state=COMMITTED, commit_id=bindparam("p_commit_id"), ended_ms=bindparam("p_now"))
    .returning(type_coerce(select(txn_to_write_id.c.write_id).where(
        txn_to_write_id.c.txn_id == bindparam("p_txn")).exists(), Integer)))
_RELEASE_TXN_LOCKS = Prepared(delete(hive_locks).where(hive_locks.c.txn_id == bindparam("p_txn")))
_COMPACTION_OF_TXN = Prepared(
    select(compaction_queue.c.id, compaction_queue.c.ctype, compaction_queue.c.db_name,
           compaction_queue.c.tbl_name, compaction_queue.c.part_name)
    .where(compaction_queue.c.txn_id == bindparam("p_txn")))


@dataclass
class CommitResult:
    txn_id: int
    already_committed: bool = False
    commit_id: int | None = None
    event_ids: list[int] = field(default_factory=list)
    # Whether the commit recorded a write (only known when asked for: ``report_writes``).
    recorded_writes: bool = True
    # Set when the write-write conflict check aborted the transaction instead: the abort
    # is to be committed and then reported (TxnAbortedException with this message).
    conflict: str | None = None


def check_commit_key(txn_id: int, key_value: tuple[int, str, str] | None) -> None:
    if key_value is not None and not key_value[1].startswith(TXN_KEY_PREFIX):
        raise InvalidInput(
            f"commit_txn {txn_id_str(txn_id)}: keyValue key {key_value[1]!r} must start "
            f"with {TXN_KEY_PREFIX!r} (table id {key_value[0]})")

def commit_txn(conn: Connection, txn_id: int, *, messages: em.MessageContext,
               reports_writes: bool = False,
               excl_write_enabled: bool | None = None, repl_policy: str | None = None,
               key_value: tuple[int, str, str] | None = None,
               report_writes: bool = False) -> CommitResult:
    """Commit; idempotent for a committed transaction.

    ``excl_write_enabled`` is the 4.x request field: True means writers were serialized by
    EXCL_WRITE locks and the write-write conflict check is skipped; False or None (the field
    absent, as from a 3.x client) runs the check. ``report_writes``: find out whether
    the commit records any write (``CommitResult.recorded_writes``), which costs a
    statement on some databases. A lost conflict aborts the transaction and is returned
    in ``CommitResult.conflict``, for the caller to commit the abort and then raise.
    ``reports_writes``: the request carries ``writeEventInfos`` (a write, whatever else).
    The events, built by ``messages``: COMMIT_TXN (none for a READ_ONLY transaction, as in
    Hive), naming the table whose parameter ``key_value`` set (for which Hive writes no
    ALTER_TABLE); then COMMIT_COMPACTION_EVENT when a compaction's transaction commits.
    """
    if repl_policy:
        log.info("commit_txn %s: replPolicy %r accepted and ignored", txn_id_str(txn_id),
                 repl_policy)
    check_commit_key(txn_id, key_value)
    check_conflicts = excl_write_enabled is not True
    flags_in_row = writer_is_exclusive(conn)
    row = (_TXN_TO_COMMIT if flags_in_row else TXN_ROW_LOCKED).execute(
        conn, {"p_txn": txn_id}).first()
    if row is None:
        raise_not_open(None, txn_id)
    if row.state == COMMITTED:
        return CommitResult(txn_id, already_committed=True, commit_id=row.commit_id,
                            recorded_writes=False)
    if row.state == ABORTED:
        raise_not_open(ABORTED, txn_id)
    now = now_ms()
    altered = []
    if key_value is not None:
        # Recorded atomically with the commit (Hive's CommitTxnKeyValue): an ingest
        # job stores its progress marker so a replay after a crash can skip work
        # that this commit already made visible.
        altered.append(set_table_parameter_in(conn, key_value[0], key_value[1], key_value[2],
                                              must_exist=True))
    read_only = row.txn_type == TxnType.READ_ONLY
    comps = (_TXN_COMPONENTS.execute(conn, {"p_txn": txn_id}).all()
             if not read_only and (not flags_in_row or row.has_components) else [])
    recorded = True
    # Whether the write ids are read by the state's UPDATE (below) rather than now.
    write_ids_unknown = False
    if report_writes:
        recorded = bool(reports_writes or key_value is not None or comps)
        if not recorded:
            write_ids_unknown = _write_ids_unknown(row, flags_in_row)
            recorded = not write_ids_unknown and _may_have_written(row, flags_in_row)
    upd_del = [c for c in comps if c.operation_type in UPDATE_DELETE and c.tbl_name]
    commit_id = None
    if upd_del:
        # Lock the txn counter: orders this commit against open_txns and other
        # update/delete commits (see the module docstring).
        commit_id = NEXT_TXN_ID_LOCKED.execute(conn).scalar_one() - 1
        if check_conflicts:
            conflict = _find_conflict(conn, txn_id, commit_id, upd_del)
            if conflict is not None:
                abort_in(conn, [txn_id], messages=messages, now=now, reason=conflict)
                return CommitResult(txn_id, conflict=conflict)
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
    marked = {"p_txn": txn_id, "p_commit_id": commit_id, "p_now": now}
    if write_ids_unknown:
        # The UPDATE runs after the row's lock was granted: its snapshot is current.
        recorded = bool(_MARK_COMMITTED_READING_WRITE_IDS.execute(conn, marked).scalar())
    else:
        _MARK_COMMITTED.execute(conn, marked)
    if row.heartbeat_count:
        # Only lock() creates a transaction's locks, and it heartbeats the
        # transaction in the same database transaction (require_open_heartbeat): a
        # transaction never heartbeated holds no locks and needs no release.
        _RELEASE_TXN_LOCKS.execute(conn, {"p_txn": txn_id})
    ids = [] if read_only else notifications.append(
        conn, messages.message_format, em.commit_txn(messages, txn_id, altered),
        _commit_compaction(conn, messages, row))
    return CommitResult(txn_id, commit_id=commit_id, event_ids=ids, recorded_writes=recorded)


def _commit_compaction(conn: Connection, messages: em.MessageContext, row) -> em.LogEntry | None:
    """The COMMIT_COMPACTION_EVENT of a compaction's transaction: its queue entry (Hive's
    ``getCompactionByTxnId``); None for any other transaction. The entry of a compaction
    or soft delete learns its commit (``compaction_queue.compaction_committed``)."""
    if row.txn_type not in (TxnType.COMPACTION, TxnType.REBALANCE_COMPACTION,
                            TxnType.SOFT_DELETE):
        return None
    compaction_committed(conn, row.txn_id)
    if row.txn_type == TxnType.SOFT_DELETE:
        return None
    entry = _COMPACTION_OF_TXN.execute(conn, {"p_txn": row.txn_id}).first()
    if entry is None:
        log.warning("no compaction queue entry for the compaction transaction %s",
                    txn_id_str(row.txn_id))
        return None
    return em.commit_compaction(messages, row.txn_id, entry.id, CompactionType(entry.ctype).name,
                                entry.db_name, entry.tbl_name, entry.part_name)


def _write_ids_unknown(row, flags_in_row: bool) -> bool:
    """Whether only a look at the transaction's write ids tells if its commit records a
    write: a DEFAULT transaction whose row carries no flags (PostgreSQL)."""
    return row.txn_type == TxnType.DEFAULT and not flags_in_row


def _may_have_written(row, flags_in_row: bool) -> bool:
    """Whether committing this open transaction may record a write beyond its components:
    a write id (only DEFAULT and READ_ONLY transactions can be checked; a READ_ONLY one can
    have no write id, allocation refuses it). Not for a row whose write ids are unknown
    (``_write_ids_unknown``)."""
    if row.txn_type not in (TxnType.DEFAULT, TxnType.READ_ONLY):
        return True
    if row.txn_type == TxnType.READ_ONLY:
        return False
    return bool(row.has_write_ids)


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


