"""Thrift calls of catalogs, data connectors, the legacy types, HPL/SQL routines,
replication metrics and runtime statistics (``domain.catalog.catalogs``,
``domain.catalog.catalog_extras``), answered as Hive 4's metastore answers them."""

from __future__ import annotations

from hms_txn.domain.catalog import catalog_extras, catalogs
from hms_txn.domain.model.warehouse import Warehouse
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


class CatalogsService:
    """Catalogs (``hive`` holds the databases; see ``service.catalog.catalog_names``), data
    connectors and types."""

    def __init__(self, units: UnitOfWork, warehouse: Warehouse):
        self.units = units
        self.warehouse = warehouse

    # ---------------------------------------------------------------- catalogs

    def create_catalog(self, catalog):
        doc = to_doc(catalog.catalog) if catalog.catalog is not None else {}
        self.units.write(lambda c: catalogs.create(c, doc)).apply(self.warehouse)

    def alter_catalog(self, rqst):
        new = to_doc(rqst.newCat) if rqst.newCat is not None else {}
        self.units.write(lambda c: catalogs.alter(c, rqst.name, new))

    def get_catalog(self, catName):
        doc = self.units.read(lambda c: catalogs.get(c, catName.name))
        return t.GetCatalogResponse(catalog=from_doc(t.Catalog, doc))

    def get_catalogs(self):
        return t.GetCatalogsResponse(names=self.units.read(catalogs.names))

    def drop_catalog(self, catName):
        self.units.write(lambda c: catalogs.drop(c, catName.name)).apply(self.warehouse)

    # ---------------------------------------------------------------- data connectors

    def create_dataconnector(self, connector):
        doc = to_doc(connector) if connector is not None else {}
        self.units.write(lambda c: catalog_extras.create_connector(c, doc))

    def create_dataconnector_req(self, connectorReq):
        self.create_dataconnector(connectorReq.connector)

    def get_dataconnector_req(self, request):
        doc = self.units.read(lambda c: catalog_extras.get_connector(c, request.connectorName))
        return from_doc(t.DataConnector, doc)

    def get_dataconnectors(self):
        return self.units.read(catalog_extras.connector_names)

    def alter_dataconnector(self, name, connector):
        doc = to_doc(connector) if connector is not None else {}
        self.units.write(lambda c: catalog_extras.alter_connector(c, name, doc))

    def alter_dataconnector_req(self, alterReq):
        self.alter_dataconnector(alterReq.connectorName, alterReq.newConnector)

    def drop_dataconnector(self, name, ifNotExists, checkReferences):
        self.units.write(lambda c: catalog_extras.drop_connector(
            c, name, if_not_exists=bool(ifNotExists)))

    def drop_dataconnector_req(self, dropDcReq):
        self.drop_dataconnector(dropDcReq.connectorName, dropDcReq.ifNotExists,
                                dropDcReq.checkReferences)

    # ---------------------------------------------------------------- HPL/SQL routines

    def create_stored_procedure(self, proc):
        doc = to_doc(proc)
        self.units.write(lambda c: catalog_extras.put_procedure(c, doc))

    def get_stored_procedure(self, request):
        doc = self.units.read(lambda c: catalog_extras.get_procedure(c, request.dbName,
                                                                     request.procName))
        return from_doc(t.StoredProcedure, doc)

    def drop_stored_procedure(self, request):
        self.units.write(lambda c: catalog_extras.drop_procedure(c, request.dbName,
                                                                 request.procName))

    def get_all_stored_procedures(self, request):
        return self.units.read(lambda c: catalog_extras.procedure_names(c, request.dbName))

    def add_package(self, request):
        doc = to_doc(request)
        self.units.write(lambda c: catalog_extras.put_package(c, doc))

    def find_package(self, request):
        doc = self.units.read(lambda c: catalog_extras.get_package(c, request.dbName,
                                                                   request.packageName))
        return from_doc(t.Package, doc)

    def get_all_packages(self, request):
        return self.units.read(lambda c: catalog_extras.package_names(c, request.dbName))

    def drop_package(self, request):
        self.units.write(lambda c: catalog_extras.drop_package(c, request.dbName,
                                                               request.packageName))

    # ---------------------------------------------------------------- replication metrics

    def add_replication_metrics(self, replicationMetricList):
        docs = [to_doc(m) for m in replicationMetricList.replicationMetricList or []]
        self.units.write(lambda c: catalog_extras.add_replication_metrics(c, docs))

    def get_replication_metrics(self, rqst):
        docs = self.units.read(lambda c: catalog_extras.get_replication_metrics(
            c, rqst.scheduledExecutionId, rqst.policy, rqst.dumpExecutionId))
        return t.ReplicationMetricList(
            replicationMetricList=[from_doc(t.ReplicationMetrics, d) for d in docs])
