"""Thrift catalog calls: databases, tables, partitions.

Each method unpacks its wire arguments, runs the domain (``domain.model.catalog`` for reads,
``domain.catalog.databases``/``tables``/``partitions`` for changes) in a unit of work and packs the
answer; domain errors pass through to ``DeclaredErrors``, which maps them. Reads of one
table or database go through the metadata cache. A change's directories are made or
removed once it has committed (``warehouse.FileChanges``).
"""

from __future__ import annotations

import copy
import threading
import weakref
from typing import Any

from hms_txn.common.errors import NoSuchObject, Refused
from hms_txn.domain.stats import column_stats, stats_state
from hms_txn.domain.model import catalog, names
from hms_txn.domain.cache.cache import MetadataCache
from hms_txn.domain.cache.cache_entries import DatabaseRead, TableRead
from hms_txn.domain.catalog.databases import Databases
from hms_txn.domain.catalog.partitions import Partitions
from hms_txn.domain.catalog.tables import Tables
from hms_txn.domain.model.warehouse import FileChanges, Warehouse
from hms_txn.service.catalog.owners import owned_database, owned_table
from hms_txn.service.catalog.constraints import request_constraint_docs
from hms_txn.service.catalog.table_access import UNDECLARED, TableAccess, declared_by
from hms_txn.service.units import Route, UnitOfWork, policy
from hms_txn.wire.thrift_gen.hive_metastore import constants as hive_metastoreConstants
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from hms_txn.wire.encoded import EncodedStructs, encode
from hms_txn.wire.codec import from_doc, to_doc

I16_ALL = -1


def _table(doc: dict[str, Any]) -> t.Table:
    return from_doc(t.Table, doc)


def _partition(doc: dict[str, Any]) -> t.Partition:
    return from_doc(t.Partition, doc)


class _ConvertedMemo:
    """Thrift structs already built from documents the metadata cache keeps in memory.

    A cached partition document is the same dict object for as long as its cache entry
    lives, so the struct built from it can be reused by identity: the memo holds the
    document itself, which keeps its id from being reused, and is bounded. Documents read
    from the database are new objects each time and simply churn through it.
    """

    def __init__(self, limit: int = 20000):
        self.limit = limit
        self._items: dict[int, tuple[dict, Any, bytes]] = {}
        self._lock = threading.Lock()

    def _get(self, doc: dict[str, Any]) -> tuple[dict, Any, bytes]:
        hit = self._items.get(id(doc))
        if hit is not None and hit[0] is doc:
            return hit
        obj = _partition(doc)
        item = (doc, obj, encode(obj))
        with self._lock:
            if len(self._items) >= self.limit:
                self._items.clear()
            self._items[id(doc)] = item
        return item

    def partition(self, doc: dict[str, Any]) -> t.Partition:
        return self._get(doc)[1]

    def partitions(self, docs) -> EncodedStructs:
        """The structs of ``docs`` with their encodings (see ``handler.encoded``)."""
        items = [self._get(d) for d in docs]
        return EncodedStructs([i[1] for i in items], [i[2] for i in items])


converted = _ConvertedMemo()


# What this layer derives from a cache entry's document (the converted struct, its
# columns), for as long as the entry lives: entries are immutable, and what is kept is only
# ever serialized.
_entry_memos: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def entry_memo(entry: Any) -> dict:
    """The memo of a cache entry (a new dict the first time)."""
    memo = _entry_memos.get(entry)
    if memo is None:
        memo = _entry_memos.setdefault(entry, {})
    return memo


def cached_table(read: TableRead) -> t.Table:
    """The Table struct of a ``TableRead``; a cache hit re-uses its entry's struct."""
    if read.entry is None:
        return _table(read.doc)
    memo = entry_memo(read.entry)
    table = memo.get("Table")
    if table is None:
        table = memo["Table"] = _table(read.doc)
    return table


def _cached_database(read: DatabaseRead) -> t.Database:
    """The Database struct of a ``DatabaseRead``, memoized as tables are."""
    if read.entry is None:
        return from_doc(t.Database, read.doc)
    memo = entry_memo(read.entry)
    database = memo.get("Database")
    if database is None:
        database = memo["Database"] = from_doc(t.Database, read.doc)
    return database


def expected_parameter(props: dict) -> tuple[str, str] | None:
    """Hive 4's compare-and-swap of an alter (``HiveAlterHandler``): the environment
    context's ``expected_parameter_key`` must still have ``expected_parameter_value``, or
    the alter fails. Iceberg's Java client sends ``metadata_location`` and the metadata
    file it read when its own lock is off (``HiveTableOperations``)."""
    key = props.get(hive_metastoreConstants.EXPECTED_PARAMETER_KEY)
    value = props.get(hive_metastoreConstants.EXPECTED_PARAMETER_VALUE)
    return (key, value) if key is not None and value is not None else None


