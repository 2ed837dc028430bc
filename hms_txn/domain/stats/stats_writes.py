"""Writing column statistics, as Hive 4's metastore does, with its events.

Three writers, each Hive's own:

* ``write_table``: ``ObjectStore.updateTableColumnStatistics`` (the table's columns are
  checked; a column's stored fields the new statistics leave unset are kept);
* ``write_partition``: ``ObjectStore.updatePartitionColumnStatistics`` (the partition must
  exist; a column unknown to it is accepted);
* ``write_partitions``: the batch Hive's ``set_aggr_stats_for`` uses with direct SQL (its
  default): partitions that do not exist are skipped, a partition without
  ``COLUMN_STATS_ACCURATE`` starts from ``TRUE`` (so its basic stats count as accurate),
  failures are reported as "Unable to update Column stats for ...", and the event's
  parameters are the ``COLUMN_STATS_ACCURATE`` entry alone.

Each lists the columns in ``COLUMN_STATS_ACCURATE`` and, for a transactional table, applies
``stats_state``'s rules: a change without write state is refused, stats replacing ones of
a write the writer cannot see lose their accuracy, and the writer's id becomes the table's
or partition's ``writeId``. ``set_aggr`` is ``set_aggr_stats_for`` with and without
``needMerge``: merging keeps only the columns ``COLUMN_STATS_ACCURATE`` lists and folds the
stored statistics in (``stats_aggregation.merge_into``); stored statistics the writer's
snapshot cannot use invalidate everything instead.

Statistics documents come in as ColumnStatistics documents (``statsDesc``, ``statsObj``,
``engine``) and are normalized first, as HMSHandler does: names lower-cased,
``lastAnalyzed`` now.
"""

from __future__ import annotations

import copy
from typing import Sequence

from hms_txn.common.errors import Internal, InvalidInput, MetastoreError, NoSuchObject
from hms_txn.domain.stats import stats_state
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import Doc, is_true, is_transactional, now_s
from hms_txn.domain.stats.column_stats import (
    CATALOG, engine_of, partition_rows, partition_stats, partition_values,
    require_table_object, save_partition, save_table, table_for_stats, table_stats, write_rows)
from hms_txn.domain.events.event_messages import (
    MessageContext, alter_partition, alter_table, update_partition_column_stats,
    update_table_column_stats)
from hms_txn.domain.events.notifications import append
from hms_txn.domain.stats.stats_aggregation import kind_of, merge_into

ACCURATE = stats_state.ACCURATE


def normalize(stats: Doc, engine: str | None = None) -> Doc:
    """``normalizeColStatsInput``: a copy with lower-case names and ``lastAnalyzed`` now.
    Statistics without a table, or a column without a name, type or statistics (required
    fields Hive's own code fails on), are refused."""
    out = copy.deepcopy(stats)
    desc = out.get("statsDesc") or {}
    if not desc.get("dbName") or not desc.get("tableName"):
        raise InvalidInput("column statistics name no table (statsDesc.dbName and tableName "
                           "are required)")
    desc["catName"] = (desc.get("catName") or CATALOG).lower()
    desc["dbName"] = names.lower(desc["dbName"])
    desc["tableName"] = names.lower(desc["tableName"])
    desc["lastAnalyzed"] = now_s()
    out["statsDesc"] = desc
    for obj in out.setdefault("statsObj", []):
        if not obj.get("colName") or not obj.get("colType") or kind_of(obj.get("statsData")) is None:
            raise InvalidInput(f"column statistics of {desc['dbName']}.{desc['tableName']}: "
                               f"every object needs colName, colType and statsData "
                               f"(got {obj.get('colName')!r})")
        obj["colName"] = obj["colName"].lower()
        obj["colType"] = obj["colType"].lower()
    out["engine"] = engine_of(out.get("engine") or engine)
    return out


def _columns(stats: Doc) -> list[str]:
    return [o["colName"] for o in stats["statsObj"]]


def _is_acid(table: Doc) -> bool:
    """``TxnUtils.isAcidTable``: transactional and not insert-only."""
    props = str((table.get("parameters") or {}).get("transactional_properties", "")).lower()
    return is_transactional(table) and props != "insert_only"


def _stored_stats_parameters(table: Doc, obj: Doc, stats: Doc, write_id: int,
                             valid_write_ids: str | None) -> dict:
    """``obj``'s (the table's or one of its partitions') parameters once ``stats`` are
    stored, set on ``obj``: the columns marked in COLUMN_STATS_ACCURATE and, for a
    transactional table, Hive's checks (``verifyStatsChangeCtx``; basic statistics marked
    inaccurate when the current ones are not valid for the writer) and the writer's
    ``writeId``."""
    old = dict(obj.get("parameters") or {})
    params = dict(old)
    stats_state.set_columns(params, _columns(stats))
    if is_transactional(table):
        message = stats_state.verify_change(f"{table['dbName']}.{table['tableName']}", old,
                                            params, write_id, valid_write_ids, True)
        if message:
            raise Internal(message)
        if not stats_state.current_stats_valid(old, stats_state.write_id_of(obj),
                                               valid_write_ids, True):
            stats_state.set_basic(params, False)
        obj["writeId"] = write_id
    obj["parameters"] = params
    return params


