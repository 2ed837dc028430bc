"""Column statistics, tables and partitions: every call, Hive 4's rules for transactional
tables, and the events, through a real Thrift client on SQLite and PostgreSQL.

Sources (apache/hive, Hive 4 line): HMSHandler (the calls; ``set_aggr_stats_for`` in the
newer ``SetAggrStatsHandler``), ObjectStore (``updateTableColumnStatistics``,
``updatePartitionColumnStatistics``, ``isCurrentStatsValidForTheQuery``,
``verifyStatsChangeCtx``, ``get_aggr_stats_for``), DirectSqlUpdateStat (the batched
partition write), StatsSetupConst (``COLUMN_STATS_ACCURATE``), MetaStoreDirectSql and
StatObjectConverter (aggregation), HiveAlterHandler (``alterTableUpdateTableColumnStats``);
the facts in /work/notes/hive4/handler-behaviour.md ("Column statistics", "stats on
transactional tables").
"""

from __future__ import annotations

import json

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.domain.stats import stats_state
from hms_txn.domain.stats.stats_aggregation import aggregate, java_double_text
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.stats_support import (
    Writer, accurate, booleans, by_name, col_stats, doubles, events_since, last_event_id, longs,
    refused, snapshot, strings)
from tests.hms_txn.test_catalog import make_table

# the capability every ACID-aware client declares (Hive 3/4's HiveMetaStoreClient, Trino,
# Impala): the metastore hands it transactional tables
ACID_AWARE = T.ClientCapabilities([T.ClientCapability.INSERT_ONLY_TABLES])

ACID = {"transactional": "true"}
REFUSED = ("Cannot change stats state for a transactional table {t} without providing the "
           "transactional write state for verification (new write ID {w}, valid write IDs "
           "{v}; current state {old}; new state {new}")


def tables(client, *, acid=False):
    client.create_database(T.Database(name="s", parameters={}))
    params = dict(ACID) if acid else {}
    client.create_table(make_table("s", "t", cols=(("id", "int"), ("name", "string"),
                                                   ("flag", "boolean"), ("x", "double")),
                                   params=params))
    client.create_table(make_table("s", "p", cols=(("id", "int"), ("name", "string")),
                                   keys=(("ds", "string"),), params=params))
    for v in ("1", "2", "3", "4"):
        client.add_partition(T.Partition(values=[v], dbName="s", tableName="p", parameters={}))


def table_req(client, cols, engine=None, valid=None, table="t"):
    return client.get_table_statistics_req(T.TableStatsRequest(
        dbName="s", tblName=table, colNames=cols, engine=engine, validWriteIdList=valid)).tableStats


def parts_req(client, parts, cols, valid=None):
    return client.get_partitions_statistics_req(T.PartitionsStatsRequest(
        dbName="s", tblName="p", colNames=cols, partNames=parts, validWriteIdList=valid)).partStats


def aggr(client, parts, cols, valid=None):
    return client.get_aggr_stats_for(T.PartitionsStatsRequest(
        dbName="s", tblName="p", colNames=cols, partNames=parts, validWriteIdList=valid))


# ------------------------------------------------------------------ the pure rules

def test_column_stats_accurate_is_written_as_hive_s_jackson_does():
    # StatsSetupConst.ColumnStatsAccurate: @JsonPropertyOrder(basicStats, columnStats),
    # BASIC_STATS left out when false (NON_DEFAULT), COLUMN_STATS when empty (NON_EMPTY),
    # columns a TreeMap, booleans written as strings
    params = {}
    stats_state.set_columns(params, ["b", "a"])
    assert params["COLUMN_STATS_ACCURATE"] == '{"COLUMN_STATS":{"a":"true","b":"true"}}'
    stats_state.set_basic(params, True)
    assert params["COLUMN_STATS_ACCURATE"] == \
        '{"BASIC_STATS":"true","COLUMN_STATS":{"a":"true","b":"true"}}'
    stats_state.remove_columns(params, ["a", "b"])
    assert params["COLUMN_STATS_ACCURATE"] == '{"BASIC_STATS":"true"}'
    stats_state.set_basic(params, False)        # false removes the whole parameter
    assert params == {}
    # parseStatsAcc: Hive 2's plain TRUE, unknown keys, garbage
    assert stats_state.parse("TRUE").basic and not stats_state.parse("{}").basic
    assert not stats_state.parse('{"BASIC_STATS":"true","X":1}').basic
    assert stats_state.parse('{"COLUMN_STATS":{"a":"false"}}').columns == {"a": False}
    assert stats_state.columns_having_stats({"COLUMN_STATS_ACCURATE":
                                             '{"COLUMN_STATS":{"a":"false","b":"true"}}'}) == ["b"]


