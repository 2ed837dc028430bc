"""The database and table calls of ``service.catalog.table_calls`` over Thrift, against Hive 4's
documented behaviour (/work/notes/hive4/handler-behaviour.md, "Databases" and "Tables":
get_table_names_by_filter, get_tables_ext, get_fields_req, get_schema_req,
translate_table_dryrun, the materialized-view calls) and the calls Trino makes
(/work/notes/clients/trino.md: ThriftHiveMetastore.getTablesWithParameter sends
``get_table_names_by_filter(db, "hive_filter_field_params__<k> = \\"<v>\\"", -1)``)."""

from __future__ import annotations

import json

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_catalog_names import answers


def test_database_request_forms(client):
    client.create_database_req(t.CreateDatabaseRequest(
        databaseName="Remote", description="d", parameters={"k": "v"}, type="REMOTE",
        dataConnectorName="mysql_conn", remote_dbname="shop"))
    db = client.get_database("remote")
    assert (db.name, db.type, db.connector_name, db.remote_dbname, db.description) == (
        "remote", t.DatabaseType.REMOTE, "mysql_conn", "shop", "d")
    with pytest.raises(t.AlreadyExistsException):
        client.create_database_req(t.CreateDatabaseRequest(databaseName="remote"))
    db.description = "changed"
    client.alter_database_req(t.AlterDatabaseRequest(oldDbName="@hive#remote", newDb=db))
    assert client.get_database("remote").description == "changed"
    with pytest.raises(t.MetaException, match="not a database type"):
        client.create_database_req(t.CreateDatabaseRequest(databaseName="x", type="ODD"))


def test_drop_table_req_and_columns(client):
    client.create_table(make_table("default", "t1", keys=(("p", "string"),)))
    fields = client.get_fields_req(t.GetFieldsRequest(dbName="default", tblName="t1")).fields
    schema = client.get_schema_req(t.GetSchemaRequest(dbName="default", tblName="t1",
                                                      catName="hive")).fields
    assert [f.name for f in fields] == ["id", "name"]
    assert [f.name for f in schema] == ["id", "name", "p"]
    table = client.get_table("default", "t1")
    assert client.translate_table_dryrun(t.CreateTableRequest(table=table)) == table
    client.drop_table_req(t.DropTableRequest(dbName="default", tableName="t1", deleteData=True))
    assert client.get_all_tables("default") == []
    with pytest.raises(t.NoSuchObjectException):
        client.drop_table_req(t.DropTableRequest(dbName="default", tableName="t1"))


def test_table_names_by_filter(client):
    client.create_table(make_table("default", "a", params={"trino_query_id": "q1", "x.y": "1"}))
    client.create_table(make_table("default", "b", params={"trino_query_id": "q2"}))
    client.create_table(make_table("default", "c"))

    def names(text, limit=-1):
        return client.get_table_names_by_filter("default", text, limit)

    assert names('hive_filter_field_params__trino_query_id = "q1"') == ["a"]
    assert names('hive_filter_field_params__trino_query_id LIKE "q%"') == ["a", "b"]
    assert names('hive_filter_field_params__trino_query_id <> "q1"') == ["b"]
    assert names('hive_filter_field_params__x.y = "1"') == ["a"]
    assert names('hive_filter_field_owner__ = "tester"', 2) == ["a", "b"]
    assert names("hive_filter_field_last_access__ = 0") == ["a", "b", "c"]
    assert client.get_table_names_by_filter("@hive#default", 'hive_filter_field_owner__ = "x"',
                                            -1) == []
    with answers(t.UnknownDBException, "DB name is null or empty"):
        client.get_table_names_by_filter("", "hive_filter_field_owner__ = \"x\"", -1)
    with answers(t.InvalidOperationException, "default cannot apply null filter"):
        client.get_table_names_by_filter("default", None, -1)
    with pytest.raises(t.MetaException):
        names("nonsense ===")


