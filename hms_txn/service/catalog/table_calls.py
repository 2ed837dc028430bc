"""Thrift database and table calls beyond ``CatalogService``'s: the request forms Hive 4
added (``create_database_req``, ``drop_table_req``, ``get_fields_req``, ...), TRUNCATE
(``domain.catalog.truncate``), table listings by filter and with capabilities, and the materialized
view bookkeeping."""

from __future__ import annotations

from hms_txn.common.errors import InvalidOperation, Refused
from hms_txn.domain.catalog import materialized_views, table_filter
from hms_txn.domain.events import event_messages
from hms_txn.domain.catalog.truncate import truncate
from hms_txn.service.catalog.catalog import CatalogService
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

# GetTablesExtRequestFields
ACCESS_TYPE, PROCESSOR_CAPABILITIES = 1, 2
MANAGERAWMETADATA = "MANAGERAWMETADATA"


def database_of_request(req) -> t.Database:
    """The Database a CreateDatabaseRequest describes (its ``type`` is a string in 4.0.x)."""
    kind = req.type
    if isinstance(kind, str):
        kind = t.DatabaseType._NAMES_TO_VALUES.get(kind.upper())
        if kind is None:
            raise Refused(f"{req.type} is not a database type (NATIVE or REMOTE)")
    return t.Database(
        name=req.databaseName, description=req.description, locationUri=req.locationUri,
        parameters=req.parameters, privileges=req.privileges, ownerName=req.ownerName,
        ownerType=req.ownerType, catalogName=req.catalogName, createTime=req.createTime,
        managedLocationUri=req.managedLocationUri, type=kind,
        connector_name=req.dataConnectorName, remote_dbname=req.remote_dbname)


class TableCalls:
    """The calls of this module; ``catalog`` serves the forms these share their work with."""

    def __init__(self, catalog_service: CatalogService, ctx: event_messages.MessageContext):
        self.catalog = catalog_service
        self.units = catalog_service.units
        self.warehouse = catalog_service.warehouse
        self.ctx = ctx

    # ---------------------------------------------------------------- request forms

    def create_database_req(self, createDatabaseRequest):
        self.catalog.create_database(database_of_request(createDatabaseRequest))

    def alter_database_req(self, alterDbReq):
        self.catalog.alter_database(alterDbReq.oldDbName, alterDbReq.newDb)

    def drop_table_req(self, dropTableReq):
        req = dropTableReq
        self.catalog.drop_table_with_environment_context(req.dbName, req.tableName,
                                                         bool(req.deleteData), req.envContext)

    def get_fields_req(self, req):
        return t.GetFieldsResponse(fields=self.catalog.get_fields(req.dbName, req.tblName))

    def get_schema_req(self, req):
        return t.GetSchemaResponse(fields=self.catalog.get_schema(req.dbName, req.tblName))

    def translate_table_dryrun(self, request):
        """Hive runs its metadata transformer on the table and answers the result without
        creating it; hms-txn has no transformer (as Hive with
        ``metastore.metadata.transformer.class`` empty), so the table comes back as sent."""
        return request.table

    # ---------------------------------------------------------------- truncate

    def truncate_table(self, dbName, tableName, partNames):
        """Hive's deprecated form: no write id (a transactional table is refused, see
        ``domain.catalog.truncate``)."""
        self._truncate(dbName, tableName, partNames, -1, None)

    def truncate_table_req(self, req):
        env = req.environmentContext.properties if req.environmentContext else None
        self._truncate(req.dbName, req.tableName, req.partNames, req.writeId, env)
        return t.TruncateTableResponse()

    def _truncate(self, db, table, part_names, write_id, env) -> None:
        def work(conn):
            bases, files = truncate(conn, self.ctx, db, table,
                                    None if part_names is None else list(part_names),
                                    write_id, env)
            # Before the commit, as Hive does: the base is invisible until the truncating
            # transaction commits, and harmless (aborted) if it never does.
            for location in bases:
                self.warehouse.add_truncate_base(location, int(write_id))
            return files
        self.units.write(work).apply(self.warehouse)

    # ---------------------------------------------------------------- listings

    def get_table_names_by_filter(self, dbname, filter, max_tables):
        if not dbname:
            raise t.UnknownDBException(message="DB name is null or empty")
        if filter is None:
            raise InvalidOperation(f"{dbname} cannot apply null filter")
        return self.units.read(lambda c: table_filter.table_names(c, dbname, filter,
                                                                  max_tables))

    # ---------------------------------------------------------------- materialized views

    def get_materialized_views_for_rewriting(self, db_name):
        docs = self.units.read(lambda c: materialized_views.for_rewriting(c, db_name or ""))
        return [d["tableName"] for d in docs]

    def get_all_materialized_view_objects_for_rewriting(self):
        docs = self.units.read(lambda c: materialized_views.for_rewriting(c, None))
        return [from_doc(t.Table, d) for d in docs]

    def update_creation_metadata(self, catName, dbname, tbl_name, creation_metadata):
        metadata = to_doc(creation_metadata)
        self.units.write(lambda c: materialized_views.set_creation_metadata(
            c, self.ctx, dbname, tbl_name, metadata))

    def get_materialization_invalidation_info(self, creation_metadata, validTxnList):
        return materialization_info(self.units, creation_metadata)


def materialization_info(units: UnitOfWork, creation_metadata) -> t.Materialization | None:
    """Whether a view's sources changed since its snapshot, from our transaction records
    (also in extension mode: the write ids are ours). None is Hive's null, which the client
    reads as a missing result."""
    found = units.read(lambda c: materialized_views.invalidation(
        c, creation_metadata.tablesUsed, creation_metadata.validTxnList))
    if found is None:
        return None
    modified, compacted = found
    return t.Materialization(sourceTablesUpdateDeleteModified=modified,
                             sourceTablesCompacted=compacted)
