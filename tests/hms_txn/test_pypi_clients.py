"""The PyPI metastore clients ``hmsclient`` and ``pymetastore`` against hms-txn.

Both ship their own code generated from the upstream Hive IDL, so they check our wire
compatibility independently of our generated code. Objects are created both through
our client and through hmsclient, then listed (databases, tables, partitions) by both.
Runs on both backends.
"""

from __future__ import annotations

import pytest
from hmsclient import hmsclient as hmsclient_mod
from hmsclient.genthrift.hive_metastore import ttypes as ht
from pymetastore.metastore import HMS

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

ORC = dict(inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
           outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
           serde="org.apache.hadoop.hive.ql.io.orc.OrcSerde")


def _ours_partitioned_table(db: str, name: str) -> t.Table:
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema("id", "bigint", ""), t.FieldSchema("payload", "string", "")],
        inputFormat=ORC["inputFormat"], outputFormat=ORC["outputFormat"],
        serdeInfo=t.SerDeInfo(serializationLib=ORC["serde"], parameters={}),
        bucketCols=[], sortCols=[], parameters={}, numBuckets=-1)
    return t.Table(tableName=name, dbName=db, owner="ours", sd=sd, tableType="MANAGED_TABLE",
                   partitionKeys=[t.FieldSchema("dt", "string", ""), t.FieldSchema("hr", "int", "")],
                   parameters={})


def _hmsclient_table(db: str, name: str, keys: list[str]) -> ht.Table:
    sd = ht.StorageDescriptor(
        cols=hmsclient_mod.HMSClient.make_schema(["k:int", "v:string"]),
        inputFormat=ORC["inputFormat"], outputFormat=ORC["outputFormat"],
        serdeInfo=ht.SerDeInfo(serializationLib=ORC["serde"], parameters={}),
        bucketCols=[], sortCols=[], parameters={}, numBuckets=-1)
    return ht.Table(tableName=name, dbName=db, owner="hmsclient", sd=sd, tableType="MANAGED_TABLE",
                    partitionKeys=hmsclient_mod.HMSClient.make_schema(keys), parameters={})


@pytest.fixture
def populated(hms, client):
    """Two databases: one made through our client, one through hmsclient."""
    client.create_database(t.Database(name="ours_db", description="made by our client",
                                      parameters={}, ownerName="ours", ownerType=t.PrincipalType.USER))
    client.create_table(_ours_partitioned_table("ours_db", "logs"))
    client.create_table(t.Table(tableName="plain", dbName="ours_db", sd=t.StorageDescriptor(
        cols=[t.FieldSchema("x", "int", "")], parameters={},
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=t.SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                              parameters={})),
        tableType="MANAGED_TABLE", parameters={}, partitionKeys=[]))
    client.add_partitions([t.Partition(values=v, dbName="ours_db", tableName="logs")
                           for v in (["2024-01-01", "0"], ["2024-01-01", "1"], ["2024-01-02", "0"])])

    with hmsclient_mod.HMSClient(host="127.0.0.1", port=hms.port) as c:
        c.create_database(ht.Database(name="Their_DB", description="made by hmsclient", parameters={}))
        c.create_table(_hmsclient_table("their_db", "Events", ["region"]))
        table = c.get_table("their_db", "events")
        c.add_partition(table, ["eu"])
        c.add_partition(table, ["us"])
    return hms


def test_hmsclient_lists_databases_tables_partitions(populated):
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=populated.port) as c:
        assert c.get_all_databases() == ["default", "ours_db", "their_db"]
        assert c.get_databases("ours*|their*") == ["ours_db", "their_db"]
        db = c.get_database("ours_db")
        assert db.description == "made by our client" and db.locationUri.endswith("/ours_db.db")
        assert c.get_all_tables("ours_db") == ["logs", "plain"]
        assert c.get_tables("their_db", "ev*") == ["events"]
        assert c.get_all_tables("default") == []

        assert c.get_partition_names("ours_db", "logs", -1) == [
            "dt=2024-01-01/hr=0", "dt=2024-01-01/hr=1", "dt=2024-01-02/hr=0"]
        assert c.get_partition_names("their_db", "events", -1) == ["region=eu", "region=us"]
        assert c.get_partition_names("ours_db", "logs", 2) == [
            "dt=2024-01-01/hr=0", "dt=2024-01-01/hr=1"]
        parts = c.get_partitions("ours_db", "logs", -1)
        assert [p.values for p in parts] == [["2024-01-01", "0"], ["2024-01-01", "1"], ["2024-01-02", "0"]]
        assert all(p.sd.inputFormat == ORC["inputFormat"] for p in parts)
        assert parts[0].sd.location.endswith("/ours_db.db/logs/dt=2024-01-01/hr=0")
        assert [p.values for p in c.get_partitions_ps("ours_db", "logs", ["2024-01-01"], -1)] == [
            ["2024-01-01", "0"], ["2024-01-01", "1"]]
        assert [p.values for p in c.get_partitions_by_filter("ours_db", "logs", "dt = '2024-01-02'", -1)] == [
            ["2024-01-02", "0"]]
        assert c.check_for_named_partition("their_db", "events", "region=eu")
        assert not c.check_for_named_partition("their_db", "events", "region=asia")

        table = c.get_table("their_db", "events")
        assert table.owner == "hmsclient"
        assert [(k.name, k.type) for k in table.partitionKeys] == [("region", "string")]
        assert [(f.name, f.type) for f in table.sd.cols] == [("k", "int"), ("v", "string")]


def test_pymetastore_lists_databases_tables_partitions(populated):
    with HMS.create(host="127.0.0.1", port=populated.port) as hms:
        assert hms.list_databases() == ["default", "ours_db", "their_db"]
        db = hms.get_database("ours_db")
        assert db.name == "ours_db" and db.comment == "made by our client"
        assert db.owner_name == "ours"
        assert hms.list_tables("ours_db") == ["logs", "plain"]
        assert hms.list_tables("their_db") == ["events"]
        assert hms.list_columns("ours_db", "logs") == ["id", "payload"]

        assert hms.list_partitions("ours_db", "logs") == [
            "dt=2024-01-01/hr=0", "dt=2024-01-01/hr=1", "dt=2024-01-02/hr=0"]
        assert hms.list_partitions("their_db", "events") == ["region=eu", "region=us"]
        # get_partitions asserts the types of every field it reads (catName, parameters, ...).
        parts = hms.get_partitions("ours_db", "logs")
        assert [p.values for p in parts] == [["2024-01-01", "0"], ["2024-01-01", "1"], ["2024-01-02", "0"]]
        assert {p.cat_name for p in parts} == {"hive"}
        assert parts[2].sd.location.endswith("/ours_db.db/logs/dt=2024-01-02/hr=0")
        assert parts[0].sd.storage_format.serde == ORC["serde"]
        part = hms.get_partition("their_db", "events", "region=us")
        assert part.values == ["us"]

        table = hms.get_table("ours_db", "logs")
        assert table.name == "logs" and table.database_name == "ours_db"
        assert [c.name for c in table.columns] == ["id", "payload"]
        assert [c.name for c in table.partition_columns] == ["dt", "hr"]
        assert table.table_type == "MANAGED_TABLE"
        assert hms.get_table("ours_db", "plain").partition_columns == []