class StatsWriter:
    """The statistics writes of one metastore (``ctx`` builds the event messages)."""

    def __init__(self, ctx: MessageContext):
        self.ctx = ctx

    def _event(self, conn, entry) -> None:
        append(conn, self.ctx.message_format, entry)

    # -------------------------------------------------------------- table and partition

    def write_table(self, conn, stats: Doc, valid_write_ids: str | None, write_id: int) -> bool:
        """Table-level statistics (``stats`` normalized) and UPDATE_TBL_COL_STAT_EVENT."""
        desc = stats["statsDesc"]
        tbl_id, table = table_for_stats(conn, desc["dbName"], desc["tableName"], for_update=True)
        known = {c["name"].lower() for c in (table.get("sd") or {}).get("cols") or []}
        for column in _columns(stats):
            if column not in known:
                raise Internal(f"Column {column} doesn't exist in table {table['tableName']} "
                               f"in database {table['dbName']}")
        write_rows(conn, True, tbl_id, stats["engine"], stats["statsObj"],
                   desc["lastAnalyzed"], overlay=True)
        params = _stored_stats_parameters(table, table, stats, write_id, valid_write_ids)
        save_table(conn, tbl_id, table)
        self._event(conn, update_table_column_stats(
            self.ctx, stats, stats_state.reader_view(table, valid_write_ids), params, write_id=write_id,
            valid_write_ids=valid_write_ids))
        return True

    def write_partition(self, conn, stats: Doc, valid_write_ids: str | None,
                        write_id: int) -> bool:
        """One partition's statistics (``stats`` normalized) and UPDATE_PART_COL_STAT_EVENT."""
        desc = stats["statsDesc"]
        tbl_id, table = require_table_object(conn, desc["dbName"], desc["tableName"],
                                             for_update=True)
        values = partition_values(table, desc.get("partName"))
        name = names.make_partition_name(
            [k["name"] for k in table.get("partitionKeys") or []], values)
        part = partition_rows(conn, tbl_id, [name], for_update=True).get(name)
        if part is None:
            raise NoSuchObject("Partition for which stats is gathered doesn't exist.")
        part_id, pdoc = part
        write_rows(conn, False, part_id, stats["engine"], stats["statsObj"],
                   desc["lastAnalyzed"], overlay=True)
        params = _stored_stats_parameters(table, pdoc, stats, write_id, valid_write_ids)
        save_partition(conn, part_id, pdoc)
        self._event(conn, update_partition_column_stats(self.ctx, stats, values, table, params,
                                                        write_id=write_id))
        return True

    def write_partitions(self, conn, tbl_id: int, table: Doc, by_name: dict[str, Doc],
                         valid_write_ids: str | None, write_id: int) -> bool:
        """The batch write (see the module docstring); ``by_name`` maps partition names,
        taken exactly as sent, to normalized statistics."""
        if not by_name:
            return False
        try:
            self._write_partitions(conn, tbl_id, table, by_name, valid_write_ids, write_id)
        except MetastoreError as err:
            raise Internal(f"Unable to update Column stats for  {table['tableName']} due to: "
                           f"{err.message}") from None
        return True

    def _write_partitions(self, conn, tbl_id: int, table: Doc, by_name: dict[str, Doc],
                          valid_write_ids: str | None, write_id: int) -> None:
        acid = _is_acid(table)
        label = f"{table['dbName']}.{table['tableName']}"
        for name, (part_id, pdoc) in partition_rows(conn, tbl_id, by_name, for_update=True).items():
            stats = by_name[name]
            params = pdoc.setdefault("parameters", {})
            old_value = params.get(ACCURATE)
            accurate = {ACCURATE: "TRUE" if old_value is None else old_value}
            stats_state.set_columns(accurate, _columns(stats))
            if acid and old_value is not None:
                message = stats_state.verify_change(label, {ACCURATE: old_value}, accurate,
                                                    write_id, valid_write_ids, True)
                if message:
                    raise Internal(message)
                if not stats_state.current_stats_valid({ACCURATE: old_value},
                                                       stats_state.write_id_of(pdoc),
                                                       valid_write_ids, True):
                    stats_state.set_basic(accurate, False)
            params.pop(ACCURATE, None)
            params.update(accurate)
            if acid:
                pdoc["writeId"] = write_id
            save_partition(conn, part_id, pdoc)
            write_rows(conn, False, part_id, stats["engine"], stats["statsObj"],
                       stats["statsDesc"]["lastAnalyzed"], overlay=False)
            self._event(conn, update_partition_column_stats(
                self.ctx, stats, pdoc["values"], table, accurate, write_id=write_id))

    # -------------------------------------------------------------- set_aggr_stats_for

    def set_aggr(self, conn, col_stats: Sequence[Doc], *, need_merge: bool, engine: str | None,
                 valid_write_ids: str | None, write_id: int) -> bool:
        """``set_aggr_stats_for`` (see the module docstring)."""
        if not col_stats:
            return True
        all_stats = [normalize(s, engine) for s in col_stats]
        first = all_stats[0]
        desc = first["statsDesc"]
        db, name = desc["dbName"], desc["tableName"]
        if is_true(desc.get("isTblLevel")):
            if len(all_stats) != 1:
                raise Internal("Expecting only 1 ColumnStatistics for table's column stats, "
                               f"but find {len(all_stats)}")
            if need_merge:
                return self._merge_table(conn, first, valid_write_ids, write_id)
            return self.write_table(conn, first, valid_write_ids, write_id)
        by_name: dict[str, Doc] = {}
        for stats in all_stats:
            part = stats["statsDesc"].get("partName")
            if part in by_name:
                _merge_objects(stats, by_name[part])
            by_name[part] = stats
        if need_merge:
            return self._merge_partitions(conn, db, name, _columns(first), by_name,
                                          valid_write_ids, write_id)
        tbl_id, table = require_table_object(conn, db, name, for_update=True)
        return self.write_partitions(conn, tbl_id, table, by_name, valid_write_ids, write_id)

    def _merge_table(self, conn, stats: Doc, valid_write_ids: str | None, write_id: int) -> bool:
        desc = stats["statsDesc"]
        old = table_stats(conn, desc["dbName"], desc["tableName"], _columns(stats),
                          stats["engine"], valid_write_ids)
        tbl_id, table = require_table_object(conn, desc["dbName"], desc["tableName"],
                                             for_update=True)
        invalid = old is not None and old.get("isStatsCompliant") is False
        if invalid:
            stats["statsObj"] = []
        else:
            _keep_mergeable(stats, table.get("parameters"))
            if old is not None and stats["statsObj"]:
                _merge_objects(stats, old)
        if stats["statsObj"]:
            return self.write_table(conn, stats, valid_write_ids, write_id)
        if invalid:
            before = copy.deepcopy(table)
            _invalidate(table, write_id)
            save_table(conn, tbl_id, table)
            self._event(conn, alter_table(self.ctx, before, table, write_id=write_id))
        return not invalid

    def _merge_partitions(self, conn, db: str, name: str, columns: list[str],
                          by_name: dict[str, Doc], valid_write_ids: str | None,
                          write_id: int) -> bool:
        olds = {s["statsDesc"]["partName"]: s for s in partition_stats(
            conn, db, name, list(by_name), columns, engine_of(next(iter(by_name.values()))["engine"]),
            valid_write_ids)}
        tbl_id, table = require_table_object(conn, db, name, for_update=True)
        parts = partition_rows(conn, tbl_id, by_name, for_update=True)
        result, batch = True, {}
        for part_name, stats in by_name.items():
            if part_name not in parts:
                continue    # Hive finds no partition object for it and writes nothing
            part_id, pdoc = parts[part_name]
            old = olds.get(part_name)
            invalid = old is not None and old.get("isStatsCompliant") is False
            if invalid:
                stats["statsObj"] = []
            else:
                _keep_mergeable(stats, pdoc.get("parameters"))
                if old is not None and stats["statsObj"]:
                    _merge_objects(stats, old)
            if stats["statsObj"]:
                batch[part_name] = stats
            elif invalid:
                before = copy.deepcopy(pdoc)
                _invalidate(pdoc, write_id)
                save_partition(conn, part_id, pdoc)
                self._event(conn, alter_partition(self.ctx, table, before, pdoc,
                                                  write_id=write_id))
                result = False
        if batch:
            self.write_partitions(conn, tbl_id, table, batch, valid_write_ids, write_id)
        return result


def _keep_mergeable(stats: Doc, params: dict | None) -> None:
    """``getMergableCols``: only the columns ``COLUMN_STATS_ACCURATE`` lists."""
    stats["statsObj"] = [o for o in stats["statsObj"]
                         if stats_state.can_merge(params, o["colName"])]


def _merge_objects(new: Doc, old: Doc) -> None:
    """``mergeColStats``: each new column folded with the old one of the same name."""
    olds = {o["colName"]: o for o in old.get("statsObj") or []}
    for obj in new["statsObj"]:
        if obj["colName"] in olds:
            merge_into(obj, olds[obj["colName"]])


def _invalidate(doc: Doc, write_id: int) -> None:
    """What Hive does to a table or partition whose stored stats a merging writer cannot
    use: its write id, and no ``COLUMN_STATS_ACCURATE`` at all."""
    doc["writeId"] = write_id
    params = doc.setdefault("parameters", {})
    stats_state.remove_columns(params, None)
    stats_state.set_basic(params, False)
