"""Extension mode (docs/extension-mode.md) and the calls issue 28 added: catalog-qualified
names, the request forms of DDL (logged and evicted like their old forms), TRUNCATE, and
the families forwarded as they are. The upstream is another hms-txn server (normal mode),
as in the first group of test_extension_mode."""

from __future__ import annotations

import json
import os

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import InProcessServer


def server(root, name: str, conf: dict) -> InProcessServer:
    base = os.path.join(str(root), name)
    return InProcessServer(os.path.join(base, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{base}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(base, "warehouse"), **conf})


@pytest.fixture
def clients(tmp_path):
    """(extension-mode client, upstream client); the extension server caches for an hour,
    so whatever it answers fresh after a change it learned from its own log."""
    upstream = server(tmp_path, "upstream", {})
    ext = server(tmp_path, "ext", {
        "hms_txn.upstream.uris": upstream.uri, "hms_txn.upstream.retries": "1",
        "hms_txn.upstream.retry.delay": "50ms", "hms_txn.upstream.cache.ttl": "1h"})
    c, u = ext.client(), upstream.client()
    yield c, u
    c.close()
    u.close()
    ext.stop()
    upstream.stop()


def _events(client, after: int = 0) -> list[tuple[str, str, str | None, dict]]:
    rsp = client.get_next_notification(t.NotificationEventRequest(lastEvent=after))
    return [(e.eventType, e.dbName, e.tableName, json.loads(e.message)) for e in rsp.events]


def _last(client) -> int:
    return client.get_current_notificationEventId().eventId


def test_hive_catalog_names_are_plain_and_other_catalogs_go_upstream(clients):
    c, u = clients
    c.create_table(make_table("default", "t1"))
    assert c.get_table("@hive#default", "t1").tableName == "t1"      # from our cache
    assert c.get_databases("@hive#") == ["default"]
    assert c.get_all_tables("@hive#default") == ["t1"]
    c.drop_table_with_environment_context("@hive#default", "t1", True, None)
    assert u.get_all_tables("default") == []
    assert [e[:3] for e in _events(c)][-1] == ("DROP_TABLE", "default", "t1")
    with pytest.raises(t.NoSuchObjectException):                     # the cache followed
        c.get_table("default", "t1")
    # a name in another catalog is the upstream's business, sent as it was
    with pytest.raises(t.NoSuchObjectException) as info:
        c.get_table("@spark#default", "t1")
    assert info.value.message == "No catalog spark"
    assert c.get_catalogs().names == ["hive"]                         # forwarded


def test_request_forms_are_logged_and_evicted_like_the_old_forms(clients):
    c, u = clients
    last = _last(c)
    c.create_database_req(t.CreateDatabaseRequest(databaseName="sales"))
    assert u.get_database("sales").name == "sales"
    c.create_table(make_table("sales", "orders", keys=(("day", "string"),)))
    c.get_table("sales", "orders")                                    # cached now
    part = c.append_partition_req(t.AppendPartitionsRequest(
        dbName="sales", tableName="orders", partVals=["d1"]))
    assert part.values == ["d1"] and u.get_partition_names("sales", "orders", -1) == ["day=d1"]
    c.append_partition_req(t.AppendPartitionsRequest(dbName="sales", tableName="orders",
                                                     name="day=d2"))
    assert c.fetch_partition_names_req(t.PartitionsRequest(
        dbName="sales", tblName="orders")) == ["day=d1", "day=d2"]
    assert [p.values for p in c.get_partitions_by_filter_req(t.GetPartitionsByFilterRequest(
        dbName="sales", tblName="orders", filter="day = 'd2'"))] == [["d2"]]
    assert c.drop_partition_req(t.DropPartitionRequest(dbName="sales", tblName="orders",
                                                       partName="day=d1")) is True
    assert c.get_partition_names("sales", "orders", -1) == ["day=d2"]
    c.drop_table_req(t.DropTableRequest(dbName="sales", tableName="orders", deleteData=True))
    assert u.get_all_tables("sales") == []
    assert [e[:3] for e in _events(c, last)] == [
        ("CREATE_DATABASE", "sales", None), ("CREATE_TABLE", "sales", "orders"),
        ("ADD_PARTITION", "sales", "orders"), ("ADD_PARTITION", "sales", "orders"),
        ("DROP_PARTITION", "sales", "orders"), ("DROP_TABLE", "sales", "orders")]


def test_truncate_goes_upstream_and_is_logged_as_hive_logs_it(clients):
    c, u = clients
    c.create_table(make_table("default", "plain", params={"numRows": "5"}))
    c.create_table(make_table("default", "parts", keys=(("p", "string"),)))
    c.append_partition("default", "parts", ["a"])
    assert c.get_table("default", "plain").parameters["numRows"] == "5"   # cached
    last = _last(c)
    c.truncate_table_req(t.TruncateTableRequest(dbName="@hive#default", tableName="plain"))
    c.truncate_table("default", "parts", None)
    assert u.get_table("default", "plain").parameters["numRows"] == "0"
    assert c.get_table("default", "plain").parameters["numRows"] == "0"   # evicted
    events = _events(c, last)
    assert [(e[0], e[2], e[3]["isTruncateOp"]) for e in events] == [
        ("ALTER_TABLE", "plain", "true"), ("ALTER_PARTITION", "parts", "true")]


def test_materialization_invalidation_info_is_ours(clients):
    """It reads the transactions that wrote the view's sources, which are ours."""
    c, u = clients
    c.create_table(make_table("default", "src", params={"transactional": "true"}))
    [txn] = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
    c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
        dbName="default", tableName="src", txnIds=[txn]))
    c.lock(t.LockRequest(component=[t.LockComponent(
        type=t.LockType.SHARED_WRITE, level=t.LockLevel.TABLE, dbname="default",
        tablename="src", operationType=t.DataOperationType.DELETE, isTransactional=True)],
        txnid=txn, user="u", hostname="h"))
    c.commit_txn(t.CommitTxnRequest(txnid=txn))
    metadata = t.CreationMetadata(catName="hive", dbName="default", tblName="mv",
                                  tablesUsed={"default.src"},
                                  validTxnList="1$default.src:0:9223372036854775807::")
    found = c.get_materialization_invalidation_info(metadata, "")
    assert (found.sourceTablesUpdateDeleteModified, found.sourceTablesCompacted) == (True, False)
