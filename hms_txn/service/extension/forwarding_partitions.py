"""Extension mode's partition calls (see ``service.extension.forwarding`` for the rules): reads of a
non-transactional table's partitions from its cached listing where they can be answered
exactly, everything else forwarded; changes forwarded, then logged and evicted."""

from __future__ import annotations

import copy

from hms_txn.domain.model import names
from hms_txn.domain.extension.upstream_catalog import UpstreamAnswer
from hms_txn.service.catalog.catalog import converted
from hms_txn.service.extension.forwarder import Forwarder
from hms_txn.service.extension.forwarding_table_form import sent_partitions
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


def _partitions_of(rows):
    return converted.partitions(d for _, d in rows)


def _names_of(rows):
    return [n for n, _ in rows]


class PartitionForwarding:
    def __init__(self, fwd: Forwarder):
        self.fwd = fwd

    # ---------------------------------------------------------------- partitions

    def _table(self, db: str, name: str) -> dict | None:
        """The table for a partition event (its partition keys and object); None, after
        evicting it, when it cannot be read (the change is then not logged)."""
        table = self.fwd.table_doc(db, name) or self.fwd.fetch_table(db, name)
        if table is None:
            self.fwd.cache.invalidate(db, name)
        return table

    def _parts_added(self, db: str, name: str, parts) -> None:
        table = self._table(db, name)
        if table is not None:
            self.fwd.record("ADD_PARTITION", db, name, self.fwd.events.partitions_added, table,
                            [to_doc(p) for p in parts])

    def _sent(self, db: str, name: str, parts: list) -> list:
        """``parts`` as a client sent them, without the plain form (``sent_partitions``)."""
        return sent_partitions(parts, lambda: self._table(db, name))

    def add_partition(self, new_part):
        new_part, = self._sent(new_part.dbName, new_part.tableName, [new_part])
        part = self.fwd.up("add_partition", new_part)
        self._parts_added(new_part.dbName, new_part.tableName, [part])
        return part

    def add_partition_with_environment_context(self, new_part, environment_context):
        new_part, = self._sent(new_part.dbName, new_part.tableName, [new_part])
        part = self.fwd.up("add_partition_with_environment_context", new_part, environment_context)
        self._parts_added(new_part.dbName, new_part.tableName, [part])
        return part

    def add_partitions(self, new_parts):
        if not new_parts:
            return 0
        first = new_parts[0]
        new_parts = self._sent(first.dbName, first.tableName, list(new_parts))
        result = self.fwd.up("add_partitions_req", t.AddPartitionsRequest(
            dbName=first.dbName, tblName=first.tableName, parts=new_parts, ifNotExists=False,
            needResult=True))
        added = result.partitions or []
        self._parts_added(first.dbName, first.tableName, added)
        return len(added)

    def add_partitions_req(self, request):
        forwarded = copy.copy(request)
        forwarded.parts = self._sent(request.dbName, request.tblName, list(request.parts or []))
        forwarded.needResult = True
        forwarded.validWriteIdList = None
        result = self.fwd.up("add_partitions_req", forwarded)
        self._parts_added(request.dbName, request.tblName, result.partitions or [])
        if request.needResult is False:
            return t.AddPartitionsResult()
        return result

    def add_partitions_pspec(self, new_parts):
        count = self.fwd.up("add_partitions_pspec", new_parts)
        for spec in new_parts or []:
            self.fwd.cache.invalidate(spec.dbName, spec.tableName)
        return count

    def append_partition(self, db_name, tbl_name, part_vals):
        part = self.fwd.up("append_partition", db_name, tbl_name, part_vals)
        self._parts_added(db_name, tbl_name, [part])
        return part

    def append_partition_with_environment_context(self, db_name, tbl_name, part_vals,
                                                  environment_context):
        part = self.fwd.up("append_partition_with_environment_context", db_name, tbl_name,
                        part_vals, environment_context)
        self._parts_added(db_name, tbl_name, [part])
        return part

    def append_partition_by_name(self, db_name, tbl_name, part_name):
        part = self.fwd.up("append_partition_by_name", db_name, tbl_name, part_name)
        self._parts_added(db_name, tbl_name, [part])
        return part

    def append_partition_by_name_with_environment_context(self, db_name, tbl_name, part_name,
                                                          environment_context):
        part = self.fwd.up("append_partition_by_name_with_environment_context", db_name, tbl_name,
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
        cache = self.fwd.cache
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
                             with_auth=bool(auth), memo=(key, lambda: self.fwd.up(method, *args)))
        if found is None:
            return self.fwd.up(method, *args)
        if isinstance(found, UpstreamAnswer):
            return found.value
        return convert(found)

    def _one(self, db, tbl, name_of):
        """A partition from the cache (None: ask the upstream, for its own answer)."""
        cache = self.fwd.cache
        if not cache.enabled:
            return None
        found = cache.partitions(db, tbl)
        if found is None:
            return None
        table, listing = found
        name = name_of(table)
        doc = listing.index.get(name) if name is not None else None
        return None if doc is None else converted.partition(doc)

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
        return part if part is not None else self.fwd.up("get_partition", db_name, tbl_name, part_vals)

    def get_partition_by_name(self, db_name, tbl_name, part_name):
        part = self._one(db_name, tbl_name, lambda table: part_name)
        return part if part is not None else \
            self.fwd.up("get_partition_by_name", db_name, tbl_name, part_name)

    def get_partition_req(self, req):
        return t.GetPartitionResponse(
            partition=self.get_partition(req.dbName, req.tblName, list(req.partVals or [])))

    def get_partitions(self, db_name, tbl_name, max_parts):
        rows = self._select(db_name, tbl_name, limit=max_parts)
        if rows is None:
            return self.fwd.up("get_partitions", db_name, tbl_name, max_parts)
        return converted.partitions(d for _, d in rows)

    def get_partitions_req(self, req):
        max_parts = -1 if req.maxParts is None else req.maxParts
        return t.PartitionsResponse(partitions=self.get_partitions(req.dbName, req.tblName, max_parts))

    def get_partition_names(self, db_name, tbl_name, max_parts):
        rows = self._select(db_name, tbl_name, limit=max_parts)
        if rows is None:
            return self.fwd.up("get_partition_names", db_name, tbl_name, max_parts)
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
            return self.fwd.up("get_partitions_with_auth", db_name, tbl_name, max_parts, user_name,
                            group_names)
        return converted.partitions(d for _, d in rows)

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
            return self.fwd.up("get_partitions_by_filter", db_name, tbl_name, filter, max_parts)
        return converted.partitions(d for _, d in rows)

    def get_num_partitions_by_filter(self, db_name, tbl_name, filter):
        rows = self._select(db_name, tbl_name, filter_text=filter or "")
        if rows is None:
            return self.fwd.up("get_num_partitions_by_filter", db_name, tbl_name, filter)
        return len(rows)

    def get_partitions_by_names(self, db_name, tbl_name, names):
        rows = self._select(db_name, tbl_name, part_names=list(names or []))
        if rows is None:
            return self.fwd.up("get_partitions_by_names", db_name, tbl_name, names)
        return converted.partitions(d for _, d in rows)

    def get_partitions_by_names_req(self, req):
        if req.validWriteIdList:
            _, rows = self.fwd.cache.get_partitions_by_names(req.db_name, req.tbl_name, list(req.names or []),
                                                      valid_write_ids=req.validWriteIdList)
            parts = [from_doc(t.Partition, d) for _, d in rows]
        else:
            parts = self.get_partitions_by_names(req.db_name, req.tbl_name, list(req.names or []))
        return t.GetPartitionsByNamesResult(partitions=list(parts))

    def _before(self, db, name, values_list) -> list[dict | None]:
        """The partitions about to be altered, as the upstream has them."""
        table = self.fwd.table_doc(db, name) or self.fwd.fetch_table(db, name)
        return self.fwd.fetch_partitions(table, values_list) if table else [None] * len(values_list)

    def _parts_altered(self, db, name, before, parts) -> None:
        """One ALTER_PARTITION per partition, with its object before (``before``) and
        after (read back; the request's when it cannot be)."""
        table = self._table(db, name)
        if table is None:
            return
        sent = [to_doc(p) for p in parts or []]
        stored = self.fwd.fetch_partitions(table, [p.get("values") or [] for p in sent])
        after = [s or p for s, p in zip(stored, sent)]
        self.fwd.record("ALTER_PARTITION", db, name, self.fwd.events.partitions_altered, table,
                        [b or a for b, a in zip(before, after)], after)

    @staticmethod
    def _no_write_ids(parts):
        out = []
        for p in parts or []:
            if p is not None and p.writeId is not None:
                p = copy.copy(p)
                p.writeId = None
            out.append(p)
        return out

    def _alter(self, method: str, db_name, tbl_name, parts: list, *rest) -> None:
        """Forward an alter of ``parts`` (one partition's methods send ``parts[0]``)."""
        before = self._before(db_name, tbl_name, [p.values or [] for p in parts])
        sent = self._no_write_ids(parts)
        self.fwd.up(method, db_name, tbl_name, sent if method.startswith("alter_partitions")
                    else sent[0], *rest)
        self._parts_altered(db_name, tbl_name, before, parts)

    def alter_partition(self, db_name, tbl_name, new_part):
        self._alter("alter_partition", db_name, tbl_name, [new_part])

    def alter_partition_with_environment_context(self, db_name, tbl_name, new_part,
                                                 environment_context):
        self._alter("alter_partition_with_environment_context", db_name, tbl_name, [new_part],
                    environment_context)

    def alter_partitions(self, db_name, tbl_name, new_parts):
        self._alter("alter_partitions", db_name, tbl_name, list(new_parts or []))

    def alter_partitions_with_environment_context(self, db_name, tbl_name, new_parts,
                                                  environment_context):
        self._alter("alter_partitions_with_environment_context", db_name, tbl_name,
                    list(new_parts or []), environment_context)

    def alter_partitions_req(self, req):
        self.alter_partitions_with_environment_context(req.dbName, req.tableName, req.partitions,
                                                       req.environmentContext)
        return t.AlterPartitionsResponse()

    def rename_partition(self, db_name, tbl_name, part_vals, new_part):
        before = self._before(db_name, tbl_name, [list(part_vals or [])])
        self.fwd.up("rename_partition", db_name, tbl_name, part_vals, new_part)
        self._parts_altered(db_name, tbl_name, before, [new_part])

    def rename_partition_req(self, req):
        self.rename_partition(req.dbName, req.tableName, list(req.partVals or []), req.newPart)
        return t.RenamePartitionResponse()

    def _parts_dropped(self, db, name, values_list) -> None:
        table = self._table(db, name)
        if table is not None:
            self.fwd.record("DROP_PARTITION", db, name, self.fwd.events.partitions_dropped,
                            table, [list(v) for v in values_list])

    def drop_partition(self, db_name, tbl_name, part_vals, deleteData):
        result = self.fwd.up("drop_partition", db_name, tbl_name, part_vals, deleteData)
        self._parts_dropped(db_name, tbl_name, [part_vals or []])
        return result

    def drop_partition_with_environment_context(self, db_name, tbl_name, part_vals, deleteData,
                                                environment_context):
        result = self.fwd.up("drop_partition_with_environment_context", db_name, tbl_name, part_vals,
                          deleteData, environment_context)
        self._parts_dropped(db_name, tbl_name, [part_vals or []])
        return result

    def _values_of(self, db_name, tbl_name, part_name) -> list[str]:
        table = self.fwd.table_doc(db_name, tbl_name) or {}
        keys = [k["name"].lower() for k in table.get("partitionKeys") or []]
        try:
            return names.partition_values_from_name(keys, part_name)
        except Exception:
            return [part_name]

    def drop_partition_by_name(self, db_name, tbl_name, part_name, deleteData):
        result = self.fwd.up("drop_partition_by_name", db_name, tbl_name, part_name, deleteData)
        self._parts_dropped(db_name, tbl_name, [self._values_of(db_name, tbl_name, part_name)])
        return result

    def drop_partition_by_name_with_environment_context(self, db_name, tbl_name, part_name,
                                                        deleteData, environment_context):
        result = self.fwd.up("drop_partition_by_name_with_environment_context", db_name, tbl_name,
                          part_name, deleteData, environment_context)
        self._parts_dropped(db_name, tbl_name, [self._values_of(db_name, tbl_name, part_name)])
        return result

    def drop_partitions_req(self, req):
        forwarded = copy.copy(req)
        forwarded.needResult = True
        result = self.fwd.up("drop_partitions_req", forwarded)
        self._parts_dropped(req.dbName, req.tblName,
                            [p.values or [] for p in result.partitions or []])
        if req.needResult is False:
            return t.DropPartitionsResult()
        return result

    def exchange_partition(self, partitionSpecs, source_db, source_table_name, dest_db,
                           dest_table_name):
        result = self.fwd.up("exchange_partition", partitionSpecs, source_db, source_table_name,
                          dest_db, dest_table_name)
        self.fwd.cache.invalidate(source_db, source_table_name)
        self.fwd.cache.invalidate(dest_db, dest_table_name)
        return result

    def exchange_partitions(self, partitionSpecs, source_db, source_table_name, dest_db,
                            dest_table_name):
        result = self.fwd.up("exchange_partitions", partitionSpecs, source_db, source_table_name,
                          dest_db, dest_table_name)
        self.fwd.cache.invalidate(source_db, source_table_name)
        self.fwd.cache.invalidate(dest_db, dest_table_name)
        return result

