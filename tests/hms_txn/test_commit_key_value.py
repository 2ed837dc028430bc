"""CommitTxnRequest.keyValue: a `_meta*` table parameter recorded atomically with a commit."""

from __future__ import annotations

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table


def _open(client) -> int:
    return client.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]


def test_commit_records_the_key_value(client):
    client.create_table(make_table("default", "sink", params={"transactional": "true",
                                                             "_meta.last.batch": "-1"}))
    table = client.get_table_acid_aware("default", "sink")
    txn = _open(client)
    client.commit_txn(t.CommitTxnRequest(txnid=txn, keyValue=t.CommitTxnKeyValue(
        tableId=table.id, key="_meta.last.batch", value="7")))
    assert client.get_table_acid_aware("default", "sink").parameters["_meta.last.batch"] == "7"
    req = t.GetTableRequest(dbName="default", tblName="sink",
                            capabilities=t.ClientCapabilities([t.ClientCapability.INSERT_ONLY_TABLES]))
    assert client.get_table_req(req).table.parameters["_meta.last.batch"] == "7"


@pytest.mark.parametrize("key, table_id_delta, message", [
    ("last.batch", 0, "must start with '_meta'"),
    ("_meta.unknown", 0, "has no parameter"),
    ("_meta.last.batch", 1000, "no table with id"),
])
def test_bad_key_value_fails_and_changes_nothing(client, key, table_id_delta, message):
    client.create_table(make_table("default", "sink", params={"_meta.last.batch": "-1"}))
    table = client.get_table("default", "sink")
    txn = _open(client)
    with pytest.raises(t.NoSuchTxnException, match=message):
        client.commit_txn(t.CommitTxnRequest(txnid=txn, keyValue=t.CommitTxnKeyValue(
            tableId=table.id + table_id_delta, key=key, value="7")))
    assert client.get_table("default", "sink").parameters["_meta.last.batch"] == "-1"
    open_ids = [x.id for x in client.get_open_txns_info().open_txns if x.state == t.TxnState.OPEN]
    assert txn in open_ids  # the commit did not happen; the client may retry or abort
    client.commit_txn(t.CommitTxnRequest(txnid=txn))
