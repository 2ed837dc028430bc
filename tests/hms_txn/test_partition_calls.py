"""The partition calls of ``service.catalog.partition_calls`` over Thrift, against Hive 4's
documented behaviour (/work/notes/hive4/handler-behaviour.md, "Partitions": HMSHandler
get_partition_values, get_partitions_pspec, get_partitions_with_specs, exchange_partitions,
markPartitionForEvent, ...; the expression calls: HiveMetaStoreClient.listPartitionsByExpr
and PartitionPruner.getPartitionsFromServer)."""

from __future__ import annotations

import json
import os

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import local, make_table
from tests.hms_txn.test_catalog_names import answers

LOAD_DONE = t.PartitionEventType.LOAD_DONE


@pytest.fixture
def sales(client):
    """sales.orders partitioned by (region, day) with four partitions; sales.archive with
    the same schema and none."""
    client.create_database(t.Database(name="sales"))
    keys = (("region", "string"), ("day", "int"))
    client.create_table(make_table("sales", "orders", keys=keys))
    client.create_table(make_table("sales", "archive", keys=keys))
    for region, day in (("eu", "1"), ("eu", "2"), ("us", "1"), ("us", "10")):
        client.append_partition("sales", "orders", [region, day])
    return client


def _events_since(client, last: int) -> list[t.NotificationEvent]:
    return client.get_next_notification(t.NotificationEventRequest(lastEvent=last)).events


def _last_event(client) -> int:
    return client.get_current_notificationEventId().eventId


# ----------------------------------------------------------------- Java expressions


def test_expression_calls_answer_unknown_method(sales):
    """What makes Hive's client prune on its own (IncompatibleMetastoreException)."""
    for call in (sales.get_partitions_by_expr, sales.get_partitions_spec_by_expr):
        with pytest.raises(TApplicationException) as info:
            call(t.PartitionsByExprRequest(dbName="sales", tblName="orders", expr=b"\x01kryo"))
        assert info.value.type == TApplicationException.UNKNOWN_METHOD
    # the connection goes on serving
    assert len(sales.get_partition_names("sales", "orders", -1)) == 4


def test_other_expression_forms_answer_unknown_method(sales):
    with pytest.raises(TApplicationException) as info:
        sales.get_partition_names_req(t.PartitionsByExprRequest(
            dbName="sales", tblName="orders", expr=b"\x01kryo"))
    assert info.value.type == TApplicationException.UNKNOWN_METHOD
    with pytest.raises(TApplicationException) as info:
        sales.drop_partitions_req(t.DropPartitionsRequest(
            dbName="sales", tblName="orders",
            parts=t.RequestPartsSpec(exprs=[t.DropPartitionsExpr(expr=b"\x01")])))
    assert info.value.type == TApplicationException.UNKNOWN_METHOD
    assert len(sales.get_partition_names("sales", "orders", -1)) == 4


def test_partition_names_req_without_expression(sales):
    req = t.PartitionsByExprRequest(dbName="sales", tblName="orders", expr=b"")
    assert sales.get_partition_names_req(req) == [
        "region=eu/day=1", "region=eu/day=2", "region=us/day=1", "region=us/day=10"]
    req.order, req.maxParts = "0,1:-+", 3      # region descending, then day ascending
    assert sales.get_partition_names_req(req) == [
        "region=us/day=1", "region=us/day=10", "region=eu/day=1"]
    with pytest.raises(t.NoSuchObjectException):
        sales.get_partition_names_req(t.PartitionsByExprRequest(dbName="sales", tblName="nope",
                                                                expr=b""))


# ----------------------------------------------------------------- reads