def test_stats_validity_for_a_snapshot():
    # ObjectStore.isCurrentStatsValidForTheQuery
    accurate_ = {"COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'}
    snap = "s.t:5:5:3:4"            # hwm 5, write 3 open, write 4 aborted
    valid = stats_state.current_stats_valid
    assert valid({}, 0, snap, False) and valid({}, -1, None, False)   # not transactional
    assert valid(accurate_, 2, snap, False) and not valid({}, 2, snap, False)
    assert not valid(accurate_, 3, snap, False) and not valid(accurate_, 3, snap, True)
    assert not valid(accurate_, 4, snap, False) and valid({}, 4, snap, True)  # aborted
    assert not valid(accurate_, 6, snap, True) and not valid(accurate_, 2, None, True)


def test_stats_change_needs_write_state():
    # ObjectStore.verifyStatsChangeCtx
    old = {"COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'}
    new = {"COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true","COLUMN_STATS":{"a":"true"}}'}
    verify = stats_state.verify_change
    assert verify("d.t", old, new, 5, "d.t:5:9223372036854775807::", True) is None
    assert verify("d.t", old, {}, -1, None, True) is None             # invalidating
    assert verify("d.t", old, dict(old), -1, None, False) is None     # no change
    assert verify("d.t", old, new, -1, None, False) == REFUSED.format(
        t="d.t", w=-1, v="null", old=old["COLUMN_STATS_ACCURATE"],
        new=new["COLUMN_STATS_ACCURATE"])


def test_java_double_text_and_extrapolation_arithmetic():
    assert [java_double_text(x) for x in (100.0, 0.001, 1e7, 1.5e-5, -2.5, 0.0001)] == \
        ["100.0", "0.001", "1.0E7", "1.5E-5", "-2.5", "1.0E-4"]
    # LinearExtrapolatePartStatus over 4 requested partitions, stats in 3 of them: long
    # arithmetic truncates, sums scale as sum // count * partitions
    stats = [(f"ds={i}", {"colName": "c", "colType": "bigint",
                          "statsData": {"longStats": {"lowValue": lo, "highValue": hi,
                                                      "numNulls": n, "numDVs": d}}})
             for i, lo, hi, n, d in ((1, 0, 10, 1, 5), (2, 20, 30, 2, 8), (3, -5, 3, 0, 4))]
    objs, found = aggregate(["ds=1", "ds=2", "ds=3", "ds=4"], ["c"], stats)
    assert found == 3
    got = objs[0]["statsData"]["longStats"]
    # low: min -5 at index 2, max 20 at index 1 -> right border is the min:
    # 20 - (25 * (3 - 1)) / (2 - 1) = -30; high: min 3 at 2, max 30 at 1 -> left border max
    # 3 + (27 * 2) / 1 = 57; nulls 3 // 3 * 4 = 4; distinct values: 8 at 1, 4 at 2 -> 4 + 4*2 = 12
    assert got == {"numNulls": 4, "lowValue": -30, "highValue": 57, "numDVs": 12}


# ------------------------------------------------------------------ table statistics

def test_table_statistics_roundtrip(client):
    tables(client)
    with pytest.raises(TApplicationException) as missing:        # Hive returns null
        client.get_table_column_statistics("s", "t", "id")
    assert missing.value.type == TApplicationException.MISSING_RESULT
    assert client.update_table_column_statistics(col_stats("S", "T", [
        ("ID", "INT", longs(1, 100, 2, 50, bitVectors=b"HLL\x01")),
        ("name", "string", strings(10, 4.5, 1, 20))])) is True
    got = client.get_table_column_statistics("@hive#s", "t", "ID")   # HS2's catalog prefix
    assert (got.statsDesc.isTblLevel, got.statsDesc.dbName, got.statsDesc.tableName,
            got.statsDesc.catName, got.engine) == (True, "s", "t", "hive", "hive")
    assert got.statsDesc.lastAnalyzed > 0 and got.isStatsCompliant is None
    # names lower-cased (normalizeColStatsInput); sketches not read back (stats.fetch.bitvector)
    assert [(o.colName, o.colType) for o in got.statsObj] == [("id", "int")]
    assert got.statsObj[0].statsData.longStats == T.LongColumnStatsData(
        lowValue=1, highValue=100, numNulls=2, numDVs=50)
    assert set(by_name(table_req(client, ["NAME", "id", "flag"]))) == {"id", "name"}
    assert table_req(client, []) == [] and table_req(client, ["id"], engine="impala") == []
    assert accurate(client.get_table_acid_aware("s", "t").parameters) == \
        {"COLUMN_STATS": {"id": "true", "name": "true"}}
    # overwriting a column keeps the stored fields the new statistics leave unset
    # (StatObjectConverter.setFieldsIntoOldStats)
    client.update_table_column_statistics(col_stats("s", "t", [("id", "int", T.ColumnStatisticsData(
        longStats=T.LongColumnStatsData(highValue=7, numNulls=0, numDVs=3)))]))
    assert by_name(table_req(client, ["id"]))["id"] == T.LongColumnStatsData(
        lowValue=1, highValue=7, numNulls=0, numDVs=3)
    # statistics are kept per engine
    client.update_table_column_statistics(col_stats("s", "t", [("id", "int", longs(5, 6, 0, 2))],
                                                    engine="impala"))
    assert by_name(table_req(client, ["id"], engine="impala"))["id"].lowValue == 5
    assert by_name(table_req(client, ["id"], engine="hive"))["id"].lowValue == 1


def test_table_statistics_refusals(client):
    tables(client)
    with refused(T.MetaException, "Column zz doesn't exist in table t in database s"):
        client.update_table_column_statistics(col_stats("s", "t", [("zz", "int", longs(1, 2, 0, 1))]))
    missing = "Specified catalog.database.table does not exist : hive.s.nope"
    with refused(T.NoSuchObjectException, missing):
        client.update_table_column_statistics(col_stats("s", "nope", [("id", "int", longs(1, 2, 0, 1))]))
    with refused(T.NoSuchObjectException, missing):
        client.get_table_column_statistics("s", "nope", "id")
    with refused(T.NoSuchObjectException, missing):
        table_req(client, ["id"], table="nope")
    # the _req forms (HMSHandler.update_table_column_statistics_req)
    two = col_stats("s", "t", [("id", "int", longs(1, 2, 0, 1))])
    with refused(T.InvalidInputException, "Only one stats object expected"):
        client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
            colStats=[two, two], engine="hive"))
    with refused(T.InvalidInputException, "Merge is not supported for non-aggregate stats"):
        client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
            colStats=[two], needMerge=True, engine="hive"))
    assert client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
        colStats=[two], engine="hive")).result is True
    # nothing of a refused call was kept
    assert set(by_name(table_req(client, ["id", "zz"]))) == {"id"}


