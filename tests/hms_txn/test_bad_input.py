"""Bad input gets a declared Thrift exception with a clear message and changes nothing.

Every call here goes through ``hmsclient`` (a PyPI client with its own code generated
from the upstream Hive IDL), so the exception must be one the upstream IDL declares for
the method, at the field id the upstream client reads. After each refused call the whole
visible state is compared with the state before it: databases, tables, partitions (full
objects), the notification log's last event id and the files under the warehouse.
Runs on both backends.
"""

from __future__ import annotations

import os

import pytest
from hmsclient import hmsclient as hmsclient_mod
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as HT
from hmsclient.genthrift.hive_metastore import ttypes as ht

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

ORC_IN = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"


def _sd(cols=(("id", "bigint"), ("name", "string"))) -> ht.StorageDescriptor:
    return ht.StorageDescriptor(
        cols=[ht.FieldSchema(n, ty, "") for n, ty in cols], inputFormat=ORC_IN, outputFormat=ORC_OUT,
        serdeInfo=ht.SerDeInfo(serializationLib=ORC_SERDE, parameters={}),
        bucketCols=[], sortCols=[], parameters={}, numBuckets=-1)


def _table(db: str, name: str, *, keys=(), sd="default", cols=None) -> ht.Table:
    if sd == "default":
        sd = _sd(cols) if cols else _sd()
    return ht.Table(dbName=db, tableName=name, owner="test", tableType="MANAGED_TABLE", sd=sd,
                    partitionKeys=[ht.FieldSchema(k, "string", "") for k in keys], parameters={})


def _part(db: str, table: str, values: list[str]) -> ht.Partition:
    return ht.Partition(dbName=db, tableName=table, values=values, parameters={})


class World:
    """Snapshots of everything a bad call could have changed."""

    def __init__(self, ours, warehouse: str):
        self.ours = ours
        self.warehouse = warehouse

    def snapshot(self) -> dict:
        c = self.ours
        state: dict = {"event_id": c.get_current_notificationEventId().eventId, "dbs": {}}
        for db in c.get_all_databases():
            tables = {}
            for name in c.get_all_tables(db):
                table = c.get_table(db, name)
                parts = c.get_partitions(db, name, -1) if table.partitionKeys else []
                tables[name] = (repr(table), [repr(p) for p in parts])
            state["dbs"][db] = (repr(c.get_database(db)), tables)
        files = []
        for root, dirs, names in os.walk(self.warehouse):
            files.extend(os.path.relpath(os.path.join(root, n), self.warehouse) for n in dirs + names)
        state["files"] = sorted(files)
        return state


@pytest.fixture
def world(hms, client, tmp_path):
    # The shop database: a partitioned and a plain table, one partition.
    client.create_database(t.Database(name="shop", description="", parameters={}))
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=hms.port) as c:
        c.create_table(_table("shop", "orders", keys=("dt", "region")))
        c.create_table(_table("shop", "plain"))
        c.add_partition(c.get_table("shop", "orders"), ["2024-01-01", "eu"])
    return World(client, str(tmp_path / "warehouse"))


@pytest.fixture
def hc(hms):
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=hms.port) as c:
        yield c


def add_partition(hc, part: ht.Partition):
    """The Thrift ``add_partition`` (HMSClient shadows it with a (table, values) helper)."""
    return HT.Client.add_partition(hc, part)


def refused(world: World, exc_type: type, call, *args, says: tuple[str, ...] = ()):
    """``call(*args)`` raises ``exc_type`` whose message names ``says``; nothing changed."""
    before = world.snapshot()
    with pytest.raises(exc_type) as info:
        call(*args)
    message = info.value.message
    assert message and all(s.lower() in message.lower() for s in says), message
    assert world.snapshot() == before, f"state changed by a refused {call.__name__}"
    return message


# ------------------------------------------------------------------ missing objects

def test_missing_database(world, hc):
    refused(world, ht.NoSuchObjectException, hc.get_database, "no_such_db", says=("no_such_db",))
    refused(world, ht.NoSuchObjectException, hc.get_table, "no_such_db", "orders", says=("no_such_db",))
    refused(world, ht.NoSuchObjectException, hc.create_table, _table("no_such_db", "t1"),
            says=("no_such_db", "does not exist"))
    refused(world, ht.NoSuchObjectException, hc.drop_database, "no_such_db", True, True,
            says=("no_such_db",))
    assert hc.get_all_tables("no_such_db") == []


