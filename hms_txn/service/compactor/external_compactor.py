"""The calls of a Hive compactor running elsewhere (``domain.compaction.external_compactor``):
a Hive Worker in HiveServer2 (``hive.metastore.runworker.in=hs2``) works on our compaction
queue next to our own compactor, sharing its claim, and reports its delta metrics."""

from __future__ import annotations

from hms_txn.common.config import Config
from hms_txn.common.errors import InvalidInput
from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.compaction import external_compactor as ext
from hms_txn.domain.compaction import one_statement as one
from hms_txn.domain.txn.compaction_queue import FAILED, REFUSED
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.thrift_gen.hive_metastore import ttypes


class ExternalCompactorService:
    """``find_next_compact(2)``, ``update_compactor_state``, ``set_hadoop_jobid``,
    ``mark_compacted`` / ``mark_failed`` / ``mark_refused`` / ``mark_cleaned``,
    ``find_columns_with_stats``, ``submit_for_cleanup``, ``update_compaction_metrics_data``,
    ``remove_compaction_metrics_data``."""

    def __init__(self, config: Config, units: UnitOfWork):
        self.config = config
        self.units = units

    def find_next_compact(self, workerId):
        return self.find_next_compact2(ttypes.FindNextCompactRequest(workerId=workerId))

    def find_next_compact2(self, rqst):
        if rqst is None:
            raise InvalidInput("FindNextCompactRequest is null")
        timeout_ms = int(self.config["hive.compactor.worker.pool.timeout"] * 1000)
        fns = self.units.functions
        if fns is not None:     # the claim in one statement (hms_txn.domain.compaction.one_statement)
            row = ext.claimed_row(self.units.call(lambda conn: one.claim_compaction(
                conn, fns, rqst.workerId or "", rqst.workerVersion or "",
                pool_name=rqst.poolName, pool_timeout_ms=timeout_ms)))
        else:
            row = self.units.write(lambda conn: ext.find_next(
                conn, rqst.workerId, rqst.workerVersion, rqst.poolName, timeout_ms))
        return ttypes.OptionalCompactionInfoStruct(ci=None if row is None else _info(row))

    def update_compactor_state(self, cr, txn_id):
        self.units.write(lambda conn: ext.update_compactor_state(
            conn, cr.id, cr.workerId, txn_id, cr.highestWriteId, cr.runas))

    def set_hadoop_jobid(self, jobId, cq_id):
        self.units.write(lambda conn: ext.set_hadoop_job_id(conn, jobId, cq_id))

    def mark_compacted(self, cr):
        self.units.write(lambda conn: ext.mark_compacted(conn, cr.id, cr.workerId))

    def mark_failed(self, cr):
        self._finish(cr, FAILED)

    def mark_refused(self, cr):
        self._finish(cr, REFUSED)

    def _finish(self, cr, state):
        retention = bk.retention_of(self.config)
        self.units.write(lambda conn: ext.mark_finished(
            conn, cr.id, cr.workerId, state, cr.errorMessage, db=cr.dbname, table=cr.tablename,
            partition=cr.partitionname, ctype=cr.type, retention=retention))

    def mark_cleaned(self, cr):
        retention = bk.retention_of(self.config)
        self.units.write(lambda conn: ext.mark_cleaned(conn, cr.id, retention))

    def find_columns_with_stats(self, cr):
        return self.units.read(lambda conn: ext.columns_with_stats(
            conn, cr.dbname, cr.tablename, cr.partitionname))

    def submit_for_cleanup(self, o1, o2, o3):
        rqst = o1
        self.units.write(lambda conn: ext.submit_for_cleanup(
            conn, rqst.dbname, rqst.tablename, rqst.partitionname, rqst.type,
            run_as=rqst.runas, properties=rqst.properties, highest_write_id=o2, txn_id=o3,
            initiator_id=rqst.initiatorId, initiator_version=rqst.initiatorVersion,
            pool_name=rqst.poolName, number_of_buckets=rqst.numberOfBuckets,
            order_by=rqst.orderByClause))
        return True

    def update_compaction_metrics_data(self, data):
        return self.units.write(lambda conn: ext.update_metric(
            conn, data.dbname, data.tblname, data.partitionname, _metric_name(data.type),
            data.metricvalue, data.threshold))

    def remove_compaction_metrics_data(self, request):
        self.units.write(lambda conn: ext.remove_metric(
            conn, request.dbName, request.tblName, request.partitionName,
            _metric_name(request.type)))


def _metric_name(metric_type) -> str:
    name = ttypes.CompactionMetricsMetricType._VALUES_TO_NAMES.get(metric_type)
    if name is None:
        raise InvalidInput(f"unknown compaction metric type {metric_type}")
    return name


def _info(row: dict):
    """The claimed entry as Hive's CompactionInfo.compactionInfoToStruct sends it."""
    return ttypes.CompactionInfoStruct(
        id=row["id"], dbname=row["db_name"], tablename=row["tbl_name"],
        partitionname=row["part_name"], type=row["ctype"], runas=row["run_as"],
        properties=row["properties"],
        toomanyaborts=False, hasoldabort=False, state=row["state"], workerId=row["worker_id"],
        start=row["start_ms"], highestWriteId=row["highest_write_id"] or 0,
        errorMessage=row["error_message"], enqueueTime=row["enqueue_ms"], retryRetention=0,
        poolname=row["pool_name"], numberOfBuckets=row["number_of_buckets"] or 0,
        orderByClause=row["order_by"])
