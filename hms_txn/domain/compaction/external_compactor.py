"""A Hive compactor running elsewhere, on our compaction queue (Hive 4's
``CompactionTxnHandler`` calls on the wire: ``find_next_compact2``, ``update_compactor_state``,
``set_hadoop_jobid``, ``mark_compacted`` / ``mark_failed`` / ``mark_refused`` /
``mark_cleaned``, ``find_columns_with_stats``, ``submit_for_cleanup``, the compaction
metrics).

HiveServer2 with ``hive.metastore.runworker.in=hs2`` runs Hive's Worker threads there; each
claims a request with ``find_next_compact2``, opens a COMPACTION transaction and records it
(``update_compactor_state``), compacts, calls ``mark_compacted`` and commits (or aborts and
calls ``mark_failed`` / ``mark_refused``). Living with our own compactor:

* one claim: ``find_next`` takes entries through ``compaction_bookkeeping.claim_next``, the
  claim our Workers use (the "compaction" mutex, initiated -> working), so a Hive Worker
  and ours never take the same entry;
* the calls that move an entry act only on an entry the calling worker still holds:
  ``find_next`` answers with the entry as claimed, naming the worker, and Hive's Worker
  sends that struct back, so its later calls are conditional on the entry still being
  working under that worker id, as our own Workers' calls are (``_mine``). A request
  revoked from a timed-out Hive Worker (``revoke_timed_out``, which also aborts its
  transaction) is therefore never moved by that worker's late calls. A struct that names
  no worker is taken to mean any working entry (initiated too, to fail or refuse it);
* the Cleaner waits for the compaction's transaction: an entry marked compacted before its
  transaction committed is cleaned only after the commit (``compaction_committed``);
* the transaction a Hive Worker records is not written to ``txn_components`` as Hive does
  (to keep an aborted compaction's TXNS row until its files are cleaned): our housekeeping
  keeps aborted COMPACTION transactions anyway (``purge_empty_aborted_txns``).
"""

from __future__ import annotations

import json

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import Internal, InvalidInput
from hms_txn.domain.stats import column_stats
from hms_txn.domain.model import catalog
from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.txn.compaction_queue import (DID_NOT_INITIATE, FAILED, INITIATED,
                                                 READY_FOR_CLEANING, WORKING, CompactionType,
                                                 next_txn_id_now)
from hms_txn.domain.txn.txn_records import OPEN, now_ms, txn_row
from hms_txn.store.schema import (compaction_metrics, compaction_queue, next_compaction_id,
                                  partition_column_stats, table_column_stats)
from hms_txn.store.sql import reserve_ids

Q = compaction_queue.c


def stringable_map(properties: dict | None) -> str | None:
    """Hive's ``StringableMap.toString``, the form of CQ_TBLPROPERTIES that Hive's Worker
    parses: ``<n>:`` then ``<len>:<key><len>:<value>`` per entry (Java string lengths)."""
    if not properties:
        return None
    out = [f"{len(properties)}:"]
    for key, value in properties.items():
        for s in (key, value):
            out.append(f"{_java_len(s)}:{s}" if s else "0:")
    return "".join(out)


def _java_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def find_next(conn: Connection, worker_id: str | None, worker_version: str | None,
              pool_name: str | None, pool_timeout_ms: int) -> dict | None:
    """Claim the next request for a Hive Worker (Hive's NextCompactionFunction): the queue
    row (column name -> value; the properties as Hive's Worker reads them), or None when
    there is nothing to do."""
    e = bk.claim_next(conn, worker_id or "", worker_version or "", pool_name=pool_name,
                      pool_timeout_ms=pool_timeout_ms)
    if e is None:
        return None
    return claimed_row(conn.execute(select(compaction_queue).where(Q.id == e.id)).first())


def claimed_row(row) -> dict | None:
    """A claimed queue row as ``find_next`` answers it (None: nothing claimed)."""
    if row is None:
        return None
    found = row._asdict()
    found["properties"] = stringable_map(json.loads(found["properties"]) if found["properties"]
                                         else None)
    return found


def _held(entry_id: int, worker_id: str | None, states=(WORKING,)):
    """The entry, while ``worker_id`` holds it (any worker when None: then in ``states``)."""
    if worker_id:
        return (Q.id == entry_id) & (Q.state == WORKING) & (Q.worker_id == worker_id)
    return (Q.id == entry_id) & Q.state.in_(states)


def update_compactor_state(conn: Connection, entry_id: int, worker_id: str | None,
                           txn_id: int, highest_write_id: int | None,
                           run_as: str | None) -> None:
    """A Hive Worker records its compaction transaction and the highest write id it
    compacts (Hive updates exactly one row, else IllegalStateException)."""
    if conn.execute(update(compaction_queue).where(_held(entry_id, worker_id))
                    .values(txn_id=txn_id, highest_write_id=highest_write_id, run_as=run_as)
                    ).rowcount != 1:
        raise Internal(f"Could not find record in COMPACTION_QUEUE for id:{entry_id} "
                       f"working under {worker_id or 'any worker'}")


def set_hadoop_job_id(conn: Connection, job_id: str | None, entry_id: int) -> None:
    conn.execute(update(compaction_queue).where(Q.id == entry_id)
                 .values(hadoop_job_id=(job_id or None) and job_id[:128]))


def mark_compacted(conn: Connection, entry_id: int, worker_id: str | None) -> None:
    """Ready for cleaning, worker cleared (Hive's markCompacted). Hive's Worker calls it
    before committing its transaction: the commit then records the commit
    (``compaction_committed``); with no transaction open it is recorded now."""
    r = conn.execute(select(Q.txn_id).where(_held(entry_id, worker_id))
                     .with_for_update()).first()
    if r is None:
        raise InvalidInput(f"No compaction with id {entry_id} is working under "
                           f"{worker_id or 'any worker'}")
    values = {"state": READY_FOR_CLEANING, "worker_id": None}
    t = txn_row(conn, r.txn_id, for_update=False) if r.txn_id else None
    if t is None or t.state != OPEN:
        values.update(next_txn_id=next_txn_id_now(conn), commit_ms=now_ms())
    conn.execute(update(compaction_queue).where(Q.id == entry_id).values(**values))


