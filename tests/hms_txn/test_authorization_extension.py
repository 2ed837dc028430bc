"""Extension mode (docs/extension-mode.md): roles, privileges, HiveServer2's token store,
runtime statistics, types and partition marks are forwarded to the upstream metastore,
whose objects and HiveServer2 instances they belong to; the transaction family's Hive 4
calls stay ours. The upstream here is another hms-txn server (normal mode)."""

from __future__ import annotations

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_extension_mode import pair  # noqa: F401 - the fixture
from tests.support.servers import connect


def test_authorization_and_stores_are_the_upstreams(pair):  # noqa: F811
    upstream, ext = pair
    front, back = connect(ext.port), connect(upstream.port)
    try:
        front.create_database(T.Database(name="x", parameters={}))
        front.create_table(make_table("x", "t", keys=[("k", "string")]))
        front.create_role(T.Role(roleName="analyst", ownerName="alice"))
        front.grant_privileges(T.PrivilegeBag(privileges=[T.HiveObjectPrivilege(
            hiveObject=T.HiveObjectRef(objectType=3, dbName="x", objectName="t"),
            principalName="analyst", principalType=2,
            grantInfo=T.PrivilegeGrantInfo(privilege="SELECT", grantor="alice", grantorType=1,
                                           grantOption=False))]))
        front.add_token("hs2-token", "secret")
        key = front.add_master_key("k")
        front.add_runtime_stats(T.RuntimeStat(weight=1, payload=b"p"))
        front.create_type(T.Type(name="ty"))
        front.markPartitionForEvent("x", "t", {"k": "1"}, 1)
        assert back.get_role_names() == ["admin", "analyst", "public"]
        assert [p.principalName for p in back.list_privileges(
            None, None, T.HiveObjectRef(objectType=3, dbName="x", objectName="t"))] == ["analyst"]
        assert back.get_token("hs2-token") == "secret" and back.get_master_keys() == ["k"]
        assert key == 1
        assert [s.payload for s in back.get_runtime_stats(
            T.GetRuntimeStatsRequest(maxWeight=-1, maxCreateTime=0))] == [b"p"]
        assert back.get_type("ty").name == "ty"
        assert back.isPartitionMarkedForEvent("x", "t", {"k": "1"}, 1)
        # the upstream's refusals come back unchanged
        with pytest.raises(T.MetaException, match="already exists"):
            front.create_role(T.Role(roleName="analyst", ownerName="alice"))
        # the transaction family stays ours: compactions queue here, not upstream
        assert front.compact2(T.CompactionRequest(dbname="x", tablename="t", type=2)).accepted
        assert back.show_compact(T.ShowCompactRequest()).compacts == []
        front.add_write_ids_to_min_history(1, {"x.t": 1})
        front.update_transaction_statistics(T.UpdateTransactionalStatsRequest(
            tableId=1, insertCount=1, updatedCount=0, deletedCount=0))
    finally:
        front.close()
        back.close()
