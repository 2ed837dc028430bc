"""Locks and compaction requests on the wire (``domain.locks.locks``,
``domain.txn.compaction_queue``, ``domain.compaction.compaction_admin``)."""

from __future__ import annotations

from hms_txn.domain.compaction import compaction_admin
from hms_txn.domain.locks import locks
from hms_txn.domain.txn import compaction_queue
from hms_txn.domain.locks import one_statement as one
from hms_txn.domain.txn.compaction_queue import CompactionInfo
from hms_txn.service.units import Route, UnitOfWork, policy
from hms_txn.wire.session import identity
from hms_txn.wire.thrift_gen.hive_metastore import ttypes


def _ms_or_none(value):
    return None if value is None else int(value)


class LockService:
    """``lock``, ``check_lock``, ``unlock``, ``show_locks``."""

    def __init__(self, units: UnitOfWork):
        self.units = units

    @policy(route=Route.BATCH)
    def lock(self, rqst):
        request = locks.LockRequest(
            components=[locks.LockComponent(
                type=c.type, level=c.level, dbname=c.dbname, tablename=c.tablename,
                partitionname=c.partitionname, operation_type=c.operationType,
                is_transactional=c.isTransactional,
                is_dynamic_partition_write=c.isDynamicPartitionWrite)
                for c in (rqst.component or ())],
            txn_id=rqst.txnid or 0, user=identity(rqst.user), hostname=rqst.hostname,
            agent_info=rqst.agentInfo, zero_wait_read=bool(rqst.zeroWaitReadEnabled),
            exclusive_ctas=bool(rqst.exclusiveCTAS))
        fns = self.units.functions
        if fns is not None:     # one statement (hms_txn.domain.locks.one_statement)
            return _lock_response(self.units.call(lambda conn: one.lock(conn, fns, request)))
        return _lock_response(self.units.write(lambda conn: locks.lock(conn, request)))

    @policy(route=Route.BATCH)
    def check_lock(self, rqst):
        fns = self.units.functions
        if fns is not None:
            return _lock_response(self.units.call(
                lambda conn: one.check_lock(conn, fns, rqst.lockid)))
        return _lock_response(self.units.write(lambda conn: locks.check_lock(
            conn, rqst.lockid, txn_id=rqst.txnid, elapsed_ms=rqst.elapsed_ms)))

    @policy(route=Route.BATCH)
    def unlock(self, rqst):
        self.units.write(lambda conn: locks.unlock(conn, rqst.lockid))

    def show_locks(self, rqst):
        rqst = rqst or ttypes.ShowLocksRequest()
        found = self.units.read(lambda conn: locks.show_locks(
            conn, dbname=rqst.dbname, tablename=rqst.tablename, partname=rqst.partname,
            txn_id=rqst.txnid))
        return ttypes.ShowLocksResponse(locks=[
            ttypes.ShowLocksResponseElement(
                lockid=i.lock_id, dbname=i.dbname, tablename=i.tablename, partname=i.partname,
                state=int(i.state), type=int(i.type), txnid=i.txn_id,
                lastheartbeat=i.last_heartbeat_ms, acquiredat=_ms_or_none(i.acquired_ms),
                user=i.user, hostname=i.hostname, heartbeatCount=i.heartbeat_count,
                agentInfo=i.agent_info, blockedByExtId=i.blocked_by_ext_id,
                blockedByIntId=i.blocked_by_int_id, lockIdInternal=i.lock_id_internal)
            for i in found])

    def remove_timed_out(self, timeout_s: float) -> list[int]:
        """The reaper's part for txn-less locks not heartbeated for ``timeout_s``."""
        return self.units.write(lambda conn: locks.remove_timed_out(conn, timeout_s))


def _lock_response(result):
    return ttypes.LockResponse(lockid=result.lock_id, state=int(result.state),
                               errorMessage=result.error_message)


class CompactionService:
    """``compact``, ``compact2``, ``show_compact``, ``abort_Compactions``,
    ``get_latest_committed_compaction_info``: the queue as clients see it."""

    def __init__(self, units: UnitOfWork):
        self.units = units

    def _enqueue(self, rqst):
        return self.units.write(lambda conn: compaction_queue.compact(
            conn, rqst.dbname, rqst.tablename, rqst.partitionname, rqst.type,
            run_as=rqst.runas, properties=rqst.properties, initiator_id=rqst.initiatorId,
            initiator_version=rqst.initiatorVersion, pool_name=rqst.poolName,
            number_of_buckets=rqst.numberOfBuckets, order_by=rqst.orderByClause))

    def compact(self, rqst):
        self._enqueue(rqst)

    def compact2(self, rqst):
        r = self._enqueue(rqst)
        return ttypes.CompactionResponse(id=r.id, state=r.state, accepted=r.accepted,
                                         errormessage=r.error_message)

    def show_compact(self, rqst):
        rqst = rqst or ttypes.ShowCompactRequest()
        infos = self.units.read(lambda conn: compaction_queue.show_compact(
            conn, id=rqst.id, pool_name=rqst.poolName, dbname=rqst.dbName,
            tablename=rqst.tbName, partitionname=rqst.partName, ctype=rqst.type,
            state=rqst.state, limit=rqst.limit, order=rqst.order))
        return ttypes.ShowCompactResponse(compacts=[_compact_element(i) for i in infos])

    def abort_Compactions(self, rqst):
        ids = list(rqst.compactionIds or ())
        outcomes = self.units.write(lambda conn: compaction_admin.abort_compactions(conn, ids))
        return ttypes.AbortCompactResponse(abortedcompacts={
            i: ttypes.AbortCompactionResponseElement(compactionId=o.compaction_id,
                                                     status=o.status, message=o.message)
            for i, o in outcomes.items()})

    def get_latest_committed_compaction_info(self, rqst):
        found = self.units.read(lambda conn: compaction_admin.latest_committed(
            conn, rqst.dbname, rqst.tablename, rqst.partitionnames, rqst.lastCompactionId))
        return ttypes.GetLatestCommittedCompactionInfoResponse(compactions=[
            ttypes.CompactionInfoStruct(id=c.id, dbname=c.db, tablename=c.table,
                                        partitionname=c.partition, type=c.ctype)
            for c in found])


def _compact_element(i: CompactionInfo):
    return ttypes.ShowCompactResponseElement(
        dbname=i.dbname, tablename=i.tablename, partitionname=i.partitionname, type=int(i.type),
        state=i.state, workerid=i.worker_id, start=i.start_ms, runAs=i.run_as,
        metaInfo=i.meta_info, endTime=i.end_ms,
        hadoopJobId=i.hadoop_job_id if i.hadoop_job_id is not None else "None", id=i.id,
        errorMessage=i.error_message, enqueueTime=i.enqueue_ms, workerVersion=i.worker_version,
        initiatorId=i.initiator_id, initiatorVersion=i.initiator_version,
        cleanerStart=i.cleaner_start_ms, poolName=i.pool_name, nextTxnId=i.next_txn_id,
        txnId=i.txn_id, commitTime=i.commit_ms, hightestWriteId=i.highest_write_id)
