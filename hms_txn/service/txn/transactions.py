"""Transactions and write ids on the wire: open, commit, abort, snapshots, heartbeats.

Each method turns the Thrift request into plain values, runs the domain (``domain.txn.txn``,
``domain.txn.writeids``) in a unit of work and packs the answer. Domain errors pass through to
``DeclaredErrors``, which maps them to the exceptions the method declares.

The two calls that may commit lazily, and why losing them in a power cut (never in a
process crash: a lazy commit survives ``kill -9``) does no harm:

* ``open_txns``: a lost open transaction never did anything durable: write ids, locks,
  commits and aborts of it are durable commits, and flushing the log makes every earlier
  commit, its open included, durable too. Its client's next call gets "No such
  transaction", as for a transaction aborted and cleaned up; its id, below the high-water
  mark and absent from TXNS, reads as committed with nothing written, which is what it is.
  Ids are never reused: the domain keeps lazily opened ids within a durable reservation
  (``domain.txn.txn``, "The id reservation"); an open that has to raise it is durable. The
  OPEN_TXN events of lazy opens are only served to clients once durable (the notification
  reads make every commit durable first), since event ids must not be reused under a
  client that has seen them.
* ``commit_txn`` of a transaction that wrote nothing (the commit of every read-only
  query): no write id, no write component (from ``lock`` or ``add_dynamic_partitions``),
  no ``writeEventInfos``, no ``keyValue``, and of type DEFAULT or READ_ONLY. Lost in a
  power cut, such a transaction is back open (or, if its open was lost too, unknown) and
  the reaper aborts it after ``hive.txn.timeout``, releasing any read locks it held.
  Committed or aborted, it changed no data, so no reader's view differs; anything that
  depended on the commit having happened durably is itself a durable commit (another
  client's lock granted in its place, a compaction cleaning past it), which flushes the
  lazy commit with it; its COMMIT_TXN event is served only once durable, as above. A
  commit that turns out to record a write is made durable before it is answered.

Each call has two forms: where the store offers the one-statement form (PostgreSQL's
functions, ``units.functions``), the call is one statement (``units.call``, through
``domain.txn.one_statement``); else its Python path runs in a transaction (``units.write`` /
``units.read``). Both answer the same; the durability declared here holds for both.
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Connection

from hms_txn.common.errors import InvalidInput, TxnAborted
from hms_txn.domain.locks import locks as lock_domain
from hms_txn.domain.txn import one_statement as one
from hms_txn.domain.locks import rebuild_locks
from hms_txn.domain.txn.repl_write_ids import repl_table_write_id_state
from hms_txn.domain.txn import writeids
from hms_txn.domain.txn import txn_commit
from hms_txn.domain.txn.dml_events import DmlEvents
from hms_txn.domain.txn.txn import TxnManager, seed_txn_id
from hms_txn.domain.txn.txn_records import TxnType, heartbeat_txn_in, now_ms
from hms_txn.service.units import Durability, Route, UnitOfWork, policy
from hms_txn.wire.session import identity
from hms_txn.wire.thrift_gen.hive_metastore import ttypes

log = logging.getLogger(__name__)

LAZY = Durability.MAY_BE_LAZY


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


class TxnService:
    """``open_txns`` ... ``get_valid_write_ids``: the transaction calls of the API.
    ``dml_events`` records the writes a commit reports (``writeEventInfos``)."""

    def __init__(self, units: UnitOfWork, txns: TxnManager, dml_events: DmlEvents):
        self.units = units
        self.txns = txns
        self.dml_events = dml_events
        # extension mode: forwarding_table_form.WriteIdRecovery (set by the server)
        self.write_id_recovery = None

    # -- transactions ------------------------------------------------------------------------

    @policy(route=Route.BATCH, durability=LAZY)
    def open_txns(self, rqst):
        args = dict(agent_info=rqst.agentInfo,
                    txn_type=rqst.txn_type if rqst.txn_type is not None else TxnType.DEFAULT,
                    repl_policy=rqst.replPolicy, repl_src_txn_ids=rqst.replSrcTxnIds,
                    lazy_commit=self.units.lazy_commits)
        user = identity(rqst.user)
        fns = self.units.functions
        if fns is not None:     # the function raises the reservation durably itself
            return ttypes.OpenTxnsResponse(txn_ids=self.units.call(lambda conn: one.open_txns(
                conn, fns, self.txns, rqst.num_txns, user, rqst.hostname, **args), LAZY).txn_ids)

        def work(conn: Connection):
            opened = self.txns.open_txns(conn, rqst.num_txns, user, rqst.hostname, **args)
            if opened.raised_reservation:
                self.units.require_durable(conn)
            return opened.txn_ids

        return ttypes.OpenTxnsResponse(txn_ids=self.units.write(work, LAZY))

    @policy(route=Route.BATCH, durability=LAZY)
    def commit_txn(self, rqst):
        events = [{"writeId": w.writeId, "database": w.database, "table": w.table,
                   "files": w.files, "partition": w.partition}
                  for w in (rqst.writeEventInfos or ())]
        key_value = None
        if rqst.keyValue is not None:
            key_value = (rqst.keyValue.tableId, rqst.keyValue.key, rqst.keyValue.value)
        if rqst.replLastIdInfo is not None:
            log.info("commit_txn txnid:%s: replLastIdInfo accepted and ignored", rqst.txnid)
        # A commit that carries writes is durable; one that may have written nothing
        # finds out in the database, and asks only where a commit can be lazy at all.
        may_be_lazy = self.units.lazy_commits and not events and key_value is None
        fns = self.units.functions
        if fns is not None and not events and key_value is None:
            # One statement, which makes itself durable if it records a write.
            result = self.units.call(lambda conn: one.commit_txn(
                conn, fns, self.txns, rqst.txnid, excl_write_enabled=rqst.exclWriteEnabled,
                repl_policy=rqst.replPolicy), LAZY)
            if result.conflict is not None:
                raise TxnAborted(result.conflict)   # the abort itself is committed
            return

        def work(conn: Connection):
            result = txn_commit.commit_txn(
                conn, rqst.txnid, messages=self.txns.messages, reports_writes=bool(events),
                excl_write_enabled=rqst.exclWriteEnabled, repl_policy=rqst.replPolicy,
                key_value=key_value, report_writes=may_be_lazy)
            if may_be_lazy and result.recorded_writes:
                self.units.require_durable(conn)
            if events and result.conflict is None and not result.already_committed:
                self.dml_events.commit_writes(conn, rqst.txnid, events)
            return result

        result = self.units.write(work, LAZY if may_be_lazy else Durability.DURABLE)
        if result.conflict is not None:
            raise TxnAborted(result.conflict)   # the abort itself is committed

    @policy(route=Route.BATCH)
    def abort_txn(self, rqst):
        fns = self.units.functions
        if fns is not None:
            self.units.call(lambda conn: one.abort_txn(
                conn, fns, self.txns, rqst.txnid, repl_policy=rqst.replPolicy,
                error_code=rqst.errorCode))
            return
        self.units.write(lambda conn: self.txns.abort_txn(
            conn, rqst.txnid, repl_policy=rqst.replPolicy, error_code=rqst.errorCode))

    def abort_txns(self, rqst):
        fns = self.units.functions
        if fns is not None:
            self.units.call(lambda conn: one.abort_txns(conn, fns, self.txns, rqst.txn_ids or []))
            return
        self.units.write(lambda conn: self.txns.abort_txns(conn, rqst.txn_ids or []))

    def _open_txns_response(self, exclude):
        fns = self.units.functions
        if fns is not None:
            ot = self.units.call(lambda conn: one.get_open_txns(conn, fns, exclude))
        else:
            ot = self.units.read(lambda conn: self.txns.get_open_txns(conn, exclude))
        return ttypes.GetOpenTxnsResponse(
            txn_high_water_mark=ot.hwm, open_txns=ot.txn_ids, min_open_txn=ot.min_open,
            abortedBits=bitset_bytes([t in ot.aborted for t in ot.txn_ids]))

    @policy(route=Route.BATCH)
    def get_open_txns(self):
        return self._open_txns_response((TxnType.READ_ONLY,))

    def get_open_txns_req(self, rqst):
        exclude = None if rqst is None else rqst.excludeTxnTypes
        return self._open_txns_response(exclude or ())

    def get_open_txns_info(self):
        fns = self.units.functions
        if fns is not None:
            hwm, infos = self.units.call(lambda conn: one.get_open_txns_info(conn, fns))
        else:
            hwm, infos = self.units.read(self.txns.get_open_txns_info)
        return ttypes.GetOpenTxnsInfoResponse(txn_high_water_mark=hwm, open_txns=[
            ttypes.TxnInfo(id=i.id, state=int(i.state), user=i.user, hostname=i.hostname,
                           agentInfo=i.agent_info if i.agent_info is not None else "Unknown",
                           heartbeatCount=i.heartbeat_count, metaInfo=i.meta_info,
                           startedTime=i.started_ms, lastHeartbeatTime=i.last_heartbeat_ms)
            for i in infos])

    @policy(route=Route.BATCH)
    def heartbeat(self, ids):
        lock_id = ids.lockid if ids else None
        txn_id = ids.txnid if ids else None
        fns = self.units.functions
        if fns is not None:
            self.units.call(lambda conn: one.heartbeat(conn, fns, lock_id, txn_id))
            return

        def work(conn: Connection) -> None:
            now = now_ms()
            if lock_id:
                lock_domain.heartbeat_lock_in(conn, lock_id, now)
            if txn_id:
                heartbeat_txn_in(conn, txn_id, now)

        self.units.write(work)

    def heartbeat_txn_range(self, txns):
        fns = self.units.functions
        if fns is not None:
            aborted, nosuch = self.units.call(
                lambda conn: one.heartbeat_txn_range(conn, fns, txns.min, txns.max))
        else:
            aborted, nosuch = self.units.write(
                lambda conn: self.txns.heartbeat_txn_range(conn, txns.min, txns.max))
        return ttypes.HeartbeatTxnRangeResponse(aborted=set(aborted), nosuch=set(nosuch))

    # -- write ids ---------------------------------------------------------------------------

    @policy(route=Route.BATCH)
    def allocate_table_write_ids(self, rqst):
        src = None
        if rqst.srcTxnToWriteIdList:
            src = [(x.txnId, x.writeId) for x in rqst.srcTxnToWriteIdList]
        if not rqst.txnIds and (rqst.replPolicy or src):
            raise InvalidInput("replication write id allocation is not supported by hms-txn")
        if self.write_id_recovery is not None:
            self.write_id_recovery.ensure([(rqst.dbName, rqst.tableName)])
        fns = self.units.functions
        if fns is not None:
            pairs = self.units.call(lambda conn: one.allocate_table_write_ids(
                conn, fns, self.txns, rqst.dbName, rqst.tableName, rqst.txnIds or [],
                repl_policy=rqst.replPolicy, src_txn_to_write_ids=src,
                reallocate=bool(rqst.reallocate)))
        else:
            pairs = self.units.write(lambda conn: writeids.allocate_table_write_ids(
                conn, rqst.dbName, rqst.tableName, rqst.txnIds or [],
                messages=self.txns.messages, repl_policy=rqst.replPolicy,
                src_txn_to_write_ids=src, reallocate=bool(rqst.reallocate)))
        return ttypes.AllocateTableWriteIdsResponse(
            txnToWriteIds=[ttypes.TxnToWriteId(txnId=t, writeId=w) for t, w in pairs])

    @policy(route=Route.BATCH)
    def get_valid_write_ids(self, rqst):
        if self.write_id_recovery is not None:
            self.write_id_recovery.ensure(writeids.split_table_name(n)
                                          for n in rqst.fullTableNames or [] if "." in n)
        # One statement on PostgreSQL (a function, domain.txn.one_statement), with the reader's
        # snapshot or the current one; the Python path for a snapshot of a given write id
        # or with more exceptions than are worth looking up one by one.
        fns = self.units.functions
        snapshot = (None if rqst.validTxnList is None
                    else writeids.parse_valid_txn_list(rqst.validTxnList))
        if fns is not None and rqst.writeId is None and (
                snapshot is None
                or len(snapshot.exceptions) <= writeids.MAX_EXCEPTIONS_LOOKED_UP):
            tables = self.units.call(lambda conn: one.get_valid_write_ids(
                conn, fns, rqst.fullTableNames or [], snapshot))
        else:
            tables = self.units.read(lambda conn: writeids.get_valid_write_ids(
                conn, rqst.fullTableNames or [], rqst.validTxnList, rqst.writeId),
                snapshot=rqst.validTxnList is None)
        return ttypes.GetValidWriteIdsResponse(tblValidWriteIds=[
            ttypes.TableValidWriteIds(
                fullTableName=t.full_table_name, writeIdHighWaterMark=t.hwm,
                invalidWriteIds=t.invalid_write_ids, minOpenWriteId=t.min_open_write_id,
                abortedBits=bitset_bytes(t.aborted))
            for t in tables])

    def get_max_allocated_table_write_id(self, rqst):
        return ttypes.MaxAllocatedTableWriteIdResponse(maxWriteId=self.units.read(
            lambda conn: writeids.get_max_allocated_write_id(conn, rqst.dbName, rqst.tableName)))

    def add_dynamic_partitions(self, rqst):
        self.units.write(lambda conn: writeids.add_dynamic_partitions(
            conn, rqst.txnid, rqst.writeid, rqst.dbname, rqst.tablename,
            rqst.partitionnames or [], rqst.operationType))

    def get_latest_txnid_in_conflict(self, txnId):
        return self.units.read(lambda conn: writeids.get_latest_txnid_in_conflict(conn, txnId))

    @policy(route=Route.INLINE)
    def add_write_ids_to_min_history(self, txnId, writeIds):
        """Accepted; nothing to record. HiveServer2 4 sends, for each transactional table a
        query reads, the lowest write id its snapshot still sees (DbTxnManager
        .addWriteIdsToMinHistory); Hive's Cleaner (with metastore.txn.use.minhistorywriteid)
        keeps the files those write ids need. Our Cleaner already keeps every file that a
        transaction opened before the compaction committed may read
        (``compaction_bookkeeping.cleaning_blocker``), which covers these readers."""

    def update_transaction_statistics(self, req):
        """Accepted; nothing to update. Hive adds the counts to the rows of the
        materialized views that use the table (MV_TABLES_USED); hms-txn has no materialized
        views."""

    def seed_write_id(self, rqst):
        self.units.write(lambda conn: writeids.seed_write_id(
            conn, rqst.dbName, rqst.tableName, rqst.seedWriteId))

    def seed_txn_id(self, rqst):
        self.units.write(lambda conn: seed_txn_id(conn, rqst.seedTxnId))

    def repl_tbl_writeid_state(self, rqst):
        """ReplTxnTask (REPL_WRITEID_STATE), in a bootstrap REPL LOAD of a transactional
        table: the source's ValidWriteIdList of the table."""
        self.units.write(lambda conn: repl_table_write_id_state(
            conn, self.txns, rqst.validWriteIdlist, rqst.user, rqst.hostName, rqst.dbName,
            rqst.tableName, rqst.partNames))

    def get_lock_materialization_rebuild(self, dbName, tableName, txnId):
        """HiveServer2's DbTxnManager.acquireMaterializationRebuildLock, before a rebuild:
        lockid is the transaction id, state ACQUIRED or NOT_ACQUIRED."""
        acquired = self.units.write(lambda conn: rebuild_locks.lock_rebuild(
            conn, dbName, tableName, txnId))
        return ttypes.LockResponse(lockid=txnId, state=ttypes.LockState.ACQUIRED if acquired
                                   else ttypes.LockState.NOT_ACQUIRED)

    def heartbeat_lock_materialization_rebuild(self, dbName, tableName, txnId):
        return self.units.write(lambda conn: rebuild_locks.heartbeat_rebuild(
            conn, dbName, tableName, txnId))

    # -- background ---------------------------------------------------------------------------

    def abort_timed_out(self, timeout_s: float, *, batch: int = 1000) -> list[int]:
        """The reaper: abort every open transaction not heartbeated for ``timeout_s``,
        ``batch`` per database transaction."""
        aborted: list[int] = []
        while True:
            done = self.units.write(
                lambda conn: self.txns.abort_timed_out(conn, timeout_s, batch=batch))
            aborted.extend(done)
            if len(done) < batch:
                return aborted

    def recover_reserved_ids(self) -> None:
        self.units.write(self.txns.recover_reserved_ids)

    def recover_reserved_ids_in(self, conn: Connection) -> None:
        """The same in the caller's transaction: the store runs it on the first connection
        after the database server restarted (``Store.on_database_restart``)."""
        self.txns.recover_reserved_ids(conn)

    def release_reserved_ids(self) -> None:
        if self.txns.reserved_ids_used:
            self.units.write(self.txns.release_reserved_ids)
