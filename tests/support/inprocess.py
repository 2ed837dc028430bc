"""Transaction calls made in-process through the service layer, with plain Python
arguments and answers: for tests that watch what one call does inside the server (its
commits, fsyncs, statements) without a Thrift connection around it."""

from __future__ import annotations

from typing import Sequence

from hms_txn.domain.locks.locks import LockRequest
from hms_txn.domain.txn.txn_records import TxnState, TxnType
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


class Calls:
    def __init__(self, ms):
        self.ms = ms

    def open_txns(self, n: int, user: str, host: str, *,
                  txn_type: int = TxnType.DEFAULT) -> list[int]:
        return self.ms.txn_service.open_txns(t.OpenTxnRequest(
            num_txns=n, user=user, hostname=host, txn_type=txn_type)).txn_ids

    def commit_txn(self, txn_id: int, *, write_events: Sequence[t.WriteEventInfo] = (),
                   key_value: tuple[int, str, str] | None = None) -> None:
        rqst = t.CommitTxnRequest(txnid=txn_id, exclWriteEnabled=None)
        if write_events:
            rqst.writeEventInfos = list(write_events)
        if key_value is not None:
            rqst.keyValue = t.CommitTxnKeyValue(tableId=key_value[0], key=key_value[1],
                                                value=key_value[2])
        self.ms.txn_service.commit_txn(rqst)

    def abort_txn(self, txn_id: int) -> None:
        self.ms.txn_service.abort_txn(t.AbortTxnRequest(txnid=txn_id))

    def heartbeat(self, *, txn_id: int | None = None, lock_id: int | None = None) -> None:
        self.ms.txn_service.heartbeat(t.HeartbeatRequest(txnid=txn_id, lockid=lock_id))

    def txn_state(self, txn_id: int) -> TxnState | None:
        info = self.ms.units.read(lambda conn: self.ms.txns.get_txn(conn, txn_id))
        return None if info is None else info.state

    def allocate_table_write_ids(self, db: str, table: str, txn_ids: list[int]):
        rsp = self.ms.txn_service.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName=db, tableName=table, txnIds=txn_ids))
        return [(x.txnId, x.writeId) for x in rsp.txnToWriteIds]

    def add_dynamic_partitions(self, txn_id: int, write_id: int, db: str, table: str,
                               parts: list[str], op: int) -> None:
        self.ms.txn_service.add_dynamic_partitions(t.AddDynamicPartitions(
            txnid=txn_id, writeid=write_id, dbname=db, tablename=table, partitionnames=parts,
            operationType=int(op)))

    def lock(self, request: LockRequest):
        """``request`` in the domain's terms; the answer as the domain's ``LockResult``."""
        from hms_txn.domain.locks.locks import LockResult, LockState
        rsp = self.ms.lock_service.lock(t.LockRequest(
            component=[t.LockComponent(
                type=c.type, level=c.level, dbname=c.dbname, tablename=c.tablename,
                partitionname=c.partitionname, operationType=c.operation_type,
                isTransactional=c.is_transactional)
                for c in request.components],
            txnid=request.txn_id, user=request.user, hostname=request.hostname))
        return LockResult(rsp.lockid, LockState(rsp.state), rsp.errorMessage)

    def show_locks(self) -> list:
        """The domain's ``LockInfo`` list."""
        from hms_txn.domain.locks import locks
        return self.ms.units.read(locks.show_locks)

    def get_open_txns_info(self):
        """(high watermark, the domain's ``TxnInfo`` list)."""
        return self.ms.units.read(self.ms.txns.get_open_txns_info)

    def current_event_id(self) -> int:
        return self.ms.notification_service.get_current_notificationEventId().eventId

    def next_events(self, after: int) -> list:
        """The events after ``after`` as the domain's ``Event`` tuples."""
        from hms_txn.domain.events.notifications import Event
        rsp = self.ms.notification_service.get_next_notification(
            t.NotificationEventRequest(lastEvent=after))
        return [Event(e.eventId, e.eventTime, e.eventType, e.dbName, e.tableName, e.message,
                      e.messageFormat, e.catName) for e in rsp.events]


def calls(ms) -> Calls:
    return Calls(ms)
