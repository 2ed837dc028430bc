"""Differential test: the column statistics calls Hive 2.3 has, in one sequence, against our
server and against the Java metastore 2.3 of PySpark's jars. Answers and exceptions (with
their messages) must be the same, except where Hive 4 answers differently from 2.3: there
hms-txn follows Hive 4, and ``HIVE4_DIFFERS`` states both answers and why.

Statistics objects are compared as sets (the order of a statistics list is the database's:
Derby's differs from PostgreSQL's), without ``engine``, ``catName`` and ``lastAnalyzed``
(2.3 has no engine nor catalog; ``lastAnalyzed`` is the clock). The aggregate reads ask each
(table, column) once: the Java metastore's aggregate-stats cache (on in 2.3) answers a
later request for a similar set of partitions from the first one.
"""

from __future__ import annotations

import os
import shutil

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.stats_support import (
    booleans, col_stats, doubles, longs, strings)
from tests.hms_txn.test_catalog import make_table
from tests.support.postgres import free_port
from tests.support.requirements import require, require_module
from tests.support.servers import InProcessServer, connect
from tests.support.differential import paired_outcomes

pytestmark = pytest.mark.javahms

DB = "sdb"
COLS = (("id", "int"), ("name", "string"), ("flag", "boolean"), ("x", "double"),
        ("d", "date"), ("dec", "decimal(10,2)"))
PCOLS = (("id", "int"), ("name", "string"), ("flag", "boolean"), ("x", "double"))

# step -> (hms-txn's answer = Hive 4's, the Java metastore 2.3's answer)
_NO_TABLE_4 = "Specified catalog.database.table does not exist : hive.{}"
_NO_TABLE_23 = "Specified database/table does not exist : {}"
HIVE4_DIFFERS = {
    # ObjectStore: Hive 3 added the catalog to the message (TableName.getQualified)
    **{step: (("NoSuchObjectException", _NO_TABLE_4.format(t)),
              ("NoSuchObjectException", _NO_TABLE_23.format(t)))
       for step, t in (("get unknown table", "sdb.nope"), ("req unknown table", "sdb.nope"),
                       ("update unknown table", "sdb.nope"), ("update unknown db", "nodb.t"),
                       ("aggr unknown table", "sdb.nope"), ("set_aggr table unknown", "sdb.nope"))},
    "delete missing col": (
        ("NoSuchObjectException", "Column stats doesn't exist for table=hive.sdb.t col=nope"),
        ("NoSuchObjectException", "Column stats doesn't exist for db=sdb table=t col=nope")),
    "delete id again": (
        ("NoSuchObjectException", "Column stats doesn't exist for table=hive.sdb.t col=id"),
        ("NoSuchObjectException", "Column stats doesn't exist for db=sdb table=t col=id")),
    "delete unknown table": (
        ("NoSuchObjectException", "Table hive.sdb.nope  for which stats deletion is requested "
                                  "doesn't exist"),
        ("NoSuchObjectException", "Table nope  for which stats deletion is requested doesn't exist")),
    "delete part col again": (
        ("NoSuchObjectException", "Column stats doesn't exist for table=hive.sdb.p "
                                  "partition=ds=1 col=id"),
        ("NoSuchObjectException", "Column stats doesn't exist for db=sdb table=p "
                                  "partition=ds=1 col=id")),
    # HMSHandler.getTable: the catalog in the name
    "set_aggr part unknown table": (("InvalidObjectException", "hive.sdb.nope table not found"),
                                    ("InvalidObjectException", "sdb.nope table not found")),
    "delete part unknown table": (("InvalidObjectException", "hive.sdb.nope table not found"),
                                  ("InvalidObjectException", "sdb.nope table not found")),
    # Hive 4 takes deleted columns out of COLUMN_STATS_ACCURATE; 2.3 leaves the parameter
    "accurate after delete": ('{"COLUMN_STATS":{"d":"true","dec":"true","flag":"true",'
                              '"name":"true","x":"true"}}',
                              '{"COLUMN_STATS":{"d":"true","dec":"true","flag":"true",'
                              '"id":"true","name":"true","x":"true"}}'),
    "accurate after delete all": ("{}", '{"COLUMN_STATS":{"d":"true","dec":"true","flag":"true",'
                                        '"id":"true","name":"true","x":"true"}}'),
    "accurate of ds=1 after delete": ('{"COLUMN_STATS":{"name":"true","zz":"true"}}',
                                      '{"COLUMN_STATS":{"id":"true","name":"true"}}'),
    # (so what an alter leaves listed differs too: both take out the altered columns)
    "accurate after alter": ('{"COLUMN_STATS":{"flag":"true","name":"true"}}',
                             '{"COLUMN_STATS":{"d":"true","dec":"true","flag":"true",'
                             '"name":"true"}}'),
    # Hive 4's partition update only warns about a column the partition lacks; 2.3 fails
    "update part unknown col": (True, ("TApplicationException", 6,
                                       "Internal error processing update_partition_column_statistics")),
    "accurate of ds=1": ('{"COLUMN_STATS":{"id":"true","name":"true","zz":"true"}}',
                         '{"COLUMN_STATS":{"id":"true","name":"true"}}'),
    # Hive 4's set_aggr_stats_for writes partitions in one batch (DirectSqlUpdateStat):
    # a partition without COLUMN_STATS_ACCURATE starts from TRUE, a missing one is skipped
    "accurate after set_aggr": (['{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true","name":"true"}}',
                                 '{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true"}}'],
                                ['{"COLUMN_STATS":{"id":"true","name":"true"}}',
                                 '{"COLUMN_STATS":{"id":"true"}}']),
    "set_aggr missing partition": (True, ("NoSuchObjectException",
                                          "Partition for which stats is gathered doesn't exist.")),
}


