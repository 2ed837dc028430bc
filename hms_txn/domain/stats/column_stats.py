"""Stored column statistics: the rows, the reads, the deletes, and what an ALTER does to them.

Statistics are kept per table (or partition), engine and column (``store.schema``'s
``table_column_stats`` / ``partition_column_stats``, Hive's TAB_COL_STATS and
PART_COL_STATS) as ColumnStatisticsObj documents: ``{"colName", "colType", "statsData":
{"longStats": {...}}}``. They go with their table or partition (ON DELETE CASCADE) and
follow it through renames (rows are keyed by id). The writes, with Hive's rules and events,
are in ``stats_writes``; the transactional rules in ``stats_state``.

Reads answer as Hive 4's ObjectStore does with its defaults: statistics of the engine asked
for (``hive`` when a client names none, as Hive 2/3 clients and Trino do), without the
stored ``bitVectors`` and ``histogram`` (``metastore.stats.fetch.bitvector`` and
``.kll`` are off), ``lastAnalyzed`` the oldest of the columns returned.
"""

from __future__ import annotations

import json
from typing import Iterable, Sequence

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import Internal, InvalidObject, NoSuchObject
from hms_txn.domain.stats import stats_state
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import Doc, dumps, is_transactional, partition_keys, table_row
from hms_txn.domain.events.event_messages import (MessageContext, delete_partition_column_stats,
                                                  delete_table_column_stats)
from hms_txn.domain.events.notifications import append
from hms_txn.domain.stats.stats_aggregation import aggregate, kind_of
from hms_txn.store.schema import partition_column_stats, partitions, table_column_stats, tbls

DEFAULT_ENGINE = "hive"       # Hive's Constants.HIVE_ENGINE
CATALOG = "hive"
_NOT_FETCHED = ("bitVectors", "histogram")

_tcs, _pcs = table_column_stats.c, partition_column_stats.c


def engine_of(engine: str | None) -> str:
    return engine or DEFAULT_ENGINE


def qualified(db: str, table: str) -> str:
    """``TableName.getQualified``: ``hive.db.t``."""
    return f"{CATALOG}.{db}.{table}"


def table_for_stats(conn: Connection, db: str, table: str, *,
                    for_update: bool = False) -> tuple[int, Doc]:
    """The table the statistics belong to; Hive's ObjectStore answer when there is none."""
    row = table_row(conn, names.lower(db), names.lower(table), for_update=for_update)
    if row is None:
        raise NoSuchObject("Specified catalog.database.table does not exist : "
                           + qualified(names.lower(db), names.lower(table)))
    return row.tbl_id, json.loads(row.doc)


def require_table_object(conn: Connection, db: str, table: str, *,
                         for_update: bool = False) -> tuple[int, Doc]:
    """HMSHandler's ``getTable``: InvalidObjectException when the table does not exist."""
    row = table_row(conn, names.lower(db), names.lower(table), for_update=for_update)
    if row is None:
        raise InvalidObject(f"{qualified(names.lower(db), names.lower(table))} table not found")
    return row.tbl_id, json.loads(row.doc)


def partition_values(table: Doc, part_name: str | None) -> list[str]:
    """``getPartValsFromName``: the values of a ``k=v/...`` name, key by key of the table;
    a key the name lacks is refused as Hive does."""
    spec = dict(names.split_partition_name(part_name)) if part_name else {}
    values = []
    for key in partition_keys(table):
        if key not in spec:
            raise InvalidObject(f"incomplete partition name - missing {key}")
        values.append(spec[key])
    return values


def canonical_part_name(part_name: str) -> str:
    """``lowerCaseConvertPartName``: keys lower-cased, values as they are."""
    pairs = names.split_partition_name(part_name) if part_name else []
    return names.make_partition_name([k for k, _ in pairs], [v for _, v in pairs])


def partition_rows(conn: Connection, tbl_id: int, part_names: Iterable[str] | None = None, *,
                   for_update: bool = False) -> dict[str, tuple[int, Doc]]:
    """name -> (part_id, document) of a table's partitions (those named, if given)."""
    query = select(partitions.c.part_id, partitions.c.part_name, partitions.c.doc).where(
        partitions.c.tbl_id == tbl_id)
    if part_names is not None:
        wanted = list(dict.fromkeys(part_names))
        if not wanted:
            return {}
        query = query.where(partitions.c.part_name.in_(wanted))
    if for_update:
        query = query.with_for_update()
    rows = conn.execute(query.order_by(partitions.c.part_name)).all()
    return {r.part_name: (r.part_id, json.loads(r.doc)) for r in rows}


def save_table(conn: Connection, tbl_id: int, doc: Doc) -> None:
    conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(doc=dumps(doc)))


