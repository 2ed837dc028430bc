"""A Hive Worker running in HiveServer2 (``hive.metastore.runworker.in=hs2``) on our
compaction queue: the calls of Hive 4's Worker.findNextCompactionAndExecute, in its order,
and Hive 4's answers (CompactionTxnHandler, NextCompactionFunction, TxnHandler
.submitForCleanup, UpdateCompactionMetricsDataFunction); and the one claim it shares with
our own compactor (compaction_bookkeeping.claim_next). Over Thrift, on SQLite and
PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.compaction.external_compactor import metrics, stringable_map
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table

MAJOR = T.CompactionType.MAJOR
ACID = {"transactional": "true"}


def _write(client, table="t"):
    txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
        dbName="default", tableName=table, txnIds=[txn]))
    client.commit_txn(T.CommitTxnRequest(txnid=txn))


def _enqueue(client, table="t", part=None, pool=None, properties=None):
    return client.compact2(T.CompactionRequest(
        dbname="default", tablename=table, partitionname=part, type=MAJOR, poolName=pool,
        properties=properties, initiatorVersion="4.0.1")).id


def _entry(client, cid):
    return next(c for c in client.show_compact(T.ShowCompactRequest()).compacts if c.id == cid)


def _find(client, worker="hs2host-31", pool=None):
    return client.find_next_compact2(T.FindNextCompactRequest(
        workerId=worker, workerVersion="4.0.1", poolName=pool)).ci


def _ready_to_clean(hms):
    with hms.ms.store.write() as conn:
        return [e.id for e in bk.ready_for_cleaning(conn)]


def test_hive_worker_compaction_cycle(hms, client):
    """Worker.findNextCompactionAndExecute: find_next_compact2(workerId, workerVersion,
    poolName); CompactionTxn.open: open_txns(runAs, COMPACTION) and a SHARED_READ lock;
    get_valid_write_ids; update_compactor_state(ci with highestWriteId, runAs, txnId);
    (MRCompactor: set_hadoop_jobid); mark_compacted; CompactionTxn.close: commit_txn;
    AcidMetricService.updateMetricsFromWorker; StatsUpdater.gatherStats:
    find_columns_with_stats. Our Cleaner waits for the commit (Hive's commit sets
    CQ_COMMIT_TIME), then the entry is cleaned like one of ours."""
    client.create_table(make_table("default", "t", params=ACID))
    _write(client)
    _write(client)
    cid = _enqueue(client, properties={"compactor.mapreduce.map.memory.mb": "2048"})
    ci = _find(client)
    assert (ci.id, ci.dbname, ci.tablename, ci.partitionname, ci.type) == (
        cid, "default", "t", None, MAJOR)
    # CQ_TBLPROPERTIES as Hive's StringableMap writes it, which the Worker parses
    assert ci.properties == "1:33:compactor.mapreduce.map.memory.mb4:2048"
    assert ci.numberOfBuckets == 0 and ci.poolname is None
    e = _entry(client, cid)
    assert (e.state, e.workerid, e.workerVersion) == ("working", "hs2host-31", "4.0.1")
    assert _find(client, "hs2host-32") is None             # nothing else to claim

    txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="hive", hostname="hs2host",
                                            txn_type=T.TxnType.COMPACTION)).txn_ids[0]
    lock = client.lock(T.LockRequest(component=[T.LockComponent(
        type=T.LockType.SHARED_READ, level=T.LockLevel.TABLE, dbname="default", tablename="t",
        operationType=T.DataOperationType.SELECT, isTransactional=True)],
        txnid=txn, user="hive", hostname="hs2host"))
    assert lock.state == T.LockState.ACQUIRED
    wids = client.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=["default.t"], validTxnList=f"{txn}:{txn}::")).tblValidWriteIds[0]
    ci.highestWriteId, ci.runas = wids.writeIdHighWaterMark, "hive"
    client.update_compactor_state(ci, txn)
    client.set_hadoop_jobid("job_1700000000000_0001", cid)
    client.mark_compacted(ci)
    e = _entry(client, cid)
    assert (e.state, e.workerid, e.txnId, e.hightestWriteId, e.runAs, e.hadoopJobId) == (
        "ready for cleaning", None, txn, 2, "hive", "job_1700000000000_0001")
    assert e.commitTime is None and _ready_to_clean(hms) == []     # not committed yet
    client.commit_txn(T.CommitTxnRequest(txnid=txn))
    assert _entry(client, cid).commitTime and _ready_to_clean(hms) == [cid]

    # StatsUpdater.gatherStats asks which columns to analyze
    client.create_table(make_table("default", "plain"))
    assert client.find_columns_with_stats(T.CompactionInfoStruct(
        id=cid, dbname="default", tablename="plain", type=MAJOR)) == []
    client.update_table_column_statistics(T.ColumnStatistics(
        statsDesc=T.ColumnStatisticsDesc(isTblLevel=True, dbName="default", tableName="plain"),
        statsObj=[T.ColumnStatisticsObj(colName="id", colType="int", statsData=
                                        T.ColumnStatisticsData(longStats=T.LongColumnStatsData(
                                            numNulls=0, numDVs=1)))], engine="hive"))
    assert client.find_columns_with_stats(T.CompactionInfoStruct(
        id=cid, dbname="default", tablename="plain", type=MAJOR)) == ["id"]
    assert client.find_columns_with_stats(T.CompactionInfoStruct(
        id=cid, dbname="default", tablename="plain", partitionname="p=1", type=MAJOR)) == []

    # a Cleaner's mark_cleaned: to the history as succeeded (MarkCleanedFunction)
    client.mark_cleaned(ci)
    assert _entry(client, cid).state == "succeeded"
    with pytest.raises(T.MetaException, match="ready for cleaning"):
        client.mark_cleaned(ci)


def test_worker_refusals_and_failures(client):
    """Worker.findNextCompactionAndExecute marks a request refused (table dropped, sorted,
    thresholds not met) or failed (any exception; Worker.markFailed) with ci.errorMessage:
    Hive's updateStatus moves it to the history with that message. markFailed of id 0 (no
    entry was made) records "did not initiate"; a vanished id is an error."""
    refused, failed = _enqueue(client, "a"), _enqueue(client, "b")
    ci = _find(client)
    assert ci.id == refused
    ci.errorMessage = "Unable to find table default.a, assuming it was dropped and moving on."
    client.mark_refused(ci)
    ci = _find(client)
    ci.errorMessage = "java.io.IOException: boom"
    client.mark_failed(ci)
    assert (_entry(client, refused).state, _entry(client, refused).errorMessage) == (
        "refused", "Unable to find table default.a, assuming it was dropped and moving on.")
    assert (_entry(client, failed).state, _entry(client, failed).errorMessage) == (
        "failed", "java.io.IOException: boom")
    client.mark_failed(T.CompactionInfoStruct(id=0, dbname="default", tablename="c",
                                              type=MAJOR, errorMessage="no entry"))
    (dni,) = [c for c in client.show_compact(T.ShowCompactRequest()).compacts
              if c.tablename == "c"]
    assert (dni.state, dni.errorMessage) == ("did not initiate", "no entry")
    with pytest.raises(T.MetaException, match=f"No record with CQ_ID={failed}"):
        client.mark_failed(T.CompactionInfoStruct(id=failed, dbname="default", tablename="b",
                                                  type=MAJOR))
    # update_compactor_state declares no exception: Hive's IllegalStateException
    with pytest.raises(TApplicationException):
        client.update_compactor_state(T.CompactionInfoStruct(
            id=failed, dbname="default", tablename="b", type=MAJOR), 5)
    with pytest.raises(T.MetaException):
        client.mark_compacted(T.CompactionInfoStruct(id=failed, dbname="default",
                                                     tablename="b", type=MAJOR))


def test_one_claim_for_hive_workers_and_ours(hms, client):
    """Hive Workers (find_next_compact and find_next_compact2) and our Worker's claim
    (compaction_bookkeeping.claim_next, service/compactor/worker.py) take entries through
    the same claim: racing for 12 requests, every request is taken exactly once."""
    ids = [_enqueue(client, f"t{i}") for i in range(12)]
    taken: list[tuple[str, int]] = []
    lock = threading.Lock()

    def hive_worker(n: int) -> None:
        c = hms.client()
        try:
            while True:
                ci = (c.find_next_compact(f"hs2-{n}").ci if n % 2
                      else _find(c, f"hs2-{n}"))
                if ci is None:
                    return
                with lock:
                    taken.append((f"hs2-{n}", ci.id))
        finally:
            c.close()

    def our_worker() -> None:
        while True:
            with hms.ms.store.write() as conn:
                e = bk.claim_next(conn, "ours-worker0", "test")
            if e is None:
                return
            with lock:
                taken.append(("ours-worker0", e.id))

    threads = [threading.Thread(target=hive_worker, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=our_worker))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(i for _, i in taken) == ids
    for who, cid in taken:
        assert _entry(client, cid).workerid == who


def test_late_calls_of_a_timed_out_hive_worker(hms, client):
    """A Hive Worker whose request timed out (revoked: re-queued and its transaction
    aborted, compaction_bookkeeping.revoke_timed_out, as Hive's revokeTimedoutWorkers) and
    was then taken by our Worker cannot move it any more: the struct it sends back names
    the worker find_next_compact2 gave it to."""
    cid = _enqueue(client)
    ci = _find(client, "hs2-slow")
    assert ci.workerId == "hs2-slow"
    txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="hive", hostname="hs2",
                                            txn_type=T.TxnType.COMPACTION)).txn_ids[0]
    ci.highestWriteId = 0
    client.update_compactor_state(ci, txn)
    with hms.ms.store.write() as conn:
        assert bk.revoke_timed_out(conn, bk.worker_cutoff_ms(-60),
                                   messages=hms.ms.txns.messages) == [(cid, "i")]
        assert bk.claim_next(conn, "ours-worker0", "test").id == cid
    with pytest.raises(TApplicationException):
        client.update_compactor_state(ci, txn)
    with pytest.raises(T.MetaException, match="working under hs2-slow"):
        client.mark_compacted(ci)
    with pytest.raises(T.MetaException, match="working under hs2-slow"):
        client.mark_failed(ci)
    e = _entry(client, cid)
    assert (e.state, e.workerid) == ("working", "ours-worker0")


def test_compaction_pools(hms_factory):
    """NextCompactionFunction: a worker of a pool takes only that pool's requests; a worker
    of no pool takes requests of no pool, and those of a pool once enqueued longer ago than
    metastore.compactor.worker.pool.timeout."""
    hms = hms_factory({"hive.compactor.worker.pool.timeout": "1h"})
    client = hms.client()
    pooled, plain = _enqueue(client, "a", pool="etl"), _enqueue(client, "b")
    assert _find(client).id == plain
    assert _find(client) is None
    assert _find(client, pool="etl").id == pooled
    client.close()
    hms = hms_factory({"hive.compactor.worker.pool.timeout": "1ms"})   # same database
    client = hms.client()
    pooled = _enqueue(client, "c", pool="etl")
    deadline = time.monotonic() + 30
    found = None
    while found is None and time.monotonic() < deadline:    # once 1 ms has passed
        found = _find(client)
    assert found.id == pooled
    client.close()


def test_submit_for_cleanup_of_a_failed_ctas(hms, client):
    """HiveQueryLifeTimeHook.checkAndRollbackCTAS (hive.txn.xlock.ctas): a failed CTAS
    sends submit_for_cleanup(MAJOR request with the location and ifPurge, the table's
    write id, the query's transaction) and its transaction then aborts. Hive
    (TxnHandler.submitForCleanup): true, an entry ready for cleaning holding both; it is
    cleaned once the transaction is over."""
    txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    assert client.submit_for_cleanup(T.CompactionRequest(
        dbname="default", tablename="ctas", type=MAJOR, runas="u",
        properties={"location": "file:/tmp/wh/ctas", "ifPurge": "true"}), 1, txn) is True
    (e,) = client.show_compact(T.ShowCompactRequest()).compacts
    assert (e.state, e.txnId, e.hightestWriteId, e.tablename) == (
        "ready for cleaning", txn, 1, "ctas")
    assert _ready_to_clean(hms) == []
    client.abort_txns(T.AbortTxnsRequest(txn_ids=[txn]))
    assert _ready_to_clean(hms) == [e.id]


def test_compaction_metrics(hms, client):
    """AcidMetricService.updateMetricsFromWorker (metastore.acidmetrics.ext.on): per delta
    metric, update_compaction_metrics_data(value, threshold) or
    remove_compaction_metrics_data. UpdateCompactionMetricsDataFunction: at or above the
    threshold the value is stored (version 1, then counting updates); below it, removed;
    true unless the row changed under it."""
    def update(value, part=None, kind=T.CompactionMetricsMetricType.NUM_DELTAS):
        return client.update_compaction_metrics_data(T.CompactionMetricsDataStruct(
            dbname="default", tblname="t", partitionname=part, type=kind, metricvalue=value,
            version=0, threshold=10))

    def stored():
        with hms.ms.store.write() as conn:
            return metrics(conn)

    assert update(5) is True and stored() == []
    assert update(12) is True and update(15) is True
    assert update(11, "p=1", T.CompactionMetricsMetricType.NUM_OBSOLETE_DELTAS) is True
    assert stored() == [("default", "t", None, "NUM_DELTAS", 15, 2),
                        ("default", "t", "p=1", "NUM_OBSOLETE_DELTAS", 11, 1)]
    assert update(3) is True
    client.remove_compaction_metrics_data(T.CompactionMetricsDataRequest(
        dbName="default", tblName="t", partitionName="p=1",
        type=T.CompactionMetricsMetricType.NUM_OBSOLETE_DELTAS))
    assert stored() == []


def test_stringable_map_counts_java_characters():
    assert stringable_map(None) is None
    assert stringable_map({"a": "", "k": "\U0001F600"}) == "2:1:a0:1:k2:\U0001F600"
