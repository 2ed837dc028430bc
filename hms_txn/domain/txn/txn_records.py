"""The rows of the TXNS table and what every transactional module does with them.

Transaction states and types, the row lock that serializes changes to one transaction,
Hive's "not open" errors, heartbeats and aborts: shared by ``txn`` (open/commit), ``locks``,
``writeids`` and the compaction queue, which all take a transaction's row lock before they
change anything that belongs to it. Everything here runs inside the caller's transaction.

Row locks are always taken in the same order (transaction rows by id, then counters, then
lock rows, then the notification sequence), so the database never has to break a deadlock
between two of our own operations; if it does anyway, the unit of work retries.
"""

from __future__ import annotations

import enum
import time
from typing import Iterable, Sequence

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import NoSuchTxn, TxnAborted
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.store.prepared import Prepared
from hms_txn.store.schema import hive_locks, next_txn_id, txns

OPEN, ABORTED, COMMITTED = "o", "a", "c"


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


def now_ms() -> int:
    return int(time.time() * 1000)


def txn_id_str(txn_id: int) -> str:
    """Hive's ``JavaUtils.txnIdToString``."""
    return f"txnid:{txn_id}"


def lock_id_str(lock_id: int) -> str:
    """Hive's ``JavaUtils.lockIdToString``."""
    return f"lockid:{lock_id}"


def java_str(value) -> str:
    """A value as Java's string concatenation prints it (``null`` for None)."""
    return "null" if value is None else str(value)


# Statements every caller runs, built once and executed with bound values: building a Core
# statement per call costs several times more than executing it, and on SQLite a ``Prepared``
# statement also skips SQLAlchemy's per-execution overhead (see hms_txn.store.prepared).
_next_txn_id = select(next_txn_id.c.next_id).where(next_txn_id.c.id == 1)
NEXT_TXN_ID = Prepared(_next_txn_id)
NEXT_TXN_ID_LOCKED = Prepared(_next_txn_id.with_for_update())
_txn_row = select(txns).where(txns.c.txn_id == bindparam("p_txn"))
_TXN_ROW = Prepared(_txn_row)
TXN_ROW_LOCKED = Prepared(_txn_row.with_for_update())
_heartbeat_open = (update(txns).where(txns.c.txn_id == bindparam("p_txn"))
                   .where(txns.c.state == OPEN)
                   .values(last_heartbeat_ms=bindparam("p_now"),
                           heartbeat_count=txns.c.heartbeat_count + 1))
_HEARTBEAT_OPEN = Prepared(_heartbeat_open)
# Heartbeat and lock an open transaction's row in one statement, returning its type.
_HEARTBEAT_OPEN_RETURNING = Prepared(_heartbeat_open.returning(txns.c.txn_type))


def current_hwm(conn: Connection) -> int:
    """Highest transaction id handed out so far (0 when none)."""
    value = NEXT_TXN_ID.execute(conn).scalar()
    return 0 if value is None else int(value) - 1


def txn_row(conn: Connection, txn_id: int, *, for_update: bool = True):
    return (TXN_ROW_LOCKED if for_update else _TXN_ROW).execute(conn, {"p_txn": txn_id}).first()


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


def abort_in(conn: Connection, txn_ids: Iterable[int], *, messages: em.MessageContext,
             now: int | None = None, reason: str | None = None) -> list[int]:
    """Abort those of ``txn_ids`` that are open, release their locks, write ABORT_TXN events
    (``messages``), none for READ_ONLY transactions, as Hive's ``abortTxns``.

    Returns the ids actually aborted. Their components stay in ``txn_components`` (the
    compactor's cleaner needs to know where aborted data may lie). Timed-out transactions
    get their ABORT_TXN too, which Hive 4.0's reaper does not write (HIVE-27797): the
    metadata caches and Impala learn from it that the write ids are aborted.
    """
    ids = sorted(set(int(t) for t in txn_ids))
    if not ids:
        return []
    now = now_ms() if now is None else now
    aborted: list[int] = []
    logged: list[int] = []
    for chunk in _chunks(ids, 500):
        rows = conn.execute(
            select(txns.c.txn_id, txns.c.txn_type).where(txns.c.txn_id.in_(chunk))
            .where(txns.c.state == OPEN).order_by(txns.c.txn_id).with_for_update()
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
        logged.extend(r.txn_id for r in rows if r.txn_type != TxnType.READ_ONLY)
    notifications.append(conn, messages.message_format,
                         *(em.abort_txn(messages, t) for t in logged))
    return aborted


def _chunks(seq: Sequence[int], size: int):
    for i in range(0, len(seq), size):
        yield seq[i:i + size]

