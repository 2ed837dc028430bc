"""The lock calls in the store's one-statement form (PostgreSQL's functions): what the
domain checks and prepares for the statement and what it makes of the answer, the same as
``locks.lock``/``locks.check_lock`` on the Python path. Why the form is chosen by the
service and the work lives in the domain: ``hms_txn.domain.txn.one_statement``."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from hms_txn.domain.locks import locks
from hms_txn.domain.txn.txn_records import now_ms
from hms_txn.store.txn_functions import TxnFunctions


def lock(conn: Connection, fns: TxnFunctions, request: locks.LockRequest) -> locks.LockResult:
    """``locks.lock``."""
    locks.check_request(request)
    txn_id = int(request.txn_id or 0)
    answer = fns.lock(
        conn, txn_id=txn_id, user=request.user or "", host=request.hostname or "",
        agent=request.agent_info if request.agent_info is not None else "Unknown",
        now=now_ms(), zero_wait_read=bool(request.zero_wait_read),
        exclusive_ctas=bool(request.exclusive_ctas), components=locks.lock_rows(request),
        records=locks.written_components(request.components) if txn_id else [])
    return locks.LockResult(answer.lock_id, locks.LockState(answer.state), answer.message)


def check_lock(conn: Connection, fns: TxnFunctions, lock_id: int) -> locks.LockResult:
    """``locks.check_lock``."""
    answer = fns.check_lock(conn, lock_id=lock_id, now=now_ms())
    return locks.LockResult(answer.lock_id, locks.LockState(answer.state), answer.message)


