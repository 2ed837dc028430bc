"""Transactions, write ids, locks and compaction requests on the wire.

Each method converts the Thrift request into plain values, calls the domain object on
``self.ms`` (``txns``, ``writeids``, ``locks``, ``compaction``) and converts the answer
back. Domain errors are mapped to the declared Thrift exceptions by ``DeclaredErrors``.

Field presence. Hive's server distinguishes "field not sent" from "sent with its default"
for two optional booleans with defaults, and old clients rely on it:

* ``LockComponent.isTransactional`` (default false): not sent means an old client, whose
  write components must be recorded; sent as false means a non-ACID table, not recorded.
* ``CommitTxnRequest.exclWriteEnabled`` (default true): not sent means a 3.x client, which
  expects the write-write conflict check at commit; a 4.x client sends it, and true means
  EXCL_WRITE locks already serialized the writers so the check is skipped.

Java's generated code only sends such fields when the caller set them; Python's generated
code fills in the IDL default when it reads a struct, which would erase the difference. So
``install_wire_compat`` gives the Processor its own decoders for ``lock`` and
``commit_txn``: subclasses of the generated structs whose constructors leave these two fields
unset (None), so a field the client did not send reads as None. The generated classes
themselves are not changed.
"""

from __future__ import annotations

import logging
from typing import Any

from thrift.Thrift import TType

from hms_txn.domain.compaction_queue import CompactionInfo
from hms_txn.common.errors import InvalidInput
from hms_txn.domain.locks import LockComponent, LockRequest
from hms_txn.wire.thrift_gen.hive_metastore import ttypes
from hms_txn.domain.txn import TxnType, WriteEvent
from hms_txn.service.session import identity

log = logging.getLogger("hms_txn.handler")


def bitset_bytes(flags) -> bytes:
    """Java ``BitSet.toByteArray()`` of the set positions in ``flags`` (a bool sequence)."""
    size = 0
    for i, f in enumerate(flags):
        if f:
            size = i // 8 + 1
    out = bytearray(size)
    for i, f in enumerate(flags):
        if f:
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def _write_open_txns_hive2(resp, oprot) -> None:
    """GetOpenTxnsResponse in Hive 2.x's shape: ``open_txns`` as ``set<i64>``, no abortedBits."""
    oprot.writeStructBegin("GetOpenTxnsResponse")
    oprot.writeFieldBegin("txn_high_water_mark", TType.I64, 1)
    oprot.writeI64(resp.txn_high_water_mark)
    oprot.writeFieldEnd()
    oprot.writeFieldBegin("open_txns", TType.SET, 2)
    oprot.writeSetBegin(TType.I64, len(resp.open_txns))
    for txn_id in resp.open_txns:
        oprot.writeI64(txn_id)
    oprot.writeSetEnd()
    oprot.writeFieldEnd()
    if resp.min_open_txn is not None:
        oprot.writeFieldBegin("min_open_txn", TType.I64, 3)
        oprot.writeI64(resp.min_open_txn)
        oprot.writeFieldEnd()
    oprot.writeFieldStop()
    oprot.writeStructEnd()


class _Hive2OpenTxnsResult:
    def __init__(self, success):
        self.success = success

    def write(self, oprot):
        oprot.writeStructBegin("get_open_txns_result")
        oprot.writeFieldBegin("success", TType.STRUCT, 0)
        _write_open_txns_hive2(self.success, oprot)
        oprot.writeFieldEnd()
        oprot.writeFieldStop()
        oprot.writeStructEnd()


def _process_get_open_txns_hive2(processor, seqid, iprot, oprot):
    from thrift.Thrift import TApplicationException, TMessageType
    from thrift.transport.TTransport import TTransportException

    from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore

    args = ThriftHiveMetastore.get_open_txns_args()
    args.read(iprot)
    iprot.readMessageEnd()
    try:
        result = _Hive2OpenTxnsResult(processor._handler.get_open_txns())
        msg_type = TMessageType.REPLY
    except TTransportException:
        raise
    except TApplicationException as ex:
        result, msg_type = ex, TMessageType.EXCEPTION
    except Exception:
        log.exception("get_open_txns failed")
        result = TApplicationException(TApplicationException.INTERNAL_ERROR, "Internal error")
        msg_type = TMessageType.EXCEPTION
    oprot.writeMessageBegin("get_open_txns", msg_type, seqid)
    result.write(oprot)
    oprot.writeMessageEnd()
    oprot.trans.flush()


