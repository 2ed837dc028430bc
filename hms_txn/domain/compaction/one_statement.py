"""The compactor's claim in the store's one-statement form (PostgreSQL's functions), shared
by our Workers and Hive's external ones (``find_next_compact2``): the same claim as
``compaction_bookkeeping.claim_next`` on the Python path. Why the form is chosen by the
service and the work lives in the domain: ``hms_txn.domain.txn.one_statement``."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.txn.txn_records import now_ms
from hms_txn.store.txn_functions import TxnFunctions


def claim_compaction(conn: Connection, fns: TxnFunctions, worker_id: str, worker_version: str,
                     *, pool_name: str | None = None,
                     pool_timeout_ms: int | None = None):
    """``compaction_bookkeeping.claim_next``: the claimed row (named; ``bk.entry_of`` makes
    the entry), or None."""
    now = now_ms()
    before = now - pool_timeout_ms if not pool_name and pool_timeout_ms is not None else None
    return fns.claim_compaction(conn, worker=worker_id, version=worker_version,
                                pool=pool_name or None, enqueued_before=before, now=now)


def claim_next(conn: Connection, fns: TxnFunctions, worker_id: str,
               worker_version: str) -> bk.Entry | None:
    """``compaction_bookkeeping.claim_next`` for our Workers."""
    row = claim_compaction(conn, fns, worker_id, worker_version)
    return None if row is None else bk.entry_of(row)