def test_delete_table_statistics(client):
    tables(client)
    client.update_table_column_statistics(col_stats("s", "t", [
        ("id", "int", longs(1, 2, 0, 1)), ("flag", "boolean", booleans(1, 2, 3)),
        ("x", "double", doubles(0.5, 1.5, 0, 2))]))
    client.update_table_column_statistics(col_stats("s", "t", [("id", "int", longs(1, 2, 0, 1))],
                                                    engine="impala"))
    first = last_event_id(client)
    assert client.delete_table_column_statistics("s", "t", "ID", "hive") is True
    assert by_name(table_req(client, ["id"], engine="impala"))      # another engine's: kept
    # Hive 4 takes the column out of COLUMN_STATS_ACCURATE (Hive 2.3 left it there)
    assert accurate(client.get_table_acid_aware("s", "t").parameters) == \
        {"COLUMN_STATS": {"flag": "true", "x": "true"}}
    with refused(T.NoSuchObjectException,
                 "Column stats doesn't exist for table=hive.s.t col=id"):
        client.delete_table_column_statistics("s", "t", "id", "hive")
    with refused(T.NoSuchObjectException,
                 "Table hive.s.nope  for which stats deletion is requested doesn't exist"):
        client.delete_table_column_statistics("s", "nope", "id", None)
    assert client.delete_table_column_statistics("@hive#s", "t", None, None) is True  # all
    assert table_req(client, ["id", "flag", "x"]) == []
    assert table_req(client, ["id"], engine="impala") == []
    assert client.get_table_acid_aware("s", "t").parameters["COLUMN_STATS_ACCURATE"] == "{}"
    deletes = events_since(client, first, {"DELETE_TBL_COL_STAT_EVENT"})
    assert [(e.dbName, e.tableName, json.loads(e.message)["colName"]) for e in deletes] == \
        [("s", "t", "id"), ("s", "t", None)]


