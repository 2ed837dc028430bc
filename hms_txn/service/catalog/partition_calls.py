"""Thrift partition calls beyond ``CatalogService``'s: partition specs, partition values,
name listings with an order, exchanging and marking partitions, the request forms Hive 4
added, and the calls with a Kryo-serialized Java expression.

The expression calls. ``get_partitions_by_expr`` and ``get_partitions_spec_by_expr`` carry
a Hive ``ExprNodeGenericFuncDesc`` serialized by Kryo, which only Java code with hive-exec
can read. Hive's client (HiveMetaStoreClient.listPartitionsByExpr and
listPartitionsSpecByExpr) turns a TApplicationException UNKNOWN_METHOD into
IncompatibleMetastoreException, on which Hive's PartitionPruner prunes on the client: it
lists the partition names, evaluates the expression itself and fetches the partitions by
name. Any other answer fails the query. So both calls are answered UNKNOWN_METHOD, by the
dispatcher, as if this server did not have them (``handler.answered_as_unknown``).
``get_partition_names_req`` with a non-empty expression and ``drop_partitions_req`` with
expressions need the same deserializer; they answer the same exception (there, Hive's
client has no fallback: the statement fails with a clear cause).
"""

from __future__ import annotations

from thrift.Thrift import TApplicationException

from hms_txn.common.errors import InvalidInput, InvalidObject, NoSuchObject, Refused
from hms_txn.domain.catalog import partition_specs
from hms_txn.domain.events import event_messages
from hms_txn.domain.model import catalog
from hms_txn.domain.catalog.partition_moves import exchange
from hms_txn.service.catalog.catalog import CatalogService
from hms_txn.service.handler import answered_as_unknown
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

BY_NAMES, BY_VALUES, BY_EXPR = 0, 1, 2   # PartitionFilterMode


def needs_java_expression(method: str) -> TApplicationException:
    return TApplicationException(
        TApplicationException.UNKNOWN_METHOD,
        f"{method} with a serialized Hive expression is not supported by hms-txn: the "
        "expression can only be read by Java code (Hive prunes partitions on the client "
        "when get_partitions_by_expr answers UNKNOWN_METHOD)")


def _first(items: list, max_parts) -> list:
    """At most ``max_parts`` items (all for None or a negative number, Hive's -1)."""
    return items if max_parts is None or max_parts < 0 else items[:max_parts]


def _order_key(order: str | None, width: int):
    """Hive's partition-name order ``"<i>,<j>:<+|-><+|->"`` (column indexes, one direction
    each) as a sort of (name, values) pairs; values compare as text."""
    if not order:
        return None
    columns, _, directions = order.partition(":")
    try:
        indexes = [int(i) for i in columns.split(",") if i.strip()]
    except ValueError:
        raise InvalidInput(f"invalid partition order {order!r}") from None
    if any(i < 0 or i >= width for i in indexes) or len(directions) < len(indexes):
        raise InvalidInput(f"invalid partition order {order!r}")
    return list(zip(indexes, (d == "-" for d in directions)))


def _sorted(rows, order):
    for index, descending in reversed(order or []):
        rows = sorted(rows, key=lambda r, i=index: r[1]["values"][i], reverse=descending)
    return rows