def norm(v):
    if isinstance(v, T.ColumnStatistics):
        d = v.statsDesc
        return ("CS", d.isTblLevel, d.dbName, d.tableName, d.partName, norm(v.statsObj))
    if isinstance(v, list) and v and isinstance(v[0], T.ColumnStatisticsObj):
        return sorted((o.colName, o.colType, repr(o.statsData)) for o in v)
    if isinstance(v, T.AggrStats):
        return ("AGGR", v.partsFound, norm(v.colStats))
    if isinstance(v, T.TableStatsResult):
        return ("TSR", norm(v.tableStats))
    if isinstance(v, T.PartitionsStatsResult):
        return ("PSR", sorted((k, norm(vs)) for k, vs in v.partStats.items()))
    return v


def decimals(low: str, high: str, nulls, ndv):
    from decimal import Decimal
    from hms_txn.domain.stats.stats_aggregation import decimal_doc
    from hms_txn.wire.codec import from_doc
    return T.ColumnStatisticsData(decimalStats=T.DecimalColumnStatsData(
        lowValue=from_doc(T.Decimal, decimal_doc(Decimal(low))),
        highValue=from_doc(T.Decimal, decimal_doc(Decimal(high))), numNulls=nulls, numDVs=ndv))


def dates(low, high, nulls, ndv):
    return T.ColumnStatisticsData(dateStats=T.DateColumnStatsData(
        lowValue=T.Date(low), highValue=T.Date(high), numNulls=nulls, numDVs=ndv))


