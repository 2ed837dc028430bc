"""Extension mode's catalog calls: forwarded to the upstream metastore.

``make_processor`` uses this mixin instead of ``CatalogCalls`` when
``hms_txn.upstream.uris`` is set (docs/extension-mode.md). Transactions, write ids, locks,
compaction, the notification log and fb303 stay ours (``TxnCalls``, ``NotificationCalls``,
``Fb303Service``); every other method of the IDL goes to the upstream:

* Generic forwarding (``__getattr__``): the call is sent as is and the upstream's answer
  or declared exception comes back unchanged. Newer structs sent to an older upstream lose
  only the fields it does not know (Thrift skips unknown fields).
* Translations: Hive 3/4 request-style calls are sent as their Hive 2.x equivalents
  (``get_database_req`` → ``get_database``, ``get_partitions_by_names_req`` →
  ``get_partitions_by_names``, ``alter_table_req`` → ``alter_table_with_environment_context``,
  ...), which every upstream version answers; constraint getters missing before Hive 3
  answer empty, and ``get_all_table_constraints`` is made of the primary and foreign keys.
  Write ids and ValidWriteIdLists are ours and never forwarded.
* ``get_table``/``get_table_req`` (and ``get_partitions_by_names_req`` with a
  ValidWriteIdList) are served through our metadata cache, whose loader reads the upstream.
  So are databases, table names, columns, functions (``extension.UpstreamFunctions``) and
  the partition reads of non-transactional tables (``ExtensionCache.select``/``partitions``,
  ``extension.select_partitions``; a multi-match ``_ps`` read from the upstream's memoized
  answer to the same read); whatever the cache cannot answer exactly is forwarded.
* DDL forwarded through us is written to OUR notification log (CREATE/ALTER/DROP_TABLE,
  ADD/ALTER/DROP_PARTITION, CREATE/ALTER/DROP_DATABASE, CREATE/DROP_FUNCTION), as Hive 4
  writes it, with the objects the upstream holds before and after the change, after the
  upstream applied it; that keeps our cache (and other hms-txn processes on the same
  database) right. A change whose objects cannot be read back is not logged (Hive's
  readers need them): it is evicted from this process's cache, and the others see it
  within the cache's time to live.

An unreachable upstream is ``UpstreamUnavailable``, which the client gets as a
MetaException naming the URI.
"""

from __future__ import annotations

import copy
import re

from hms_txn.common.errors import NoSuchObject
from hms_txn.domain.model import catalog, names
from hms_txn.service.catalog.catalog import cached_table, entry_memo
from hms_txn.service.catalog.owners import owned_database, owned_table
from hms_txn.service.catalog.table_access import UNDECLARED, declared_by
from hms_txn.service.extension.forwarder import Forwarder
from hms_txn.service.extension.forwarding_table_form import (alter_without_stats, altered_table,
                                                             client_tables, sent_table,
                                                             upstream_table)
from hms_txn.wire.client import tables_request
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

# Methods served here even when we do not implement them (they then answer "not supported
# by hms-txn" rather than reach the upstream's own, separate transaction system).
_OWNED_PATTERN = re.compile(
    r"txn|transaction|write_?id|lock|compact|notification|listener_event|write_event|heartbeat|cleaner|"
    r"cleanup|worker|hadoop_jobid|^mark_|min_history|columns_with_stats", re.I)


def owned_methods(served: frozenset[str]) -> frozenset[str]:
    """What extension mode never forwards: the methods our own services serve
    (``served``) and every method of the transaction, lock, compaction and notification
    families, implemented or not."""
    idl = {m for m in vars(ThriftHiveMetastore.Iface) if not m.startswith("_")}
    return frozenset(served | {m for m in idl if _OWNED_PATTERN.search(m)})

_IDL = frozenset(m for m in vars(ThriftHiveMetastore.Iface) if not m.startswith("_"))
_STATS_WRITES = {"update_table_column_statistics", "update_partition_column_statistics",
                 "delete_table_column_statistics", "delete_partition_column_statistics"}