def test_partition_values(sales):
    def values(**kw):
        req = t.PartitionValuesRequest(dbName="sales", tblName="orders", **kw)
        return [r.row for r in sales.get_partition_values(req).partitionValues]

    region = [t.FieldSchema("region", "string")]
    day = [t.FieldSchema("day", "int")]
    assert values(partitionKeys=region) == [["eu"], ["us"]]
    assert values(partitionKeys=region, applyDistinct=False) == [["eu"], ["eu"], ["us"], ["us"]]
    assert values(partitionKeys=region, ascending=False) == [["us"], ["eu"]]
    assert values(partitionKeys=region + day, filter="day = 1") == [["eu", "1"], ["us", "1"]]
    assert values(partitionKeys=region + day, partitionOrder=day, maxParts=2) == [
        ["eu", "1"], ["us", "1"]]
    with pytest.raises(t.MetaException):       # Hive turns NoSuchObject into MetaException here
        sales.get_partition_values(t.PartitionValuesRequest(
            dbName="sales", tblName="nope", partitionKeys=region))
    with pytest.raises(t.MetaException, match="nokey"):
        values(partitionKeys=[t.FieldSchema("nokey", "string")])


def test_partitions_pspec_one_list_unless_grouping_is_enabled(sales):
    specs = sales.get_partitions_pspec("sales", "orders", -1)
    table = sales.get_table("sales", "orders")
    assert len(specs) == 1 and specs[0].sharedSDPartitionSpec is None
    assert specs[0].rootPath == table.sd.location and specs[0].catName == "hive"
    assert [p.values for p in specs[0].partitionList.partitions] == [
        ["eu", "1"], ["eu", "2"], ["us", "1"], ["us", "10"]]
    assert len(sales.get_partitions_pspec("sales", "orders", 2)[0].partitionList.partitions) == 2
    filtered = sales.get_part_specs_by_filter("sales", "orders", "region = 'us'", -1)
    assert [p.values for p in filtered[0].partitionList.partitions] == [["us", "1"], ["us", "10"]]
    table.parameters["hive.hcatalog.partition.spec.grouping.enabled"] = "true"
    sales.alter_table("sales", "orders", table)
    specs = sales.get_partitions_pspec("sales", "orders", -1)
    assert len(specs) == 1 and specs[0].partitionList is None
    shared = specs[0].sharedSDPartitionSpec
    assert shared.sd.location == table.sd.location
    assert [p.relativePath for p in shared.partitions] == [
        "/region=eu/day=1", "/region=eu/day=2", "/region=us/day=1", "/region=us/day=10"]


def test_partitions_with_specs_filters_and_projection(sales):
    def specs(mode, filters, fields=None, include=None, exclude=None):
        return sales.get_partitions_with_specs(t.GetPartitionsRequest(
            dbName="sales", tblName="orders",
            filterSpec=t.GetPartitionsFilterSpec(filterMode=mode, filters=filters),
            projectionSpec=t.GetProjectionsSpec(fieldList=fields, includeParamKeyPattern=include,
                                                excludeParamKeyPattern=exclude))).partitionSpec

    def values(found):
        out = []
        for spec in found:
            parts = (spec.sharedSDPartitionSpec or spec.partitionList).partitions
            out += [p.values for p in parts]
        return out

    by_names = specs(t.PartitionFilterMode.BY_NAMES, ["region=us/day=10", "region=eu/day=1"])
    assert values(by_names) == [["eu", "1"], ["us", "10"]]
    assert by_names[0].sharedSDPartitionSpec is not None   # under the table: one shared SD
    assert values(specs(t.PartitionFilterMode.BY_VALUES, ["eu"])) == [["eu", "1"], ["eu", "2"]]
    assert values(specs(t.PartitionFilterMode.BY_EXPR, ["region = 'us'", "day > 5"])) == [
        ["us", "10"]]
    projected = specs(t.PartitionFilterMode.BY_NAMES, ["region=eu/day=2"],
                      fields=["values", "parameters"], include="transient%")
    part = projected[0].partitionList.partitions[0]   # no sd projected: a plain list
    assert part.values == ["eu", "2"] and part.sd is None
    assert list(part.parameters) == ["transient_lastDdlTime"]
    excluded = specs(t.PartitionFilterMode.BY_NAMES, ["region=eu/day=2"],
                     fields=["values", "parameters"], exclude="transient%")
    assert "transient_lastDdlTime" not in excluded[0].partitionList.partitions[0].parameters
    with pytest.raises(t.MetaException, match="nosuchfield"):
        specs(t.PartitionFilterMode.BY_NAMES, ["region=eu/day=2"], fields=["nosuchfield"])