class PartitionCalls:
    """The partition calls of this module (see its docstring). ``catalog`` serves the
    forms these share their work with."""

    def __init__(self, catalog_service: CatalogService, ctx: event_messages.MessageContext):
        self.catalog = catalog_service
        self.units = catalog_service.units
        self.warehouse = catalog_service.warehouse
        self.ctx = ctx

    def _rows(self, db, tbl, **how):
        try:
            return self.units.read(lambda c: catalog.list_partitions(c, db, tbl, **how))
        except NoSuchObject:      # the table or its database (Hive 4's get_table_core)
            raise catalog.hive_table_not_found(db, tbl) from None

    # ---------------------------------------------------------------- Java expressions

    @answered_as_unknown
    def get_partitions_by_expr(self, req):
        raise needs_java_expression("get_partitions_by_expr")

    @answered_as_unknown
    def get_partitions_spec_by_expr(self, req):
        raise needs_java_expression("get_partitions_spec_by_expr")

    def get_partition_names_req(self, req):
        """Hive 4's listPartitionNames: every name (an expression cannot be read here), in
        ``order``, at most ``maxParts``."""
        if req.expr:
            raise needs_java_expression("get_partition_names_req")
        table, rows = self._rows(req.dbName, req.tblName)
        order = _order_key(req.order, len(table.get("partitionKeys") or []))
        return [name for name, _ in _first(_sorted(rows, order), req.maxParts)]

    # ---------------------------------------------------------------- reads

    def get_partition_values(self, request):
        """Distinct (unless ``applyDistinct`` is false) rows of the values of the keys asked
        for, of the partitions matching ``filter``, sorted by ``partitionOrder`` (else by
        the keys asked for), at most ``maxParts``. Hive answers a missing table with
        MetaException here."""
        try:
            table, rows = self._rows(request.dbName, request.tblName,
                                     filter_text=request.filter or None)
        except NoSuchObject as err:
            raise Refused(err.message) from None
        keys = catalog.partition_keys(table)
        wanted = [k.name.lower() for k in request.partitionKeys or []]
        unknown = [k for k in wanted if k not in keys]
        if unknown:
            raise Refused(f"{', '.join(unknown)} is not a partition key of table "
                          f"{table['dbName']}.{table['tableName']}")
        values = [[d["values"][keys.index(k)] for k in wanted] for _, d in rows]
        if request.applyDistinct is not False:
            values = list(dict.fromkeys(tuple(v) for v in values))
        order = [k.name.lower() for k in request.partitionOrder or []] or wanted
        positions = [wanted.index(k) for k in order if k in wanted]
        values = sorted(values, key=lambda v: [v[i] for i in positions],
                        reverse=request.ascending is False)
        return t.PartitionValuesResponse(partitionValues=[
            t.PartitionValuesRow(row=list(v)) for v in _first(values, request.maxParts)])

    def _specs(self, docs) -> list:
        return [from_doc(t.PartitionSpec, d) for d in docs]

    def get_partitions_pspec(self, db_name, tbl_name, max_parts):
        table, rows = self._rows(db_name, tbl_name, limit=max_parts)
        return self._specs(partition_specs.for_pspec(table, [d for _, d in rows]))

    def get_part_specs_by_filter(self, db_name, tbl_name, filter, max_parts):
        table, rows = self._rows(db_name, tbl_name, limit=max_parts,
                                 filter_text=filter or "")
        return self._specs(partition_specs.for_pspec(table, [d for _, d in rows]))

    def get_partitions_with_specs(self, request):
        """Partitions by names, by (partial) values or by filters (ANDed), projected to the
        fields asked for, grouped by storage descriptor."""
        spec = request.filterSpec or t.GetPartitionsFilterSpec()
        filters = list(spec.filters or [])
        how: dict = {}
        if spec.filterMode == BY_NAMES:
            how["part_names"] = filters
        elif spec.filterMode == BY_VALUES:
            how["partial_values"] = filters
        elif spec.filterMode == BY_EXPR and filters:
            how["filter_text"] = " AND ".join(f"({f})" for f in filters)
        table, rows = self._rows(request.dbName, request.tblName, **how)
        projection = request.projectionSpec or t.GetProjectionsSpec()
        parts = partition_specs.project([d for _, d in rows], projection.fieldList,
                                        projection.includeParamKeyPattern,
                                        projection.excludeParamKeyPattern)
        return t.GetPartitionsResponse(
            partitionSpec=self._specs(partition_specs.grouped(table, parts)))

    def get_partitions_by_filter_req(self, req):
        return self.catalog.get_partitions_by_filter(req.dbName, req.tblName, req.filter,
                                                     req.maxParts)

    def fetch_partition_names_req(self, partitionReq):
        return self.catalog.get_partition_names(partitionReq.dbName, partitionReq.tblName,
                                                partitionReq.maxParts)

    # ---------------------------------------------------------------- changes

    def add_partitions_pspec(self, new_parts):
        """The partitions of the specs (all of one table, as Hive assumes) added; how many."""
        if not new_parts:
            return 0
        first = new_parts[0]
        if first.dbName is None or first.tableName is None:
            raise Refused("The database and table name cannot be null.")
        docs = [p for spec in new_parts for p in partition_specs.expand(to_doc(spec))]
        try:
            return self.catalog.add_partitions(
                [from_doc(t.Partition, {**d, "dbName": first.dbName,
                                        "tableName": first.tableName}) for d in docs])
        except NoSuchObject:
            raise InvalidObject(f"Unable to add partitions because database or table "
                                f"{first.dbName}.{first.tableName} does not exist") from None

    def drop_partitions_req(self, req):
        if req.parts is not None and req.parts.exprs is not None:
            raise needs_java_expression("drop_partitions_req")
        return self.catalog.drop_partitions_req(req)

    def append_partition_req(self, appendPartitionsReq):
        req = appendPartitionsReq
        if req.name is not None:
            return self.catalog.append_partition_by_name(req.dbName, req.tableName, req.name)
        if not req.partVals:
            raise Refused("The partition values must not be null or empty.")
        return self.catalog.append_partition(req.dbName, req.tableName, req.partVals)

    def drop_partition_req(self, dropPartitionReq):
        req = dropPartitionReq
        delete_data = req.deleteData is not False
        if req.partName is not None:
            return self.catalog.drop_partition_by_name(req.dbName, req.tblName, req.partName,
                                                       delete_data)
        if req.partVals is None:
            raise Refused("The partition values cannot be null.")
        return self.catalog.drop_partition(req.dbName, req.tblName, req.partVals, delete_data)

    def rename_partition_req(self, req):
        self.catalog.rename_partition(req.dbName, req.tableName, req.partVals, req.newPart)
        return t.RenamePartitionResponse()

    def exchange_partitions(self, partitionSpecs, source_db, source_table_name, dest_db,
                            dest_table_name):
        moved, files = self.units.write(lambda c: exchange(
            c, self.ctx, self.warehouse, partitionSpecs, source_db, source_table_name,
            dest_db, dest_table_name))
        files.apply(self.warehouse)
        return [from_doc(t.Partition, d) for d in moved]

    def exchange_partition(self, partitionSpecs, source_db, source_table_name, dest_db,
                           dest_table_name):
        """Hive runs exchange_partitions and answers an empty Partition."""
        self.exchange_partitions(partitionSpecs, source_db, source_table_name, dest_db,
                                 dest_table_name)
        # Java writes the unset i32 fields of its new Partition() as 0
        return t.Partition(createTime=0, lastAccessTime=0)
