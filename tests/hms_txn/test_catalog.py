"""Catalog calls through a real Thrift client, on SQLite and PostgreSQL."""

from __future__ import annotations

import os

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

ORC_IN = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"


def make_sd(cols=(("id", "int"), ("name", "string")), location=None):
    return t.StorageDescriptor(
        cols=[t.FieldSchema(n, ty, None) for n, ty in cols], location=location,
        inputFormat=ORC_IN, outputFormat=ORC_OUT, compressed=False, numBuckets=-1,
        serdeInfo=t.SerDeInfo(name=None, serializationLib=ORC_SERDE, parameters={}),
        bucketCols=[], sortCols=[], parameters={})


def make_table(db, name, *, keys=(), cols=(("id", "int"), ("name", "string")), params=None,
               table_type="MANAGED_TABLE", location=None):
    return t.Table(tableName=name, dbName=db, owner="tester", sd=make_sd(cols, location),
                   partitionKeys=[t.FieldSchema(k, ty, None) for k, ty in keys],
                   parameters=dict(params or {}), tableType=table_type)


def local(location: str) -> str:
    assert location.startswith("file:"), location
    return location[len("file:"):]


# --------------------------------------------------------------------------- databases

def test_default_database_exists(client):
    assert client.get_all_databases() == ["default"]
    db = client.get_database("default")
    assert db.name == "default" and db.locationUri.startswith("file:")


def test_database_lifecycle(client):
    client.create_database(t.Database(name="Sales", description="d", parameters={"k": "v"}))
    db = client.get_database("SALES")
    assert db.name == "sales" and db.parameters == {"k": "v"} and db.description == "d"
    assert os.path.isdir(local(db.locationUri)) and db.locationUri.endswith("/sales.db")
    assert client.get_databases("sal*") == ["sales"]
    assert client.get_databases("x*|s*") == ["sales"]
    # as the Java metastore 2.3 matches (test_name_patterns_match_the_java_metastore):
    # "." is any one character, other regex syntax is literal, "" matches no database
    assert client.get_databases("s.les") == ["sales"]
    assert client.get_databases("sale?") == client.get_databases("") == []
    assert client.get_databases(" sales|x") == ["sales"] and client.get_databases("sales |x") == []
    assert client.get_all_databases() == ["default", "sales"]
    db.description = "changed"
    client.alter_database("sales", db)
    assert client.get_database("sales").description == "changed"
    with pytest.raises(t.AlreadyExistsException, match="sales"):
        client.create_database(t.Database(name="sales"))
    client.drop_database("sales", True, False)
    assert client.get_all_databases() == ["default"]
    assert not os.path.exists(local(db.locationUri))
    with pytest.raises(t.NoSuchObjectException, match="sales"):
        client.get_database("sales")
    with pytest.raises(t.NoSuchObjectException):
        client.drop_database("sales", True, False)


def test_drop_database_non_empty_needs_cascade(client):
    client.create_database(t.Database(name="d"))
    client.create_table(make_table("d", "t1"))
    with pytest.raises(t.InvalidOperationException, match="not empty"):
        client.drop_database("d", True, False)
    assert client.get_all_tables("d") == ["t1"]
    location = client.get_table("d", "t1").sd.location
    client.drop_database("d", True, True)
    assert client.get_all_databases() == ["default"]
    assert not os.path.exists(local(location))


def test_default_database_cannot_be_dropped(client):
    with pytest.raises(t.InvalidOperationException, match="default"):
        client.drop_database("default", True, True)
    assert client.get_all_databases() == ["default"]


# --------------------------------------------------------------------------- tables

