"""Data connectors, types, HPL/SQL routines, replication metrics (``domain.catalog.catalog_extras``)
and the features hms-txn keeps off (``service.features_off``), against Hive 4's documented
answers (/work/notes/hive4/handler-behaviour.md: "Data connectors", "Types", "HPL/SQL stored
procedures and packages", "Replication and change management", "File metadata",
"Workload management", "Schema registry", "Scheduled queries", "Notable answers")."""

from __future__ import annotations

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog_names import answers


def test_data_connectors(client):
    conn = t.DataConnector(name="MySQL", type="mysql", url="jdbc:mysql://h/db",
                           description="d", parameters={"user": "u"})
    client.create_dataconnector(conn)
    client.create_dataconnector_req(t.CreateDataConnectorRequest(
        t.DataConnector(name="pg", type="postgres", url="jdbc:postgresql://h/db")))
    assert client.get_dataconnectors() == ["mysql", "pg"]
    got = client.get_dataconnector_req(t.GetDataConnectorRequest("MYSQL"))
    assert (got.name, got.url, got.parameters) == ("mysql", "jdbc:mysql://h/db", {"user": "u"})
    assert got.createTime > 0
    with answers(t.AlreadyExistsException, "DataConnector mysql already exists"):
        client.create_dataconnector(conn)
    with answers(t.InvalidObjectException, "my-sql is not a valid dataconnector name"):
        client.create_dataconnector(t.DataConnector(name="my-sql", type="mysql", url="x"))
    client.alter_dataconnector("mysql", t.DataConnector(name="mysql", type="mysql", url="jdbc:new"))
    assert client.get_dataconnector_req(t.GetDataConnectorRequest("mysql")).url == "jdbc:new"
    client.alter_dataconnector_req(t.AlterDataConnectorRequest(
        "pg", t.DataConnector(name="pg", type="postgres", url="jdbc:pg2")))
    assert client.get_dataconnector_req(t.GetDataConnectorRequest("pg")).url == "jdbc:pg2"
    with answers(t.NoSuchObjectException, "DataConnector nope doesn't exist"):
        client.alter_dataconnector("nope", conn)
    client.drop_dataconnector("mysql", False, False)
    client.drop_dataconnector_req(t.DropDataConnectorRequest("pg"))
    client.drop_dataconnector("mysql", True, False)          # ifNotExists: silent
    with answers(t.NoSuchObjectException, "DataConnector mysql doesn't exist"):
        client.drop_dataconnector("mysql", False, False)
    with answers(t.NoSuchObjectException, "DataConnector mysql doesn't exist"):
        client.get_dataconnector_req(t.GetDataConnectorRequest("mysql"))
    assert client.get_dataconnectors() == []


def test_types(client):
    typ = t.Type(name="point", type1="int", type2="int",
                 fields=[t.FieldSchema("x", "int", None), t.FieldSchema("y", "int", None)])
    assert client.create_type(typ) is True
    assert client.get_type("point") == typ
    with answers(t.AlreadyExistsException, "Type point already exists"):
        client.create_type(typ)
    with answers(t.InvalidObjectException, "Invalid type name"):
        client.create_type(t.Type(name="bad name"))
    assert client.drop_type("point") is True
    with answers(t.NoSuchObjectException, 'Type "point" not found.'):
        client.get_type("point")
    with answers(t.MetaException, "Not yet implemented"):
        client.get_type_all("point")


def test_stored_procedures_and_packages(client):
    client.create_stored_procedure(t.StoredProcedure(
        name="Greet", dbName="default", catName="hive", ownerName="u", source="BEGIN END"))
    client.create_stored_procedure(t.StoredProcedure(   # create or replace
        name="greet", dbName="default", catName="hive", ownerName="u", source="BEGIN NULL END"))
    request = t.StoredProcedureRequest(catName="hive", dbName="default", procName="GREET")
    assert client.get_stored_procedure(request).source == "BEGIN NULL END"
    assert client.get_all_stored_procedures(t.ListStoredProcedureRequest(catName="hive")) == ["greet"]
    assert client.get_all_stored_procedures(t.ListStoredProcedureRequest(
        catName="spark")) == []
    client.drop_stored_procedure(request)
    with answers(t.NoSuchObjectException, "HPL/SQL StoredProcedure default.GREET does not exist"):
        client.get_stored_procedure(request)
    with pytest.raises(t.NoSuchObjectException):
        client.create_stored_procedure(t.StoredProcedure(name="p", dbName="nope", catName="hive"))
    client.add_package(t.AddPackageRequest(catName="hive", dbName="default", packageName="pk",
                                           ownerName="u", header="h", body="b"))
    found = client.find_package(t.GetPackageRequest(catName="hive", dbName="default",
                                                    packageName="pk"))
    assert (found.header, found.body, found.dbName) == ("h", "b", "default")
    assert client.get_all_packages(t.ListPackageRequest(catName="hive", dbName="default")) == ["pk"]
    client.drop_package(t.DropPackageRequest(catName="hive", dbName="default", packageName="pk"))
    with answers(t.NoSuchObjectException, "HPL/SQL package default.pk does not exist"):
        client.find_package(t.GetPackageRequest(catName="hive", dbName="default",
                                                packageName="pk"))