def run_sequence(c) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []

    def step(name, fn):
        try:
            value = norm(fn())
        except T.TApplicationException as err:
            value = ("TApplicationException", err.type, err.message)
        except Exception as err:  # noqa: BLE001 - the outcome is what we compare
            value = (type(err).__name__, getattr(err, "message", str(err)))
        out.append((name, value))
        return value

    def cs(table, objs, part=None):
        return col_stats(DB, table, objs, part=part)

    def tbl_req(table, cols):
        return c.get_table_statistics_req(T.TableStatsRequest(dbName=DB, tblName=table, colNames=cols))

    def part_req(table, parts, cols):
        return c.get_partitions_statistics_req(T.PartitionsStatsRequest(
            dbName=DB, tblName=table, colNames=cols, partNames=parts))

    def aggr(table, parts, cols):
        return c.get_aggr_stats_for(T.PartitionsStatsRequest(
            dbName=DB, tblName=table, colNames=cols, partNames=parts))

    def acc(table, part=None):
        obj = c.get_partition(DB, table, [part]) if part else c.get_table(DB, table)
        return (obj.parameters or {}).get("COLUMN_STATS_ACCURATE")

    def part_table(name):
        c.create_table(make_table(DB, name, cols=PCOLS, keys=(("ds", "string"),)))
        sd = c.get_table(DB, name).sd
        for v in "1234":
            c.add_partition(T.Partition(values=[v], dbName=DB, tableName=name, sd=sd, parameters={}))

    step("create db", lambda: c.create_database(T.Database(name=DB, description="", parameters={})))
    step("create t", lambda: c.create_table(make_table(DB, "t", cols=COLS)))
    for name in ("p", "pa", "pb", "pc"):
        step(f"create {name}", lambda name=name: part_table(name))

    # ------------------------------------------------------------ table level
    step("get no stats", lambda: c.get_table_column_statistics(DB, "t", "id"))
    step("get unknown col", lambda: c.get_table_column_statistics(DB, "t", "nope"))
    step("get unknown table", lambda: c.get_table_column_statistics(DB, "nope", "id"))
    step("req no stats", lambda: tbl_req("t", ["id"]))
    step("req unknown table", lambda: tbl_req("nope", ["id"]))
    step("req no cols", lambda: tbl_req("t", []))
    step("update t", lambda: c.update_table_column_statistics(cs("t", [
        ("ID", "INT", longs(1, 100, 2, 50)), ("Name", "STRING", strings(10, 4.5, 1, 20))])))
    step("accurate after update", lambda: acc("t"))
    step("get id", lambda: c.get_table_column_statistics(DB, "t", "ID"))
    step("get name", lambda: c.get_table_column_statistics(DB.upper(), "T", "name"))
    step("req some", lambda: tbl_req("t", ["name", "id", "flag"]))
    step("update unknown col", lambda: c.update_table_column_statistics(cs("t", [("zz", "int", longs(1, 2, 0, 1))])))
    step("update unknown table", lambda: c.update_table_column_statistics(cs("nope", [("id", "int", longs(1, 2, 0, 1))])))
    step("update unknown db", lambda: c.update_table_column_statistics(
        col_stats("nodb", "t", [("id", "int", longs(1, 2, 0, 1))])))
    step("overwrite without low", lambda: c.update_table_column_statistics(cs("t", [
        ("id", "int", T.ColumnStatisticsData(longStats=T.LongColumnStatsData(highValue=7, numNulls=0, numDVs=3)))])))
    step("id after overwrite", lambda: c.get_table_column_statistics(DB, "t", "id"))
    step("more kinds", lambda: c.update_table_column_statistics(cs("t", [
        ("flag", "boolean", booleans(3, 4, 1)), ("x", "double", doubles(-1.5, 2.25, 0, 9)),
        ("d", "date", dates(18000, 19000, 2, 30)), ("dec", "decimal(10,2)", decimals("-1.50", "12.25", 0, 7))])))
    step("sketch not read back", lambda: c.update_table_column_statistics(cs("t", [
        ("name", "string", T.ColumnStatisticsData(stringStats=T.StringColumnStatsData(
            maxColLen=10, avgColLen=4.5, numNulls=1, numDVs=20, bitVectors=b"FM\x01\x02")))])))
    step("req all", lambda: tbl_req("t", [n for n, _ in COLS]))
    step("accurate after more", lambda: acc("t"))

    # ------------------------------------------------------------ table deletes
    step("delete missing col", lambda: c.delete_table_column_statistics(DB, "t", "nope", None))
    step("delete id", lambda: c.delete_table_column_statistics(DB, "t", "id", None))
    step("delete id again", lambda: c.delete_table_column_statistics(DB, "t", "id", None))
    step("accurate after delete", lambda: acc("t"))
    step("delete d", lambda: c.delete_table_column_statistics(DB, "t", "D", None))
    step("delete unknown table", lambda: c.delete_table_column_statistics(DB, "nope", "id", None))
    step("delete all", lambda: c.delete_table_column_statistics(DB, "t", None, None))
    step("req after delete all", lambda: tbl_req("t", [n for n, _ in COLS]))
    step("accurate after delete all", lambda: acc("t"))
    step("delete all again", lambda: c.delete_table_column_statistics(DB, "t", None, None))

    # ------------------------------------------------------------ partitions
    step("update part", lambda: c.update_partition_column_statistics(cs("p", [
        ("id", "int", longs(0, 10, 1, 5)), ("name", "string", strings(5, 2.0, 0, 3))], part="ds=1")))
    step("update part missing", lambda: c.update_partition_column_statistics(cs("p", [
        ("id", "int", longs(0, 1, 0, 1))], part="ds=9")))
    step("update part bad name", lambda: c.update_partition_column_statistics(cs("p", [
        ("id", "int", longs(0, 1, 0, 1))], part="x=1")))
    step("update part unknown col", lambda: c.update_partition_column_statistics(cs("p", [
        ("zz", "int", longs(0, 1, 0, 1))], part="ds=1")))
    step("accurate of ds=1", lambda: acc("p", "1"))
    step("get part col", lambda: c.get_partition_column_statistics(DB, "p", "ds=1", "id"))
    step("get part col none", lambda: c.get_partition_column_statistics(DB, "p", "ds=2", "id"))
    step("get part col missing part", lambda: c.get_partition_column_statistics(DB, "p", "ds=9", "id"))
    step("set_aggr", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
        cs("p", [("id", "int", longs(20, 30, 2, 8)), ("name", "string", strings(7, 3.0, 1, 4))], part="ds=2"),
        cs("p", [("id", "int", longs(-5, 3, 0, 4))], part="ds=3")], needMerge=False)))
    step("accurate after set_aggr", lambda: [acc("p", v) for v in "23"])
    step("set_aggr missing partition", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(
        colStats=[cs("p", [("id", "int", longs(1, 1, 0, 1))], part="ds=99")], needMerge=False)))
    step("part stats", lambda: part_req("p", ["ds=1", "ds=2", "ds=3", "ds=4", "ds=9"], ["id", "name"]))
    step("set_aggr part unknown table", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(
        colStats=[cs("nope", [("id", "int", longs(1, 1, 0, 1))], part="ds=1")], needMerge=False)))
    # merge: both partitions list id as accurate
    step("set_aggr merge", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
        cs("p", [("id", "int", longs(25, 40, 1, 3))], part="ds=2"),
        cs("p", [("id", "int", longs(-9, 0, 4, 12))], part="ds=3")], needMerge=True)))
    step("merged", lambda: part_req("p", ["ds=2", "ds=3"], ["id"]))
    step("delete part col", lambda: c.delete_partition_column_statistics(DB, "p", "ds=1", "id", None))
    step("delete part col again", lambda: c.delete_partition_column_statistics(DB, "p", "ds=1", "id", None))
    step("accurate of ds=1 after delete", lambda: acc("p", "1"))
    step("delete part unknown table", lambda: c.delete_partition_column_statistics(DB, "nope", "ds=1", "id", None))
    step("delete part all", lambda: c.delete_partition_column_statistics(DB, "p", "ds=2", None, None))
    step("part stats after deletes", lambda: part_req("p", ["ds=1", "ds=2", "ds=3"], ["id", "name"]))

    # ------------------------------------------------------------ table merge
    step("set_aggr table", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[cs("t", [
        ("flag", "boolean", booleans(3, 4, 1)), ("x", "double", doubles(-1.5, 2.25, 0, 9))])], needMerge=False)))
    step("set_aggr table merge", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[cs("t", [
        ("flag", "boolean", booleans(1, 1, 1)), ("x", "double", doubles(-3.0, 1.0, 2, 4))])], needMerge=True)))
    step("merged table", lambda: tbl_req("t", ["flag", "x"]))
    step("set_aggr table two", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
        cs("t", [("x", "double", doubles(1, 2, 0, 1))]), cs("t", [("x", "double", doubles(1, 2, 0, 1))])])))
    step("set_aggr empty", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[])))
    step("set_aggr table unknown", lambda: c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
        cs("nope", [("x", "double", doubles(1, 2, 0, 1))])], needMerge=False)))

    # ------------------------------------------------------------ aggregation
    def fill(table, rows):
        return c.set_aggr_stats_for(T.SetPartitionsStatsRequest(colStats=[
            cs(table, objs, part=part) for part, objs in rows], needMerge=False))

    step("fill pa", lambda: fill("pa", [
        ("ds=1", [("id", "int", longs(0, 10, 1, 5)), ("x", "double", doubles(0.5, 1.5, 0, 3)),
                  ("name", "string", strings(5, 2.0, 0, 3)), ("flag", "boolean", booleans(1, 2, 3))]),
        ("ds=2", [("id", "int", longs(20, 30, 2, 8)), ("x", "double", doubles(-2.0, 4.0, 1, 6)),
                  ("name", "string", strings(7, 3.0, 1, 4)), ("flag", "boolean", booleans(4, 5, 6))]),
        ("ds=3", [("id", "int", longs(-5, 3, 0, 4)), ("x", "double", doubles(1.0, 2.0, 2, 2))])]))
    step("aggr all found", lambda: aggr("pa", ["ds=1", "ds=2", "ds=3"], ["id", "x"]))
    step("aggr extrapolated", lambda: aggr("pa", ["ds=1", "ds=2", "ds=3", "ds=4"], ["name", "flag"]))
    step("fill pb", lambda: fill("pb", [
        ("ds=1", [("id", "int", longs(0, 10, 1, 5)), ("x", "double", doubles(0.5, 1.5, 3, 3))]),
        ("ds=2", [("id", "int", longs(20, 30, 2, 8)), ("x", "double", doubles(-2.0, 4.0, 1, 6))]),
        ("ds=4", [("id", "int", longs(-5, 3, 0, 4)), ("x", "double", doubles(1.0, 2.0, 2, 2))])]))
    step("aggr extrapolated reversed", lambda: aggr("pb", ["ds=4", "ds=3", "ds=2", "ds=1"], ["id", "x"]))
    step("aggr no parts", lambda: aggr("pc", [], ["id"]))
    step("aggr no cols", lambda: aggr("pc", ["ds=1"], []))
    step("aggr no stats", lambda: aggr("pc", ["ds=1", "ds=2"], ["id"]))
    step("aggr unknown table", lambda: aggr("nope", ["ds=1"], ["id"]))

    # ------------------------------------------------------------ alter, rename, drop
    step("stats for alter", lambda: c.update_table_column_statistics(cs("t", [
        ("id", "int", longs(1, 100, 2, 50)), ("name", "string", strings(10, 4.5, 1, 20))])))

    def alter():
        tbl = c.get_table(DB, "t")
        tbl.sd.cols = [T.FieldSchema("id", "bigint", None), T.FieldSchema("name", "string", None),
                       T.FieldSchema("flag", "boolean", None)]
        c.alter_table_with_environment_context(DB, "t", tbl, T.EnvironmentContext(
            {"DO_NOT_UPDATE_STATS": "true"}))
    step("alter retype id, drop x", alter)
    step("after alter", lambda: tbl_req("t", ["id", "name", "flag", "x"]))
    step("accurate after alter", lambda: acc("t"))

    def rename():
        tbl = c.get_table(DB, "t")
        tbl.tableName = "t2"
        c.alter_table_with_environment_context(DB, "t", tbl, T.EnvironmentContext(
            {"DO_NOT_UPDATE_STATS": "true"}))
    step("rename", rename)
    step("after rename", lambda: tbl_req("t2", ["id", "name", "flag"]))
    step("drop t2", lambda: c.drop_table(DB, "t2", True))
    step("recreate t2", lambda: c.create_table(make_table(DB, "t2", cols=COLS)))
    step("no stats after recreate", lambda: tbl_req("t2", ["name", "flag"]))
    step("drop ds=3", lambda: c.drop_partition(DB, "p", ["3"], True))
    step("add ds=3", lambda: c.add_partition(T.Partition(
        values=["3"], dbName=DB, tableName="p", sd=c.get_table(DB, "p").sd, parameters={})) and None)
    step("no stats after re-add", lambda: part_req("p", ["ds=3"], ["id"]))
    return out


