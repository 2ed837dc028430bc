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
  answer empty. Write ids and ValidWriteIdLists are ours and never forwarded.
* ``get_table``/``get_table_req`` (and ``get_partitions_by_names_req`` with a
  ValidWriteIdList) are served through our metadata cache, whose loader reads the upstream.
  So are databases, table names, columns, functions (``extension.UpstreamFunctions``) and
  the partition reads of non-transactional tables (``ExtensionCache.select``/``partitions``,
  ``extension.select_partitions``; a multi-match ``_ps`` read from the upstream's memoized
  answer to the same read); whatever the cache cannot answer exactly is forwarded.
* DDL forwarded through us is written to OUR notification log (CREATE/ALTER/DROP_TABLE,
  ADD/ALTER/DROP_PARTITION, CREATE/ALTER/DROP_DATABASE) with the objects the upstream
  returned, after the upstream applied it; that keeps our cache (and other hms-txn
  processes on the same database) right.

An unreachable upstream is ``UpstreamUnavailable``, which the client gets as a
MetaException naming the URI.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

from thrift.Thrift import TApplicationException

from hms_txn.domain import names
from hms_txn.domain.extension import UpstreamAnswer
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from hms_txn.service.catalog import _cached_table, _converted
from hms_txn.service.notifications import NotificationCalls
from hms_txn.service.fb303 import Fb303Service
from hms_txn.service.tokens import TokenService
from hms_txn.service.locks import CompactionService, LockService
from hms_txn.service.transactions import TxnService
from hms_txn.wire.codec import from_doc, to_doc

log = logging.getLogger("hms_txn.handler")

# Methods served here even when we do not implement them (they then answer "not supported
# by hms-txn" rather than reach the upstream's own, separate transaction system).
_OWNED_PATTERN = re.compile(
    r"txn|transaction|write_?id|lock|compact|notification|listener_event|write_event|heartbeat|cleaner|"
    r"worker|hadoop_jobid|^mark_|min_history|columns_with_stats", re.I)


def _owned() -> frozenset[str]:
    mine = {m for cls in (TxnService, LockService, CompactionService, NotificationCalls, Fb303Service,
                              TokenService) for m in vars(cls)
            if not m.startswith("_")}
    idl = {m for m in vars(ThriftHiveMetastore.Iface) if not m.startswith("_")}
    return frozenset(mine | {m for m in idl if _OWNED_PATTERN.search(m)})


OWNED = _owned()
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


def _partitions_of(rows):
    return _converted.partitions(d for _, d in rows)


def _names_of(rows):
    return [n for n, _ in rows]


def forwarded_methods() -> list[str]:
    return sorted(_IDL - OWNED)


