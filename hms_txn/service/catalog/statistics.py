"""Thrift calls of column statistics, tables and partitions (``domain.stats.column_stats``,
``domain.stats.stats_writes``): each answers as Hive 4's HMSHandler does.

* Writes: ``update_{table,partition}_column_statistics`` (deprecated: no write state, so
  refused on a transactional table once its stats state would change), their ``_req``
  forms (one statistics object, no merge, with ``writeId`` and ``validWriteIdList``) and
  ``set_aggr_stats_for`` (HiveServer2's autogather and ANALYZE; Impala's for ACID tables).
* Reads: statistics of the engine asked for (``hive`` when none is named). The
  deprecated single-column reads answer no result when there are no statistics (a Java
  client raises MISSING_RESULT, as against Hive); ``get_table_statistics_req`` and
  ``get_partitions_statistics_req`` leave out statistics a reader's ValidWriteIdList
  cannot use, and ``get_aggr_stats_for`` then answers no result at all.
* Deletes: refused on transactional tables, as Hive does.

The old calls take a database name that may carry Hive 3/4's catalog prefix (``@hive#db``).
"""

from __future__ import annotations

from typing import Any

from hms_txn.common.errors import Internal, InvalidInput
from hms_txn.domain.stats import column_stats
from hms_txn.domain.events.event_messages import MessageContext
from hms_txn.domain.model.qualified_names import parse_db_name
from hms_txn.domain.stats.stats_writes import StatsWriter, normalize
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


def database(name: str | None) -> str:
    """The database of a name argument, catalog prefix or not."""
    return parse_db_name(name).database or ""


def _write_id(request: Any) -> int:
    return -1 if request.writeId is None else int(request.writeId)


def _objects(docs: list[dict]) -> list[t.ColumnStatisticsObj]:
    return [from_doc(t.ColumnStatisticsObj, d) for d in docs]


def _single(request: t.SetPartitionsStatsRequest) -> dict:
    """The one statistics object of an ``update_*_column_statistics_req``."""
    if len(request.colStats or []) != 1:
        raise InvalidInput("Only one stats object expected")
    if request.needMerge:
        raise InvalidInput("Merge is not supported for non-aggregate stats")
    return normalize(to_doc(request.colStats[0]), request.engine)


class StatisticsService:
    """Column statistics of tables and partitions (``messages`` builds their events, in the
    server's message format)."""

    def __init__(self, units: UnitOfWork, messages: MessageContext):
        self.units = units
        self.ctx = messages
        self.writer = StatsWriter(self.ctx)

    # ---------------------------------------------------------------- writes

    def update_table_column_statistics(self, stats_obj):
        stats = normalize(to_doc(stats_obj))
        return self.units.write(lambda c: self.writer.write_table(c, stats, None, -1))

    def update_partition_column_statistics(self, stats_obj):
        stats = normalize(to_doc(stats_obj))
        return self.units.write(lambda c: self.writer.write_partition(c, stats, None, -1))

    def update_table_column_statistics_req(self, req):
        stats = _single(req)
        return t.SetPartitionsStatsResponse(result=self.units.write(
            lambda c: self.writer.write_table(c, stats, req.validWriteIdList, _write_id(req))))

    def update_partition_column_statistics_req(self, req):
        stats = _single(req)
        return t.SetPartitionsStatsResponse(result=self.units.write(
            lambda c: self.writer.write_partition(c, stats, req.validWriteIdList, _write_id(req))))

    def set_aggr_stats_for(self, request):
        docs = [to_doc(s) for s in request.colStats or []]
        return self.units.write(lambda c: self.writer.set_aggr(
            c, docs, need_merge=bool(request.needMerge), engine=request.engine,
            valid_write_ids=request.validWriteIdList, write_id=_write_id(request)))

    # ---------------------------------------------------------------- reads

    def get_table_column_statistics(self, db_name, tbl_name, col_name):
        doc = self.units.read(lambda c: column_stats.table_stats(
            c, database(db_name), tbl_name, [col_name or ""], None, None))
        return None if doc is None else from_doc(t.ColumnStatistics, doc)

    def get_partition_column_statistics(self, db_name, tbl_name, part_name, col_name):
        found = self.units.read(lambda c: column_stats.partition_stats(
            c, database(db_name), tbl_name, [column_stats.canonical_part_name(part_name)],
            [col_name or ""], None, None))
        if not found:
            return None
        if len(found) != 1:
            raise Internal(f"{len(found)} statistics for single column and partition")
        return from_doc(t.ColumnStatistics, found[0])

    def get_table_statistics_req(self, request):
        doc = self.units.read(lambda c: column_stats.table_stats(
            c, request.dbName, request.tblName, request.colNames or [], request.engine,
            request.validWriteIdList))
        usable = doc is not None and doc.get("isStatsCompliant") is not False
        return t.TableStatsResult(tableStats=_objects(doc["statsObj"]) if usable else [])

    def get_partitions_statistics_req(self, request):
        found = self.units.read(lambda c: column_stats.partition_stats(
            c, request.dbName, request.tblName,
            [column_stats.canonical_part_name(p) for p in request.partNames or []],
            request.colNames or [], request.engine, request.validWriteIdList))
        return t.PartitionsStatsResult(partStats={
            s["statsDesc"]["partName"]: _objects(s["statsObj"])
            for s in found if s.get("isStatsCompliant") is not False})

    def get_aggr_stats_for(self, request):
        found = self.units.read(lambda c: column_stats.aggregate_stats(
            c, request.dbName, request.tblName,
            [column_stats.canonical_part_name(p) for p in request.partNames or []],
            request.colNames or [], request.engine, request.validWriteIdList))
        if found is None:
            return None
        objs, parts_found = found
        return t.AggrStats(colStats=_objects(objs), partsFound=parts_found)

    # ---------------------------------------------------------------- deletes

    def delete_table_column_statistics(self, db_name, tbl_name, col_name, engine=None):
        return self.units.write(lambda c: column_stats.delete_table_stats(
            c, self.ctx, database(db_name), tbl_name, col_name, engine))

    def delete_partition_column_statistics(self, db_name, tbl_name, part_name, col_name,
                                           engine=None):
        return self.units.write(lambda c: column_stats.delete_partition_stats(
            c, self.ctx, database(db_name), tbl_name, part_name, col_name, engine))