@pytest.fixture(scope="module")
def java_hms(tmp_path_factory):
    require(shutil.which("java") is not None, "java is not installed")
    require_module("pyspark")
    from hms_bench.javahms import start_java_metastore
    server = start_java_metastore(free_port(), str(tmp_path_factory.mktemp("javahms")))
    yield server
    server.stop()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_same_answers_as_java_metastore(java_hms, hms):
    pairs = paired_outcomes(run_sequence, hms.port, java_hms.port)
    mismatches = []
    for name, mine, java in pairs:
        expected = HIVE4_DIFFERS.get(name, (java, java))
        if (mine, java) != expected:
            mismatches.append(f"{name}: ours={mine!r} java={java!r} expected={expected!r}")
    assert not mismatches, "\n".join(mismatches)
    assert set(HIVE4_DIFFERS) <= {n for n, _, _ in pairs}


def test_extension_mode_writes_an_older_upstream_s_way(java_hms, tmp_path):
    """In front of Hive 2.3, which has no update_*_column_statistics_req, extension mode
    sends the older call (service/extension/forwarding.py)."""
    ext = InProcessServer(str(tmp_path / "ext"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp_path}/ext.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(str(tmp_path), "wh"),
        "hms_txn.upstream.uris": f"thrift://127.0.0.1:{java_hms.port}"})
    c, u = ext.client(), connect(java_hms.port)
    try:
        c.create_database(T.Database(name="extstats", description="", parameters={}))
        c.create_table(make_table("extstats", "t", cols=COLS))
        assert c.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
            colStats=[col_stats("extstats", "t", [("id", "int", longs(1, 2, 0, 2))])],
            writeId=5, validWriteIdList="extstats.t:5:9223372036854775807::",
            engine="hive")).result is True
        got = u.get_table_column_statistics("extstats", "t", "id")
        assert got.statsObj[0].statsData.longStats.highValue == 2
        assert "id" in c.get_table("extstats", "t").parameters["COLUMN_STATS_ACCURATE"]
    finally:
        c.close()
        u.close()
        ext.stop()