def test_request_forms_of_the_old_reads(sales):
    parts = sales.get_partitions_by_filter_req(t.GetPartitionsByFilterRequest(
        dbName="sales", tblName="orders", filter="day >= 2", maxParts=-1))
    assert [p.values for p in parts] == [["eu", "2"], ["us", "10"]]
    assert sales.fetch_partition_names_req(t.PartitionsRequest(
        dbName="sales", tblName="orders", maxParts=2)) == ["region=eu/day=1", "region=eu/day=2"]


# ----------------------------------------------------------------- changes


def test_append_and_drop_partition_req(sales):
    part = sales.append_partition_req(t.AppendPartitionsRequest(
        dbName="sales", tableName="orders", partVals=["fr", "3"]))
    assert part.values == ["fr", "3"] and os.path.isdir(local(part.sd.location))
    by_name = sales.append_partition_req(t.AppendPartitionsRequest(
        dbName="sales", tableName="orders", name="region=fr/day=4"))
    assert by_name.values == ["fr", "4"]
    with pytest.raises(t.AlreadyExistsException):
        sales.append_partition_req(t.AppendPartitionsRequest(
            dbName="sales", tableName="orders", partVals=["fr", "3"]))
    assert sales.drop_partition_req(t.DropPartitionRequest(
        dbName="sales", tblName="orders", partVals=["fr", "3"], deleteData=True)) is True
    assert not os.path.exists(local(part.sd.location))
    assert sales.drop_partition_req(t.DropPartitionRequest(
        dbName="sales", tblName="orders", partName="region=fr/day=4")) is True
    with pytest.raises(t.NoSuchObjectException):
        sales.drop_partition_req(t.DropPartitionRequest(
            dbName="sales", tblName="orders", partName="region=fr/day=4"))
    assert len(sales.get_partition_names("sales", "orders", -1)) == 4


def test_rename_partition_req(sales):
    new = sales.get_partition("sales", "orders", ["us", "10"])
    new.values = ["us", "11"]
    sales.rename_partition_req(t.RenamePartitionRequest(
        dbName="sales", tableName="orders", partVals=["us", "10"], newPart=new))
    assert sales.get_partition_names("sales", "orders", -1)[-1] == "region=us/day=11"
    moved = sales.get_partition("sales", "orders", ["us", "11"]).sd.location
    assert moved.endswith("/region=us/day=11") and os.path.isdir(local(moved))


def test_add_partitions_pspec(sales):
    table = sales.get_table("sales", "orders")
    shared = t.PartitionSpec(
        dbName="sales", tableName="orders", rootPath=table.sd.location,
        sharedSDPartitionSpec=t.PartitionSpecWithSharedSD(sd=table.sd, partitions=[
            t.PartitionWithoutSD(values=["jp", "1"], relativePath="/region=jp/day=1",
                                 parameters={"k": "v"}),
            t.PartitionWithoutSD(values=["jp", "2"], relativePath="/region=jp/day=2",
                                 parameters={})]))
    listed = t.PartitionSpec(dbName="sales", tableName="orders", partitionList=t.PartitionListComposingSpec(
        partitions=[t.Partition(values=["kr", "1"], dbName="sales", tableName="orders")]))
    assert sales.add_partitions_pspec([shared, listed]) == 3
    jp = sales.get_partition("sales", "orders", ["jp", "1"])
    assert jp.sd.location == table.sd.location + "/region=jp/day=1" and jp.parameters["k"] == "v"
    assert os.path.isdir(local(jp.sd.location))
    assert sales.add_partitions_pspec([]) == 0
    missing = t.PartitionSpec(dbName="sales", tableName="nope", partitionList=t.PartitionListComposingSpec(
        partitions=[t.Partition(values=["kr", "2"])]))
    with pytest.raises(t.InvalidObjectException, match="sales.nope does not exist"):
        sales.add_partitions_pspec([missing])


