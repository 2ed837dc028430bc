"""The materialized-view rebuild lock (Hive's ``LockMaterializationRebuildFunction`` and
``TxnHandler.heartbeatLockMaterializationRebuild``): HiveServer2 takes it before
``ALTER MATERIALIZED VIEW ... REBUILD`` so that two rebuilds of one view never run
together, and heartbeats it while the rebuild runs.

Hive deletes the lock when the rebuilding transaction commits and, once the lock's heartbeat
is older than the transaction timeout, when it aborted (``ReleaseMaterializationRebuildLocks``).
Here a lock whose transaction is no longer open is released on the spot by the next request
for the view, which is what Hive's answers come to once its housekeeper has run.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.domain.txn.txn_records import OPEN, now_ms
from hms_txn.store.schema import materialization_rebuild_locks as mrl
from hms_txn.store.schema import txns
from hms_txn.store.sql import lock_mutex


def _view(db: str, table: str):
    return (mrl.c.db_name == (db or "").lower()) & (mrl.c.tbl_name == (table or "").lower())


def _txn_open(txn_id):
    return select(txns.c.txn_id).where(txns.c.txn_id == txn_id).where(txns.c.state == OPEN)


def lock_rebuild(conn: Connection, db: str, table: str, txn_id: int) -> bool:
    """Take the view's rebuild lock for ``txn_id``; False when another open transaction
    holds it (the same transaction asking again also gets False, as in Hive)."""
    lock_mutex(conn, "materialization_rebuild")
    held = conn.execute(select(mrl.c.txn_id).where(_view(db, table))).first()
    if held is not None:
        if conn.execute(_txn_open(held.txn_id)).first() is not None:
            return False
        conn.execute(delete(mrl).where(_view(db, table)))
    conn.execute(insert(mrl).values(db_name=(db or "").lower(), tbl_name=(table or "").lower(),
                                    txn_id=txn_id, last_heartbeat_ms=now_ms()))
    return True


def heartbeat_rebuild(conn: Connection, db: str, table: str, txn_id: int) -> bool:
    """Renew the lock ``txn_id`` holds on the view; False when it holds none (any more)."""
    return conn.execute(
        update(mrl).where(_view(db, table)).where(mrl.c.txn_id == txn_id)
        .where(mrl.c.txn_id.in_(_txn_open(txn_id))).values(last_heartbeat_ms=now_ms())
    ).rowcount > 0