def test_table_lifecycle(client):
    client.create_database(t.Database(name="d"))
    client.create_table(make_table("d", "Events", params={"comment": "c"}))
    tbl = client.get_table("D", "EVENTS")
    assert (tbl.dbName, tbl.tableName, tbl.tableType) == ("d", "events", "MANAGED_TABLE")
    assert tbl.sd.location.endswith("/d.db/events") and os.path.isdir(local(tbl.sd.location))
    assert [c.name for c in tbl.sd.cols] == ["id", "name"]
    assert tbl.createTime > 0 and "transient_lastDdlTime" in tbl.parameters
    assert tbl.parameters["comment"] == "c"
    assert client.get_all_tables("d") == ["events"]
    assert client.get_tables("d", "ev*") == ["events"]
    assert client.get_tables("d", "x*") == []
    assert client.get_tables_by_type("d", "*", "MANAGED_TABLE") == ["events"]
    assert client.get_tables_by_type("d", "*", "EXTERNAL_TABLE") == []
    assert [x.tableName for x in client.get_table_objects_by_name("d", ["events", "missing"])] == ["events"]
    res = client.get_table_objects_by_name_req(t.GetTablesRequest(dbName="d", tblNames=["events"]))
    assert [x.tableName for x in res.tables] == ["events"]
    got = client.get_table_req(t.GetTableRequest(dbName="d", tblName="events"))
    assert got.table.tableName == "events"
    assert [f.name for f in client.get_fields("d", "events")] == ["id", "name"]
    client.drop_table("d", "events", True)
    assert client.get_all_tables("d") == []
    assert not os.path.exists(local(tbl.sd.location))
    with pytest.raises(t.NoSuchObjectException, match="d.events"):
        client.get_table("d", "events")


def test_table_keeps_unknown_fields_and_parameters(client):
    tbl = make_table("default", "t", params={"a": "1", "transactional": "true"})
    tbl.sd.serdeInfo.parameters = {"serialization.format": "1"}
    tbl.sd.sortCols = [t.Order("id", 1)]
    tbl.sd.skewedInfo = t.SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={})
    tbl.ownerType = t.PrincipalType.ROLE
    client.create_table(tbl)
    got = client.get_table_acid_aware("default", "t")
    assert got.sd.serdeInfo.parameters == {"serialization.format": "1"}
    assert got.sd.sortCols == [t.Order("id", 1)]
    assert got.ownerType == t.PrincipalType.ROLE and got.owner == "tester"
    assert got.parameters["transactional"] == "true"


def test_alter_table_properties_and_rename(client):
    client.create_database(t.Database(name="d"))
    client.create_table(make_table("d", "t1", keys=[("ds", "string")]))
    client.add_partitions([t.Partition(values=["a"], dbName="d", tableName="t1")])
    tbl = client.get_table("d", "t1")
    tbl.parameters["owner_note"] = "x"
    client.alter_table_with_environment_context("d", "t1", tbl, t.EnvironmentContext({}))
    assert client.get_table("d", "t1").parameters["owner_note"] == "x"
    old_location = tbl.sd.location
    tbl.tableName = "t2"
    client.alter_table("d", "t1", tbl)
    assert client.get_all_tables("d") == ["t2"]
    moved = client.get_table("d", "t2")
    assert moved.sd.location.endswith("/d.db/t2") and os.path.isdir(local(moved.sd.location))
    assert not os.path.exists(local(old_location))
    part = client.get_partition("d", "t2", ["a"])
    assert part.tableName == "t2" and part.sd.location == moved.sd.location + "/ds=a"
    client.create_table(make_table("d", "t3"))
    tbl.tableName = "t3"
    with pytest.raises(t.InvalidOperationException, match="already exists"):
        client.alter_table("d", "t2", tbl)
    assert client.get_all_tables("d") == ["t2", "t3"]


def test_alter_table_cannot_change_partition_keys(client):
    client.create_table(make_table("default", "p", keys=[("ds", "string")]))
    tbl = client.get_table("default", "p")
    tbl.partitionKeys = [t.FieldSchema("other", "string", None)]
    with pytest.raises(t.InvalidOperationException, match="partition keys"):
        client.alter_table("default", "p", tbl)
    assert [k.name for k in client.get_table("default", "p").partitionKeys] == ["ds"]


def test_external_table_keeps_files(client, tmp_path):
    data = tmp_path / "ext"
    data.mkdir()
    (data / "file.orc").write_bytes(b"x")
    client.create_table(make_table("default", "ext", params={"EXTERNAL": "TRUE"},
                                   table_type="EXTERNAL_TABLE", location=f"file:{data}"))
    assert client.get_table("default", "ext").tableType == "EXTERNAL_TABLE"
    client.drop_table("default", "ext", True)
    assert (data / "file.orc").exists()


