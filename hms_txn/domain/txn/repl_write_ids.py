"""A replica's write-id state (Hive's ``ReplTableWriteIdStateFunction``): the bootstrap
REPL LOAD of a transactional table sends the source's ValidWriteIdList of the table, and
the target's write ids are made to match it: the aborted write ids of the source become
aborted here too (one transaction opened and aborted per write id), the table's next
write id follows the source's high-water mark, and a major compaction is queued to clean
the aborted data. A table that already has write ids is left as it is (the load is
replayed: idempotent)."""

from __future__ import annotations

import logging
from typing import Sequence

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from orc_acid.valid_ids import ValidIdListError, ValidWriteIdList

from hms_txn.common.errors import InvalidInput
from hms_txn.domain.txn import compaction_queue
from hms_txn.domain.txn.compaction_queue import CompactionType
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.domain.txn.txn_records import abort_in
from hms_txn.store.schema import next_write_id, txn_to_write_id

log = logging.getLogger(__name__)


def repl_table_write_id_state(conn: Connection, txns: TxnManager, valid_write_ids: str,
                              user: str, host: str, db_name: str, table_name: str,
                              part_names: Sequence[str] | None) -> bool:
    """Apply the source's write-id state to the table; False when it already has one."""
    db, table = (db_name or "").lower(), (table_name or "").lower()
    if not db or not table:
        raise InvalidInput("repl_tbl_writeid_state needs dbName and tableName")
    try:
        wids = ValidWriteIdList.parse(valid_write_ids or "")
    except ValidIdListError as err:
        raise InvalidInput(f"invalid validWriteIdlist {valid_write_ids!r}: {err}") from None
    nw = next_write_id.c
    if conn.execute(select(nw.next_id).where(nw.db_name == db)
                    .where(nw.tbl_name == table)).first() is not None:
        log.info("write-id state %s is already applied to %s.%s", valid_write_ids, db, table)
        return False
    aborted = sorted(wids.aborted_ids)
    if aborted:
        txn_ids: list[int] = []
        while len(txn_ids) < len(aborted):      # open_txns caps a batch
            txn_ids += txns.open_txns(conn, len(aborted) - len(txn_ids), user, host).txn_ids
        conn.execute(insert(txn_to_write_id), [
            {"txn_id": t, "db_name": db, "tbl_name": table, "write_id": w}
            for t, w in zip(txn_ids, aborted)])
        abort_in(conn, txn_ids, messages=txns.messages,
                 reason="replicated aborted write id")
    conn.execute(insert(next_write_id).values(db_name=db, tbl_name=table,
                                              next_id=wids.high_watermark + 1))
    if aborted:
        for part in (part_names or [None]):
            compaction_queue.compact(conn, db, table, part, CompactionType.MAJOR)
    log.info("write-id state %s applied to %s.%s", valid_write_ids, db, table)
    return True