def save_partition(conn: Connection, part_id: int, doc: Doc) -> None:
    conn.execute(update(partitions).where(partitions.c.part_id == part_id).values(doc=dumps(doc)))


# ------------------------------------------------------------------------------ rows

def _owner(table_level: bool):
    return (table_column_stats, _tcs.tbl_id) if table_level else (partition_column_stats, _pcs.part_id)


def stored(conn: Connection, table_level: bool, owner_ids: Sequence[int],
           columns: Sequence[str] | None, engine: str | None) -> list[tuple[int, Doc, int]]:
    """(owner id, ColumnStatisticsObj, lastAnalyzed) of the rows asked for (all engines
    when ``engine`` is None), full documents (sketches included)."""
    tab, owner = _owner(table_level)
    if not owner_ids or (columns is not None and not columns):
        return []
    query = select(owner, tab.c.col_name, tab.c.col_type, tab.c.last_analyzed, tab.c.data).where(
        owner.in_(list(dict.fromkeys(owner_ids))))
    if columns is not None:
        query = query.where(tab.c.col_name.in_(list(dict.fromkeys(columns))))
    if engine is not None:
        query = query.where(tab.c.engine == engine)
    return [(r[0], {"colName": r.col_name, "colType": r.col_type,
                    "statsData": json.loads(r.data)}, r.last_analyzed)
            for r in conn.execute(query)]


def write_rows(conn: Connection, table_level: bool, owner_id: int, engine: str,
               objs: Sequence[Doc], last_analyzed: int, *, overlay: bool) -> None:
    """Store statistics objects, replacing a column's row. With ``overlay`` (Hive's
    ``setFieldsIntoOldStats``, the single-object writes) a field the new statistics leave
    unset keeps its stored value when both are of the same kind."""
    tab, owner = _owner(table_level)
    old = {o["colName"]: o for _, o, _ in stored(conn, table_level, [owner_id],
                                                  [o["colName"] for o in objs], engine)}
    for obj in objs:
        data = obj["statsData"]
        before = old.get(obj["colName"])
        kind = kind_of(data)
        if overlay and before is not None and kind is not None and kind == kind_of(before["statsData"]):
            data = {kind: {**before["statsData"][kind], **data[kind]}}
        values = {"col_type": obj["colType"], "last_analyzed": last_analyzed, "data": dumps(data)}
        key = and_(owner == owner_id, tab.c.engine == engine, tab.c.col_name == obj["colName"])
        if before is not None:
            conn.execute(update(tab).where(key).values(**values))
        else:
            conn.execute(insert(tab).values({owner.name: owner_id, "engine": engine,
                                             "col_name": obj["colName"], **values}))


def delete_rows(conn: Connection, table_level: bool, owner_ids: Sequence[int],
                columns: Sequence[str] | None, engine: str | None = None) -> int:
    tab, owner = _owner(table_level)
    if not owner_ids:
        return 0
    query = delete(tab).where(owner.in_(list(owner_ids)))
    if columns is not None:
        query = query.where(tab.c.col_name.in_(list(columns)))
    if engine is not None:
        query = query.where(tab.c.engine == engine)
    return conn.execute(query).rowcount


def _for_reader(obj: Doc) -> Doc:
    kind = kind_of(obj["statsData"])
    if kind is None:
        return obj
    data = {k: v for k, v in obj["statsData"][kind].items() if k not in _NOT_FETCHED}
    return {**obj, "statsData": {kind: data}}


def _in_order(objs: Iterable[tuple[Doc, int]], columns: Sequence[str]) -> tuple[list[Doc], int | None]:
    by_name = {o["colName"]: (o, at) for o, at in objs}
    found = [by_name[c] for c in dict.fromkeys(columns) if c in by_name]
    analyzed = min((at for _, at in found), default=None)
    return [_for_reader(o) for o, _ in found], analyzed


# ------------------------------------------------------------------------------ reads

def table_stats(conn: Connection, db: str, table: str, columns: Sequence[str],
                engine: str | None, valid_write_ids: str | None) -> Doc | None:
    """``getTableColumnStatistics``: the table's ColumnStatistics for ``columns`` (None
    when it has none), ``isStatsCompliant`` set when a ValidWriteIdList was given."""
    tbl_id, doc = table_for_stats(conn, db, table)
    compliant = stats_state.reader_compliant(doc, doc.get("parameters"),
                                             stats_state.write_id_of(doc), valid_write_ids)
    rows = stored(conn, True, [tbl_id], [c.lower() for c in columns], engine_of(engine))
    objs, analyzed = _in_order(((o, at) for _, o, at in rows), [c.lower() for c in columns])
    if not objs:
        return None
    result = {"statsDesc": {"isTblLevel": True, "dbName": doc["dbName"],
                            "tableName": doc["tableName"], "lastAnalyzed": analyzed,
                            "catName": CATALOG},
              "statsObj": objs, "engine": engine_of(engine)}
    if compliant is not None:
        result["isStatsCompliant"] = compliant
    return result


