"""The compaction queue: compact / compact2 enqueue requests, show_compact lists them.

The queue is one of the transaction tables, as in Hive (``TxnHandler.compact``,
``showCompact``, and ``CommitTxnFunction`` marking a compaction's entry on commit:
``compaction_committed``): enqueueing, listing and that mark live here, beside the
transactions that use them (``txn_commit``, ``repl_write_ids``); the compactor's side, which
moves entries through the states below, is ``compaction_bookkeeping`` (Hive's
``CompactionTxnHandler``), above the transaction code and never imported by it.

A request for an object that is already queued is refused the way Hive 4 refuses it
(``CompactFunction``): id -1, state "refused", not accepted, and a message naming the
queued entry. An entry blocks new requests while initiated or working, and while ready for
cleaning if it compacted up to the table's current compactor high-water mark (nothing was
written since that a new compaction could take). A request for a table or partition that
does not exist is queued all the same, as Hive 4's HMSHandler.compact2 -> TxnHandler
.compact queues it (CompactFunction never looks at the table); the Worker refuses it
(``service.compactor.worker``), and ``hms-txn compact`` checks before it asks.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass
from typing import Mapping

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import InvalidInput
from hms_txn.domain.txn.txn_records import now_ms
from hms_txn.domain.txn.writeids import get_valid_write_ids
from hms_txn.store.schema import (compaction_queue, completed_compactions, next_compaction_id,
                                  next_txn_id)
from hms_txn.store.sql import lock_mutex, reserve_ids

log = logging.getLogger(__name__)


class CompactionType(enum.IntEnum):
    MINOR = 1
    MAJOR = 2
    REBALANCE = 3


# Hive's one-letter state codes and the words show_compact / compact2 use for them.
INITIATED, WORKING, READY_FOR_CLEANING, FAILED, SUCCEEDED, ATTEMPTED = "i", "w", "r", "f", "s", "a"
DID_NOT_INITIATE, REFUSED, ABORTED = "d", "c", "x"
STATE_NAMES = {
    INITIATED: "initiated", WORKING: "working", READY_FOR_CLEANING: "ready for cleaning",
    FAILED: "failed", SUCCEEDED: "succeeded", ATTEMPTED: "attempted",
    DID_NOT_INITIATE: "did not initiate", REFUSED: "refused", ABORTED: "aborted",
}
STATE_CODES = {name: code for code, name in STATE_NAMES.items()}
REFUSED_ID = -1        # compact2's id for a request it did not enqueue


@dataclass
class CompactionResult:
    id: int
    state: str
    accepted: bool
    error_message: str | None = None


@dataclass
class CompactionInfo:
    id: int
    dbname: str
    tablename: str
    partitionname: str | None
    type: CompactionType
    state: str                     # the word, e.g. "initiated"
    worker_id: str | None
    start_ms: int | None
    run_as: str | None
    highest_write_id: int | None
    meta_info: str | None
    end_ms: int | None
    hadoop_job_id: str | None
    error_message: str | None
    enqueue_ms: int | None
    worker_version: str | None
    initiator_id: str | None
    initiator_version: str | None
    cleaner_start_ms: int | None
    pool_name: str | None
    next_txn_id: int | None
    txn_id: int | None
    commit_ms: int | None
    properties: dict | None


def compact(conn: Connection, dbname: str, tablename: str, partitionname: str | None,
            ctype: int, *, run_as: str | None = None,
            properties: Mapping[str, str] | None = None, initiator_id: str | None = None,
            initiator_version: str | None = None, pool_name: str | None = None,
            number_of_buckets: int | None = None,
            order_by: str | None = None) -> CompactionResult:
    if not dbname or not tablename:
        raise InvalidInput("a compaction request needs dbname and tablename")
    if ctype not in CompactionType._value2member_map_:
        raise InvalidInput(f"unknown compaction type {ctype}")
    db, table = dbname.lower(), tablename.lower()
    part = partitionname or None

    lock_mutex(conn, "compaction")
    q = compaction_queue.c
    cond = (q.db_name == db) & (q.tbl_name == table)
    cond &= q.part_name == part if part is not None else q.part_name.is_(None)
    queued = conn.execute(
        select(q.id, q.state, q.highest_write_id).where(cond)
        .where(q.state.in_((INITIATED, WORKING, READY_FOR_CLEANING))).order_by(q.id)
    ).all()
    if any(e.state == READY_FOR_CLEANING for e in queued):
        hwm = _compactor_high_water_mark(conn, db, table)
        queued = [e for e in queued if e.state != READY_FOR_CLEANING
                  or e.highest_write_id == hwm]
    if queued:
        existing = queued[0]
        return CompactionResult(REFUSED_ID, STATE_NAMES[REFUSED], False,
                                f"Compaction is already scheduled with state="
                                f"'{STATE_NAMES[existing.state]}' and id={existing.id}")
    new_id = reserve_ids(conn, next_compaction_id, 1)
    conn.execute(insert(compaction_queue).values(
        id=new_id, db_name=db, tbl_name=table, part_name=part, state=INITIATED,
        ctype=int(ctype), properties=json.dumps(dict(properties)) if properties else None,
        run_as=run_as, enqueue_ms=now_ms(), initiator_id=initiator_id,
        initiator_version=initiator_version, pool_name=pool_name,
        number_of_buckets=number_of_buckets, order_by=order_by,
    ))
    result = CompactionResult(new_id, STATE_NAMES[INITIATED], True)

    if result.accepted:
        log.info("enqueued %s compaction %d of %s.%s%s", CompactionType(ctype).name,
                 result.id, db, table, f"/{part}" if part else "")
    return result


def _compactor_high_water_mark(conn: Connection, db: str, table: str) -> int:
    """The table's write-id high-water mark as a compactor would take it now: just below
    its lowest open write id (Hive's ``TxnUtils.createValidCompactWriteIdList``)."""
    ids = get_valid_write_ids(conn, [f"{db}.{table}"])[0]
    if ids.min_open_write_id is not None:
        return ids.min_open_write_id - 1
    return ids.hwm


def show_compact(conn: Connection, *, id: int | None = None, pool_name: str | None = None,
                 dbname: str | None = None, tablename: str | None = None,
                 partitionname: str | None = None, ctype: int | None = None,
                 state: str | None = None, limit: int | None = None,
                 order: str | None = None) -> list[CompactionInfo]:
    state_code = None
    if state:
        state_code = STATE_CODES.get(state.lower(), state.lower()[:1])
    out: list[CompactionInfo] = []
    for table, has_end in ((compaction_queue, False), (completed_compactions, True)):
        c = table.c
        query = select(table)
        if id is not None:
            query = query.where(c.id == id)
        if pool_name:
            query = query.where(c.pool_name == pool_name)
        if dbname:
            query = query.where(c.db_name == dbname.lower())
        if tablename:
            query = query.where(c.tbl_name == tablename.lower())
        if partitionname:
            query = query.where(c.part_name == partitionname)
        if ctype is not None:
            query = query.where(c.ctype == int(ctype))
        if state_code:
            query = query.where(c.state == state_code)
        for r in conn.execute(query):
            out.append(_info(r, r.end_ms if has_end else None))
    descending = bool(order) and "desc" in order.lower()
    out.sort(key=lambda i: i.id, reverse=descending)
    if limit is not None and limit > 0:
        out = out[:limit]
    return out


def next_txn_id_now(conn: Connection) -> int:
    """The next transaction id: a compaction committed now is seen by every transaction
    from it on (an entry's ``next_txn_id``, what the Cleaner waits for)."""
    return int(conn.execute(select(next_txn_id.c.next_id)
                            .where(next_txn_id.c.id == 1)).scalar() or 1)


def compaction_committed(conn: Connection, txn_id: int) -> None:
    """The transaction ``txn_id`` of a compaction or soft delete committed: the entry that
    recorded it (``update_compactor_state``, ``submit_for_cleanup``) may be cleaned once
    the transactions opened before now are gone (Hive's CommitTxnFunction sets
    CQ_NEXT_TXN_ID and CQ_COMMIT_TIME)."""
    conn.execute(update(compaction_queue).where(compaction_queue.c.txn_id == txn_id).values(
        next_txn_id=next_txn_id_now(conn), commit_ms=now_ms()))


def _info(r, end_ms) -> CompactionInfo:
    return CompactionInfo(
        id=r.id, dbname=r.db_name, tablename=r.tbl_name, partitionname=r.part_name,
        type=CompactionType(r.ctype), state=STATE_NAMES.get(r.state, r.state),
        worker_id=r.worker_id, start_ms=r.start_ms, run_as=r.run_as,
        highest_write_id=r.highest_write_id, meta_info=r.meta_info, end_ms=end_ms,
        hadoop_job_id=r.hadoop_job_id, error_message=r.error_message, enqueue_ms=r.enqueue_ms,
        worker_version=r.worker_version, initiator_id=r.initiator_id,
        initiator_version=r.initiator_version, cleaner_start_ms=r.cleaner_start_ms,
        pool_name=r.pool_name, next_txn_id=r.next_txn_id, txn_id=r.txn_id,
        commit_ms=r.commit_ms, properties=json.loads(r.properties) if r.properties else None,
    )