# ------------------------------------------------------------------ partition statistics

def test_partition_statistics(client):
    tables(client)
    assert client.update_partition_column_statistics(col_stats("s", "p", [
        ("id", "int", longs(0, 10, 1, 5)), ("zz", "int", longs(0, 1, 0, 1))], part="ds=1"))
    # a column the partition lacks is accepted (Hive 4 only warns); listed as accurate
    assert accurate(client.get_partition("s", "p", ["1"]).parameters) == \
        {"COLUMN_STATS": {"id": "true", "zz": "true"}}
    got = client.get_partition_column_statistics("s", "p", "DS=1", "id")   # keys any case
    assert (got.statsDesc.isTblLevel, got.statsDesc.partName) == (False, "ds=1")
    with pytest.raises(TApplicationException):
        client.get_partition_column_statistics("s", "p", "ds=2", "id")
    with refused(T.NoSuchObjectException, "Partition for which stats is gathered doesn't exist."):
        client.update_partition_column_statistics(col_stats("s", "p", [("id", "int", longs(0, 1, 0, 1))],
                                                            part="ds=9"))
    with refused(T.InvalidObjectException, "incomplete partition name - missing ds"):
        client.update_partition_column_statistics(col_stats("s", "p", [("id", "int", longs(0, 1, 0, 1))],
                                                            part="x=1"))
    with refused(T.InvalidObjectException, "hive.s.nope table not found"):
        client.update_partition_column_statistics(col_stats("s", "nope", [("id", "int", longs(0, 1, 0, 1))],
                                                            part="ds=1"))
    assert client.update_partition_column_statistics_req(T.SetPartitionsStatsRequest(
        colStats=[col_stats("s", "p", [("name", "string", strings(3, 2.0, 0, 2))], part="ds=2")],
        engine="hive")).result
    stats = parts_req(client, ["ds=1", "DS=2", "ds=3", "ds=9"], ["id", "name"])
    assert {k: set(by_name(v)) for k, v in stats.items()} == {"ds=1": {"id"}, "ds=2": {"name"}}
    # deletes
    first = last_event_id(client)
    assert client.delete_partition_column_statistics("s", "p", "ds=1", "id", None)
    with refused(T.NoSuchObjectException,
                 "Column stats doesn't exist for table=hive.s.p partition=ds=1 col=id"):
        client.delete_partition_column_statistics("s", "p", "ds=1", "id", None)
    with refused(T.NoSuchObjectException, "Partition ds=9 for which stats..."):
        client.delete_partition_column_statistics("s", "p", "ds=9", None, None)
    with refused(T.InvalidObjectException, "hive.s.nope table not found"):
        client.delete_partition_column_statistics("s", "nope", "ds=1", None, None)
    assert accurate(client.get_partition("s", "p", ["1"]).parameters) == {"COLUMN_STATS": {"zz": "true"}}
    (event,) = events_since(client, first, {"DELETE_PART_COL_STAT_EVENT"})
    message = json.loads(event.message)
    assert (message["partName"], message["partValues"], message["colName"]) == ("ds=1", ["1"], "id")


