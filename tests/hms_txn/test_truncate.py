"""TRUNCATE (``truncate_table``, ``truncate_table_req``) against Hive 4's metastore
(HMSHandler.truncateTableInternal / TruncateTableHandler: ``addTruncateBaseFile`` for
transactional tables, ``updateStatsForTruncate``, ALTER_TABLE / ALTER_PARTITION events with
isTruncateOp) and the request HiveServer2 sends (Hive.truncateTable ->
HiveMetaStoreClient.truncateTableInternal: dbName "@hive#db", writeId and
validWriteIdList for ACID tables, environmentContext truncateSkipDataDeletion)."""

from __future__ import annotations

import json
import os

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from orc_acid.snapshot import get_acid_state
from tests.hms_txn.test_catalog import local, make_table
from tests.hms_txn.test_writeids import alloc, open_txns, snapshot, write_ids

STATS = {"numFiles": "2", "numRows": "10", "totalSize": "300", "rawDataSize": "900",
         "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true"}}'}
TRUNCATED = {"numFiles": "0", "numRows": "0", "totalSize": "0", "rawDataSize": "0",
             "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'}


def _write(location: str, *names: str) -> None:
    for name in names:
        path = os.path.join(local(location), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("data")


def _events(client, last: int) -> list[t.NotificationEvent]:
    return client.get_next_notification(t.NotificationEventRequest(lastEvent=last)).events


def _last(client) -> int:
    return client.get_current_notificationEventId().eventId


def _stats_of(params: dict) -> dict:
    return {k: v for k, v in params.items() if k in TRUNCATED}


def test_plain_table_loses_its_files_and_stats(client):
    client.create_table(make_table("default", "plain", params=STATS))
    location = client.get_table("default", "plain").sd.location
    _write(location, "000000_0", "sub/000001_0")
    last = _last(client)
    client.truncate_table_req(t.TruncateTableRequest(dbName="@hive#default", tableName="plain"))
    assert os.listdir(local(location)) == []          # the directory stays
    table = client.get_table("default", "plain")
    assert _stats_of(table.parameters) == TRUNCATED
    [event] = _events(client, last)
    message = json.loads(event.message)
    assert (event.eventType, message["isTruncateOp"], message["writeId"]) == (
        "ALTER_TABLE", "true", -1)


def test_skip_data_deletion_keeps_files(client):
    client.create_table(make_table("default", "kept", params=STATS))
    location = client.get_table("default", "kept").sd.location
    _write(location, "000000_0")
    client.truncate_table_req(t.TruncateTableRequest(
        dbName="default", tableName="kept",
        environmentContext=t.EnvironmentContext({"truncateSkipDataDeletion": "true"})))
    assert os.listdir(local(location)) == ["000000_0"]
    assert _stats_of(client.get_table("default", "kept").parameters) == TRUNCATED


def test_partitions_named_or_all(client):
    client.create_table(make_table("default", "parts", keys=(("p", "string"),)))
    for value in ("a", "b", "c"):
        client.add_partition(t.Partition(values=[value], dbName="default", tableName="parts",
                                         parameters=dict(STATS)))
        _write(client.get_partition("default", "parts", [value]).sd.location, "f")
    last = _last(client)
    client.truncate_table("default", "parts", ["p=a", "p=c"])
    left = {v: os.listdir(local(client.get_partition("default", "parts", [v]).sd.location))
            for v in "abc"}
    assert left == {"a": [], "b": ["f"], "c": []}
    assert _stats_of(client.get_partition("default", "parts", ["a"]).parameters) == TRUNCATED
    assert _stats_of(client.get_partition("default", "parts", ["b"]).parameters) != TRUNCATED
    events = _events(client, last)
    assert [(e.eventType, json.loads(e.message)["keyValues"], json.loads(e.message)["isTruncateOp"])
            for e in events] == [("ALTER_PARTITION", {"p": "a"}, "true"),
                                 ("ALTER_PARTITION", {"p": "c"}, "true")]
    client.truncate_table("default", "parts", None)            # no names: every partition
    assert os.listdir(local(client.get_partition("default", "parts", ["b"]).sd.location)) == []


def test_acid_table_gets_an_empty_base_at_the_write_id(client):
    params = {"transactional": "true", **STATS}
    client.create_table(make_table("default", "acid", params=params))
    location = client.get_table_acid_aware("default", "acid").sd.location
    _write(location, "delta_0000001_0000001_0000/bucket_00000")
    [first] = open_txns(client)
    alloc(client, "acid", [first])
    client.commit_txn(t.CommitTxnRequest(txnid=first))
    [txn] = open_txns(client)
    [(_, write_id)] = alloc(client, "acid", [txn])
    valid = write_ids(client, ["default.acid"], snapshot(client, txn))["default.acid"]
    last = _last(client)
    client.truncate_table_req(t.TruncateTableRequest(
        dbName="@hive#default", tableName="acid", writeId=write_id, validWriteIdList=str(valid),
        environmentContext=t.EnvironmentContext({"truncateSkipDataDeletion": "true"})))
    base = os.path.join(local(location), f"base_{write_id:07d}")
    assert os.listdir(base) == ["_metadata_acid"]
    with open(os.path.join(base, "_metadata_acid")) as fh:
        assert json.load(fh) == {"thisFileVersion": "0", "dataFormat": "truncated"}
    assert os.path.exists(os.path.join(local(location), "delta_0000001_0000001_0000"))
    table = client.get_table_acid_aware("default", "acid")
    assert table.writeId == write_id and _stats_of(table.parameters) == TRUNCATED
    [event] = _events(client, last)
    message = json.loads(event.message)
    assert (event.eventType, message["isTruncateOp"], message["writeId"]) == (
        "ALTER_TABLE", "true", write_id)
    client.commit_txn(t.CommitTxnRequest(txnid=txn))
    # a reader after the commit sees the truncating base and nothing older
    after = write_ids(client, ["default.acid"], snapshot(client))["default.acid"]
    state = get_acid_state(location, after)
    assert state.base.path == f"base_{write_id:07d}" and state.deltas == ()


def test_acid_table_without_a_write_id_is_refused(client):
    client.create_table(make_table("default", "acid2", params={"transactional": "true"}))
    location = client.get_table_acid_aware("default", "acid2").sd.location
    _write(location, "delta_0000001_0000001_0000/bucket_00000")
    with pytest.raises(t.MetaException, match="without a write id"):
        client.truncate_table("default", "acid2", None)
    assert os.listdir(local(location)) == ["delta_0000001_0000001_0000"]
    with pytest.raises(t.MetaException, match="does not exist"):
        client.truncate_table_req(t.TruncateTableRequest(dbName="default", tableName="nope"))