def test_table_names_case_insensitive_unique(client):
    client.create_table(make_table("default", "Mixed"))
    with pytest.raises(t.AlreadyExistsException):
        client.create_table(make_table("default", "MIXED"))
    assert client.get_all_tables("default") == ["mixed"]


# --------------------------------------------------------------------------- partitions

@pytest.fixture
def part_table(client):
    client.create_database(t.Database(name="d"))
    client.create_table(make_table("d", "p", keys=[("ds", "string"), ("hr", "int")]))
    parts = [t.Partition(values=[ds, hr], dbName="d", tableName="p")
             for ds in ("2024-01-01", "2024-01-02") for hr in ("1", "2", "10")]
    assert client.add_partitions(parts) == 6
    return client.get_table("d", "p")


def test_partition_reads(client, part_table):
    names = client.get_partition_names("d", "p", -1)
    assert names == sorted(names) and len(names) == 6
    assert "ds=2024-01-01/hr=10" in names
    assert len(client.get_partition_names("d", "p", 2)) == 2
    part = client.get_partition("d", "p", ["2024-01-01", "2"])
    assert part.values == ["2024-01-01", "2"]
    assert part.sd.location == part_table.sd.location + "/ds=2024-01-01/hr=2"
    assert os.path.isdir(local(part.sd.location))
    assert part.sd.cols == part_table.sd.cols
    assert client.get_partition_by_name("d", "p", "ds=2024-01-01/hr=2").values == ["2024-01-01", "2"]
    assert len(client.get_partitions("d", "p", -1)) == 6
    assert len(client.get_partitions("d", "p", 3)) == 3
    assert [p.values for p in client.get_partitions_ps("d", "p", ["2024-01-02"], -1)] == \
        [["2024-01-02", "1"], ["2024-01-02", "10"], ["2024-01-02", "2"]]
    assert [p.values for p in client.get_partitions_ps_with_auth("d", "p", ["", "10"], -1, "u", [])] == \
        [["2024-01-01", "10"], ["2024-01-02", "10"]]
    assert client.get_partition_names_ps("d", "p", ["2024-01-01", ""], -1) == \
        ["ds=2024-01-01/hr=1", "ds=2024-01-01/hr=10", "ds=2024-01-01/hr=2"]
    by_names = client.get_partitions_by_names("d", "p", ["ds=2024-01-02/hr=2", "ds=2024-01-01/hr=1", "ds=x/hr=1"])
    assert sorted(p.values for p in by_names) == [["2024-01-01", "1"], ["2024-01-02", "2"]]
    assert client.partition_name_to_vals("ds=a%2Fb/hr=1") == ["a/b", "1"]
    assert client.partition_name_to_spec("ds=a/hr=1") == {"ds": "a", "hr": "1"}


@pytest.mark.parametrize("filter_text, expected", [
    ("ds = '2024-01-01'", 3),
    ('ds = "2024-01-02" and hr > 1', 2),  # numeric: 2 and 10
    ("hr >= 2 and hr < 10", 2),
    ("ds = '2024-01-01' or hr = 10", 4),
    ("not (hr = 1)", 4),
    ("ds like '2024-01-0%' and (hr = 1 or hr = 2)", 4),
    ("ds <> '2024-01-01'", 3),
    ("", 6),
])
def test_partitions_by_filter(client, part_table, filter_text, expected):
    assert len(client.get_partitions_by_filter("d", "p", filter_text, -1)) == expected
    assert client.get_num_partitions_by_filter("d", "p", filter_text) == expected


def test_partitions_by_bad_filter(client, part_table):
    with pytest.raises(t.MetaException, match="filter"):
        client.get_partitions_by_filter("d", "p", "ds = ", -1)
    with pytest.raises(t.MetaException, match="not a partition key"):
        client.get_partitions_by_filter("d", "p", "nope = 'x'", -1)