# --------------------------------------------------------------- field-presence decoding

def _unset_by_default(base: type, *fields: str) -> type:
    """A subclass of generated struct ``base`` whose ``fields`` default to None (unset)."""
    def __init__(self, **kwargs):
        for name in fields:
            kwargs.setdefault(name, None)
        base.__init__(self, **kwargs)
    return type(base.__name__, (base,), {"__init__": __init__, "__module__": __name__})


def _respec(spec, swap: dict):
    """Copy a thrift_spec, replacing struct classes per ``swap``."""
    if isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], type):
        cls = swap.get(spec[0], spec[0])
        # the C decoder reads a nested struct by the spec stored here, not cls.thrift_spec
        return [cls, cls.thrift_spec if spec[0] in swap else spec[1]]
    if isinstance(spec, tuple):
        return tuple(_respec(x, swap) for x in spec)
    return spec


def _read_by_spec(self, iprot):
    from thrift.transport import TTransport
    if (iprot._fast_decode is not None
            and isinstance(iprot.trans, TTransport.CReadableTransport)):
        iprot._fast_decode(self, iprot, [self.__class__, self.thrift_spec])
        return
    iprot.readStruct(self, self.thrift_spec)


def _with_spec(base: type, swap: dict) -> type:
    return type(base.__name__, (base,), {"thrift_spec": _respec(base.thrift_spec, swap),
                                         "read": _read_by_spec, "__module__": __name__})


_LockComponentWire = _unset_by_default(ttypes.LockComponent, "isTransactional")
_LockRequestWire = _with_spec(ttypes.LockRequest, {ttypes.LockComponent: _LockComponentWire})
_CommitTxnRequestWire = _unset_by_default(ttypes.CommitTxnRequest, "exclWriteEnabled")


def _process_with_args(method: str, args_cls: type):
    """A Processor entry for ``method`` that decodes its arguments with ``args_cls``."""
    from thrift.Thrift import TApplicationException, TMessageType
    from thrift.transport.TTransport import TTransportException

    from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore

    result_cls = getattr(ThriftHiveMetastore, f"{method}_result")
    specs = [s for s in result_cls.thrift_spec if s is not None]
    returns = any(s[2] == "success" for s in specs)
    declared = [(s[2], s[3][0]) for s in specs if s[2] != "success"]

    def process(processor, seqid, iprot, oprot):
        args = args_cls()
        args.read(iprot)
        iprot.readMessageEnd()
        result = result_cls()
        msg_type = TMessageType.REPLY
        try:
            value = getattr(processor._handler, method)(args.rqst)
            if returns:
                result.success = value
        except TTransportException:
            raise
        except TApplicationException as ex:
            result, msg_type = ex, TMessageType.EXCEPTION
        except Exception as ex:
            for name, cls in declared:
                if isinstance(ex, cls):
                    setattr(result, name, ex)
                    break
            else:
                log.exception("%s failed", method)
                result = TApplicationException(TApplicationException.INTERNAL_ERROR,
                                               "Internal error")
                msg_type = TMessageType.EXCEPTION
        oprot.writeMessageBegin(method, msg_type, seqid)
        result.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()

    return process


def _presence_processors() -> dict:
    from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore as TH
    return {
        "lock": _process_with_args(
            "lock", _with_spec(TH.lock_args, {ttypes.LockRequest: _LockRequestWire})),
        "commit_txn": _process_with_args(
            "commit_txn", _with_spec(TH.commit_txn_args,
                                     {ttypes.CommitTxnRequest: _CommitTxnRequestWire})),
    }


def install_wire_compat(processor, ms) -> None:
    """Per-server wire variants that the generated Processor cannot express.

    Always: ``lock`` and ``commit_txn`` decode with field presence (see the module doc).

    ``hms_txn.hive2.open.txns.as.set``: answer ``get_open_txns`` in Hive 2.x's shape. Hive
    2.3's Java client (Spark's ``HiveMetaStoreClient.getValidTxns``) reads field 2 only as
    a set: it skips our 3.x+ list and then fails with "Required field 'open_txns' is
    unset!". Hive 3/4 clients and Trino read only the list, so the 2.x shape is opt-in for
    servers whose transactional clients are all Hive 2.x.
    """
    processor._processMap.update(_presence_processors())
    if ms.config["hms_txn.hive2.open.txns.as.set"]:
        processor._processMap["get_open_txns"] = _process_get_open_txns_hive2


