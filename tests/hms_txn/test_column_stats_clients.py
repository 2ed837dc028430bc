"""Column statistics as the engines write and read them: the calls HiveServer2 4.x, Trino's
Hive connector and Impala make, in their order and argument shapes, each answer one the
client goes on with. The call sequences are those of /work/notes/clients/ (hs2.md,
trino.md, impala.md), which cite the clients' source; each step names its source there.
"""

from __future__ import annotations

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.stats_support import (
    Writer, accurate, by_name, col_stats, longs, snapshot, strings)
from tests.hms_txn.test_catalog import make_table

COLS = (("id", "bigint"), ("name", "string"))
HS2_CAPABILITIES = T.ClientCapabilities(values=[T.ClientCapability.INSERT_ONLY_TABLES])


def hs2_create(client, name, *, keys=(), acid=False):
    """CREATE TABLE from HS2: the table carries the stats state HS2 sets for a new, empty
    table (StatsSetupConst.setStatsStateForCreateTable with hive.stats.column.autogather:
    every basic stat 0, BASIC_STATS and every column accurate)."""
    params = {"numFiles": "0", "numRows": "0", "rawDataSize": "0", "totalSize": "0",
              "numFilesErasureCoded": "0",
              "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true","COLUMN_STATS":'
                                       '{"id":"true","name":"true"}}'}
    if acid:
        params["transactional"] = "true"
    client.create_table_req(T.CreateTableRequest(table=make_table(
        "default", name, cols=COLS, keys=keys, params=params)))


def hs2_get_table(client, name, valid=None):
    # hs2.md INSERT 1 (Hive.getTable): engine "hive", getColumnStats false, capabilities
    return client.get_table_req(T.GetTableRequest(
        dbName="default", tblName=name, catName="hive", engine="hive", getColumnStats=False,
        capabilities=HS2_CAPABILITIES, validWriteIdList=valid)).table


def hs2_basic_stats(client, table, rows, valid=None):
    # hs2.md INSERT 6 (BasicStatsTask.aggregateStats): alter_table_req with
    # DO_NOT_UPDATE_STATS carrying the basic stats, marked accurate
    table.parameters.update({"numRows": str(rows), "numFiles": "1", "totalSize": "100",
                             "rawDataSize": str(rows * 10)})
    table.parameters.pop("transient_lastDdlTime", None)           # Hive.alterTable drops it
    acc = accurate(table.parameters) or {}
    acc["BASIC_STATS"] = "true"
    client.alter_table_req(T.AlterTableRequest(
        catName="hive", dbName="default", tableName=table.tableName, table=table,
        environmentContext=T.EnvironmentContext({"DO_NOT_UPDATE_STATS": "true"}),
        validWriteIdList=valid))


def hs2_column_stats(client, table, objs, *, need_merge, part=None, writer=None):
    # hs2.md INSERT 6 / ANALYZE 2 (ColStatsProcessor.persistColumnStats): set_aggr_stats_for,
    # engine "hive" on the request and every ColumnStatistics; for ACID the writer's
    # validWriteIdList and write id
    stats = col_stats("default", table, objs, part=part, engine="hive")
    stats.statsDesc.catName = "hive"
    request = T.SetPartitionsStatsRequest(colStats=[stats], engine="hive", needMerge=need_merge)
    if writer is not None:
        request.validWriteIdList, request.writeId = writer.valid_write_ids, writer.write_id
    return client.set_aggr_stats_for(request)


def hs2_read_stats(client, table, cols, valid=None):
    # hs2.md SELECT 3 (HMSC.getTableColumnStatistics): no call when colNames is empty
    return client.get_table_statistics_req(T.TableStatsRequest(
        dbName="default", tblName=table, colNames=cols, engine="hive", catName="hive",
        validWriteIdList=valid)).tableStats


