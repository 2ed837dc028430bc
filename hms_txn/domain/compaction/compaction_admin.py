"""Hive 4's calls on compaction requests besides enqueueing and listing them:
``abort_Compactions`` (``AbortCompactionFunction``) and
``get_latest_committed_compaction_info`` (``TxnHandler.getLatestCommittedCompactionInfo``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, union_all
from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.compaction.compaction_bookkeeping import finish
from hms_txn.domain.txn.compaction_queue import (ABORTED, INITIATED, READY_FOR_CLEANING,
                                                 STATE_NAMES, SUCCEEDED)
from hms_txn.store.schema import compaction_queue, completed_compactions

ABORT_MESSAGE = "Compaction Aborted by Abort Comapction request."     # sic, as Hive


@dataclass(frozen=True)
class AbortOutcome:
    """An AbortCompactionResponseElement."""
    compaction_id: int
    status: str            # "Success" or "Error"
    message: str


@dataclass(frozen=True)
class CommittedCompaction:
    """A CompactionInfoStruct as this call fills it."""
    id: int
    db: str
    table: str
    partition: str | None
    ctype: int


def abort_compactions(conn: Connection, ids: list[int]) -> dict[int, AbortOutcome]:
    """Abort the requests still initiated (they move to the history as aborted); every other
    id is answered with why not."""
    out = {i: AbortOutcome(i, "Error", "No Such Compaction Id Available") for i in ids}
    if not ids:
        return out
    states = {}
    for table in (compaction_queue, completed_compactions):
        for r in conn.execute(select(table.c.id, table.c.state)
                              .where(table.c.id.in_(sorted(set(ids))))):
            states[r.id] = r.state
    for cid, state in states.items():
        if state != INITIATED:
            out[cid] = AbortOutcome(cid, "Error", "Error while aborting compaction as "
                                    f"compaction is in state-{STATE_NAMES.get(state, state)}")
        elif finish(conn, cid, ABORTED, ABORT_MESSAGE, expect_state=INITIATED):
            out[cid] = AbortOutcome(cid, "Success", "Successfully aborted compaction")
        else:
            out[cid] = AbortOutcome(cid, "Error", "Error while aborting compaction: Unable to "
                                    "update compaction record in COMPACTION_QUEUE")
    return out


def latest_committed(conn: Connection, db: str | None, table: str | None,
                     partitions: list[str] | None,
                     last_compaction_id: int | None) -> list[CommittedCompaction]:
    """The newest committed compaction (succeeded, or compacted and waiting for the cleaner)
    of the table and of each of its partitions (those named, if any), newer than
    ``last_compaction_id`` when given; newest first."""
    if db is None or table is None:
        raise MetastoreError("Database name and table name cannot be null.")
    parts = []
    for t, state in ((completed_compactions, SUCCEEDED), (compaction_queue, READY_FOR_CLEANING)):
        c = t.c
        query = select(c.id, c.db_name, c.tbl_name, c.part_name, c.ctype).where(
            (c.state == state) & (c.db_name == db.lower()) & (c.tbl_name == table.lower()))
        if partitions:
            query = query.where(c.part_name.in_(partitions))
        if last_compaction_id is not None:
            query = query.where(c.id > last_compaction_id)
        parts.append(query)
    rows = conn.execute(union_all(*parts)).all()
    out: list[CommittedCompaction] = []
    seen: set[str | None] = set()
    for r in sorted(rows, key=lambda r: r.id, reverse=True):
        if r.part_name not in seen:
            seen.add(r.part_name)
            out.append(CommittedCompaction(r.id, r.db_name, r.tbl_name, r.part_name, r.ctype))
    return out