def test_set_aggr_stats_for_partitions(client):
    tables(client)
    first = last_event_id(client)
    # HS2's autogather for a dynamic-partition insert (ColStatsProcessor.persistColumnStats):
    # one ColumnStatistics per partition; a partition twice is merged first; a partition that
    # does not exist is skipped (DirectSqlUpdateStat.getPartitionInfo finds no row for it)
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
        col_stats("s", "p", [("id", "int", longs(20, 30, 2, 8))], part="ds=2", engine="hive"),
        col_stats("s", "p", [("id", "int", longs(10, 25, 1, 9))], part="ds=2", engine="hive"),
        col_stats("s", "p", [("id", "int", longs(-5, 3, 0, 4))], part="ds=3", engine="hive"),
        col_stats("s", "p", [("id", "int", longs(1, 1, 0, 1))], part="ds=99", engine="hive")],
        engine="hive", needMerge=False)) is True
    stats = parts_req(client, ["ds=2", "ds=3"], ["id"])
    assert by_name(stats["ds=2"])["id"] == T.LongColumnStatsData(
        lowValue=10, highValue=30, numNulls=3, numDVs=9)
    # a partition without COLUMN_STATS_ACCURATE starts from "TRUE" in the batch write
    assert accurate(client.get_partition("s", "p", ["3"]).parameters) == \
        {"BASIC_STATS": "true", "COLUMN_STATS": {"id": "true"}}
    events = events_since(client, first, {"UPDATE_PART_COL_STAT_EVENT"})
    assert sorted(json.loads(e.message)["partVals"][0] for e in events) == ["2", "3"]
    assert all(json.loads(e.message)["parameters"].keys() == {"COLUMN_STATS_ACCURATE"}
               for e in events)
    # needMerge: only the columns COLUMN_STATS_ACCURATE lists are merged and written
    # (MetaStoreServerUtils.getMergableCols, ColumnStatsMerger)
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
        col_stats("s", "p", [("id", "int", longs(25, 40, 1, 3))], part="ds=2"),
        col_stats("s", "p", [("id", "int", longs(1, 2, 1, 3))], part="ds=4")],
        needMerge=True, engine="hive"))
    stats = parts_req(client, ["ds=2", "ds=4"], ["id"])
    assert list(stats) == ["ds=2"]
    assert by_name(stats["ds=2"])["id"] == T.LongColumnStatsData(
        lowValue=10, highValue=40, numNulls=4, numDVs=9)
    with refused(T.InvalidObjectException, "hive.s.nope table not found"):
        client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
            col_stats("s", "nope", [("id", "int", longs(1, 1, 0, 1))], part="ds=1")], engine="hive"))


def test_set_aggr_stats_for_table(client):
    tables(client)
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[], engine="hive"))
    one = col_stats("s", "t", [("flag", "boolean", booleans(3, 4, 1)), ("x", "double", doubles(-1.5, 2.25, 0, 9))])
    with refused(T.MetaException,
                 "Expecting only 1 ColumnStatistics for table's column stats, but find 2"):
        client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[one, one], engine="hive"))
    # needMerge on a table listing no column: nothing to merge, nothing written, true
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[one], needMerge=True,
                                                                 engine="hive"))
    assert table_req(client, ["flag", "x"]) == []
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[one], engine="hive"))
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[col_stats("s", "t", [
        ("flag", "boolean", booleans(1, 1, 1)), ("x", "double", doubles(-3.0, 1.0, 2, 4))])],
        needMerge=True, engine="hive"))
    got = by_name(table_req(client, ["flag", "x"]))
    assert got["flag"] == T.BooleanColumnStatsData(numTrues=4, numFalses=5, numNulls=2)
    assert got["x"] == T.DoubleColumnStatsData(lowValue=-3.0, highValue=2.25, numNulls=2, numDVs=9)


def test_aggregate_statistics(client):
    tables(client)
    for part, lo, hi, nulls, ndv in (("ds=1", 0, 10, 1, 5), ("ds=2", 20, 30, 2, 8),
                                     ("ds=3", -5, 3, 0, 4)):
        client.update_partition_column_statistics(col_stats("s", "p", [("id", "int", longs(lo, hi, nulls, ndv))],
                                                            part=part))
    client.update_partition_column_statistics(col_stats("s", "p", [("name", "string", strings(5, 2.0, 0, 3))],
                                                        part="ds=1"))
    got = aggr(client, ["ds=1", "ds=2", "ds=3"], ["id"])
    assert got.partsFound == 3
    # every partition has the column: min, max, sum of nulls, max of distinct values
    assert by_name(got.colStats)["id"] == T.LongColumnStatsData(lowValue=-5, highValue=30,
                                                                numNulls=3, numDVs=8)
    got = aggr(client, ["ds=1", "ds=2", "ds=3", "ds=4"], ["id", "name"])
    assert got.partsFound == 1 and [o.colName for o in got.colStats] == ["id", "name"]
    assert by_name(got.colStats)["id"] == T.LongColumnStatsData(
        lowValue=-30, highValue=57, numNulls=4, numDVs=12)        # extrapolated, see above
    assert by_name(got.colStats)["name"] == T.StringColumnStatsData(
        maxColLen=5, avgColLen=2.0, numNulls=0, numDVs=3)         # one partition: as is
    assert aggr(client, [], ["id"]) == T.AggrStats(colStats=[], partsFound=0)
    assert aggr(client, ["ds=1"], []) == T.AggrStats(colStats=[], partsFound=0)
    with pytest.raises(T.NoSuchObjectException):
        client.get_aggr_stats_for(T.PartitionsStatsRequest(dbName="s", tblName="nope",
                                                           colNames=["id"], partNames=["ds=1"]))