def test_replication_metrics(client):
    client.add_replication_metrics(t.ReplicationMetricList([
        t.ReplicationMetrics(scheduledExecutionId=1, policy="p", dumpExecutionId=10,
                             metadata="m1", progress="started"),
        t.ReplicationMetrics(scheduledExecutionId=2, policy="p", dumpExecutionId=10)]))
    client.add_replication_metrics(t.ReplicationMetricList([
        t.ReplicationMetrics(scheduledExecutionId=1, policy="p", dumpExecutionId=10,
                             progress="done")]))

    def get(**kw):
        return client.get_replication_metrics(
            t.GetReplicationMetricsRequest(**kw)).replicationMetricList

    [one] = get(scheduledExecutionId=1)
    assert (one.metadata, one.progress) == ("m1", "done")
    assert [m.scheduledExecutionId for m in get(policy="p")] == [2, 1]
    assert [m.scheduledExecutionId for m in get(dumpExecutionId=10)] == [2, 1]
    assert get(policy="other") == [] and get() == []


def test_features_off_answer_as_hive(client):
    # workload management: nothing active, no plans
    assert client.get_active_resource_plan(t.WMGetActiveResourcePlanRequest()).resourcePlan is None
    assert client.get_all_resource_plans(t.WMGetAllResourcePlanRequest()).resourcePlans == []
    with answers(t.NoSuchObjectException, "There is no resource plan named: rp"):
        client.get_resource_plan(t.WMGetResourcePlanRequest(resourcePlanName="rp"))
    with answers(t.NoSuchObjectException, "There is no resource plan named: rp"):
        client.create_wm_pool(t.WMCreatePoolRequest(t.WMPool(resourcePlanName="rp", poolPath="a")))
    with pytest.raises(t.MetaException, match="workload management"):
        client.create_resource_plan(t.WMCreateResourcePlanRequest(
            resourcePlan=t.WMResourcePlan(name="rp")))
    # scheduled queries: nothing is ever due
    poll = client.scheduled_query_poll(t.ScheduledQueryPollRequest("ns"))
    assert poll == t.ScheduledQueryPollResponse()
    with answers(t.InvalidOperationException, "invalid executionId: 7"):
        client.scheduled_query_progress(t.ScheduledQueryProgressInfo(
            scheduledExecutionId=7, state=t.QueryState.FINISHED, executorQueryId="q"))
    with pytest.raises(t.NoSuchObjectException):
        client.get_scheduled_query(t.ScheduledQueryKey("s", "ns"))
    # change management off: nothing to do
    assert client.cm_recycle(t.CmRecycleRequest(dataPath="/x", purge=True)) == t.CmRecycleResponse()
    # file metadata: ObjectStore does not support it
    assert client.get_file_metadata(t.GetFileMetadataRequest([1, 2])) == t.GetFileMetadataResult(
        metadata={}, isSupported=False)
    assert client.get_file_metadata_by_expr(t.GetFileMetadataByExprRequest(
        [1], b"x")) == t.GetFileMetadataByExprResult(metadata={}, isSupported=False)
    assert client.cache_file_metadata(t.CacheFileMetadataRequest("default", "t")).isSupported is False
    client.put_file_metadata(t.PutFileMetadataRequest([1], [b"x"]))
    with pytest.raises(TApplicationException) as info:   # as the Java metastore answers
        client.clear_file_metadata(t.ClearFileMetadataRequest([1]))
    assert info.value.type == TApplicationException.INTERNAL_ERROR
    # schema registry: nothing registered, Hive's texts
    name = t.ISchemaName(catName="hive", dbName="default", schemaName="s")
    with answers(t.NoSuchObjectException, "No schema named ISchemaName(catName:hive, "
                                          "dbName:default, schemaName:s) exists"):
        client.get_ischema(name)
    with answers(t.NoSuchObjectException, "No versions of schema ISchemaName(catName:hive, "
                                          "dbName:default, schemaName:s)exist"):
        client.get_schema_latest_version(name)
    assert client.get_schemas_by_cols(t.FindSchemasByColsRqst(colName="c")).schemaVersions == []
    with answers(t.NoSuchObjectException, "No serde named sd exists"):
        client.get_serde(t.GetSerdeRequest("sd"))
    with pytest.raises(t.MetaException, match="no property store"):
        client.get_properties(t.PropertyGetRequest(nameSpace="hms"))
