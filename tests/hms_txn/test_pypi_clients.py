"""The PyPI metastore clients ``hmsclient``, ``hmsclient-hive-3`` and ``pymetastore``
against hms-txn.

Each ships its own code generated from an upstream Hive IDL (2.3 for hmsclient, 3.0 for
hmsclient-hive-3), so they check our wire compatibility independently of our generated
code. Objects are created through our client and through hmsclient (and
hmsclient-hive-3), then listed (databases, tables, partitions) by each. Runs on both
backends.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import pytest
from hmsclient import hmsclient as hmsclient_mod
from hmsclient.genthrift.hive_metastore import ttypes as ht
from pymetastore.metastore import HMS

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.requirements import require
from tests.support.servers import REPO_ROOT

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


HIVE_3_DIR = os.environ.get("HMSCLIENT_HIVE_3_DIR",
                            os.path.join(REPO_ROOT, "build", "hmsclient-hive-3"))


@pytest.fixture(scope="module")
def hive3():
    """The ``hmsclient-hive-3`` package, loaded as ``hmsclient_hive_3``: it installs the
    same top-level package (``hmsclient``) as hmsclient, so the two cannot share an
    environment; .ci/run installs it into build/hmsclient-hive-3 (``pip --target``).
    Its modules import each other relatively, so another name is all it takes."""
    init = os.path.join(HIVE_3_DIR, "hmsclient", "__init__.py")
    require(os.path.exists(init), f"hmsclient-hive-3 is not installed in {HIVE_3_DIR} "
            "(pip install --no-deps --target build/hmsclient-hive-3 hmsclient-hive-3)")
    name = "hmsclient_hive_3"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[os.path.dirname(init)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_hmsclient_hive_3_creates_and_lists(populated, hive3):
    """hmsclient-hive-3 (the Hive 3.0 IDL: catalog names on databases, tables and
    partitions, request-style reads) creates a database, a partitioned table and its
    partitions, and lists what it and the other clients made."""
    h3 = importlib.import_module("hmsclient_hive_3.genthrift.hive_metastore.ttypes")
    with hive3.HMSClient(host="127.0.0.1", port=populated.port) as c:
        c.create_database(h3.Database(name="hive3_db", description="made by hmsclient-hive-3",
                                      parameters={}, catalogName="hive"))
        sd = h3.StorageDescriptor(
            cols=[h3.FieldSchema("k", "int", ""), h3.FieldSchema("v", "string", "")],
            inputFormat=ORC["inputFormat"], outputFormat=ORC["outputFormat"],
            serdeInfo=h3.SerDeInfo(serializationLib=ORC["serde"], parameters={}),
            bucketCols=[], sortCols=[], parameters={}, numBuckets=-1)
        c.create_table(h3.Table(tableName="metrics", dbName="hive3_db", owner="hive3", sd=sd,
                                tableType="MANAGED_TABLE", parameters={}, catName="hive",
                                partitionKeys=[h3.FieldSchema("day", "string", "")]))
        table = c.get_table("hive3_db", "metrics")
        c.add_partition(table, ["2024-01-01"])
        c.add_partition(table, ["2024-01-02"])

        assert c.get_all_databases() == ["default", "hive3_db", "ours_db", "their_db"]
        assert c.get_databases("hive3*|ours*") == ["hive3_db", "ours_db"]
        db = c.get_database("hive3_db")
        assert db.description == "made by hmsclient-hive-3" and db.catalogName == "hive"
        assert db.locationUri.endswith("/hive3_db.db")
        assert c.get_all_tables("ours_db") == ["logs", "plain"]
        assert c.get_tables("their_db", "ev*") == ["events"]

        table = c.get_table("hive3_db", "metrics")
        assert (table.owner, table.catName) == ("hive3", "hive")
        assert [(f.name, f.type) for f in table.sd.cols] == [("k", "int"), ("v", "string")]
        req = c.get_table_req(h3.GetTableRequest(dbName="ours_db", tblName="logs",
                                                 catName="hive"))
        assert [k.name for k in req.table.partitionKeys] == ["dt", "hr"]
        assert req.table.catName == "hive"

        assert c.get_partition_names("hive3_db", "metrics", -1) == [
            "day=2024-01-01", "day=2024-01-02"]
        parts = c.get_partitions("ours_db", "logs", -1)
        assert [p.values for p in parts] == [["2024-01-01", "0"], ["2024-01-01", "1"],
                                             ["2024-01-02", "0"]]
        assert {p.catName for p in parts} == {"hive"}
        assert [p.values for p in c.get_partitions_by_filter(
            "hive3_db", "metrics", "day = '2024-01-02'", -1)] == [["2024-01-02"]]
        assert c.check_for_named_partition("their_db", "events", "region=eu")
        assert not c.check_for_named_partition("hive3_db", "metrics", "day=2024-01-03")