def test_alter_drops_statistics_of_changed_columns(client):
    tables(client)
    client.update_table_column_statistics(col_stats("s", "t", [
        ("id", "int", longs(1, 2, 0, 1)), ("name", "string", strings(1, 1.0, 0, 1)),
        ("x", "double", doubles(0.0, 1.0, 0, 1))]))
    tbl = client.get_table_acid_aware("s", "t")
    tbl.sd.cols = [T.FieldSchema("id", "bigint", None), T.FieldSchema("name", "string", None),
                   T.FieldSchema("flag", "boolean", None)]
    client.alter_table("s", "t", tbl)           # id retyped, x dropped
    assert set(by_name(table_req(client, ["id", "name", "x"]))) == {"name"}
    assert accurate(client.get_table_acid_aware("s", "t").parameters) == {"COLUMN_STATS": {"name": "true"}}
    tbl = client.get_table_acid_aware("s", "t")
    tbl.tableName = "t2"
    client.alter_table("s", "t", tbl)           # a rename keeps them
    assert set(by_name(table_req(client, ["name"], table="t2"))) == {"name"}
    client.drop_table("s", "t2", True)
    client.create_table(make_table("s", "t2"))
    assert table_req(client, ["name"], table="t2") == []
    # partitions: a cascading alter drops the partitions' statistics too; dropping a
    # partition drops its statistics
    client.update_partition_column_statistics(col_stats("s", "p", [("id", "int", longs(0, 1, 0, 1)),
                                                                   ("name", "string", strings(1, 1.0, 0, 1))],
                                                        part="ds=1"))
    client.update_partition_column_statistics(col_stats("s", "p", [("id", "int", longs(0, 1, 0, 1))],
                                                        part="ds=2"))
    ptbl = client.get_table_acid_aware("s", "p")
    ptbl.sd.cols = [T.FieldSchema("id", "int", None)]
    client.alter_table_with_cascade("s", "p", ptbl, True)
    assert {k: set(by_name(v)) for k, v in parts_req(client, ["ds=1", "ds=2"], ["id", "name"]).items()} == \
        {"ds=1": {"id"}, "ds=2": {"id"}}
    assert accurate(client.get_partition("s", "p", ["1"]).parameters) == {"COLUMN_STATS": {"id": "true"}}
    client.drop_partition("s", "p", ["2"], True)
    client.add_partition(T.Partition(values=["2"], dbName="s", tableName="p", parameters={}))
    assert list(parts_req(client, ["ds=1", "ds=2"], ["id"])) == ["ds=1"]


# ------------------------------------------------------------------ transactional tables

def test_deprecated_calls_on_a_transactional_table(client):
    tables(client, acid=True)
    # Trino writes with update_table_column_statistics, no write state (trino.md, INSERT 4):
    # allowed while the basic stats are not marked accurate (verifyStatsChangeCtx)
    assert client.update_table_column_statistics(col_stats("s", "t", [("id", "int", longs(1, 2, 0, 1))]))
    tbl = client.get_table_acid_aware("s", "t")
    assert tbl.writeId == -1 and accurate(tbl.parameters) == {"COLUMN_STATS": {"id": "true"}}
    # ... and refused once they are: a writer without write state cannot change them
    w = Writer(client, "s", "t")
    tbl.parameters["COLUMN_STATS_ACCURATE"] = '{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true"}}'
    tbl.writeId = w.write_id
    client.alter_table_req(T.AlterTableRequest(dbName="s", tableName="t", table=tbl,
                                               validWriteIdList=w.valid_write_ids))
    w.commit()
    old = client.get_table_acid_aware("s", "t").parameters["COLUMN_STATS_ACCURATE"]
    with pytest.raises(T.MetaException) as err:
        client.update_table_column_statistics(col_stats("s", "t", [("name", "string", strings(1, 1.0, 0, 1))]))
    assert err.value.message == REFUSED.format(
        t="s.t", w=-1, v="null", old=old,
        new='{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true","name":"true"}}')
    with refused(T.MetaException, "Cannot delete stats via this API for a transactional table"):
        client.delete_table_column_statistics("s", "t", "id", None)
    with refused(T.MetaException, "Cannot delete stats via this API..."):
        client.delete_partition_column_statistics("s", "p", "ds=1", "id", None)
    # an alter without write state that changes the stats state is refused the same way
    tbl = client.get_table_acid_aware("s", "t")
    tbl.parameters["COLUMN_STATS_ACCURATE"] = '{"BASIC_STATS":"true"}'
    with refused(T.MetaException,
                 "Cannot change stats state for a transactional table s.t without providing..."):
        client.alter_table("s", "t", tbl)


