"""The Iceberg REST catalog (issue 43) through pyiceberg's ``RestCatalog``: every call of the
spec the catalog serves, against one server for the module.

pyiceberg's client is stricter than the spec (``missing`` in the update-properties answer,
identifiers in every listing, the spec's error bodies: ``_handle_non_200_response`` in
``pyiceberg/catalog/rest/response.py`` maps 404/409/500 to its exceptions); the calls
pyiceberg does not make (multi-table ``transactions/commit``, ``metrics``) are sent as the
spec defines them. What the Thrift door sees of each change is checked with our Thrift
client on the same server.
"""

from __future__ import annotations

import json
import os
import uuid

import pyarrow as pa
import pytest
import requests
from pyiceberg.exceptions import (BadRequestError, CommitFailedException,
                                  NamespaceAlreadyExistsError, NamespaceNotEmptyError,
                                  NoSuchNamespaceError, NoSuchTableError, TableAlreadyExistsError)
from pyiceberg.schema import Schema
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate
from pyiceberg.types import LongType, NestedField, StringType

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.iceberg_rest import rest_catalog, rest_server

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False),
                NestedField(2, "name", StringType(), required=False, doc="who"))
ARROW = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(*ids: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": f"n{i}"} for i in ids], schema=ARROW)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = rest_server(str(tmp_path_factory.mktemp("iceberg-rest")))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def catalog(server):
    return rest_catalog(server)


@pytest.fixture(scope="module")
def thrift(server):
    client = server.client()
    yield client
    client.close()


@pytest.fixture
def ns(catalog, request):
    """A fresh namespace for the test (dropped with what is left in it)."""
    name = "ns_" + request.node.name.removeprefix("test_")[:40].lower()
    catalog.create_namespace(name)
    yield name
    for ident in catalog.list_tables(name):
        catalog.drop_table(ident)
    catalog.drop_namespace(name)


def url(server, path: str) -> str:
    return f"{server.server.rest_address}/v1/hive/{path}"


def files_under(location: str) -> list[str]:
    root = location.removeprefix("file:")
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


def test_config_names_the_prefix_and_the_endpoints_and_ignores_the_warehouse(server):
    base = server.server.rest_address
    config = requests.get(f"{base}/v1/config", params={"warehouse": "s3://anything"}).json()
    assert config["overrides"] == {"prefix": "hive"} and config["defaults"] == {}
    assert "POST /v1/{prefix}/transactions/commit" in config["endpoints"]
    # The routes answer with the catalog's prefix and without one; another prefix is a 400.
    assert requests.get(f"{base}/v1/hive/namespaces").status_code == 200
    assert requests.get(f"{base}/v1/namespaces").status_code == 200
    other = requests.get(f"{base}/v1/spark_catalog/namespaces")
    assert other.status_code == 400 and other.json()["error"]["type"] == "BadRequestException"


def test_namespaces_are_databases_both_ways(catalog, thrift):
    catalog.create_namespace("sales", {"comment": "sales data", "team": "finance"})
    db = thrift.get_database("sales")
    assert db.description == "sales data" and db.parameters == {"team": "finance"}
    assert db.locationUri.endswith("/sales.db")
    assert ("sales",) in catalog.list_namespaces()
    props = catalog.load_namespace_properties("sales")
    assert props["comment"] == "sales data" and props["team"] == "finance"
    assert props["location"] == db.locationUri
    assert catalog.namespace_exists("sales") and not catalog.namespace_exists("nope")
    summary = catalog.update_namespace_properties("sales", removals={"team", "absent"},
                                                  updates={"owner_team": "bi"})
    assert (summary.removed, summary.updated, summary.missing) == (["team"], ["owner_team"],
                                                                   ["absent"])
    assert thrift.get_database("sales").parameters == {"owner_team": "bi"}
    assert catalog.list_namespaces("sales") == []       # databases have no children

    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("sales")
    with pytest.raises(BadRequestError, match="one level"):
        catalog.create_namespace(("a", "b"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties("nope")
    # A database made over Thrift is a namespace; one holding a table is not empty.
    thrift.create_database(t.Database(name="from_thrift", description="d", parameters={}))
    assert ("from_thrift",) in catalog.list_namespaces()
    catalog.create_table("sales.orders", schema=SCHEMA)
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace("sales")
    catalog.drop_table("sales.orders")
    catalog.drop_namespace("sales")
    catalog.drop_namespace("from_thrift")
    assert "sales" not in thrift.get_all_databases()
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace("sales")


def test_tables_create_load_append_rename_register_drop(catalog, thrift, ns):
    table = catalog.create_table(f"{ns}.orders", schema=SCHEMA, properties={"owner": "bi"})
    assert table.metadata_location.endswith(".metadata.json")
    assert table.location().endswith(f"/{ns}.db/orders")
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table(f"{ns}.orders", schema=SCHEMA)
    # The Thrift door sees Hive's form of an Iceberg table (Iceberg's HiveTableOperations).
    hive = thrift.get_table(ns, "orders")
    assert hive.tableType == "EXTERNAL_TABLE"
    assert hive.parameters["table_type"] == "ICEBERG"
    assert hive.parameters["metadata_location"] == table.metadata_location
    assert hive.parameters["owner"] == "bi"
    assert [(c.name, c.type, c.comment) for c in hive.sd.cols] == [("id", "bigint", None),
                                                                   ("name", "string", "who")]
    # Listing shows Iceberg tables only: a plain Hive table beside it is left out.
    thrift.create_table(t.Table(
        tableName="plain", dbName=ns, tableType="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE"},
        partitionKeys=[], sd=t.StorageDescriptor(cols=[t.FieldSchema("x", "int")],
                                                 serdeInfo=t.SerDeInfo(parameters={}))))
    assert catalog.list_tables(ns) == [(ns, "orders")]
    assert not catalog.table_exists(f"{ns}.plain")
    with pytest.raises(NoSuchTableError, match="Not an iceberg table"):
        catalog.load_table(f"{ns}.plain")
    thrift.drop_table(ns, "plain", False)

    table.append(rows(1, 2))
    catalog.load_table(f"{ns}.orders").append(rows(3))
    loaded = catalog.load_table(f"{ns}.orders")
    assert sorted(r["id"] for r in loaded.scan().to_arrow().to_pylist()) == [1, 2, 3]
    assert len(loaded.snapshots()) == 2
    params = thrift.get_table(ns, "orders").parameters
    assert params["metadata_location"] == loaded.metadata_location
    assert params["numRows"] == "3" and params["snapshot-count"] == "2"
    assert params["previous_metadata_location"] != params["metadata_location"]

    catalog.rename_table(f"{ns}.orders", f"{ns}.orders2")
    assert catalog.list_tables(ns) == [(ns, "orders2")]
    assert catalog.load_table(f"{ns}.orders2").location() == loaded.location()
    with pytest.raises(NoSuchTableError):
        catalog.rename_table(f"{ns}.orders", f"{ns}.orders3")

    # Drop without purge keeps the files; register brings the table back from its file.
    catalog.drop_table(f"{ns}.orders2")
    assert not catalog.table_exists(f"{ns}.orders2")
    back = catalog.register_table(f"{ns}.back", loaded.metadata_location)
    assert back.metadata_location == loaded.metadata_location
    assert sorted(r["id"] for r in back.scan().to_arrow().to_pylist()) == [1, 2, 3]
    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table(f"{ns}.back", loaded.metadata_location)
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.missing")


def test_a_stale_requirement_is_a_409_and_changes_nothing(catalog, thrift, ns):
    catalog.create_table(f"{ns}.events", schema=SCHEMA)
    first = catalog.load_table(f"{ns}.events")
    second = catalog.load_table(f"{ns}.events")     # the same version, read twice
    first.append(rows(1))
    after = thrift.get_table(ns, "events").parameters["metadata_location"]
    metadata_dir = first.location().removeprefix("file:") + "/metadata"
    before_files = set(os.listdir(metadata_dir))
    # What the second reader sends: main must still be where it read it (nowhere).
    with pytest.raises(CommitFailedException, match="main was created concurrently"):
        catalog.commit_table(second, (AssertRefSnapshotId(ref="main", snapshot_id=None),),
                             (SetPropertiesUpdate(updates={"late": "yes"}),))
    assert thrift.get_table(ns, "events").parameters["metadata_location"] == after
    assert set(os.listdir(metadata_dir)) == before_files      # no file of the failed commit
    # pyiceberg's own append re-reads and retries on the 409 (Table's commit retry): both
    # appends land.
    second.append(rows(2))
    assert sorted(r["id"] for r in catalog.load_table(f"{ns}.events").scan()
                  .to_arrow().to_pylist()) == [1, 2]


def test_stage_create_commits_as_a_create_transaction(catalog, thrift, ns):
    txn = catalog.create_table_transaction(f"{ns}.staged", schema=SCHEMA)
    assert not catalog.table_exists(f"{ns}.staged")     # nothing stored yet
    txn.append(rows(7))
    txn.commit_transaction()
    table = catalog.load_table(f"{ns}.staged")
    assert [r["id"] for r in table.scan().to_arrow().to_pylist()] == [7]
    assert thrift.get_table(ns, "staged").parameters["table_type"] == "ICEBERG"
    late = catalog.create_table_transaction(f"{ns}.raced", schema=SCHEMA)
    catalog.create_table(f"{ns}.raced", schema=SCHEMA)
    with pytest.raises(CommitFailedException, match="already exists"):
        late.commit_transaction()       # assert-create: someone created it meanwhile


def test_transactions_commit_is_atomic_across_tables(server, catalog, ns):
    a = catalog.create_table(f"{ns}.a", schema=SCHEMA)
    b = catalog.create_table(f"{ns}.b", schema=SCHEMA)

    def change(name, uuid_, value):
        return {"identifier": {"namespace": [ns], "name": name},
                "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid_)}],
                "updates": [{"action": "set-properties", "updates": {"batch": value}}]}

    answer = requests.post(url(server, "transactions/commit"), json={"table-changes": [
        change("a", a.metadata.table_uuid, "1"), change("b", b.metadata.table_uuid, "1")]})
    assert answer.status_code == 204, answer.text
    assert catalog.load_table(f"{ns}.a").properties["batch"] == "1"
    assert catalog.load_table(f"{ns}.b").properties["batch"] == "1"
    # One failing requirement: neither table changes.
    answer = requests.post(url(server, "transactions/commit"), json={"table-changes": [
        change("a", a.metadata.table_uuid, "2"), change("b", uuid.uuid4(), "2")]})
    assert answer.status_code == 409
    assert answer.json()["error"]["type"] == "CommitFailedException"
    assert catalog.load_table(f"{ns}.a").properties["batch"] == "1"
    assert catalog.load_table(f"{ns}.b").properties["batch"] == "1"
    missing = requests.post(url(server, "transactions/commit"), json={"table-changes": [
        change("nope", a.metadata.table_uuid, "3")]})
    assert missing.status_code == 404


def test_metrics_reports_are_accepted(server, catalog, ns):
    catalog.create_table(f"{ns}.m", schema=SCHEMA)
    report = {"report-type": "scan-report", "table-name": f"{ns}.m", "snapshot-id": 1,
              "filter": True, "schema-id": 0, "projected-field-ids": [1],
              "projected-field-names": ["id"], "metrics": {}}
    assert requests.post(url(server, f"namespaces/{ns}/tables/m/metrics"),
                         json=report).status_code == 204
    assert requests.post(url(server, f"namespaces/{ns}/tables/nope/metrics"),
                         json=report).status_code == 404


def test_purge_deletes_the_data_and_metadata_files_as_hive_catalog_does(catalog, thrift, ns):
    table = catalog.create_table(f"{ns}.purged", schema=SCHEMA)
    table.append(rows(1, 2))
    table = catalog.load_table(f"{ns}.purged")
    table.overwrite(rows(3))         # a snapshot that deletes the first data file
    location = table.location()
    before = files_under(location)
    assert sum(f.startswith("data/") for f in before) == 2     # the overwritten one too
    assert sum(f.endswith(".metadata.json") for f in before) == 3
    assert any(f.startswith("metadata/snap-") for f in before)     # manifest lists
    stray = os.path.join(location.removeprefix("file:"), "not-iceberg.txt")
    with open(stray, "w") as fh:
        fh.write("not referenced by the table")
    catalog.purge_table(f"{ns}.purged")
    assert not catalog.table_exists(f"{ns}.purged")
    with pytest.raises(t.NoSuchObjectException):
        thrift.get_table(ns, "purged")
    # Every file the metadata reaches is gone: data files of every snapshot (also the one
    # the overwrite deleted), manifests, manifest lists, all metadata files; a file the
    # table never referenced stays, as with Iceberg's CatalogUtil.dropTableData.
    assert files_under(location) == ["not-iceberg.txt"]


def test_metadata_pyiceberg_cannot_round_trip_is_refused_with_a_400(server, catalog, thrift, ns):
    with pytest.raises(BadRequestError, match="format-version 3"):
        catalog.create_table(f"{ns}.v3", schema=SCHEMA, properties={"format-version": "3"})
    table = catalog.create_table(f"{ns}.future", schema=SCHEMA)
    doc = json.loads(open(table.metadata_location.removeprefix("file:")).read())
    doc["encryption-keys"] = [{"key-id": "k1", "encrypted-key-metadata": "AAAA"}]
    written = table.location() + f"/metadata/00001-{uuid.uuid4()}.metadata.json"
    with open(written.removeprefix("file:"), "w") as fh:
        json.dump(doc, fh)
    registered = catalog.register_table(f"{ns}.future2", written)
    # Loading serves the file as written; a commit would drop the field, so it is refused.
    raw = requests.get(url(server, f"namespaces/{ns}/tables/future2")).json()
    assert raw["metadata"]["encryption-keys"] == doc["encryption-keys"]
    with pytest.raises(BadRequestError, match="encryption-keys"):
        registered.append(rows(1))
    assert thrift.get_table(ns, "future2").parameters["metadata_location"] == written


def test_rest_changes_are_in_the_notification_log_and_the_cache(catalog, thrift, ns):
    start = thrift.get_current_notificationEventId().eventId
    table = catalog.create_table(f"{ns}.logged", schema=SCHEMA)
    table.append(rows(1))
    # Read through the cache right after the commit: the new pointer.
    current = catalog.load_table(f"{ns}.logged").metadata_location
    assert thrift.get_table(ns, "logged").parameters["metadata_location"] == current
    catalog.drop_table(f"{ns}.logged")
    events = thrift.get_next_notification(t.NotificationEventRequest(lastEvent=start)).events
    kinds = [(e.eventType, e.tableName) for e in events if e.tableName == "logged"]
    assert kinds == [("CREATE_TABLE", "logged"), ("ALTER_TABLE", "logged"),
                     ("DROP_TABLE", "logged")]


def test_errors_have_the_spec_body_and_status(server, catalog, ns):
    catalog.create_table(f"{ns}.e", schema=SCHEMA)
    missing = requests.get(url(server, f"namespaces/{ns}/tables/nope"))
    assert missing.status_code == 404
    assert missing.json() == {"error": {"message": f"Table does not exist: {ns}.nope",
                                        "type": "NoSuchTableException", "code": 404}}
    bad_json = requests.post(url(server, f"namespaces/{ns}/tables/e"), data=b"{not json",
                             headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == 400
    unknown = requests.post(url(server, f"namespaces/{ns}/tables/e"), json={
        "requirements": [], "updates": [{"action": "make-it-faster"}]})
    assert unknown.status_code == 400, unknown.text
    assert "make-it-faster" in unknown.json()["error"]["message"]
    no_ns = requests.get(url(server, "namespaces/nope/tables"))
    assert no_ns.status_code == 404
    assert no_ns.json()["error"]["type"] == "NoSuchNamespaceException"
    both = requests.post(url(server, f"namespaces/{ns}/properties"),
                         json={"removals": ["a"], "updates": {"a": "1"}})
    assert both.status_code == 422


def test_load_with_snapshots_refs_returns_the_referenced_snapshots(server, catalog, ns):
    table = catalog.create_table(f"{ns}.refs", schema=SCHEMA)
    table.append(rows(1))
    catalog.load_table(f"{ns}.refs").append(rows(2))
    every = requests.get(url(server, f"namespaces/{ns}/tables/refs")).json()["metadata"]
    refs = requests.get(url(server, f"namespaces/{ns}/tables/refs"),
                        params={"snapshots": "refs"}).json()["metadata"]
    assert len(every["snapshots"]) == 2
    assert [s["snapshot-id"] for s in refs["snapshots"]] == [every["current-snapshot-id"]]