def mark_finished(conn: Connection, entry_id: int, worker_id: str | None, state: str,
                  message: str | None, *, db: str, table: str, partition: str | None,
                  ctype: int | None, retention: dict) -> int:
    """Hive's markFailed / markRefused: the entry moves to the history as ``state``; with
    id 0 (the failure came before any entry existed) a history entry is made, "did not
    initiate" for a failure. Returns the history id."""
    if entry_id:
        if not bk.finish(conn, entry_id, state, message, retention=retention,
                         worker_id=worker_id, expect_state=(INITIATED, WORKING)):
            raise InvalidInput(f"No record with CQ_ID={entry_id} found in COMPACTION_QUEUE"
                               + (f" working under {worker_id}" if worker_id else ""))
        return entry_id
    return bk.record_history(conn, (db or "").lower(), (table or "").lower(), partition,
                             ctype or CompactionType.MINOR,
                             DID_NOT_INITIATE if state == FAILED else state, message or "",
                             retention=retention)


def mark_cleaned(conn: Connection, entry_id: int, retention: dict) -> None:
    e = bk.get_entry(conn, entry_id)
    if e is None or not bk.mark_cleaned(conn, e, retention)["moved"]:
        raise InvalidInput(f"No compaction with id {entry_id} is ready for cleaning")


def columns_with_stats(conn: Connection, db: str, table: str,
                       partition: str | None) -> list[str]:
    """Columns of the table (or of the partition) that have statistics (Hive's
    FindColumnsWithStatsHandler); nothing for an unknown table or partition."""
    row = catalog.table_row(conn, (db or "").lower(), (table or "").lower())
    if row is None:
        return []
    if partition is None:
        query = select(table_column_stats.c.col_name).where(
            table_column_stats.c.tbl_id == row.tbl_id)
    else:
        parts = column_stats.partition_rows(conn, row.tbl_id, [partition])
        if partition not in parts:
            return []
        query = select(partition_column_stats.c.col_name).where(
            partition_column_stats.c.part_id == parts[partition][0])
    return list(dict.fromkeys(r[0] for r in conn.execute(query)))


def submit_for_cleanup(conn: Connection, db: str, table: str, partition: str | None,
                       ctype: int, *, run_as: str | None, properties: dict | None,
                       highest_write_id: int, txn_id: int, **request) -> int:
    """Hive's submitForCleanup: a queue entry straight in ready for cleaning, holding the
    transaction and write id whose files are to go (HiveServer2 sends it when a CTAS
    under an exclusive lock fails). It is cleaned once that transaction is over."""
    if not db or not table:
        raise InvalidInput("a cleanup request needs dbname and tablename")
    new_id = reserve_ids(conn, next_compaction_id, 1)
    values = dict(id=new_id, db_name=db.lower(), tbl_name=table.lower(), part_name=partition,
                  state=READY_FOR_CLEANING, ctype=int(ctype), run_as=run_as,
                  properties=json.dumps(dict(properties)) if properties else None,
                  enqueue_ms=now_ms(), highest_write_id=highest_write_id, txn_id=txn_id,
                  **request)
    t = txn_row(conn, txn_id, for_update=False) if txn_id else None
    if t is None or t.state != OPEN:
        values.update(next_txn_id=next_txn_id_now(conn), commit_ms=now_ms())
    conn.execute(insert(compaction_queue).values(**values))
    return new_id


# -- compaction metrics (Hive's COMPACTION_METRICS_CACHE) -----------------------------------

def _metric(db: str, table: str, partition: str | None, metric_type: str):
    c = compaction_metrics.c
    return ((c.db_name == (db or "").lower()) & (c.tbl_name == (table or "").lower())
            & (c.part_name == (partition or "")) & (c.metric_type == metric_type))


def update_metric(conn: Connection, db: str, table: str, partition: str | None,
                  metric_type: str, value: int, threshold: int) -> bool:
    """Hive's UpdateCompactionMetricsDataFunction: a value at or above the threshold is
    stored (its version counting the updates), one below it removes the metric."""
    cond = _metric(db, table, partition, metric_type)
    prev = conn.execute(select(compaction_metrics.c.version).where(cond)
                        .with_for_update()).first()
    if value < threshold:
        return prev is None or conn.execute(delete(compaction_metrics).where(cond)).rowcount > 0
    if prev is None:
        conn.execute(insert(compaction_metrics).values(
            db_name=(db or "").lower(), tbl_name=(table or "").lower(),
            part_name=partition or "", metric_type=metric_type, metric_value=value, version=1))
        return True
    return conn.execute(update(compaction_metrics).where(cond).values(
        metric_value=value, version=prev.version + 1)).rowcount > 0


def remove_metric(conn: Connection, db: str, table: str, partition: str | None,
                  metric_type: str) -> None:
    conn.execute(delete(compaction_metrics).where(_metric(db, table, partition, metric_type)))


def metrics(conn: Connection) -> list[tuple[str, str, str | None, str, int, int]]:
    """(db, table, partition, type, value, version) of every stored metric."""
    c = compaction_metrics.c
    return [(r.db_name, r.tbl_name, r.part_name or None, r.metric_type, r.metric_value,
             r.version)
            for r in conn.execute(select(compaction_metrics).order_by(
                c.db_name, c.tbl_name, c.part_name, c.metric_type))]