def test_statistics_are_valid_for_the_writer_s_snapshot_only(client):
    tables(client, acid=True)
    # an ACID INSERT as HS2 runs it (hs2.md "INSERT into an ACID table", 1 and 4)
    w = Writer(client, "s", "t")
    before = snapshot(client, "s", "t")             # a reader that started before the commit
    tbl = client.get_table_acid_aware("s", "t")
    tbl.writeId = w.write_id
    tbl.parameters.update({"numRows": "3", "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'})
    client.alter_table_req(T.AlterTableRequest(
        dbName="s", tableName="t", table=tbl, validWriteIdList=w.valid_write_ids,
        environmentContext=T.EnvironmentContext({"DO_NOT_UPDATE_STATS": "true"})))
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(
        colStats=[col_stats("s", "t", [("id", "int", longs(1, 3, 0, 3))], engine="hive")],
        needMerge=True, writeId=w.write_id, validWriteIdList=w.valid_write_ids, engine="hive"))
    # needMerge: "id" was not listed as accurate, so nothing merged; ANALYZE-style overwrite:
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(
        colStats=[col_stats("s", "t", [("id", "int", longs(1, 3, 0, 3))], engine="hive")],
        needMerge=False, writeId=w.write_id, validWriteIdList=w.valid_write_ids, engine="hive"))
    assert by_name(table_req(client, ["id"], valid=w.valid_write_ids))     # the writer sees them
    w.commit()
    after = snapshot(client, "s", "t")
    assert by_name(table_req(client, ["id"], valid=after))["id"].highValue == 3
    assert table_req(client, ["id"], valid=before) == []       # not for an older snapshot
    assert by_name(table_req(client, ["id"]))                   # no snapshot: served as is
    req = client.get_table_req(T.GetTableRequest(capabilities=ACID_AWARE, dbName="s", tblName="t", validWriteIdList=before))
    assert req.isStatsCompliant is None and req.table.isStatsCompliant is False
    assert "COLUMN_STATS_ACCURATE" not in req.table.parameters
    req = client.get_table_req(T.GetTableRequest(capabilities=ACID_AWARE, dbName="s", tblName="t", validWriteIdList=after,
                                                 getColumnStats=True, engine="hive"))
    assert req.table.isStatsCompliant is True and accurate(req.table.parameters) == \
        {"BASIC_STATS": "true", "COLUMN_STATS": {"id": "true"}}
    assert set(by_name(req.table.colStats.statsObj)) == {"id"}
    assert client.get_table_req(T.GetTableRequest(capabilities=ACID_AWARE, dbName="s", tblName="t")).table.isStatsCompliant is None


def test_a_concurrent_writer_invalidates_the_statistics(client):
    tables(client, acid=True)
    a, b = Writer(client, "s", "t"), Writer(client, "s", "t")    # B cannot see A's write
    for w in (a, b):
        tbl = client.get_table_acid_aware("s", "t")
        tbl.writeId = w.write_id
        tbl.parameters["COLUMN_STATS_ACCURATE"] = '{"BASIC_STATS":"true"}'
        client.alter_table_req(T.AlterTableRequest(dbName="s", tableName="t", table=tbl,
                                                   validWriteIdList=w.valid_write_ids))
        client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
            colStats=[col_stats("s", "t", [("id", "int", longs(1, 3, 0, 3))])],
            writeId=w.write_id, validWriteIdList=w.valid_write_ids, engine="hive"))
    # B's alter replaced statistics of a write it cannot see: the basic stats are no longer
    # accurate (ObjectStore.alterTable), so no reader gets B's column stats either
    tbl = client.get_table_acid_aware("s", "t")
    assert tbl.writeId == b.write_id
    assert accurate(tbl.parameters) == {"COLUMN_STATS": {"id": "true"}}
    a.commit()
    b.commit()
    assert table_req(client, ["id"], valid=snapshot(client, "s", "t")) == []
    # statistics of an aborted write may be replaced by the next complete writer
    c = Writer(client, "s", "t")
    client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
        colStats=[col_stats("s", "t", [("id", "int", longs(1, 3, 0, 3))])],
        writeId=c.write_id, validWriteIdList=c.valid_write_ids, engine="hive"))
    c.abort()
    d = Writer(client, "s", "t")
    tbl = client.get_table_acid_aware("s", "t")
    tbl.writeId = d.write_id
    tbl.parameters["COLUMN_STATS_ACCURATE"] = '{"BASIC_STATS":"true"}'
    client.alter_table_req(T.AlterTableRequest(dbName="s", tableName="t", table=tbl,
                                               validWriteIdList=d.valid_write_ids))
    client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
        colStats=[col_stats("s", "t", [("id", "int", longs(1, 9, 0, 9))])],
        writeId=d.write_id, validWriteIdList=d.valid_write_ids, engine="hive"))
    d.commit()
    assert by_name(table_req(client, ["id"], valid=snapshot(client, "s", "t")))["id"].highValue == 9


