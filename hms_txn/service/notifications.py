"""Thrift notification-log calls: reading, filtering and counting the log, client-fired
events, and the ACID write notifications (``add_write_notification_log``,
``get_all_write_event_info``).

Clients keep event ids (they ask for "events after N"), so what they are shown must not be
taken back by a power cut: after reading, every commit so far is made durable (a no-op
unless a lazy commit happened since; see ``service.txn.transactions``). After rather than
before the read, so that a lazy commit landing in between is covered.
"""

from __future__ import annotations

from hms_txn.common.errors import InvalidInput, NoSuchObject
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.txn.dml_events import DmlEvents
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


def _event(ev) -> t.NotificationEvent:
    return t.NotificationEvent(eventId=ev.event_id, eventTime=ev.event_time, eventType=ev.event_type,
                               dbName=ev.db_name, tableName=ev.tbl_name, message=ev.message,
                               messageFormat=ev.message_format, catName=ev.cat_name)


class NotificationService:
    """``max_events``: the most events one read returns (``hive.metastore.max.event.response``)."""

    def __init__(self, units: UnitOfWork, dml_events: DmlEvents, *, max_events: int = 1000000):
        self.units = units
        self.dml_events = dml_events
        self.max_events = max_events

    def _durable_read(self, work):
        result = self.units.read(work)
        self.units.make_durable()
        return result

    def get_next_notification(self, rqst):
        """Hive 4's ``getNextNotification``: ``maxEvents`` between 1 and the server's
        maximum, else that maximum; the catalog, database, table and event type filters
        as ``notifications.next_events`` applies them."""
        wanted = rqst.maxEvents or 0
        max_events = wanted if 0 < wanted < self.max_events else self.max_events
        events = self._durable_read(lambda conn: notifications.next_events(
            conn, rqst.lastEvent or 0, max_events, rqst.eventTypeSkipList or (),
            cat_name=rqst.catName, db_name=rqst.dbName, table_names=rqst.tableNames,
            event_types=rqst.eventTypeList))
        return t.NotificationEventResponse(events=[_event(e) for e in events])

    def get_current_notificationEventId(self):
        return t.CurrentNotificationEventId(
            eventId=self._durable_read(notifications.current_event_id))

    def get_notification_events_count(self, rqst):
        if rqst.dbName is None:
            raise InvalidInput("get_notification_events_count needs dbName (a database or *)")
        count = self.units.read(lambda conn: notifications.count_events(
            conn, rqst.fromEventId or 0, rqst.dbName, cat_name=rqst.catName,
            to_event_id=rqst.toEventId, limit=rqst.limit, table_names=rqst.tableNames))
        return t.NotificationEventsCountResponse(eventsCount=count)

    def fire_listener_event(self, rqst):
        """INSERT events (``insertData``, or 4.x ``insertDatas`` with per-entry partition
        values). Nothing is written for an unsuccessful operation."""
        data = rqst.data
        if data is None or (data.insertData is None and not data.insertDatas):
            raise InvalidInput("fire_listener_event supports INSERT events only (insertData)")
        if not rqst.dbName or not rqst.tableName:
            raise InvalidInput("fire_listener_event needs dbName and tableName")
        if not rqst.successful:
            return t.FireEventResponse(eventIds=[])
        items = [data.insertData] if data.insertData is not None else list(data.insertDatas)
        inserts = []
        for item in items:
            part_vals = item.partitionVal if item.partitionVal else rqst.partitionVals
            # Hive: replace defaults to true when the caller does not say.
            replace = True if item.replace is None else bool(item.replace)
            inserts.append((list(part_vals) if part_vals else None, replace,
                            list(item.filesAdded or []), item.subDirectoryList))
        ids = self.units.write(lambda conn: self.dml_events.fire_insert(
            conn, rqst.dbName, rqst.tableName, inserts))
        return t.FireEventResponse(eventIds=ids)

    def add_write_notification_log(self, rqst):
        info = rqst.fileInfo
        self.units.write(lambda conn: self.dml_events.add_write_notification(
            conn, rqst.txnId, rqst.writeId, rqst.db, rqst.table,
            list(info.filesAdded or []) if info else [], info.subDirectoryList if info else None,
            list(rqst.partitionVals) if rqst.partitionVals else None))
        return t.WriteNotificationLogResponse()

    def add_write_notification_log_in_batch(self, rqst):
        """The batch form HiveServer2 sends for dynamic-partition ACID writes
        (Hive.addWriteNotificationLogInBatch): one ACID write per request, as
        ``add_write_notification_log`` writes it, for the batch's table, all in one
        transaction. Requests for partitions that do not exist are dropped, as Hive's handler
        drops them; a table that does not exist fails the call."""
        requests = list(rqst.requestList or ())

        def work(conn):
            self.dml_events.source.objects(conn, rqst.db, rqst.table, None)
            for r in requests:
                info = r.fileInfo
                try:
                    self.dml_events.add_write_notification(
                        conn, r.txnId, r.writeId, rqst.db, rqst.table,
                        list(info.filesAdded or []) if info else [],
                        info.subDirectoryList if info else None,
                        list(r.partitionVals) if r.partitionVals else None)
                except NoSuchObject:
                    if not r.partitionVals:
                        raise

        if requests:
            self.units.write(work)
        return t.WriteNotificationLogBatchResponse()

    def get_all_write_event_info(self, request):
        """The ACID writes of a transaction (``ObjectStore.getAllWriteEventInfo``), which
        Impala asks for at each COMMIT_TXN event; [] for none."""
        rows = self.units.read(lambda conn: notifications.write_notifications(
            conn, request.txnId, request.dbName, request.tableName))
        return [t.WriteEventInfo(**em.write_event_info(row)) for row in rows]