def _ms_or_none(value):
    return None if value is None else int(value)


class TxnCalls:
    ms: Any

    # -- transactions ------------------------------------------------------------------------

    def open_txns(self, rqst):
        ids = self.ms.txns.open_txns(
            rqst.num_txns, identity(rqst.user), rqst.hostname, agent_info=rqst.agentInfo,
            txn_type=rqst.txn_type if rqst.txn_type is not None else TxnType.DEFAULT,
            repl_policy=rqst.replPolicy, repl_src_txn_ids=rqst.replSrcTxnIds)
        return ttypes.OpenTxnsResponse(txn_ids=ids)

    def commit_txn(self, rqst):
        events = [WriteEvent(write_id=w.writeId, database=w.database, table=w.table,
                             files=w.files, partition=w.partition, table_obj=w.tableObj,
                             partition_obj=w.partitionObj)
                  for w in (rqst.writeEventInfos or ())]
        key_value = None
        if rqst.keyValue is not None:
            key_value = (rqst.keyValue.tableId, rqst.keyValue.key, rqst.keyValue.value)
        if rqst.replLastIdInfo is not None:
            log.info("commit_txn txnid:%s: replLastIdInfo accepted and ignored", rqst.txnid)
        self.ms.txns.commit_txn(rqst.txnid, write_events=events,
                                excl_write_enabled=rqst.exclWriteEnabled,
                                repl_policy=rqst.replPolicy, key_value=key_value)

    def abort_txn(self, rqst):
        self.ms.txns.abort_txn(rqst.txnid, repl_policy=rqst.replPolicy, error_code=rqst.errorCode)

    def abort_txns(self, rqst):
        self.ms.txns.abort_txns(rqst.txn_ids or [], error_code=rqst.errorCode)

    def _open_txns_response(self, exclude):
        ot = self.ms.txns.get_open_txns(exclude)
        return ttypes.GetOpenTxnsResponse(
            txn_high_water_mark=ot.hwm, open_txns=ot.txn_ids, min_open_txn=ot.min_open,
            abortedBits=bitset_bytes([t in ot.aborted for t in ot.txn_ids]))

    def get_open_txns(self):
        return self._open_txns_response((TxnType.READ_ONLY,))

    def get_open_txns_req(self, rqst):
        exclude = None if rqst is None else rqst.excludeTxnTypes
        return self._open_txns_response(exclude or ())

    def get_open_txns_info(self):
        hwm, infos = self.ms.txns.get_open_txns_info()
        return ttypes.GetOpenTxnsInfoResponse(txn_high_water_mark=hwm, open_txns=[
            ttypes.TxnInfo(id=i.id, state=int(i.state), user=i.user, hostname=i.hostname,
                           agentInfo=i.agent_info if i.agent_info is not None else "Unknown",
                           heartbeatCount=i.heartbeat_count, metaInfo=i.meta_info,
                           startedTime=i.started_ms, lastHeartbeatTime=i.last_heartbeat_ms)
            for i in infos])

    def heartbeat(self, ids):
        self.ms.txns.heartbeat(lock_id=ids.lockid if ids else None,
                               txn_id=ids.txnid if ids else None)

    def heartbeat_txn_range(self, txns):
        aborted, nosuch = self.ms.txns.heartbeat_txn_range(txns.min, txns.max)
        return ttypes.HeartbeatTxnRangeResponse(aborted=set(aborted), nosuch=set(nosuch))

    # -- write ids ---------------------------------------------------------------------------

    def allocate_table_write_ids(self, rqst):
        src = None
        if rqst.srcTxnToWriteIdList:
            src = [(x.txnId, x.writeId) for x in rqst.srcTxnToWriteIdList]
        if not rqst.txnIds and (rqst.replPolicy or src):
            raise InvalidInput("replication write id allocation is not supported by hms-txn")
        pairs = self.ms.writeids.allocate_table_write_ids(
            rqst.dbName, rqst.tableName, rqst.txnIds or [], repl_policy=rqst.replPolicy,
            src_txn_to_write_ids=src, reallocate=bool(rqst.reallocate))
        return ttypes.AllocateTableWriteIdsResponse(
            txnToWriteIds=[ttypes.TxnToWriteId(txnId=t, writeId=w) for t, w in pairs])

    def get_valid_write_ids(self, rqst):
        tables = self.ms.writeids.get_valid_write_ids(
            rqst.fullTableNames or [], rqst.validTxnList, rqst.writeId)
        return ttypes.GetValidWriteIdsResponse(tblValidWriteIds=[
            ttypes.TableValidWriteIds(
                fullTableName=t.full_table_name, writeIdHighWaterMark=t.hwm,
                invalidWriteIds=t.invalid_write_ids, minOpenWriteId=t.min_open_write_id,
                abortedBits=bitset_bytes(t.aborted))
            for t in tables])

    def get_max_allocated_table_write_id(self, rqst):
        return ttypes.MaxAllocatedTableWriteIdResponse(
            maxWriteId=self.ms.writeids.get_max_allocated_write_id(rqst.dbName, rqst.tableName))

    def add_dynamic_partitions(self, rqst):
        self.ms.writeids.add_dynamic_partitions(
            rqst.txnid, rqst.writeid, rqst.dbname, rqst.tablename, rqst.partitionnames or [],
            rqst.operationType)

    def get_latest_txnid_in_conflict(self, txnId):
        return self.ms.writeids.get_latest_txnid_in_conflict(txnId)

    # -- locks ---------------------------------------------------------------------------------

    def lock(self, rqst):
        request = LockRequest(
            components=[LockComponent(
                type=c.type, level=c.level, dbname=c.dbname, tablename=c.tablename,
                partitionname=c.partitionname, operation_type=c.operationType,
                is_transactional=c.isTransactional,
                is_dynamic_partition_write=c.isDynamicPartitionWrite)
                for c in (rqst.component or ())],
            txn_id=rqst.txnid or 0, user=identity(rqst.user), hostname=rqst.hostname,
            agent_info=rqst.agentInfo, zero_wait_read=bool(rqst.zeroWaitReadEnabled),
            exclusive_ctas=bool(rqst.exclusiveCTAS))
        return self._lock_response(self.ms.locks.lock(request))

    def check_lock(self, rqst):
        return self._lock_response(self.ms.locks.check_lock(
            rqst.lockid, txn_id=rqst.txnid, elapsed_ms=rqst.elapsed_ms))

    @staticmethod
    def _lock_response(result):
        return ttypes.LockResponse(lockid=result.lock_id, state=int(result.state),
                                   errorMessage=result.error_message)

    def unlock(self, rqst):
        self.ms.locks.unlock(rqst.lockid)

    def show_locks(self, rqst):
        rqst = rqst or ttypes.ShowLocksRequest()
        locks = self.ms.locks.show_locks(dbname=rqst.dbname, tablename=rqst.tablename,
                                         partname=rqst.partname, txn_id=rqst.txnid)
        return ttypes.ShowLocksResponse(locks=[
            ttypes.ShowLocksResponseElement(
                lockid=i.lock_id, dbname=i.dbname, tablename=i.tablename, partname=i.partname,
                state=int(i.state), type=int(i.type), txnid=i.txn_id,
                lastheartbeat=i.last_heartbeat_ms, acquiredat=_ms_or_none(i.acquired_ms),
                user=i.user, hostname=i.hostname, heartbeatCount=i.heartbeat_count,
                agentInfo=i.agent_info, blockedByExtId=i.blocked_by_ext_id,
                blockedByIntId=i.blocked_by_int_id, lockIdInternal=i.lock_id_internal)
            for i in locks])

    # -- compaction queue --------------------------------------------------------------------

    def _enqueue(self, rqst):
        return self.ms.compaction.compact(
            rqst.dbname, rqst.tablename, rqst.partitionname, rqst.type, run_as=rqst.runas,
            properties=rqst.properties, initiator_id=rqst.initiatorId,
            initiator_version=rqst.initiatorVersion, pool_name=rqst.poolName,
            number_of_buckets=rqst.numberOfBuckets, order_by=rqst.orderByClause)

    def compact(self, rqst):
        self._enqueue(rqst)

    def compact2(self, rqst):
        r = self._enqueue(rqst)
        return ttypes.CompactionResponse(id=r.id, state=r.state, accepted=r.accepted,
                                         errormessage=r.error_message)

    def show_compact(self, rqst):
        rqst = rqst or ttypes.ShowCompactRequest()
        infos = self.ms.compaction.show_compact(
            id=rqst.id, pool_name=rqst.poolName, dbname=rqst.dbName, tablename=rqst.tbName,
            partitionname=rqst.partName, ctype=rqst.type, state=rqst.state, limit=rqst.limit,
            order=rqst.order)
        return ttypes.ShowCompactResponse(compacts=[_compact_element(i) for i in infos])


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