def test_hs2_insert_and_analyze_on_a_plain_table(client):
    hs2_create(client, "plain")
    # INSERT INTO plain VALUES (1, 'a'), (2, 'bb'): autogather merges (needMerge true)
    for rows, (lo, hi, maxlen) in ((2, (1, 2, 2)), (5, (0, 9, 4))):
        tbl = hs2_get_table(client, "plain")
        hs2_basic_stats(client, tbl, rows)
        assert hs2_column_stats(client, "plain", [
            ("id", "bigint", longs(lo, hi, 0, 2)), ("name", "string", strings(maxlen, 1.5, 0, 2))],
            need_merge=True) is True
    got = by_name(hs2_read_stats(client, "plain", ["id", "name"]))
    assert got["id"] == T.LongColumnStatsData(lowValue=0, highValue=9, numNulls=0, numDVs=2)
    assert got["name"].maxColLen == 4
    assert accurate(hs2_get_table(client, "plain").parameters) == \
        {"BASIC_STATS": "true", "COLUMN_STATS": {"id": "true", "name": "true"}}
    # ANALYZE TABLE plain COMPUTE STATISTICS FOR COLUMNS: overwrite (needMerge false)
    assert hs2_column_stats(client, "plain", [("id", "bigint", longs(3, 4, 1, 2))], need_merge=False)
    assert by_name(hs2_read_stats(client, "plain", ["id"]))["id"].lowValue == 3
    # DESCRIBE FORMATTED plain id (hs2.md DESCRIBE 5): get_table_statistics_req
    assert set(by_name(hs2_read_stats(client, "plain", ["id"]))) == {"id"}