# Hive's default hive.serdes.using.metastore.for.schema.
_SERDES_WITH_METASTORE_SCHEMA = frozenset({
    "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
    "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
    "org.apache.hadoop.hive.serde2.columnar.ColumnarSerDe",
    "org.apache.hadoop.hive.serde2.dynamic_type.DynamicSerDe",
    "org.apache.hadoop.hive.serde2.MetadataTypedColumnsetSerDe",
    "org.apache.hadoop.hive.serde2.columnar.LazyBinaryColumnarSerDe",
    "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
    "org.apache.hadoop.hive.serde2.lazybinary.LazyBinarySerDe",
})


def _without_write_state(request):
    """A copy of a statistics request without our writeId and validWriteIdList."""
    request = copy.copy(request)
    request.validWriteIdList = None
    if hasattr(request, "writeId"):
        request.writeId = -1
    return request


class ForwardingService:
    """The catalog of extension mode (see the module docstring); ``owned`` names the
    methods never forwarded (``owned_methods``)."""

    def __init__(self, fwd: Forwarder, owned: frozenset[str]):
        self.fwd = fwd
        self.owned = owned

    def forwarded_methods(self) -> list[str]:
        return sorted(_IDL - self.owned)

    def __getattr__(self, method: str):
        if method.startswith("_") or method in self.owned or method not in _IDL:
            raise AttributeError(method)
        up = self.fwd.upstream.call
        if method in _STATS_WRITES:
            def forward(*args):
                result = up(method, *args)
                self.fwd.stats_written(method, args)
                return result
        else:
            def forward(*args):
                return up(method, *args)
        forward.__name__ = forward.__qualname__ = method
        return forward

    # ---------------------------------------------------------------- databases

    def create_database(self, database):
        self.fwd.up("create_database", owned_database(database))
        self.fwd.cache.databases.invalidate(database.name)
        doc = self.fwd.fetch_database(database.name) or to_doc(database)
        self.fwd.record("CREATE_DATABASE", database.name, None, self.fwd.events.database_created,
                        doc)

    def alter_database(self, dbname, db):
        before = self.fwd.fetch_database(dbname)
        self.fwd.up("alter_database", dbname, db)
        self.fwd.cache.databases.invalidate(dbname)
        after = self.fwd.fetch_database(dbname) or to_doc(db)
        self.fwd.record("ALTER_DATABASE", dbname, None, self.fwd.events.database_altered,
                        before or after, after)

    def drop_database(self, name, deleteData, cascade):
        before = self.fwd.fetch_database(name) or {"name": names.lower(name)}
        self.fwd.up("drop_database", name, deleteData, cascade)
        self.fwd.cache.invalidate(name, None)
        self.fwd.record("DROP_DATABASE", name, None, self.fwd.events.database_dropped, before)

    # Database reads come from the upstream through a TTL cache (extension.UpstreamDatabases):
    # forwarding these tiny, frequent calls would double their latency.

    def get_database(self, name):
        cache = self.fwd.cache
        if not cache.enabled:
            return self.fwd.up("get_database", name)
        doc, memo = cache.databases.get(name)
        database = memo.get("Database")
        if database is None:
            database = memo["Database"] = from_doc(t.Database, doc)
        return database

    def get_database_req(self, request):
        return self.get_database(request.name)

    def get_all_databases(self):
        if not self.fwd.cache.enabled:
            return self.fwd.up("get_all_databases")
        return self.fwd.cache.databases.names()

    def get_databases(self, pattern):
        # A catalog-qualified pattern (Hive 3's "@cat#...") is the upstream's business.
        if not self.fwd.cache.enabled or (pattern or "").startswith("@"):
            return self.fwd.up("get_databases", pattern)
        return [n for n in self.fwd.cache.databases.names()
                if names.matches(pattern, n, empty_matches_all=False)]

    def drop_database_req(self, req):
        try:
            self.drop_database(req.name, req.deleteData is not False, bool(req.cascade))
        except t.NoSuchObjectException:
            if not req.ignoreUnknownDb:
                raise

    # ---------------------------------------------------------------- tables: reads

    def get_table(self, dbname, tbl_name):
        read = self.fwd.cache.get_table(dbname, tbl_name)
        return self.fwd.access.table(read.doc, UNDECLARED) or cached_table(read)

    def get_table_req(self, req):
        read = self.fwd.cache.get_table(req.dbName, req.tblName, req.validWriteIdList,
                                    require_write_ids=True)
        table = self.fwd.access.table(read.doc, declared_by(req)) or cached_table(read)
        return t.GetTableResult(table=table, isStatsCompliant=False)

    def _upstream_tables(self, db, table_names) -> list:
        """The upstream's tables, asked for as a client that understands ACID tables (an
        upstream before Hive 2.3 gets the plain call)."""
        request = tables_request(db, list(table_names or []))
        result = self.fwd.up_or("get_table_objects_by_name_req", (request,), lambda: None)
        if result is None:
            return client_tables(self.fwd.up("get_table_objects_by_name", db, request.tblNames))
        return client_tables(result.tables)

    def get_table_objects_by_name(self, dbname, tbl_names):
        tables = self._upstream_tables(dbname, tbl_names)
        return self._listed(tables, UNDECLARED)

    def get_table_objects_by_name_req(self, req):
        tables = self._upstream_tables(req.dbName, req.tblNames)
        if req.tablesPattern:
            tables = [x for x in tables if names.matches(req.tablesPattern, x.tableName)]
        return t.GetTablesResult(tables=self._listed(tables, declared_by(req)))

    def _listed(self, tables: list, client) -> list:
        """The upstream's tables for this client (``TableAccess.listed``): the structs as
        received, an ACID table in the plain form for a client that does not understand it."""
        docs = [to_doc(x) for x in tables]
        received = {id(d): x for d, x in zip(docs, tables)}
        return self.fwd.access.listed(docs, client, lambda d: received[id(d)])

    def get_tables_ext(self, req):
        found = self.fwd.up("get_tables", req.database, req.tableNamePattern)
        if req.limit is not None and req.limit > 0:
            found = found[:req.limit]
        docs = []
        for name in found:
            try:
                docs.append(self.fwd.cache.get_table(req.database, name).doc)
            except NoSuchObject:        # dropped since it was listed
                pass
        return self.fwd.access.tables_ext(docs, req)

    # Columns: a metastore answers get_fields/get_schema from the table's own columns when
    # its serde keeps the schema in the metastore (Hive's hive.serdes.using.metastore.for
    # .schema, whose default list is below); for those we answer from the cached table.
    # Other serdes (Avro with a schema URL, ...) derive the columns from the data's schema,
    # which only the upstream can do, so those calls are forwarded.

    def _columns(self, method: str, db, table, env, *, with_keys: bool):
        try:
            read = self.fwd.cache.get_table(db, table)
        except NoSuchObject:  # as the upstream (HMSHandler.get_fields_with_environment_context)
            missing = catalog.hive_table_not_found(db, table)
            raise t.UnknownTableException(message=missing.message) from None
        serde = ((read.doc.get("sd") or {}).get("serdeInfo") or {}).get("serializationLib")
        if serde and serde not in _SERDES_WITH_METASTORE_SCHEMA:
            return self.fwd.up(method, db, table, env) if env is not None else \
                self.fwd.up(method.replace("_with_environment_context", ""), db, table)
        key = "Schema" if with_keys else "Fields"
        memo = entry_memo(read.entry) if read.entry is not None else {}
        cols = memo.get(key)
        if cols is None:
            docs = list((read.doc.get("sd") or {}).get("cols") or [])
            if with_keys:
                docs += read.doc.get("partitionKeys") or []
            cols = memo[key] = [from_doc(t.FieldSchema, c) for c in docs]
        return cols

    def get_fields(self, db_name, table_name):
        return self._columns("get_fields_with_environment_context", db_name, table_name, None,
                             with_keys=False)

    def get_fields_with_environment_context(self, db_name, table_name, environment_context):
        return self._columns("get_fields_with_environment_context", db_name, table_name,
                             environment_context, with_keys=False)

    def get_schema(self, db_name, table_name):
        return self._columns("get_schema_with_environment_context", db_name, table_name, None,
                             with_keys=True)

    def get_schema_with_environment_context(self, db_name, table_name, environment_context):
        return self._columns("get_schema_with_environment_context", db_name, table_name,
                             environment_context, with_keys=True)

    def get_fields_req(self, req):
        return t.GetFieldsResponse(fields=self._columns(
            "get_fields_with_environment_context", req.dbName, req.tblName, req.envContext,
            with_keys=False))

    def get_schema_req(self, req):
        return t.GetSchemaResponse(fields=self._columns(
            "get_schema_with_environment_context", req.dbName, req.tblName, req.envContext,
            with_keys=True))

    # ---------------------------------------------------------------- tables: changes

    def _created(self, db: str, name: str) -> None:
        self.fwd.cache.databases.invalidate_tables(db)
        doc = self.fwd.fetch_table(db, name)
        if doc is None:
            self.fwd.cache.invalidate(db, name)
            return
        self.fwd.record("CREATE_TABLE", db, name, self.fwd.events.table_created, doc)

    # Table names come through the same read-through cache as databases.

    def get_all_tables(self, db_name):
        if not self.fwd.cache.enabled:
            return self.fwd.up("get_all_tables", db_name)
        return self.fwd.cache.databases.table_names(db_name)

    def get_tables(self, db_name, pattern):
        if not self.fwd.cache.enabled or (db_name or "").startswith("@"):
            return self.fwd.up("get_tables", db_name, pattern)
        return [n for n in self.fwd.cache.databases.table_names(db_name)
                if names.matches(pattern, n, empty_matches_all=False)]

    def _stored(self, tbl):
        """``tbl`` as the upstream must store it (its upstream form on a Hive 2.x one)."""
        tbl = owned_table(sent_table(tbl, None))
        return tbl if self.fwd.takes_hive3_acid() else upstream_table(tbl)

    def create_table(self, tbl):
        self.fwd.up("create_table", self._stored(tbl))
        self._created(tbl.dbName, tbl.tableName)

    def create_table_with_environment_context(self, tbl, environment_context):
        self.fwd.up("create_table_with_environment_context", self._stored(tbl),
                    environment_context)
        self._created(tbl.dbName, tbl.tableName)

    def create_table_with_constraints(self, tbl, primaryKeys, foreignKeys, uniqueConstraints,
                                      notNullConstraints, defaultConstraints, checkConstraints):
        self.fwd.up("create_table_with_constraints", self._stored(tbl), primaryKeys, foreignKeys,
                 uniqueConstraints, notNullConstraints, defaultConstraints, checkConstraints)
        self._created(tbl.dbName, tbl.tableName)

    def create_table_req(self, request):
        tbl = self._stored(request.table)
        if (request.primaryKeys or request.foreignKeys or request.uniqueConstraints
                or request.notNullConstraints or request.defaultConstraints
                or request.checkConstraints):
            self.fwd.up("create_table_with_constraints", tbl, request.primaryKeys or [],
                     request.foreignKeys or [], request.uniqueConstraints or [],
                     request.notNullConstraints or [], request.defaultConstraints or [],
                     request.checkConstraints or [])
        else:
            self.fwd.up("create_table_with_environment_context", tbl, request.envContext)
        self._created(tbl.dbName, tbl.tableName)

    def _alter(self, method: str, dbname, tbl_name, new_tbl, *rest):
        before = self.fwd.fetch_table(dbname, tbl_name)
        new_tbl = sent_table(new_tbl, before)
        write_id = new_tbl.writeId if new_tbl is not None else None
        if new_tbl is not None and new_tbl.writeId is not None:
            new_tbl = copy.copy(new_tbl)    # our write ids mean nothing upstream
            new_tbl.writeId = None
        in_form = False
        if not self.fwd.takes_hive3_acid():
            new_tbl, in_form = altered_table(before, new_tbl)
        if in_form:     # Hive 2.x must not recompute the statistics of a Hive 3/4 ACID table
            method, rest = alter_without_stats(method, rest)
        self.fwd.up(method, dbname, tbl_name, new_tbl, *rest)
        self.fwd.cache.databases.invalidate_tables(dbname)
        if new_tbl.dbName and new_tbl.dbName.lower() != dbname.lower():
            self.fwd.cache.databases.invalidate_tables(new_tbl.dbName)
        after = self.fwd.fetch_table(new_tbl.dbName or dbname, new_tbl.tableName or tbl_name)
        if before is None or after is None:
            self.fwd.cache.invalidate(dbname, tbl_name)
            return
        self.fwd.record("ALTER_TABLE", dbname, tbl_name, self.fwd.events.table_altered,
                        before, after, write_id)

    def alter_table(self, dbname, tbl_name, new_tbl):
        self._alter("alter_table", dbname, tbl_name, new_tbl)

    def alter_table_with_environment_context(self, dbname, tbl_name, new_tbl, environment_context):
        self._alter("alter_table_with_environment_context", dbname, tbl_name, new_tbl,
                    environment_context)

    def alter_table_with_cascade(self, dbname, tbl_name, new_tbl, cascade):
        self._alter("alter_table_with_cascade", dbname, tbl_name, new_tbl, cascade)

    def alter_table_req(self, req):
        self._alter("alter_table_with_environment_context", req.dbName, req.tableName, req.table,
                    req.environmentContext)
        return t.AlterTableResponse()

    def _drop_table(self, method: str, dbname, name, *rest):
        before = self.fwd.fetch_table(dbname, name)
        self.fwd.up(method, dbname, name, *rest)
        self.fwd.cache.databases.invalidate_tables(dbname)
        if before is None:
            self.fwd.cache.invalidate(dbname, name)
            return
        self.fwd.record("DROP_TABLE", dbname, name, self.fwd.events.table_dropped, before)

    def drop_table(self, dbname, name, deleteData):
        self._drop_table("drop_table", dbname, name, deleteData)

    def drop_table_with_environment_context(self, dbname, name, deleteData, environment_context):
        self._drop_table("drop_table_with_environment_context", dbname, name, deleteData,
                         environment_context)

    # ---------------------------------------------------------------- column statistics
    # Forwarded, with the write state taken out: write ids and ValidWriteIdLists are ours
    # and mean nothing to the upstream. The _req writes become the older calls on an
    # upstream that does not know them (Hive 2.x).

    def set_aggr_stats_for(self, request):
        result = self.fwd.up("set_aggr_stats_for", _without_write_state(request))
        self.fwd.stats_written("set_aggr_stats_for", (request,))
        return result

    def _update_req(self, method: str, request):
        def older():
            return t.SetPartitionsStatsResponse(result=self.fwd.up(
                method[:-len("_req")], (request.colStats or [None])[0]))
        result = self.fwd.up_or(method, (_without_write_state(request),), older)
        self.fwd.stats_written(method, (request,))
        return result

    def update_table_column_statistics_req(self, req):
        return self._update_req("update_table_column_statistics_req", req)

    def update_partition_column_statistics_req(self, req):
        return self._update_req("update_partition_column_statistics_req", req)

    def get_table_statistics_req(self, request):
        return self.fwd.up("get_table_statistics_req", _without_write_state(request))

    def get_partitions_statistics_req(self, request):
        return self.fwd.up("get_partitions_statistics_req", _without_write_state(request))

    def get_aggr_stats_for(self, request):
        return self.fwd.up("get_aggr_stats_for", _without_write_state(request))

    # ---------------------------------------------------------------- functions
    # Read through extension.UpstreamFunctions (one get_all_functions, TTL, dropped on any
    # function event); a function the snapshot does not have is asked upstream, so its
    # "does not exist" answer is the upstream's own.

    def _functions(self):
        return self.fwd.cache.functions.snapshot() if self.fwd.cache.enabled else None

    def get_functions(self, dbName, pattern):
        snap = None if (dbName or "").startswith("@") else self._functions()
        if snap is None:
            return self.fwd.up("get_functions", dbName, pattern)
        return snap.names(dbName, pattern)

    def get_function(self, dbName, funcName):
        snap = self._functions()
        doc = snap.get(dbName, funcName) if snap is not None else None
        if doc is None:
            return self.fwd.up("get_function", dbName, funcName)
        func = snap.memo.get(id(doc))
        if func is None:
            func = snap.memo[id(doc)] = from_doc(t.Function, doc)
        return func

    def get_all_functions(self):
        snap = self._functions()
        if snap is None:
            return self.fwd.up("get_all_functions")
        rsp = snap.memo.get("all")
        if rsp is None:
            rsp = snap.memo["all"] = t.GetAllFunctionsResponse(
                functions=None if snap.docs is None else [from_doc(t.Function, d) for d in snap.docs])
        return rsp

    def create_function(self, func):
        self.fwd.up("create_function", func)
        self.fwd.cache.functions.invalidate()
        try:        # as the upstream stored it (it sets the creation time)
            doc = to_doc(self.fwd.up("get_function", func.dbName, func.functionName))
        except Exception:
            doc = {**to_doc(func), "dbName": names.lower(func.dbName),
                   "functionName": names.lower(func.functionName)}
        self.fwd.record("CREATE_FUNCTION", func.dbName, func.functionName,
                        self.fwd.events.function_created, doc, evict=False)

    def alter_function(self, dbName, funcName, newFunc):
        self.fwd.up("alter_function", dbName, funcName, newFunc)
        self.fwd.cache.functions.invalidate()     # Hive logs no event for it

    def drop_function(self, dbName, funcName):
        self.fwd.up("drop_function", dbName, funcName)
        self.fwd.cache.functions.invalidate()
        self.fwd.record("DROP_FUNCTION", dbName, funcName, self.fwd.events.function_dropped,
                        {"dbName": names.lower(dbName), "functionName": names.lower(funcName)},
                        evict=False)

    # ---------------------------------------------------------------- Hive 3+ constraints

    def get_unique_constraints(self, request):
        return self.fwd.up_or("get_unique_constraints", (request,),
                           lambda: t.UniqueConstraintsResponse(uniqueConstraints=[]))

    def get_not_null_constraints(self, request):
        return self.fwd.up_or("get_not_null_constraints", (request,),
                           lambda: t.NotNullConstraintsResponse(notNullConstraints=[]))

    def get_default_constraints(self, request):
        return self.fwd.up_or("get_default_constraints", (request,),
                           lambda: t.DefaultConstraintsResponse(defaultConstraints=[]))

    def get_check_constraints(self, request):
        return self.fwd.up_or("get_check_constraints", (request,),
                           lambda: t.CheckConstraintsResponse(checkConstraints=[]))

    def get_all_table_constraints(self, request):
        # A Hive 2.x upstream has only primary and foreign keys (the table's own: asked by
        # the referencing side, which 2.3 answers without a parent table).
        def from_keys():
            db, table = request.dbName, request.tblName
            pks = self.fwd.up("get_primary_keys", t.PrimaryKeysRequest(db_name=db, tbl_name=table))
            fks = self.fwd.up("get_foreign_keys", t.ForeignKeysRequest(
                foreign_db_name=db, foreign_tbl_name=table))
            return t.AllTableConstraintsResponse(allTableConstraints=t.SQLAllTableConstraints(
                primaryKeys=pks.primaryKeys, foreignKeys=fks.foreignKeys, uniqueConstraints=[],
                notNullConstraints=[], defaultConstraints=[], checkConstraints=[]))
        return self.fwd.up_or("get_all_table_constraints", (request,), from_keys)