class ForwardingCalls:
    ms: Any

    def __getattr__(self, method: str):
        if method.startswith("_") or method in OWNED or method not in _IDL:
            raise AttributeError(method)
        up = self.ms.upstream.call
        if method in _STATS_WRITES:
            def forward(*args):
                result = up(method, *args)
                self._stats_written(method, args)
                return result
        else:
            def forward(*args):
                return up(method, *args)
        forward.__name__ = forward.__qualname__ = method
        return forward

    # ---------------------------------------------------------------- helpers

    def _up(self, method: str, *args):
        return self.ms.upstream.call(method, *args)

    def _up_or(self, method: str, args: tuple, fallback):
        """``method`` on the upstream, or ``fallback()`` when the upstream does not know it."""
        missing = self.ms.upstream.__dict__.setdefault("missing_methods", set())
        if method not in missing:
            try:
                return self._up(method, *args)
            except TApplicationException as err:
                if err.type != TApplicationException.UNKNOWN_METHOD:
                    raise
                missing.add(method)
        return fallback()

    def _record(self, what: str, db: str, table: str | None, fn, *args, evict: bool = True) -> None:
        """Write the event of a forwarded change. The upstream has applied the change, so a
        failure here must not fail the call: the table is dropped from this process's cache
        and other processes see the change within the cache TTL."""
        try:
            fn(*args)
        except Exception:
            log.warning("extension mode: could not log %s of %s.%s in the notification log",
                        what, db, table, exc_info=True)
            if db and evict:
                self.ms.cache.invalidate(db, table)

    def _fetch_table(self, db: str, name: str) -> dict | None:
        try:
            return self.ms.upstream.tables.get_table(db, name)
        except Exception:
            return None

    def _table_doc(self, db: str, name: str) -> dict | None:
        """The table for an event message (cache first)."""
        try:
            return self.ms.get_table(db, name)
        except Exception:
            return None

    def _stats_written(self, method: str, args: tuple) -> None:
        stats = args[0]
        if method.startswith("update_"):
            desc = getattr(stats, "statsDesc", None)
            db, table = (desc.dbName, desc.tableName) if desc else (None, None)
        else:
            db, table = args[0], args[1]
        if db and table:
            self.ms.cache.invalidate(db, table)

    # ---------------------------------------------------------------- databases

    def create_database(self, database):
        self._up("create_database", database)
        self.ms.cache.databases.invalidate(database.name)
        self._record("CREATE_DATABASE", database.name, None, self.ms.notifications.database_changed,
                     "CREATE_DATABASE", database.name)

    def alter_database(self, dbname, db):
        self._up("alter_database", dbname, db)
        self.ms.cache.databases.invalidate(dbname)
        self._record("ALTER_DATABASE", dbname, None, self.ms.notifications.database_changed,
                     "ALTER_DATABASE", dbname)

    def drop_database(self, name, deleteData, cascade):
        self._up("drop_database", name, deleteData, cascade)
        self.ms.cache.invalidate(name, None)
        self._record("DROP_DATABASE", name, None, self.ms.notifications.database_changed,
                     "DROP_DATABASE", name)

    # Database reads come from the upstream through a TTL cache (extension.UpstreamDatabases):
    # forwarding these tiny, frequent calls would double their latency.

    def get_database(self, name):
        cache = self.ms.cache
        if not cache.enabled:
            return self._up("get_database", name)
        doc, memo = cache.databases.get(name)
        database = memo.get("Database")
        if database is None:
            database = memo["Database"] = from_doc(t.Database, doc)
        return database

    def get_database_req(self, request):
        return self.get_database(request.name)

    def get_all_databases(self):
        if not self.ms.cache.enabled:
            return self._up("get_all_databases")
        return self.ms.cache.databases.names()

    def get_databases(self, pattern):
        # A catalog-qualified pattern (Hive 3's "@cat#...") is the upstream's business.
        if not self.ms.cache.enabled or (pattern or "").startswith("@"):
            return self._up("get_databases", pattern)
        return [n for n in self.ms.cache.databases.names()
                if names.matches(pattern, n, empty_matches_all=False)]

    def drop_database_req(self, req):
        try:
            self.drop_database(req.name, req.deleteData is not False, bool(req.cascade))
        except t.NoSuchObjectException:
            if not req.ignoreUnknownDb:
                raise

    # ---------------------------------------------------------------- tables: reads

    def get_table(self, dbname, tbl_name):
        return _cached_table(self.ms.read_table(dbname, tbl_name))

    def get_table_req(self, req):
        read = self.ms.read_table(req.dbName, req.tblName, valid_write_ids=req.validWriteIdList,
                                  require_write_ids=True)
        return t.GetTableResult(table=_cached_table(read), isStatsCompliant=False)

    def get_table_objects_by_name_req(self, req):
        tables = self._up("get_table_objects_by_name", req.dbName, list(req.tblNames or []))
        if req.tablesPattern:
            tables = [x for x in tables if names.matches(req.tablesPattern, x.tableName)]
        return t.GetTablesResult(tables=tables)

    # Columns: a metastore answers get_fields/get_schema from the table's own columns when
    # its serde keeps the schema in the metastore (Hive's hive.serdes.using.metastore.for
    # .schema, whose default list is below); for those we answer from the cached table.
    # Other serdes (Avro with a schema URL, ...) derive the columns from the data's schema,
    # which only the upstream can do, so those calls are forwarded.

    def _columns(self, method: str, db, table, env, *, with_keys: bool):
        read = self.ms.read_table(db, table)
        serde = ((read.doc.get("sd") or {}).get("serdeInfo") or {}).get("serializationLib")
        if serde and serde not in _SERDES_WITH_METASTORE_SCHEMA:
            return self._up(method, db, table, env) if env is not None else \
                self._up(method.replace("_with_environment_context", ""), db, table)
        key = "Schema" if with_keys else "Fields"
        memo = read.entry.wire if read.entry is not None else {}
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
        self.ms.cache.databases.invalidate_tables(db)
        doc = self._fetch_table(db, name)
        if doc is None:
            self.ms.cache.invalidate(db, name)
            return
        self._record("CREATE_TABLE", db, name, self.ms.notifications.table_created, doc)

    # Table names come through the same read-through cache as databases.

    def get_all_tables(self, db_name):
        if not self.ms.cache.enabled:
            return self._up("get_all_tables", db_name)
        return self.ms.cache.databases.table_names(db_name)

    def get_tables(self, db_name, pattern):
        if not self.ms.cache.enabled or (db_name or "").startswith("@"):
            return self._up("get_tables", db_name, pattern)
        return [n for n in self.ms.cache.databases.table_names(db_name)
                if names.matches(pattern, n, empty_matches_all=False)]

    def create_table(self, tbl):
        self._up("create_table", tbl)
        self._created(tbl.dbName, tbl.tableName)

    def create_table_with_environment_context(self, tbl, environment_context):
        self._up("create_table_with_environment_context", tbl, environment_context)
        self._created(tbl.dbName, tbl.tableName)

    def create_table_with_constraints(self, tbl, primaryKeys, foreignKeys, uniqueConstraints,
                                      notNullConstraints, defaultConstraints, checkConstraints):
        self._up("create_table_with_constraints", tbl, primaryKeys, foreignKeys, uniqueConstraints,
                 notNullConstraints, defaultConstraints, checkConstraints)
        self._created(tbl.dbName, tbl.tableName)

    def create_table_req(self, request):
        tbl = request.table
        if request.primaryKeys or request.foreignKeys:
            self._up("create_table_with_constraints", tbl, request.primaryKeys or [],
                     request.foreignKeys or [], request.uniqueConstraints or [],
                     request.notNullConstraints or [], request.defaultConstraints or [],
                     request.checkConstraints or [])
        else:
            self._up("create_table_with_environment_context", tbl, request.envContext)
        self._created(tbl.dbName, tbl.tableName)

    def _alter(self, method: str, dbname, tbl_name, new_tbl, *rest):
        before = self._fetch_table(dbname, tbl_name)
        if new_tbl is not None and new_tbl.writeId is not None:
            new_tbl = copy.copy(new_tbl)    # our write ids mean nothing upstream
            new_tbl.writeId = None
        self._up(method, dbname, tbl_name, new_tbl, *rest)
        self.ms.cache.databases.invalidate_tables(dbname)
        if new_tbl.dbName and new_tbl.dbName.lower() != dbname.lower():
            self.ms.cache.databases.invalidate_tables(new_tbl.dbName)
        after = self._fetch_table(new_tbl.dbName or dbname, new_tbl.tableName or tbl_name)
        self._record("ALTER_TABLE", dbname, tbl_name, self.ms.notifications.table_altered, dbname, tbl_name,
                     before, after)

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
        before = self._fetch_table(dbname, name)
        self._up(method, dbname, name, *rest)
        self.ms.cache.databases.invalidate_tables(dbname)
        self._record("DROP_TABLE", dbname, name, self.ms.notifications.table_dropped, dbname, name, before)

    def drop_table(self, dbname, name, deleteData):
        self._drop_table("drop_table", dbname, name, deleteData)

    def drop_table_with_environment_context(self, dbname, name, deleteData, environment_context):
        self._drop_table("drop_table_with_environment_context", dbname, name, deleteData,
                         environment_context)

    # ---------------------------------------------------------------- partitions

    def _parts_added(self, db: str, name: str, parts) -> None:
        table = self._table_doc(db, name) or {"dbName": names.lower(db), "tableName": names.lower(name)}
        self._record("ADD_PARTITION", db, name, self.ms.notifications.partitions_added, table,
                     [to_doc(p) for p in parts])

    def add_partition(self, new_part):
        part = self._up("add_partition", new_part)
        self._parts_added(new_part.dbName, new_part.tableName, [part])
        return part

    def add_partition_with_environment_context(self, new_part, environment_context):
        part = self._up("add_partition_with_environment_context", new_part, environment_context)
        self._parts_added(new_part.dbName, new_part.tableName, [part])
        return part

    def add_partitions(self, new_parts):
        if not new_parts:
            return 0
        first = new_parts[0]
        result = self._up("add_partitions_req", t.AddPartitionsRequest(
            dbName=first.dbName, tblName=first.tableName, parts=new_parts, ifNotExists=False,
            needResult=True))
        added = result.partitions or []
        self._parts_added(first.dbName, first.tableName, added)
        return len(added)

    def add_partitions_req(self, request):
        forwarded = copy.copy(request)
        forwarded.needResult = True
        forwarded.validWriteIdList = None
        result = self._up("add_partitions_req", forwarded)
        self._parts_added(request.dbName, request.tblName, result.partitions or [])
        if request.needResult is False:
            return t.AddPartitionsResult()
        return result

    def add_partitions_pspec(self, new_parts):
        count = self._up("add_partitions_pspec", new_parts)
        for spec in new_parts or []:
            self.ms.cache.invalidate(spec.dbName, spec.tableName)
        return count

    def append_partition(self, db_name, tbl_name, part_vals):
        part = self._up("append_partition", db_name, tbl_name, part_vals)
        self._parts_added(db_name, tbl_name, [part])
        return part

    def append_partition_with_environment_context(self, db_name, tbl_name, part_vals,
                                                  environment_context):
        part = self._up("append_partition_with_environment_context", db_name, tbl_name,
                        part_vals, environment_context)
        self._parts_added(db_name, tbl_name, [part])
        return part

    def append_partition_by_name(self, db_name, tbl_name, part_name):
        part = self._up("append_partition_by_name", db_name, tbl_name, part_name)
        self._parts_added(db_name, tbl_name, [part])
        return part

    def append_partition_by_name_with_environment_context(self, db_name, tbl_name, part_name,
                                                          environment_context):
        part = self._up("append_partition_by_name_with_environment_context", db_name, tbl_name,
                        part_name, environment_context)
        self._parts_added(db_name, tbl_name, [part])
        return part

    # Partition reads of non-transactional tables come from the table's cache entry (all
    # its partitions, read once per entry; extension.ExtensionCache.partitions); whatever
    # the cache cannot answer exactly (a transactional or too large table, a missing one,
    # filters whose Hive semantics we do not reproduce) is forwarded as is.

    def _select(self, db, tbl, *, with_auth: bool = False, **how):
        """The matching (name, partition document) pairs from the cache, or None.

        ``with_auth``: the *_with_auth reads, which add the caller's privileges to each
        partition when the table has PARTITION_LEVEL_PRIVILEGE=true; then the upstream
        answers."""
        cache = self.ms.cache
        if not cache.enabled:
            return None
        return cache.select(db, tbl, with_auth=with_auth, **how)

    def _ps(self, method: str, convert, db, tbl, part_vals, max_parts, *auth):
        """A ``_ps`` read (``auth``: user and groups of the _with_auth form): ``convert``
        of the matching (name, document) pairs from the cache, else the upstream's answer
        as it is: one matching several partitions (whose order only the upstream knows) is
        memoized on the table's entry (``ExtensionCache.select``), the others forwarded."""
        args = (db, tbl, part_vals, max_parts, *auth)
        key = (method, tuple(part_vals or ()), max_parts,
               *(tuple(a) if isinstance(a, list) else a for a in auth))
        found = self._select(db, tbl, limit=max_parts, partial_values=list(part_vals or []),
                             with_auth=bool(auth), memo=(key, lambda: self._up(method, *args)))
        if found is None:
            return self._up(method, *args)
        if isinstance(found, UpstreamAnswer):
            return found.value
        return convert(found)

    def _one(self, db, tbl, name_of):
        """A partition from the cache (None: ask the upstream, for its own answer)."""
        cache = self.ms.cache
        if not cache.enabled:
            return None
        found = cache.partitions(db, tbl)
        if found is None:
            return None
        table, listing = found
        name = name_of(table)
        doc = listing.index.get(name) if name is not None else None
        return None if doc is None else _converted.partition(doc)

    @staticmethod
    def _name_of_values(values):
        def name_of(table):
            keys = [k["name"].lower() for k in table.get("partitionKeys") or []]
            if len(values) != len(keys):
                return None
            return names.make_partition_name(keys, [str(v) for v in values])
        return name_of

    def get_partition(self, db_name, tbl_name, part_vals):
        part = self._one(db_name, tbl_name, self._name_of_values(list(part_vals or [])))
        return part if part is not None else self._up("get_partition", db_name, tbl_name, part_vals)

    def get_partition_by_name(self, db_name, tbl_name, part_name):
        part = self._one(db_name, tbl_name, lambda table: part_name)
        return part if part is not None else \
            self._up("get_partition_by_name", db_name, tbl_name, part_name)

    def get_partition_req(self, req):
        return t.GetPartitionResponse(
            partition=self.get_partition(req.dbName, req.tblName, list(req.partVals or [])))

    def get_partitions(self, db_name, tbl_name, max_parts):
        rows = self._select(db_name, tbl_name, limit=max_parts)
        if rows is None:
            return self._up("get_partitions", db_name, tbl_name, max_parts)
        return _converted.partitions(d for _, d in rows)

    def get_partitions_req(self, req):
        max_parts = -1 if req.maxParts is None else req.maxParts
        return t.PartitionsResponse(partitions=self.get_partitions(req.dbName, req.tblName, max_parts))

    def get_partition_names(self, db_name, tbl_name, max_parts):
        rows = self._select(db_name, tbl_name, limit=max_parts)
        if rows is None:
            return self._up("get_partition_names", db_name, tbl_name, max_parts)
        return [n for n, _ in rows]

    def get_partitions_ps(self, db_name, tbl_name, part_vals, max_parts):
        return self._ps("get_partitions_ps", _partitions_of, db_name, tbl_name, part_vals,
                        max_parts)

    def get_partition_names_ps(self, db_name, tbl_name, part_vals, max_parts):
        return self._ps("get_partition_names_ps", _names_of, db_name, tbl_name, part_vals,
                        max_parts)

    def get_partition_names_ps_req(self, req):
        max_parts = -1 if req.maxParts is None else req.maxParts
        return t.GetPartitionNamesPsResponse(names=self.get_partition_names_ps(
            req.dbName, req.tblName, list(req.partValues or []), max_parts))

    def get_partitions_with_auth(self, db_name, tbl_name, max_parts, user_name, group_names):
        rows = self._select(db_name, tbl_name, limit=max_parts, with_auth=True)
        if rows is None:
            return self._up("get_partitions_with_auth", db_name, tbl_name, max_parts, user_name,
                            group_names)
        return _converted.partitions(d for _, d in rows)

    def get_partitions_ps_with_auth(self, db_name, tbl_name, part_vals, max_parts, user_name,
                                    group_names):
        return self._ps("get_partitions_ps_with_auth", _partitions_of, db_name, tbl_name,
                        part_vals, max_parts, user_name, group_names)

    def get_partitions_ps_with_auth_req(self, req):
        max_parts = -1 if req.maxParts is None else req.maxParts
        if req.partVals:
            parts = self.get_partitions_ps_with_auth(req.dbName, req.tblName, list(req.partVals),
                                                     max_parts, req.userName, req.groupNames)
        else:
            parts = self.get_partitions_with_auth(req.dbName, req.tblName, max_parts,
                                                  req.userName, req.groupNames)
        return t.GetPartitionsPsWithAuthResponse(partitions=parts)

    def get_partitions_by_filter(self, db_name, tbl_name, filter, max_parts):
        rows = self._select(db_name, tbl_name, limit=max_parts, filter_text=filter or "")
        if rows is None:
            return self._up("get_partitions_by_filter", db_name, tbl_name, filter, max_parts)
        return _converted.partitions(d for _, d in rows)

    def get_num_partitions_by_filter(self, db_name, tbl_name, filter):
        rows = self._select(db_name, tbl_name, filter_text=filter or "")
        if rows is None:
            return self._up("get_num_partitions_by_filter", db_name, tbl_name, filter)
        return len(rows)

    def get_partitions_by_names(self, db_name, tbl_name, names):
        rows = self._select(db_name, tbl_name, part_names=list(names or []))
        if rows is None:
            return self._up("get_partitions_by_names", db_name, tbl_name, names)
        return _converted.partitions(d for _, d in rows)

    def get_partitions_by_names_req(self, req):
        if req.validWriteIdList:
            _, rows = self.ms.get_partitions_by_names(req.db_name, req.tbl_name, list(req.names or []),
                                                      valid_write_ids=req.validWriteIdList)
            parts = [from_doc(t.Partition, d) for _, d in rows]
        else:
            parts = self.get_partitions_by_names(req.db_name, req.tbl_name, list(req.names or []))
        return t.GetPartitionsByNamesResult(partitions=list(parts))

    def _parts_altered(self, db, name, parts) -> None:
        self._record("ALTER_PARTITION", db, name, self.ms.notifications.partitions_altered, db, name,
                     [to_doc(p) for p in parts or []])

    @staticmethod
    def _no_write_ids(parts):
        out = []
        for p in parts or []:
            if p is not None and p.writeId is not None:
                p = copy.copy(p)
                p.writeId = None
            out.append(p)
        return out

    def alter_partition(self, db_name, tbl_name, new_part):
        self._up("alter_partition", db_name, tbl_name, self._no_write_ids([new_part])[0])
        self._parts_altered(db_name, tbl_name, [new_part])

    def alter_partition_with_environment_context(self, db_name, tbl_name, new_part,
                                                 environment_context):
        self._up("alter_partition_with_environment_context", db_name, tbl_name,
                 self._no_write_ids([new_part])[0], environment_context)
        self._parts_altered(db_name, tbl_name, [new_part])

    def alter_partitions(self, db_name, tbl_name, new_parts):
        self._up("alter_partitions", db_name, tbl_name, self._no_write_ids(new_parts))
        self._parts_altered(db_name, tbl_name, new_parts)

    def alter_partitions_with_environment_context(self, db_name, tbl_name, new_parts,
                                                  environment_context):
        self._up("alter_partitions_with_environment_context", db_name, tbl_name,
                 self._no_write_ids(new_parts), environment_context)
        self._parts_altered(db_name, tbl_name, new_parts)

    def alter_partitions_req(self, req):
        self.alter_partitions_with_environment_context(req.dbName, req.tableName, req.partitions,
                                                       req.environmentContext)
        return t.AlterPartitionsResponse()

    def rename_partition(self, db_name, tbl_name, part_vals, new_part):
        self._up("rename_partition", db_name, tbl_name, part_vals, new_part)
        self._parts_altered(db_name, tbl_name, [new_part])

    def rename_partition_req(self, req):
        self.rename_partition(req.dbName, req.tableName, list(req.partVals or []), req.newPart)
        return t.RenamePartitionResponse()

    def _parts_dropped(self, db, name, values_list) -> None:
        self._record("DROP_PARTITION", db, name, self.ms.notifications.partitions_dropped, db, name,
                     [list(v) for v in values_list], self._table_doc(db, name))

    def drop_partition(self, db_name, tbl_name, part_vals, deleteData):
        result = self._up("drop_partition", db_name, tbl_name, part_vals, deleteData)
        self._parts_dropped(db_name, tbl_name, [part_vals or []])
        return result

    def drop_partition_with_environment_context(self, db_name, tbl_name, part_vals, deleteData,
                                                environment_context):
        result = self._up("drop_partition_with_environment_context", db_name, tbl_name, part_vals,
                          deleteData, environment_context)
        self._parts_dropped(db_name, tbl_name, [part_vals or []])
        return result

    def _values_of(self, db_name, tbl_name, part_name) -> list[str]:
        table = self._table_doc(db_name, tbl_name) or {}
        keys = [k["name"].lower() for k in table.get("partitionKeys") or []]
        try:
            return names.partition_values_from_name(keys, part_name)
        except Exception:
            return [part_name]

    def drop_partition_by_name(self, db_name, tbl_name, part_name, deleteData):
        result = self._up("drop_partition_by_name", db_name, tbl_name, part_name, deleteData)
        self._parts_dropped(db_name, tbl_name, [self._values_of(db_name, tbl_name, part_name)])
        return result

    def drop_partition_by_name_with_environment_context(self, db_name, tbl_name, part_name,
                                                        deleteData, environment_context):
        result = self._up("drop_partition_by_name_with_environment_context", db_name, tbl_name,
                          part_name, deleteData, environment_context)
        self._parts_dropped(db_name, tbl_name, [self._values_of(db_name, tbl_name, part_name)])
        return result

    def drop_partitions_req(self, req):
        forwarded = copy.copy(req)
        forwarded.needResult = True
        result = self._up("drop_partitions_req", forwarded)
        self._parts_dropped(req.dbName, req.tblName,
                            [p.values or [] for p in result.partitions or []])
        if req.needResult is False:
            return t.DropPartitionsResult()
        return result

    def exchange_partition(self, partitionSpecs, source_db, source_table_name, dest_db,
                           dest_table_name):
        result = self._up("exchange_partition", partitionSpecs, source_db, source_table_name,
                          dest_db, dest_table_name)
        self.ms.cache.invalidate(source_db, source_table_name)
        self.ms.cache.invalidate(dest_db, dest_table_name)
        return result

    def exchange_partitions(self, partitionSpecs, source_db, source_table_name, dest_db,
                            dest_table_name):
        result = self._up("exchange_partitions", partitionSpecs, source_db, source_table_name,
                          dest_db, dest_table_name)
        self.ms.cache.invalidate(source_db, source_table_name)
        self.ms.cache.invalidate(dest_db, dest_table_name)
        return result

    def set_aggr_stats_for(self, request):
        result = self._up("set_aggr_stats_for", request)
        for stats in request.colStats or []:
            desc = stats.statsDesc
            if desc is not None and desc.dbName and desc.tableName:
                self.ms.cache.invalidate(desc.dbName, desc.tableName)
        return result

    # ---------------------------------------------------------------- functions
    # Read through extension.UpstreamFunctions (one get_all_functions, TTL, dropped on any
    # function event); a function the snapshot does not have is asked upstream, so its
    # "does not exist" answer is the upstream's own.

    def _functions(self):
        return self.ms.cache.functions.snapshot() if self.ms.cache.enabled else None

    def get_functions(self, dbName, pattern):
        snap = None if (dbName or "").startswith("@") else self._functions()
        if snap is None:
            return self._up("get_functions", dbName, pattern)
        return snap.names(dbName, pattern)

    def get_function(self, dbName, funcName):
        snap = self._functions()
        doc = snap.get(dbName, funcName) if snap is not None else None
        if doc is None:
            return self._up("get_function", dbName, funcName)
        func = snap.memo.get(id(doc))
        if func is None:
            func = snap.memo[id(doc)] = from_doc(t.Function, doc)
        return func

    def get_all_functions(self):
        snap = self._functions()
        if snap is None:
            return self._up("get_all_functions")
        rsp = snap.memo.get("all")
        if rsp is None:
            rsp = snap.memo["all"] = t.GetAllFunctionsResponse(
                functions=None if snap.docs is None else [from_doc(t.Function, d) for d in snap.docs])
        return rsp

    def _function_changed(self, event_type: str, db, name, func) -> None:
        self.ms.cache.functions.invalidate()
        self._record(event_type, db, name, self.ms.notifications.function_changed, event_type,
                     db or "", name or "", to_doc(func) if func is not None else None, evict=False)

    def create_function(self, func):
        self._up("create_function", func)
        self._function_changed("CREATE_FUNCTION", func.dbName, func.functionName, func)

    def alter_function(self, dbName, funcName, newFunc):
        self._up("alter_function", dbName, funcName, newFunc)
        self._function_changed("ALTER_FUNCTION", dbName, funcName, newFunc)

    def drop_function(self, dbName, funcName):
        self._up("drop_function", dbName, funcName)
        self._function_changed("DROP_FUNCTION", dbName, funcName, None)

    # ---------------------------------------------------------------- Hive 3+ constraints

    def get_unique_constraints(self, request):
        return self._up_or("get_unique_constraints", (request,),
                           lambda: t.UniqueConstraintsResponse(uniqueConstraints=[]))

    def get_not_null_constraints(self, request):
        return self._up_or("get_not_null_constraints", (request,),
                           lambda: t.NotNullConstraintsResponse(notNullConstraints=[]))

    def get_default_constraints(self, request):
        return self._up_or("get_default_constraints", (request,),
                           lambda: t.DefaultConstraintsResponse(defaultConstraints=[]))

    def get_check_constraints(self, request):
        return self._up_or("get_check_constraints", (request,),
                           lambda: t.CheckConstraintsResponse(checkConstraints=[]))