def test_tables_ext(client):
    client.create_table(make_table("default", "t1"))
    client.create_table(make_table("default", "t2"))
    request = t.GetTablesExtRequest(catalog="hive", database="default", tableNamePattern="t*",
                                    requestedFields=t.GetTablesExtRequestFields.ALL)
    assert client.get_tables_ext(request) == []           # no processor capabilities
    request.processorCapabilities = ["MANAGERAWMETADATA"]
    assert client.get_tables_ext(request) == []
    request.processorCapabilities = ["HIVEFULLACIDREAD"]
    found = client.get_tables_ext(request)
    # Hive 4's default translation (tests/hms_txn/test_capabilities.py has the cases)
    assert [(e.tblName, e.accessType, e.requiredReadCapabilities) for e in found] == [
        ("t1", 8, None), ("t2", 8, None)]
    request.limit = 1
    assert [e.tblName for e in client.get_tables_ext(request)] == ["t1"]
    request.catalog = "spark"
    assert client.get_tables_ext(request) == []


def test_materialized_views(client):
    view = make_table("default", "mv", table_type="MATERIALIZED_VIEW")
    view.rewriteEnabled = True
    view.viewExpandedText = view.viewOriginalText = "select 1"
    client.create_table(view)
    plain = make_table("default", "mv2", table_type="MATERIALIZED_VIEW")
    client.create_table(plain)
    assert client.get_materialized_views_for_rewriting("@hive#default") == ["mv"]
    assert [v.tableName for v in client.get_all_materialized_view_objects_for_rewriting()] == ["mv"]
    assert client.get_materialized_views_for_rewriting("nope") == []
    last = client.get_current_notificationEventId().eventId
    metadata = t.CreationMetadata(catName="hive", dbName="default", tblName="mv",
                                  tablesUsed={"default.src"}, validTxnList="5:5::")
    client.update_creation_metadata("hive", "default", "mv", metadata)
    assert client.get_table("default", "mv").creationMetadata == metadata
    events = client.get_next_notification(t.NotificationEventRequest(lastEvent=last)).events
    assert [(e.eventType, json.loads(e.message)["isTruncateOp"]) for e in events] == [
        ("ALTER_TABLE", "false")]
    with answers(t.UnknownDBException, "No catalog spark"):
        client.update_creation_metadata("spark", "default", "mv", metadata)


def test_materialization_invalidation_info(client):
    """TxnHandler.getMaterializationInvalidationInfo: an UPDATE/DELETE committed with a
    write id the view's snapshot does not see invalidates it; an INSERT does not."""
    from thrift.Thrift import TApplicationException

    client.create_table(make_table("default", "src", params={"transactional": "true"}))

    def write(op):
        [txn] = client.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
        client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName="default", tableName="src", txnIds=[txn]))
        client.lock(t.LockRequest(component=[t.LockComponent(
            type=t.LockType.SHARED_WRITE, level=t.LockLevel.TABLE, dbname="default",
            tablename="src", operationType=op, isTransactional=True)],
            txnid=txn, user="u", hostname="h"))
        client.commit_txn(t.CommitTxnRequest(txnid=txn))

    def info(snapshot, tables=("default.src",)):
        found = client.get_materialization_invalidation_info(t.CreationMetadata(
            catName="hive", dbName="default", tblName="mv", tablesUsed=set(tables),
            validTxnList=snapshot), "")
        return found.sourceTablesUpdateDeleteModified, found.sourceTablesCompacted

    write(t.DataOperationType.INSERT)                      # write id 1, seen by the view
    snapshot = "2$default.src:1:9223372036854775807::"
    assert info(snapshot) == (False, False)
    write(t.DataOperationType.INSERT)                      # write id 2: an insert
    assert info(snapshot) == (False, False)
    write(t.DataOperationType.UPDATE)                      # write id 3: an update
    assert info(snapshot) == (True, False)
    assert info(json.dumps({"validTxnList": "9$default.src:3:9223372036854775807::"})) == (
        False, False)
    with pytest.raises(TApplicationException) as missing:  # Hive's null
        info(snapshot, tables=())
    assert missing.value.type == TApplicationException.MISSING_RESULT
