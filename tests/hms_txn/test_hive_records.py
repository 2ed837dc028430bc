"""Hive's small record stores over Thrift, on SQLite and PostgreSQL: HiveServer2's token
store, runtime statistics, types and partition event marks, where Hive 4 answers what the
Java metastore 2.3 cannot show (test_authorization_differential.py compares the rest)."""

from __future__ import annotations

import time

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table


def test_master_key_ids_are_never_reused(client):
    """Hive's MASTER_KEYS ids come from a sequence: HiveServer2's token manager keeps keys by
    id, so a removed key's id must not come back (ObjectStore.addMasterKey)."""
    assert [client.add_master_key(k) for k in ("a", "b")] == [1, 2]
    assert client.remove_master_key(2)
    assert client.add_master_key("c") == 3
    assert client.get_master_keys() == ["a", "c"]


def test_token_store_refusals(client):
    # add_token declares no exception: a refusal is INTERNAL_ERROR with the reason
    with pytest.raises(TApplicationException) as err:
        client.add_token(None, "x")
    assert err.value.type == TApplicationException.INTERNAL_ERROR
    assert "token identifier" in err.value.message
    # HMSHandler.get_token: "Thrift cannot return null result"
    assert client.get_token("missing") == ""
    assert client.get_all_token_identifiers() == []


def test_runtime_stats(client):
    """ObjectStore.getRuntimeStats: newest first, until the weights reach maxWeight (the
    entry that reaches it included; negative: all), older than maxCreateTime when positive;
    MRuntimeStat.fromThrift sets the create time itself."""
    for weight, payload in ((5, b"a"), (3, b"b"), (4, b"c")):
        client.add_runtime_stats(T.RuntimeStat(createTime=1, weight=weight, payload=payload))
    everything = client.get_runtime_stats(T.GetRuntimeStatsRequest(maxWeight=-1,
                                                                   maxCreateTime=0))
    assert [s.payload for s in everything] == [b"c", b"b", b"a"]
    now = int(time.time())
    assert all(now - 60 <= s.createTime <= now + 1 for s in everything)
    assert [s.payload for s in client.get_runtime_stats(
        T.GetRuntimeStatsRequest(maxWeight=7, maxCreateTime=0))] == [b"c", b"b"]
    assert [s.payload for s in client.get_runtime_stats(
        T.GetRuntimeStatsRequest(maxWeight=0, maxCreateTime=0))] == [b"c"]
    assert client.get_runtime_stats(
        T.GetRuntimeStatsRequest(maxWeight=-1, maxCreateTime=everything[-1].createTime)) == []


@pytest.mark.parametrize("backend", ["sqlite"])
def test_type_without_a_name(client):
    # Hive's validateName fails with a NullPointerException (MetaException with its text)
    with pytest.raises(T.MetaException) as err:
        client.create_type(T.Type())
    assert err.value.message == "Type name cannot be null."


def test_partition_marks_take_catalog_names(client):
    """Hive 4's HMSHandler.markPartitionForEvent parses "@cat#db" (Hive 2.3 does not:
    compared in the differential test without it)."""
    client.create_database(T.Database(name="m", parameters={}))
    client.create_table(make_table("m", "t", keys=[("day", "string"), ("hr", "int")]))
    spec = {"hr": "3", "day": "2024-01-01"}
    client.markPartitionForEvent("@hive#m", "t", spec, 1)
    assert client.isPartitionMarkedForEvent("m", "t", spec, 1)
    assert client.isPartitionMarkedForEvent("@hive#m", "t", spec, 1)
    assert not client.isPartitionMarkedForEvent("m", "t", {"hr": "4", "day": "2024-01-01"}, 1)
    with pytest.raises(T.MetaException) as err:
        client.markPartitionForEvent("m", "t", spec, 2)
    assert "event type 2" in err.value.message