def test_exchange_partitions(sales):
    source = sales.get_table("sales", "orders")
    dest = sales.get_table("sales", "archive")
    eu = local(source.sd.location + "/region=eu")
    open(os.path.join(eu, "day=1", "data.orc"), "w").close()
    last = _last_event(sales)
    moved = sales.exchange_partitions({"region": "eu"}, "sales", "orders", "sales", "archive")
    assert sorted(p.values for p in moved) == [["eu", "1"], ["eu", "2"]]
    assert sales.get_partition_names("sales", "orders", -1) == ["region=us/day=1",
                                                                  "region=us/day=10"]
    assert sales.get_partition_names("sales", "archive", -1) == ["region=eu/day=1",
                                                                   "region=eu/day=2"]
    part = sales.get_partition("sales", "archive", ["eu", "1"])
    assert part.sd.location == dest.sd.location + "/region=eu/day=1"
    assert os.path.exists(os.path.join(local(part.sd.location), "data.orc"))
    assert not os.path.exists(eu)
    events = _events_since(sales, last)
    assert [(e.eventType, e.tableName) for e in events] == [
        ("ADD_PARTITION", "archive"), ("DROP_PARTITION", "orders"), ("DROP_PARTITION", "orders")]
    assert len(json.loads(events[0].message)["partitions"]) == 2
    # Hive's refusals, all MetaException
    with answers(t.MetaException, "No partition is found with the values {region=eu} "
                                  "for the table orders"):
        sales.exchange_partitions({"region": "eu"}, "sales", "orders", "sales", "archive")
    sales.append_partition("sales", "orders", ["eu", "1"])
    with answers(t.MetaException, "The partition region=eu/day=1 already exists in the "
                                  "table orders"):
        sales.exchange_partitions({"region": "eu"}, "sales", "archive", "sales", "orders")
    sales.create_table(make_table("sales", "other", keys=(("region", "string"), ("day", "int")),
                                  cols=(("x", "int"),)))
    with answers(t.MetaException, "The tables have different schemas. Their partitions "
                                  "cannot be exchanged."):
        sales.exchange_partitions({"region": "us"}, "sales", "orders", "sales", "other")
    with answers(t.MetaException, "The destination table hive.sales.nope not found"):
        sales.exchange_partitions({"region": "us"}, "sales", "orders", "sales", "nope")
    # the singular form answers an empty Partition (Java writes its unset i32 fields as 0)
    assert sales.exchange_partition({"region": "us", "day": "1"}, "sales", "orders",
                                    "sales", "archive") == t.Partition(createTime=0,
                                                                       lastAccessTime=0)
    assert "region=us/day=1" in sales.get_partition_names("sales", "archive", -1)


def test_partition_marks(sales):
    spec = {"region": "eu", "day": "1"}
    assert sales.isPartitionMarkedForEvent("sales", "orders", spec, LOAD_DONE) is False
    sales.markPartitionForEvent("sales", "orders", spec, LOAD_DONE)
    sales.markPartitionForEvent("sales", "orders", spec, LOAD_DONE)   # again: still marked
    assert sales.isPartitionMarkedForEvent("@hive#sales", "orders", spec, LOAD_DONE) is True
    assert sales.isPartitionMarkedForEvent("sales", "orders", {"region": "eu", "day": "2"},
                                           LOAD_DONE) is False
    with answers(t.UnknownTableException, "Table: nope is not found."):
        sales.markPartitionForEvent("sales", "nope", spec, LOAD_DONE)
    with answers(t.InvalidPartitionException, "Number of partition columns in table: 2 "
                                              "doesn't match with number of supplied "
                                              "partition values: 1"):
        sales.markPartitionForEvent("sales", "orders", {"region": "eu"}, LOAD_DONE)
    with answers(t.InvalidPartitionException, "No value found for partition column: day"):
        sales.isPartitionMarkedForEvent("sales", "orders", {"region": "eu", "DAY": "1"},
                                        LOAD_DONE)