def _limit(max_parts: int | None) -> int:
    return -1 if max_parts is None or max_parts < 0 else max_parts


class CatalogService:
    """Databases, tables and partitions."""

    def __init__(self, units: UnitOfWork, cache: MetadataCache, warehouse: Warehouse,
                 databases: Databases, tables: Tables, partitions: Partitions,
                 access: TableAccess):
        self.units = units
        self.access = access
        self.cache = cache
        self.warehouse = warehouse
        self.databases = databases
        self.tables = tables
        self.partitions = partitions

    def _apply(self, files: FileChanges) -> None:
        """Make a committed change's directories (see ``warehouse.FileChanges``)."""
        files.apply(self.warehouse)

    def _applied(self, result: tuple[list[dict], FileChanges]) -> list[dict]:
        docs, files = result
        files.apply(self.warehouse)
        return docs

    # ---------------------------------------------------------------- databases

    def create_database(self, database):
        owned_database(database)
        self._apply(self.units.write(lambda c: self.databases.create(c, to_doc(database))))

    @policy(route=Route.INLINE)
    def get_database(self, name):
        return _cached_database(self.cache.get_database(name))

    @policy(route=Route.INLINE)
    def get_database_req(self, request):
        return self.get_database(request.name)

    def get_databases(self, pattern):
        return self.units.read(lambda c: catalog.list_databases(c, pattern))

    def get_all_databases(self):
        return self.units.read(lambda c: catalog.list_databases(c, ))

    def alter_database(self, dbname, db):
        self.units.write(lambda c: self.databases.alter(c, dbname, to_doc(db)))

    def drop_database(self, name, deleteData, cascade):
        self._apply(self.units.write(lambda c: self.databases.drop(c, name, delete_data=bool(deleteData), cascade=bool(cascade))))

    def drop_database_req(self, req):
        from hms_txn.common.errors import NoSuchObject
        try:
            self._apply(self.units.write(lambda c: self.databases.drop(c, req.name, delete_data=bool(req.deleteData),
                                          cascade=bool(req.cascade))))
        except NoSuchObject:
            if not req.ignoreUnknownDb:
                raise

    # ---------------------------------------------------------------- tables

    def create_table(self, tbl):
        owned_table(tbl)
        self._apply(self.units.write(lambda c: self.tables.create(c, to_doc(tbl))))

    def create_table_with_environment_context(self, tbl, environment_context):
        self.create_table(tbl)

    def create_table_req(self, request):
        owned_table(request.table)
        self._apply(self.units.write(lambda c: self.tables.create(
            c, to_doc(request.table), constraints=request_constraint_docs(request))))

    @policy(route=Route.INLINE)
    def get_table(self, dbname, tbl_name):
        read = self.cache.get_table(dbname, tbl_name)
        return self.access.table(read.doc, UNDECLARED) or cached_table(read)

    @policy(route=Route.INLINE)
    def get_table_req(self, req):
        read = self.cache.get_table(req.dbName, req.tblName, req.validWriteIdList,
                                  require_write_ids=True)
        translated = self.access.table(read.doc, declared_by(req))
        table = translated or cached_table(read)
        compliant = stats_state.table_compliance(read.doc, req.validWriteIdList)
        if req.getColumnStats or compliant is False:
            table = self._with_stats(table, read.doc, req)
        elif compliant and translated is not None:
            table.isStatsCompliant = True       # a client's own translated copy
        elif compliant:
            # the same struct for every reader the stats are valid for: kept with the entry
            memo = entry_memo(read.entry) if read.entry is not None else {}
            table = memo.get("CompliantTable") or memo.setdefault(
                "CompliantTable", copy.copy(table))
            table.isStatsCompliant = True
        return t.GetTableResult(table=table)

    def _with_stats(self, table: t.Table, doc: dict, req) -> t.Table:
        """The table as Hive's get_table_req gives it to a reader with a ValidWriteIdList
        (``stats_state.reader_view``: ``isStatsCompliant``, and ``COLUMN_STATS_ACCURATE``
        only when the stats are valid for it) and, when asked, with its column statistics
        (those of the columns ``COLUMN_STATS_ACCURATE`` lists)."""
        view = stats_state.reader_view(doc, req.validWriteIdList)
        table = copy.copy(table)
        table.isStatsCompliant = view.get("isStatsCompliant")
        table.parameters = dict(view.get("parameters") or {})
        if req.getColumnStats:
            columns = stats_state.columns_having_stats(view.get("parameters"))
            stats = self.units.read(lambda c: column_stats.table_stats(
                c, req.dbName, req.tblName, columns, req.engine, req.validWriteIdList))
            table.colStats = None if stats is None else from_doc(t.ColumnStatistics, stats)
        return table

    def get_table_objects_by_name(self, dbname, tbl_names):
        docs = self.units.read(lambda c: catalog.get_tables(c, dbname, tbl_names or []))
        return self.access.listed(docs, UNDECLARED, _table)

    def get_table_objects_by_name_req(self, req):
        docs = self.units.read(lambda c: catalog.get_tables(c, req.dbName, req.tblNames))
        if req.tablesPattern:
            from hms_txn.domain.model.names import matches
            docs = [d for d in docs if matches(req.tablesPattern, d["tableName"])]
        return t.GetTablesResult(tables=self.access.listed(docs, declared_by(req), _table))

    def get_tables_ext(self, req):
        def read(c):
            found = catalog.list_tables(c, req.database, req.tableNamePattern)
            if req.limit is not None and req.limit > 0:
                found = found[:req.limit]
            return catalog.get_tables(c, req.database, found) if found else []
        return self.access.tables_ext(self.units.read(read), req)

    def get_tables(self, db_name, pattern):
        return self.units.read(lambda c: catalog.list_tables(c, db_name, pattern, empty_matches_all=False))

    def get_all_tables(self, db_name):
        return self.units.read(lambda c: catalog.list_tables(c, db_name))

    def get_tables_by_type(self, db_name, pattern, tableType):
        return self.units.read(lambda c: catalog.list_tables(c, db_name, pattern, tableType or None))

    def get_table_meta(self, db_patterns, tbl_patterns, tbl_types):
        return [t.TableMeta(**m) for m in self.units.read(lambda c: catalog.list_table_meta(c, db_patterns, tbl_patterns, tbl_types))]

    def get_fields(self, db_name, table_name):
        return self.get_schema_cols(db_name, table_name, with_keys=False)

    def get_fields_with_environment_context(self, db_name, table_name, environment_context):
        return self.get_fields(db_name, table_name)

    def get_schema(self, db_name, table_name):
        return self.get_schema_cols(db_name, table_name, with_keys=True)

    def get_schema_with_environment_context(self, db_name, table_name, environment_context):
        return self.get_schema(db_name, table_name)

    def get_schema_cols(self, db_name, table_name, *, with_keys: bool):
        try:
            doc = self.units.read(lambda c: catalog.get_table(c, db_name, table_name))
        except NoSuchObject:  # Hive: UnknownTableException, also for a missing database
            missing = catalog.hive_table_not_found(db_name, table_name)
            raise t.UnknownTableException(message=missing.message) from None
        cols = list((doc.get("sd") or {}).get("cols") or [])
        if with_keys:
            cols += doc.get("partitionKeys") or []
        return [from_doc(t.FieldSchema, c) for c in cols]

    def alter_table(self, dbname, tbl_name, new_tbl):
        self._apply(self.units.write(lambda c: self.tables.alter(c, dbname, tbl_name, to_doc(new_tbl))))

    def alter_table_with_environment_context(self, dbname, tbl_name, new_tbl, environment_context):
        props = (environment_context.properties or {}) if environment_context else {}
        cascade = str(props.get("CASCADE", "")).lower() == "true"
        self._apply(self.units.write(lambda c: self.tables.alter(
            c, dbname, tbl_name, to_doc(new_tbl), cascade=cascade,
            expected=expected_parameter(props))))

    def alter_table_with_cascade(self, dbname, tbl_name, new_tbl, cascade):
        self._apply(self.units.write(lambda c: self.tables.alter(c, dbname, tbl_name, to_doc(new_tbl), cascade=bool(cascade))))

    def alter_table_req(self, req):
        props = (req.environmentContext.properties or {}) if req.environmentContext else {}
        cascade = str(props.get("CASCADE", "")).lower() == "true"
        self._apply(self.units.write(lambda c: self.tables.alter(
            c, req.dbName, req.tableName, to_doc(req.table), cascade=cascade,
            valid_write_ids=req.validWriteIdList, expected=expected_parameter(props))))
        return t.AlterTableResponse()

    def drop_table(self, dbname, name, deleteData):
        self._apply(self.units.write(lambda c: self.tables.drop(c, dbname, name, delete_data=bool(deleteData))))

    def drop_table_with_environment_context(self, dbname, name, deleteData, environment_context):
        self.drop_table(dbname, name, deleteData)

    # ---------------------------------------------------------------- partitions

    def add_partition(self, new_part):
        docs = self._applied(self.units.write(lambda c: self.partitions.add(c, new_part.dbName, new_part.tableName, [to_doc(new_part)])))
        return _partition(docs[0])

    def add_partition_with_environment_context(self, new_part, environment_context):
        return self.add_partition(new_part)

    def add_partitions(self, new_parts):
        if not new_parts:
            return 0
        first = new_parts[0]
        return len(self._applied(self.units.write(lambda c: self.partitions.add(c, first.dbName, first.tableName,
                                                  [to_doc(p) for p in new_parts]))))

    def add_partitions_req(self, request):
        docs = self._applied(self.units.write(lambda c: self.partitions.add(c, request.dbName, request.tblName,
                                              [to_doc(p) for p in request.parts or []],
                                              if_not_exists=bool(request.ifNotExists))))
        if request.needResult is False:
            return t.AddPartitionsResult()
        return t.AddPartitionsResult(partitions=[_partition(d) for d in docs])

    def append_partition(self, db_name, tbl_name, part_vals):
        part = {"dbName": db_name, "tableName": tbl_name, "values": list(part_vals or [])}
        return _partition(self._applied(self.units.write(lambda c: self.partitions.add(c, db_name, tbl_name, [part])))[0])

    def append_partition_with_environment_context(self, db_name, tbl_name, part_vals, environment_context):
        return self.append_partition(db_name, tbl_name, part_vals)

    def _values_of_names(self, db_name, tbl_name, part_names) -> list[list[str]]:
        """Values of ``k1=v1/k2=v2`` names, checked against the table's partition keys
        (a name with other keys is refused, as by the Java metastore)."""
        from hms_txn.domain.model.names import partition_values_from_name
        keys = [k["name"].lower() for k in self.units.read(lambda c: catalog.get_table(c, db_name, tbl_name)).get("partitionKeys") or []]
        return [partition_values_from_name(keys, n) for n in part_names]

    def append_partition_by_name(self, db_name, tbl_name, part_name):
        return self.append_partition(db_name, tbl_name, self._values_of_names(db_name, tbl_name, [part_name])[0])

    def append_partition_by_name_with_environment_context(self, db_name, tbl_name, part_name,
                                                          environment_context):
        return self.append_partition_by_name(db_name, tbl_name, part_name)

    def get_partition(self, db_name, tbl_name, part_vals):
        return _partition(self.units.read(lambda c: catalog.get_partition(c, db_name, tbl_name, list(part_vals or []))))

    def get_partition_req(self, req):
        return t.GetPartitionResponse(partition=self.get_partition(req.dbName, req.tblName, req.partVals))

    def get_partition_with_auth(self, db_name, tbl_name, part_vals, user_name, group_names):
        return self.get_partition(db_name, tbl_name, part_vals)

    def get_partition_by_name(self, db_name, tbl_name, part_name):
        return _partition(self.units.read(lambda c: catalog.get_partition_by_name(c, db_name, tbl_name, part_name)))

    def _partitions(self, db_name, tbl_name, **kwargs) -> list[t.Partition]:
        _, rows = self.units.read(lambda c: catalog.list_partitions(c, db_name, tbl_name, **kwargs))
        return [_partition(d) for _, d in rows]

    def _partition_names(self, db_name, tbl_name, **kwargs) -> list[str]:
        _, rows = self.units.read(lambda c: catalog.list_partitions(c, db_name, tbl_name, **kwargs))
        return [name for name, _ in rows]

    def get_partitions(self, db_name, tbl_name, max_parts):
        return self._partitions(db_name, tbl_name, limit=_limit(max_parts))

    def get_partitions_req(self, req):
        return t.PartitionsResponse(partitions=self.get_partitions(req.dbName, req.tblName, req.maxParts))

    def get_partitions_with_auth(self, db_name, tbl_name, max_parts, user_name, group_names):
        return self.get_partitions(db_name, tbl_name, max_parts)

    def get_partition_names(self, db_name, tbl_name, max_parts):
        return self._partition_names(db_name, tbl_name, limit=_limit(max_parts))

    def get_partitions_ps(self, db_name, tbl_name, part_vals, max_parts):
        return self._partitions(db_name, tbl_name, limit=_limit(max_parts),
                                partial_values=list(part_vals or []))

    def get_partitions_ps_with_auth(self, db_name, tbl_name, part_vals, max_parts, user_name, group_names):
        return self.get_partitions_ps(db_name, tbl_name, part_vals, max_parts)

    def get_partitions_ps_with_auth_req(self, req):
        return t.GetPartitionsPsWithAuthResponse(
            partitions=self.get_partitions_ps(req.dbName, req.tblName, req.partVals or [], req.maxParts))

    def get_partition_names_ps(self, db_name, tbl_name, part_vals, max_parts):
        return self._partition_names(db_name, tbl_name, limit=_limit(max_parts),
                                     partial_values=list(part_vals or []))

    def get_partition_names_ps_req(self, req):
        return t.GetPartitionNamesPsResponse(
            names=self.get_partition_names_ps(req.dbName, req.tblName, req.partValues or [], req.maxParts))

    def get_partitions_by_filter(self, db_name, tbl_name, filter, max_parts):
        return self._partitions(db_name, tbl_name, limit=_limit(max_parts), filter_text=filter or "")

    def get_num_partitions_by_filter(self, db_name, tbl_name, filter):
        return self.units.read(lambda c: catalog.count_partitions_by_filter(c, db_name, tbl_name, filter or ""))

    def get_partitions_by_names(self, db_name, tbl_name, names):
        _, rows = self.cache.get_partitions_by_names(db_name, tbl_name, list(names or []))
        return converted.partitions(d for _, d in rows)

    def get_partitions_by_names_req(self, req):
        _, rows = self.cache.get_partitions_by_names(req.db_name, req.tbl_name, list(req.names or []),
                                                  valid_write_ids=req.validWriteIdList)
        return t.GetPartitionsByNamesResult(partitions=[converted.partition(d) for _, d in rows])

    def alter_partition(self, db_name, tbl_name, new_part):
        self.units.write(lambda c: self.partitions.alter(c, db_name, tbl_name, [to_doc(new_part)]))

    def alter_partition_with_environment_context(self, db_name, tbl_name, new_part, environment_context):
        self.alter_partition(db_name, tbl_name, new_part)

    def alter_partitions(self, db_name, tbl_name, new_parts):
        self.units.write(lambda c: self.partitions.alter(c, db_name, tbl_name, [to_doc(p) for p in new_parts or []]))

    def alter_partitions_with_environment_context(self, db_name, tbl_name, new_parts, environment_context):
        self.alter_partitions(db_name, tbl_name, new_parts)

    def alter_partitions_req(self, req):
        write_id = -1 if req.writeId is None else req.writeId
        self.units.write(lambda c: self.partitions.alter(
            c, req.dbName, req.tableName, [to_doc(p) for p in req.partitions or []],
            valid_write_ids=req.validWriteIdList, write_id=write_id))
        return t.AlterPartitionsResponse()

    def rename_partition(self, db_name, tbl_name, part_vals, new_part):
        self._apply(self.units.write(lambda c: self.partitions.rename(c, db_name, tbl_name, list(part_vals or []), to_doc(new_part))))

    def drop_partition(self, db_name, tbl_name, part_vals, deleteData):
        self._applied(self.units.write(lambda c: self.partitions.drop(c, db_name, tbl_name, [list(part_vals or [])],
                                        delete_data=bool(deleteData))))
        return True

    def drop_partition_with_environment_context(self, db_name, tbl_name, part_vals, deleteData,
                                                environment_context):
        return self.drop_partition(db_name, tbl_name, part_vals, deleteData)

    def drop_partition_by_name(self, db_name, tbl_name, part_name, deleteData):
        values = self._values_of_names(db_name, tbl_name, [part_name])[0]
        return self.drop_partition(db_name, tbl_name, values, deleteData)

    def drop_partition_by_name_with_environment_context(self, db_name, tbl_name, part_name, deleteData,
                                                        environment_context):
        return self.drop_partition_by_name(db_name, tbl_name, part_name, deleteData)

    def drop_partitions_req(self, req):
        if req.parts is None or req.parts.names is None:  # expressions: PartitionCalls
            raise Refused("Partition spec is not set")
        values = self._values_of_names(req.dbName, req.tblName, req.parts.names)
        dropped = self._applied(self.units.write(lambda c: self.partitions.drop(c, 
            req.dbName, req.tblName, values,
            delete_data=req.deleteData is not False, if_exists=bool(req.ifExists))))
        if req.needResult is False:
            return t.DropPartitionsResult()
        return t.DropPartitionsResult(partitions=[_partition(d) for d in dropped])

    def partition_name_to_vals(self, part_name):
        return [v for _, v in names.split_partition_name(part_name)]

    def partition_name_to_spec(self, part_name):
        return dict(names.split_partition_name(part_name))

    def partition_name_has_valid_characters(self, part_vals, throw_exception):
        return True

