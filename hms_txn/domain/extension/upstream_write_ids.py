"""Extension mode: the write-id state of a Hive 3/4 ACID table in a Hive 2.x upstream,
rebuilt from its directories when our database has none (it was lost or replaced).

Write ids and transactions are ours; the upstream keeps none for a table in its upstream
form (``upstream_table_form``). If our database loses them, the table's files still name
the write ids (``delta_M_N``, ``base_N``) and the compactor's transactions (``_vT``) that
made them. Before the first write-id call on such a table that finds no state here, the
state is seeded from those names (for every such table when our server starts on a new
database, before any reader took a snapshot; later for a table at its first write-id call): the table's next write id follows the highest one found,
and the transaction counter moves past the highest visibility transaction, so every file
present reads as committed and no new write can reuse a write id already on disk.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from hms_txn.domain.txn.txn_records import NEXT_TXN_ID, NEXT_TXN_ID_LOCKED
from hms_txn.store.schema import next_txn_id, next_write_id
from hms_txn.store.sql import insert_ignore


def handed_out_transactions(conn: Connection) -> bool:
    """Whether this database ever handed out a transaction id (False: it is new)."""
    return NEXT_TXN_ID.execute(conn).scalar() is not None


def has_write_id_state(conn: Connection, db: str, table: str) -> bool:
    return conn.execute(select(next_write_id.c.next_id)
                        .where(next_write_id.c.db_name == db)
                        .where(next_write_id.c.tbl_name == table)).first() is not None


def seed_write_id_state(conn: Connection, db: str, table: str, write_id: int,
                        txn_id: int) -> None:
    """Write ids up to ``write_id`` of ``db.table`` count as allocated and committed, and
    transaction ids up to ``txn_id`` as handed out (a no-op where the state is there)."""
    insert_ignore(conn, next_write_id, {"db_name": db, "tbl_name": table,
                                        "next_id": write_id + 1})
    nxt = NEXT_TXN_ID_LOCKED.execute(conn).scalar()
    if nxt is None:
        insert_ignore(conn, next_txn_id, {"id": 1, "next_id": txn_id + 1})
    elif nxt <= txn_id:
        conn.execute(update(next_txn_id).where(next_txn_id.c.id == 1)
                     .values(next_id=txn_id + 1))