def test_partitions_of_a_transactional_table(client):
    tables(client, acid=True)
    w = Writer(client, "s", "p")
    before = snapshot(client, "s", "p")
    parts = [client.get_partition("s", "p", [v]) for v in ("1", "2")]
    for part in parts:
        part.parameters["COLUMN_STATS_ACCURATE"] = '{"BASIC_STATS":"true"}'
    client.alter_partitions_req(T.AlterPartitionsRequest(
        dbName="s", tableName="p", partitions=parts, writeId=w.write_id,
        validWriteIdList=w.valid_write_ids))
    assert client.get_partition("s", "p", ["1"]).writeId == w.write_id
    assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
        col_stats("s", "p", [("id", "int", longs(0, 5, 0, 5))], part=f"ds={v}") for v in ("1", "2")],
        writeId=w.write_id, validWriteIdList=w.valid_write_ids, engine="hive"))
    w.commit()
    after = snapshot(client, "s", "p")
    assert set(parts_req(client, ["ds=1", "ds=2"], ["id"], valid=after)) == {"ds=1", "ds=2"}
    assert parts_req(client, ["ds=1", "ds=2"], ["id"], valid=before) == {}
    assert aggr(client, ["ds=1", "ds=2"], ["id"], valid=after).partsFound == 2
    with pytest.raises(TApplicationException) as none:       # Hive: null, no result
        aggr(client, ["ds=1", "ds=2"], ["id"], valid=before)
    assert none.value.type == TApplicationException.MISSING_RESULT
    # the batch write refuses a change without write state once the stats are accurate
    with refused(T.MetaException, "Unable to update Column stats for  p due to: Cannot change "
                                  "stats state for a transactional..."):
        client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
            col_stats("s", "p", [("name", "string", strings(1, 1.0, 0, 1))], part="ds=1")],
            engine="hive"))


def test_update_events(client):
    tables(client, acid=True)
    first = last_event_id(client)
    w = Writer(client, "s", "t")
    client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
        colStats=[col_stats("s", "t", [("id", "int", longs(1, 3, 0, 3))])],
        writeId=w.write_id, validWriteIdList=w.valid_write_ids, engine="hive"))
    w.commit()
    (event,) = events_since(client, first, {"UPDATE_TBL_COL_STAT_EVENT"})
    message = json.loads(event.message)
    assert (event.dbName, event.tableName, event.catName) == ("s", "t", "hive")
    assert message["writeId"] == w.write_id and message["validWriteIds"] == w.valid_write_ids
    assert message["parameters"]["COLUMN_STATS_ACCURATE"] == '{"COLUMN_STATS":{"id":"true"}}'
    assert json.loads(message["colStatsJson"])["2"]["lst"][0] == "rec"


def test_malformed_statistics_are_refused_and_change_nothing(client):
    tables(client)
    before = last_event_id(client)
    no_data = T.ColumnStatistics(
        statsDesc=T.ColumnStatisticsDesc(isTblLevel=True, dbName="s", tableName="t"),
        statsObj=[T.ColumnStatisticsObj("id", "int", T.ColumnStatisticsData())])
    no_table = T.ColumnStatistics(statsDesc=T.ColumnStatisticsDesc(isTblLevel=True),
                                  statsObj=[T.ColumnStatisticsObj("id", "int", longs(1, 2, 0, 1))])
    for stats in (no_data, no_table):
        with pytest.raises(T.InvalidInputException, match="column statistics"):
            client.update_table_column_statistics(stats)
        with pytest.raises(T.InvalidInputException, match="column statistics"):
            client.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[stats], engine="hive"))
    assert last_event_id(client) == before
    assert table_req(client, ["id"]) == []
    assert "COLUMN_STATS_ACCURATE" not in client.get_table_acid_aware("s", "t").parameters