def test_missing_table_and_partition(world, hc):
    refused(world, ht.NoSuchObjectException, hc.get_table, "shop", "nope", says=("shop.nope",))
    refused(world, ht.NoSuchObjectException, hc.drop_table, "shop", "nope", True, says=("shop.nope",))
    refused(world, ht.NoSuchObjectException, hc.get_partition, "shop", "orders", ["2030-01-01", "us"],
            says=("dt=2030-01-01/region=us",))
    refused(world, ht.NoSuchObjectException, hc.drop_partition, "shop", "orders", ["2030-01-01", "us"],
            True, says=("dt=2030-01-01/region=us",))


# ------------------------------------------------------------------ duplicates

def test_duplicate_table_and_database(world, hc):
    # Same name in another case, different columns: refused, the original is untouched.
    refused(world, ht.AlreadyExistsException, hc.create_table,
            _table("SHOP", "Orders", cols=(("other", "int"),)), says=("shop.orders", "already exists"))
    assert [c.name for c in hc.get_table("shop", "orders").sd.cols] == ["id", "name"]
    refused(world, ht.AlreadyExistsException, hc.create_database,
            ht.Database(name="Shop", description="again", parameters={}), says=("shop", "already exists"))
    refused(world, ht.AlreadyExistsException, add_partition, hc,
            _part("shop", "orders", ["2024-01-01", "eu"]), says=("dt=2024-01-01/region=eu", "already exists"))


# ------------------------------------------------------------------ invalid names and types

@pytest.mark.parametrize("name", ["bad name", "bad-name", "semi;colon", "dot.ted", "x" * 129, ""])
def test_invalid_database_names(world, hc, name):
    refused(world, ht.InvalidObjectException, hc.create_database,
            ht.Database(name=name, description="", parameters={}), says=("database name",))


@pytest.mark.parametrize("name", ["bad name", "bad-name", "t/../../escape", "x" * 129, ""])
def test_invalid_table_names(world, hc, name):
    refused(world, ht.InvalidObjectException, hc.create_table, _table("shop", name), says=("table name",))


def test_invalid_column_types(world, hc):
    refused(world, ht.InvalidObjectException, hc.create_table,
            _table("shop", "typo", cols=(("id", "integr"),)), says=("invalid type", "integr", "id"))
    refused(world, ht.InvalidObjectException, hc.create_table,
            _table("shop", "unclosed", cols=(("m", "map<string,int"),)), says=("invalid type",))
    refused(world, ht.InvalidObjectException, hc.create_table,
            _table("shop", "dupcol", cols=(("a", "int"), ("A", "string"))), says=("twice",))
    # Altering a table to a bad type is refused too (alter_table declares InvalidOperationException).
    table = hc.get_table("shop", "plain")
    table.sd.cols[0].type = "notatype"
    refused(world, ht.InvalidOperationException, hc.alter_table, "shop", "plain", table,
            says=("invalid type", "notatype"))


def test_table_without_storage_descriptor(world, hc):
    refused(world, ht.InvalidObjectException, hc.create_table, _table("shop", "nosd", sd=None),
            says=("shop.nosd", "storage descriptor"))


# ------------------------------------------------------------------ partitions that do not fit

def test_partition_values_must_match_keys(world, hc):
    refused(world, ht.InvalidObjectException, add_partition, hc,
            _part("shop", "orders", ["2024-01-02"]), says=("do not match", "dt, region"))
    refused(world, ht.InvalidObjectException, add_partition, hc,
            _part("shop", "orders", ["2024-01-02", "eu", "extra"]), says=("do not match",))
    refused(world, ht.InvalidObjectException, hc.append_partition, "shop", "orders", ["only-one"],
            says=("do not match",))
    refused(world, ht.InvalidObjectException, add_partition, hc,
            _part("shop", "plain", ["x"]), says=("not partitioned",))
    # A batch with one bad partition adds none of them.
    refused(world, ht.InvalidObjectException, hc.add_partitions,
            [_part("shop", "orders", ["2024-01-03", "us"]), _part("shop", "orders", ["2024-01-04"])],
            says=("do not match",))
    # A partition name whose keys are not the table's.
    refused(world, ht.InvalidObjectException, hc.append_partition_by_name, "shop", "orders",
            "day=2024-01-02/region=eu", says=("day=2024-01-02/region=eu", "match the partition keys"))
    # ... and dropping by such a name must not drop the partition with the same values.
    refused(world, (ht.NoSuchObjectException, ht.MetaException), hc.drop_partition_by_name,
            "shop", "orders", "day=2024-01-01/region=eu", True, says=("match the partition keys",))
    assert hc.get_partition_names("shop", "orders", -1) == ["dt=2024-01-01/region=eu"]