def partition_stats(conn: Connection, db: str, table: str, part_names: Sequence[str],
                    columns: Sequence[str], engine: str | None,
                    valid_write_ids: str | None) -> list[Doc]:
    """``getPartitionColumnStatistics``: one ColumnStatistics per partition that has
    statistics for some of ``columns``, in partition-name order."""
    if not part_names or not columns:
        return []
    tbl_id, doc = table_for_stats(conn, db, table)
    cols = [c.lower() for c in columns]
    parts = partition_rows(conn, tbl_id, part_names)
    by_id = {pid: (name, pdoc) for name, (pid, pdoc) in parts.items()}
    grouped: dict[int, list[tuple[Doc, int]]] = {}
    for pid, obj, at in stored(conn, False, list(by_id), cols, engine_of(engine)):
        grouped.setdefault(pid, []).append((obj, at))
    out = []
    for pid, found in sorted(grouped.items(), key=lambda item: by_id[item[0]][0]):
        name, pdoc = by_id[pid]
        objs, analyzed = _in_order(found, cols)
        stats = {"statsDesc": {"isTblLevel": False, "dbName": doc["dbName"],
                               "tableName": doc["tableName"], "partName": name,
                               "lastAnalyzed": analyzed, "catName": CATALOG},
                 "statsObj": objs, "engine": engine_of(engine)}
        if valid_write_ids is not None:
            stats["isStatsCompliant"] = stats_state.current_stats_valid(
                pdoc.get("parameters"), stats_state.write_id_of(pdoc), valid_write_ids, False)
        out.append(stats)
    return out


def aggregate_stats(conn: Connection, db: str, table: str, part_names: Sequence[str],
                    columns: Sequence[str], engine: str | None,
                    valid_write_ids: str | None) -> tuple[list[Doc], int] | None:
    """``get_aggr_stats_for``: (aggregated objects, partsFound); None, as Hive answers,
    when a ValidWriteIdList was given and some partition's statistics are not valid for it
    (or no partition was named)."""
    tbl_id, doc = table_for_stats(conn, db, table)
    cols = [c.lower() for c in columns]
    if valid_write_ids is not None:
        if not part_names:
            return None
        for _, pdoc in partition_rows(conn, tbl_id, part_names).values():
            if not stats_state.current_stats_valid(pdoc.get("parameters"),
                                                   stats_state.write_id_of(pdoc),
                                                   valid_write_ids, False):
                return None
    if not part_names or not cols:
        return [], 0
    parts = partition_rows(conn, tbl_id, part_names)
    name_of = {pid: name for name, (pid, _) in parts.items()}
    rows = stored(conn, False, list(name_of), cols, engine_of(engine))
    return aggregate(part_names, cols, ((name_of[pid], obj) for pid, obj, _ in rows))


# ------------------------------------------------------------------------------ deletes

def _refuse_transactional(table: Doc) -> None:
    if is_transactional(table):
        raise Internal("Cannot delete stats via this API for a transactional table")


def delete_table_stats(conn: Connection, ctx: MessageContext, db: str, table: str,
                       column: str | None, engine: str | None) -> bool:
    """``delete_table_column_statistics``: one column (or all: ``column`` None) of one
    engine (or all: None), the column dropped from ``COLUMN_STATS_ACCURATE``, and the
    DELETE_TBL_COL_STAT_EVENT."""
    db, table = names.lower(db), names.lower(table)
    column = column.lower() if column is not None else None
    row = table_row(conn, db, table, for_update=True)
    if row is None:
        raise NoSuchObject(f"Table {qualified(db, table)}  for which stats deletion is "
                           f"requested doesn't exist")
    doc = json.loads(row.doc)
    _refuse_transactional(doc)
    deleted = delete_rows(conn, True, [row.tbl_id], None if column is None else [column], engine)
    if column is not None and not deleted:
        raise NoSuchObject(f"Column stats doesn't exist for table={qualified(db, table)} "
                           f"col={column}")
    params = doc.setdefault("parameters", {})
    stats_state.remove_columns(params, None if column is None else [column])
    save_table(conn, row.tbl_id, doc)
    append(conn, ctx.message_format, delete_table_column_stats(ctx, db, table, column))
    return True