def test_add_partitions_req_and_duplicates(client, part_table):
    req = t.AddPartitionsRequest(dbName="d", tblName="p", parts=[
        t.Partition(values=["2024-01-01", "1"], dbName="d", tableName="p"),
        t.Partition(values=["2024-01-03", "1"], dbName="d", tableName="p")], ifNotExists=True, needResult=True)
    res = client.add_partitions_req(req)
    assert [p.values for p in res.partitions] == [["2024-01-03", "1"]]
    with pytest.raises(t.AlreadyExistsException, match="ds=2024-01-03/hr=1"):
        client.add_partition(t.Partition(values=["2024-01-03", "1"], dbName="d", tableName="p"))
    assert len(client.get_partition_names("d", "p", -1)) == 7


def test_add_partitions_is_all_or_nothing(client, part_table):
    with pytest.raises(t.AlreadyExistsException):
        client.add_partitions([t.Partition(values=["2024-02-01", "1"], dbName="d", tableName="p"),
                               t.Partition(values=["2024-01-01", "1"], dbName="d", tableName="p")])
    assert len(client.get_partition_names("d", "p", -1)) == 6


def test_alter_and_drop_partitions(client, part_table):
    part = client.get_partition("d", "p", ["2024-01-01", "1"])
    part.parameters["numRows"] = "42"
    client.alter_partition("d", "p", part)
    assert client.get_partition("d", "p", ["2024-01-01", "1"]).parameters["numRows"] == "42"
    parts = client.get_partitions_ps("d", "p", ["2024-01-02"], -1)
    for p in parts:
        p.parameters["x"] = "y"
    client.alter_partitions_with_environment_context("d", "p", parts, None)
    assert all(p.parameters["x"] == "y" for p in client.get_partitions_ps("d", "p", ["2024-01-02"], -1))
    assert client.drop_partition("d", "p", ["2024-01-01", "1"], True)
    assert not os.path.exists(local(part.sd.location))
    assert client.drop_partition_by_name("d", "p", "ds=2024-01-01/hr=2", True)
    with pytest.raises(t.NoSuchObjectException):
        client.drop_partition("d", "p", ["2024-01-01", "1"], True)
    res = client.drop_partitions_req(t.DropPartitionsRequest(
        dbName="d", tblName="p", parts=t.RequestPartsSpec(names=["ds=2024-01-02/hr=1"]),
        deleteData=True, ifExists=True, needResult=True))
    assert [p.values for p in res.partitions] == [["2024-01-02", "1"]]
    assert len(client.get_partition_names("d", "p", -1)) == 3


def test_partition_values_escaped_in_names_and_paths(client):
    client.create_table(make_table("default", "esc", keys=[("k", "string")]))
    client.add_partition(t.Partition(values=["a/b:c=d"], dbName="default", tableName="esc"))
    names = client.get_partition_names("default", "esc", -1)
    assert names == ["k=a%2Fb%3Ac%3Dd"]
    part = client.get_partition_by_name("default", "esc", names[0])
    assert part.values == ["a/b:c=d"] and part.sd.location.endswith("/esc/k=a%2Fb%3Ac%3Dd")


def test_get_partition_names_errors_use_field_one(client):
    # Hive 2.3 clients read only id 1 of get_partition_names' exceptions.
    with pytest.raises(t.NoSuchObjectException, match="missing"):
        client.get_partition_names("default", "missing", -1)


# --------------------------------------------------------------------------- misc calls

def test_session_and_config_calls(client):
    assert client.set_ugi("alice", ["g1"]) == ["alice", "g1"]
    assert client.get_config_value("hive.txn.timeout", "x") == "300s"
    assert client.get_config_value("hive.no.such.key", "fallback") == "fallback"
    assert client.getMetaConf("hive.metastore.try.direct.sql") == "true"
    with pytest.raises(t.MetaException, match="not a metastore configuration key"):
        client.getMetaConf("no.such.key")
    assert client.get_all_functions().functions == []
    assert client.get_functions("default", "*") == []
    assert client.getVersion().startswith("4.")