def test_hs2_dynamic_partition_insert_select_and_describe(client):
    hs2_create(client, "sales", keys=(("ds", "string"),))
    # INSERT ... PARTITION (ds): new partitions in one add_partitions (hs2.md INSERT 4),
    # basic stats with alter_partitions_req, then one set_aggr_stats_for for all
    tbl = hs2_get_table(client, "sales")
    parts = [T.Partition(values=[d], dbName="default", tableName="sales", catName="hive",
                         sd=tbl.sd, parameters={}) for d in ("2024-01-01", "2024-01-02")]
    client.add_partitions(parts)
    stored = client.get_partitions_by_names("default", "sales", ["ds=2024-01-01", "ds=2024-01-02"])
    for p in stored:
        p.parameters.update({"numRows": "2", "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'})
    client.alter_partitions_req(T.AlterPartitionsRequest(
        catName="hive", dbName="default", tableName="sales", partitions=stored,
        environmentContext=T.EnvironmentContext({"DO_NOT_UPDATE_STATS": "true"})))
    request = T.SetPartitionsStatsRequest(colStats=[
        col_stats("default", "sales", [("id", "bigint", longs(i, i + 10, 0, 5)),
                                       ("name", "string", strings(3, 2.0, 1, 4))],
                  part=f"ds=2024-01-0{i}", engine="hive") for i in (1, 2)],
        engine="hive", needMerge=False)
    assert client.set_aggr_stats_for(request) is True
    # SELECT with statistics (hs2.md SELECT 3): aggregated and per partition
    parts_req = T.PartitionsStatsRequest(dbName="default", tblName="sales", colNames=["id", "name"],
                                         partNames=["ds=2024-01-01", "ds=2024-01-02"],
                                         engine="hive", catName="hive")
    aggr = client.get_aggr_stats_for(parts_req)
    assert aggr.partsFound == 2
    assert by_name(aggr.colStats)["id"] == T.LongColumnStatsData(lowValue=1, highValue=12,
                                                                 numNulls=0, numDVs=5)
    assert sorted(client.get_partitions_statistics_req(parts_req).partStats) == \
        ["ds=2024-01-01", "ds=2024-01-02"]
    # HS2 sends the catalog inside the database name of the old delete calls (hs2.md, 2)
    assert client.delete_partition_column_statistics("@hive#default", "sales", "ds=2024-01-01",
                                                     "name", "hive")
    assert set(by_name(client.get_partitions_statistics_req(parts_req)
                       .partStats["ds=2024-01-01"])) == {"id"}


def test_hs2_insert_into_an_acid_table(client):
    hs2_create(client, "acid", acid=True)
    # hs2.md "INSERT into an ACID table": write id allocated, the writer's snapshot, basic
    # stats with alter_table_req(validWriteIdList, table.writeId), column stats with both
    w = Writer(client, "default", "acid")
    reader_before = snapshot(client, "default", "acid")
    tbl = hs2_get_table(client, "acid", w.valid_write_ids)
    tbl.writeId = w.write_id
    hs2_basic_stats(client, tbl, 3, valid=w.valid_write_ids)
    assert hs2_column_stats(client, "acid", [("id", "bigint", longs(1, 3, 0, 3))],
                            need_merge=True, writer=w) is True
    assert by_name(hs2_read_stats(client, "acid", ["id"], w.valid_write_ids))["id"].highValue == 3
    w.commit()
    # SELECT in a later transaction uses them; one that started before does not
    assert by_name(hs2_read_stats(client, "acid", ["id"], snapshot(client, "default", "acid")))
    assert hs2_read_stats(client, "acid", ["id"], reader_before) == []
    assert hs2_get_table(client, "acid", reader_before).isStatsCompliant is False
    # a second INSERT merges into them
    w2 = Writer(client, "default", "acid")
    tbl = hs2_get_table(client, "acid", w2.valid_write_ids)
    tbl.writeId = w2.write_id
    hs2_basic_stats(client, tbl, 5, valid=w2.valid_write_ids)
    assert hs2_column_stats(client, "acid", [("id", "bigint", longs(0, 9, 1, 4))],
                            need_merge=True, writer=w2) is True
    w2.commit()
    got = by_name(hs2_read_stats(client, "acid", ["id"], snapshot(client, "default", "acid")))
    assert got["id"] == T.LongColumnStatsData(lowValue=0, highValue=9, numNulls=1, numDVs=4)


def trino_update_table_statistics(client, table, objs, removed=(), write_id=None):
    """trino.md INSERT 4 (THM.updateTableStatistics): get_table_req, the current column
    stats (TableStatsRequest{dbName, tblName, colNames}: no engine, no catalog),
    alter_table_with_environment_context with DO_NOT_UPDATE_STATS (and table.writeId for
    ACID), update_table_column_statistics (no engine), delete_table_column_statistics for
    columns whose statistics disappeared."""
    tbl = client.get_table_req(T.GetTableRequest(dbName="default", tblName=table,
                                                 capabilities=HS2_CAPABILITIES)).table
    client.get_table_statistics_req(T.TableStatsRequest(dbName="default", tblName=table,
                                                        colNames=[c for c, _ in COLS]))
    tbl.parameters.update({"numRows": "4", "numFiles": "1", "totalSize": "10", "rawDataSize": "40",
                           "STATS_GENERATED_VIA_STATS_TASK": "workaround for potential lack of HIVE-12730"})
    if write_id is not None:
        tbl.writeId = write_id
    client.alter_table_with_environment_context(
        "default", table, tbl, T.EnvironmentContext({"DO_NOT_UPDATE_STATS": "true"}))
    assert client.update_table_column_statistics(col_stats("default", table, objs)) is True
    for column in removed:
        assert client.delete_table_column_statistics("default", table, column, None) is True


def test_trino_insert_analyze_and_show_stats(client):
    # CREATE TABLE from Trino: plain create_table, no stats state (trino.md CREATE TABLE 1)
    client.create_table(make_table("default", "tt", cols=COLS))
    trino_update_table_statistics(client, "tt", [("id", "bigint", longs(1, 4, 0, 4)),
                                                 ("name", "string", strings(2, 1.5, 0, 4))])
    # ANALYZE: the same calls (trino.md ANALYZE); a column whose statistics went away is
    # deleted
    trino_update_table_statistics(client, "tt", [("id", "bigint", longs(1, 8, 0, 8))],
                                  removed=["name"])
    # SHOW STATS (trino.md SELECT 4): get_table_statistics_req without engine
    got = client.get_table_statistics_req(T.TableStatsRequest(
        dbName="default", tblName="tt", colNames=["id", "name"])).tableStats
    assert by_name(got) == {"id": T.LongColumnStatsData(lowValue=1, highValue=8, numNulls=0, numDVs=8)}
    # partitions (THM.updatePartitionStatistics)
    client.create_table(make_table("default", "tp", cols=COLS, keys=(("ds", "string"),)))
    client.add_partitions([T.Partition(values=["a"], dbName="default", tableName="tp",
                                       sd=client.get_table_acid_aware("default", "tp").sd, parameters={})])
    part = client.get_partitions_by_names("default", "tp", ["ds=a"])[0]
    client.get_partitions_statistics_req(T.PartitionsStatsRequest(
        dbName="default", tblName="tp", colNames=["id", "name"], partNames=["ds=a"]))
    part.parameters["numRows"] = "4"
    client.alter_partition("default", "tp", part)
    assert client.update_partition_column_statistics(col_stats(
        "default", "tp", [("id", "bigint", longs(1, 4, 0, 4)), ("name", "string", strings(1, 1.0, 0, 1))],
        part="ds=a")) is True
    assert client.delete_partition_column_statistics("default", "tp", "ds=a", "name", None) is True
    got = client.get_partitions_statistics_req(T.PartitionsStatsRequest(
        dbName="default", tblName="tp", colNames=["id", "name"], partNames=["ds=a"])).partStats
    assert set(by_name(got["ds=a"])) == {"id"}


def test_trino_insert_into_a_transactional_table(client):
    # trino.md "INSERT into ACID": write id, alter_table_req with the writer's list, then
    # the statistics update of a plain INSERT with table.writeId set. The table was made by
    # Trino, so its basic stats are not marked accurate and Hive 4's rule lets the
    # deprecated calls through (ObjectStore.verifyStatsChangeCtx).
    client.create_table(make_table("default", "ta", cols=COLS, params={"transactional": "true"}))
    w = Writer(client, "default", "ta")
    tbl = client.get_table_acid_aware("default", "ta")
    tbl.writeId = w.write_id
    client.alter_table_req(T.AlterTableRequest(dbName="default", tableName="ta", table=tbl,
                                               validWriteIdList=w.valid_write_ids,
                                               writeId=w.write_id,
                                               environmentContext=T.EnvironmentContext({})))
    trino_update_table_statistics(client, "ta", [("id", "bigint", longs(1, 4, 0, 4))],
                                  write_id=w.write_id)
    w.commit()
    got = client.get_table_statistics_req(T.TableStatsRequest(
        dbName="default", tblName="ta", colNames=["id"])).tableStats
    assert by_name(got)["id"].highValue == 4


@pytest.mark.parametrize("acid", [False, True])
def test_impala_compute_stats(client, acid):
    """impala.md COMPUTE STATS: column statistics with engine "impala"; an ACID table in a
    private transaction with set_aggr_stats_for(writeId, validWriteIdList) (COE
    .alterTableUpdateStatsInner, Shim3.setTableColumnStatsTransactional); the table's
    COLUMN_STATS_ACCURATE removed by the alter that follows (COE.updateTableStats)."""
    params = {"transactional": "true"} if acid else {}
    client.create_table(make_table("default", "imp", cols=COLS, params=params))
    stats = col_stats("default", "imp", [("id", "bigint", longs(1, 4, 0, 4))], engine="impala")
    if acid:
        w = Writer(client, "default", "imp")
        assert client.set_aggr_stats_for(T.SetPartitionsStatsRequest(
            colStats=[stats], writeId=w.write_id, validWriteIdList=w.valid_write_ids,
            engine="impala"))
    else:
        assert client.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
            colStats=[stats], engine="impala")).result
    tbl = client.get_table_acid_aware("default", "imp")
    tbl.parameters.pop("COLUMN_STATS_ACCURATE", None)
    tbl.parameters.update({"numRows": "4", "STATS_GENERATED": "TASK"})
    if acid:
        tbl.writeId = w.write_id
        client.alter_table_req(T.AlterTableRequest(dbName="default", tableName="imp", table=tbl,
                                                   validWriteIdList=w.valid_write_ids))
        w.commit()
    else:
        client.alter_table("default", "imp", tbl)
    # Impala's table load: the statistics of engine "impala" (impala.md loading 4)
    got = client.get_table_statistics_req(T.TableStatsRequest(
        dbName="default", tblName="imp", colNames=["id", "name"], engine="impala")).tableStats
    assert by_name(got)["id"].highValue == 4
    assert client.get_table_statistics_req(T.TableStatsRequest(
        dbName="default", tblName="imp", colNames=["id"], engine="hive")).tableStats == []