def delete_partition_stats(conn: Connection, ctx: MessageContext, db: str, table: str,
                           part_name: str, column: str | None, engine: str | None) -> bool:
    """``delete_partition_column_statistics``, as for the table (the partition named
    with its keys in any case)."""
    db, table = names.lower(db), names.lower(table)
    column = column.lower() if column is not None else None
    tbl_id, doc = require_table_object(conn, db, table, for_update=True)
    _refuse_transactional(doc)
    name = canonical_part_name(part_name)
    values = partition_values(doc, name)
    part = partition_rows(conn, tbl_id, [name], for_update=True).get(name)
    if part is None:
        raise NoSuchObject(f"Partition {name} for which stats deletion is requested doesn't exist")
    part_id, pdoc = part
    deleted = delete_rows(conn, False, [part_id], None if column is None else [column], engine)
    if column is not None and not deleted:
        raise NoSuchObject(f"Column stats doesn't exist for table={qualified(db, table)} "
                           f"partition={name} col={column}")
    stats_state.remove_columns(pdoc.setdefault("parameters", {}), None if column is None else [column])
    save_partition(conn, part_id, pdoc)
    append(conn, ctx.message_format,
           delete_partition_column_stats(ctx, db, table, name, values, column))
    return True




# ------------------------------------------------------------------------------ alters

def _kept(cols: Iterable[Doc] | None) -> set[tuple[str, str]]:
    return {(c["name"].lower(), (c.get("type") or "").lower()) for c in cols or []}


def _prune(conn: Connection, table_level: bool, owner_id: int, params: dict,
           new_cols: Iterable[Doc] | None) -> None:
    """Drop the statistics of columns an ALTER removed, renamed or retyped (Hive's
    ``alterTableUpdateTableColumnStats``: kept only where name and type still match), and
    their ``COLUMN_STATS_ACCURATE`` entries."""
    keep = _kept(new_cols)
    gone = sorted({o["colName"] for _, o, _ in stored(conn, table_level, [owner_id], None, None)
                   if (o["colName"].lower(), o["colType"].lower()) not in keep})
    if gone:
        delete_rows(conn, table_level, [owner_id], gone)
        stats_state.remove_columns(params, gone)


def _transactional_alter(label: str, old: Doc, new: Doc, write_id: int,
                         valid_write_ids: str | None) -> None:
    """``ObjectStore.alterTable``/``alterPartition`` for a transactional table: refuse a
    stats change without write state; with it, drop ``COLUMN_STATS_ACCURATE`` when the
    stored stats come from a write the writer cannot see, and take the writer's id."""
    params = new.setdefault("parameters", {})
    message = stats_state.verify_change(label, old.get("parameters"), params, write_id,
                                        valid_write_ids, False)
    if message:
        raise Internal(message)
    new["writeId"] = stats_state.write_id_of(old)
    if valid_write_ids is not None and write_id > 0:
        if not stats_state.current_stats_valid(params, stats_state.write_id_of(old),
                                               valid_write_ids, True):
            stats_state.set_basic(params, False)
        new["writeId"] = write_id


def table_altered(conn: Connection, tbl_id: int, old: Doc, new: Doc,
                  valid_write_ids: str | None, *, cascade: bool = False) -> None:
    """What an ALTER TABLE does to statistics (``new`` is changed in place): statistics of
    changed columns dropped (with ``cascade`` the partitions' too), then the
    transactional rules (not for a table becoming transactional, as in Hive)."""
    params = new.setdefault("parameters", {})
    _prune(conn, True, tbl_id, params, (new.get("sd") or {}).get("cols"))
    if cascade:
        for pid, pdoc in partition_rows(conn, tbl_id).values():
            pparams = pdoc.setdefault("parameters", {})
            before = dict(pparams)
            _prune(conn, False, pid, pparams, (new.get("sd") or {}).get("cols"))
            if pparams != before:
                save_partition(conn, pid, pdoc)
    if is_transactional(new) and is_transactional(old):
        _transactional_alter(f"{new['dbName']}.{new['tableName']}", old, new,
                             stats_state.write_id_of(new), valid_write_ids)


def partition_altered(conn: Connection, table: Doc, part_id: int, old: Doc, new: Doc,
                      valid_write_ids: str | None, write_id: int = -1) -> None:
    """What altering a partition does to its statistics (``new`` changed in place);
    ``write_id`` > 0 is the request's, which Hive gives every partition altered."""
    _prune(conn, False, part_id, new.setdefault("parameters", {}),
           (new.get("sd") or {}).get("cols"))
    if is_transactional(table):
        if write_id > 0:
            new["writeId"] = write_id
        _transactional_alter(f"{table['dbName']}.{table['tableName']}", old, new,
                             stats_state.write_id_of(new), valid_write_ids)
