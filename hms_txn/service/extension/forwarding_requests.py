"""Extension mode's request-style catalog calls (see ``service.extension.forwarding`` for the
rules).

Hive 4 added request forms of calls every upstream has (``create_database_req``,
``drop_table_req``, ``append_partition_req``, ...): each is served by the form it stands
for, which forwards the old call an upstream of any version answers and then logs the
change's event and evicts, exactly as when the client sends the old form. TRUNCATE goes to
the upstream (its request form when it has one) and is logged as Hive logs it: an
ALTER_TABLE, or an ALTER_PARTITION per truncated partition, with ``isTruncateOp`` true.
``update_creation_metadata`` is logged as the ALTER_TABLE of the view so caches drop it;
``get_materialization_invalidation_info`` is ours, as the transactions it reads are.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from hms_txn.domain.events import event_messages, notifications
from hms_txn.domain.model import names
from hms_txn.service.extension.forwarder import Forwarder
from hms_txn.service.extension.forwarding import ForwardingService
from hms_txn.service.extension.forwarding_partitions import PartitionForwarding
from hms_txn.service.catalog.table_calls import database_of_request, materialization_info
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


class RequestForwarding:
    def __init__(self, fwd: Forwarder, tables: ForwardingService,
                 partitions: PartitionForwarding, ctx: event_messages.MessageContext):
        self.fwd = fwd
        self.tables = tables
        self.partitions = partitions
        self.ctx = ctx

    # ---------------------------------------------------------------- request forms

    def create_database_req(self, createDatabaseRequest):
        self.tables.create_database(database_of_request(createDatabaseRequest))

    def alter_database_req(self, alterDbReq):
        self.tables.alter_database(alterDbReq.oldDbName, alterDbReq.newDb)

    def drop_table_req(self, dropTableReq):
        req = dropTableReq
        self.tables.drop_table_with_environment_context(req.dbName, req.tableName,
                                                        bool(req.deleteData), req.envContext)

    def append_partition_req(self, appendPartitionsReq):
        req = appendPartitionsReq
        if req.name is not None:
            return self.partitions.append_partition_by_name(req.dbName, req.tableName, req.name)
        return self.partitions.append_partition(req.dbName, req.tableName, req.partVals)

    def drop_partition_req(self, dropPartitionReq):
        req = dropPartitionReq
        delete_data = req.deleteData is not False
        if req.partName is not None:
            return self.partitions.drop_partition_by_name(req.dbName, req.tblName, req.partName,
                                                          delete_data)
        return self.partitions.drop_partition(req.dbName, req.tblName, req.partVals,
                                              delete_data)

    def get_partitions_by_filter_req(self, req):
        return self.partitions.get_partitions_by_filter(req.dbName, req.tblName, req.filter,
                                                        req.maxParts)

    def fetch_partition_names_req(self, partitionReq):
        return self.partitions.get_partition_names(partitionReq.dbName, partitionReq.tblName,
                                                   partitionReq.maxParts)

    # ---------------------------------------------------------------- truncate

    def truncate_table(self, dbName, tableName, partNames):
        self.fwd.up("truncate_table", dbName, tableName, partNames)
        self._truncated(dbName, tableName, partNames, -1)

    def truncate_table_req(self, req):
        result = self.fwd.up_or("truncate_table_req", (req,), lambda: self.fwd.up(
            "truncate_table", req.dbName, req.tableName, req.partNames))
        self._truncated(req.dbName, req.tableName, req.partNames, req.writeId)
        return result if result is not None else t.TruncateTableResponse()

    def _truncated(self, db, name, part_names, write_id) -> None:
        table = self.fwd.fetch_table(db, name)
        if table is None:
            self.fwd.cache.invalidate(db, name)
            return
        parts: list[dict] = []
        if table.get("partitionKeys"):
            tables = self.fwd.upstream.tables
            try:
                parts = (tables.get_partitions_by_names(table["dbName"], table["tableName"],
                                                        list(part_names))
                         if part_names is not None
                         else tables.get_partitions(table["dbName"], table["tableName"], -1))
            except Exception:  # the event is then the table's; the cache drops it all the same
                parts = []

        def log(conn: Connection) -> None:
            if parts:
                entries = [event_messages.alter_partition(self.ctx, table, p, p, is_truncate=True)
                           for p in parts]
            else:
                entries = [event_messages.alter_table(self.ctx, table, table, is_truncate=True,
                                                      write_id=write_id)]
            notifications.append(conn, self.ctx.message_format, *entries)
        self.fwd.cache.databases.invalidate_tables(db)
        self.fwd.record("ALTER_TABLE", db, name, log)

    # ---------------------------------------------------------------- materialized views

    def update_creation_metadata(self, catName, dbname, tbl_name, creation_metadata):
        before = self.fwd.fetch_table(dbname, tbl_name)
        self.fwd.up("update_creation_metadata", catName, dbname, tbl_name, creation_metadata)
        after = self.fwd.fetch_table(dbname, tbl_name)
        if before is None or after is None:
            self.fwd.cache.invalidate(dbname, tbl_name)
            return
        self.fwd.record("ALTER_TABLE", names.lower(dbname), names.lower(tbl_name),
                        lambda conn: notifications.append(
                            conn, self.ctx.message_format,
                            event_messages.alter_table(self.ctx, before, after)))


    def get_materialization_invalidation_info(self, creation_metadata, validTxnList):
        return materialization_info(self.fwd.units, creation_metadata)
