"""The last Hive 4 metastore calls hms-txn used to refuse (issue 28): fb303's
getCpuProfile, the MSCK REPAIR seeds (seed_write_id, seed_txn_id), the materialized-view
rebuild lock (get_lock_materialization_rebuild, heartbeat_lock_materialization_rebuild) and
replication's repl_tbl_writeid_state. Each test replays the calls Hive's own caller makes
(file and method cited) and asserts Hive 4's answers, over Thrift, on SQLite and PostgreSQL.
The external compactor's calls are in test_external_compactor.py."""

from __future__ import annotations

import pytest

from hms_txn.service.extension.forwarding import owned_methods
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

ACQUIRED, NOT_ACQUIRED = 1, 4        # LockState


def _open(client, txn_type=None):
    return client.open_txns(T.OpenTxnRequest(num_txns=1, user="hive", hostname="hs2",
                                             txn_type=txn_type)).txn_ids[0]


def test_get_cpu_profile_is_empty(client):
    """Hive's FacebookBase.getCpuProfile answers an empty string."""
    assert client.getCpuProfile(5) == ""


def test_seed_write_id_and_txn_id_as_msck_repair_sends_them(client):
    """Msck.java (REPAIR of a transactional table whose files the metastore does not know):
    getMaxAllocatedWriteId; when it is 0, seedWriteId(db, table, max write id on the file
    system); when the files' highest visibility txn id is above the current one,
    seedTxnId(maxVisibilityTxnId + 1). TxnHandler.seedWriteId inserts NEXT_WRITE_ID =
    seed + 1; seedTxnId refuses a seed at or below the high-water mark (MetaException)."""
    txn = _open(client)                                        # Msck's own transaction
    assert client.get_max_allocated_table_write_id(T.MaxAllocatedTableWriteIdRequest(
        dbName="default", tableName="t")).maxWriteId == 0
    client.seed_write_id(T.SeedTableWriteIdsRequest(dbName="default", tableName="T",
                                                    seedWriteId=7))
    assert client.get_max_allocated_table_write_id(T.MaxAllocatedTableWriteIdRequest(
        dbName="default", tableName="t")).maxWriteId == 7
    with pytest.raises(T.MetaException, match="already has a write id"):
        client.seed_write_id(T.SeedTableWriteIdsRequest(dbName="default", tableName="t",
                                                        seedWriteId=9))
    client.seed_txn_id(T.SeedTxnIdRequest(seedTxnId=100))
    # the next write id of the table follows the seed; the next transaction the txn seed
    nxt = _open(client)
    assert nxt == 100
    wid = client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
        dbName="default", tableName="t", txnIds=[txn])).txnToWriteIds[0].writeId
    assert wid == 8
    with pytest.raises(T.MetaException, match="Invalid txnId seed 100, the highWaterMark is 100"):
        client.seed_txn_id(T.SeedTxnIdRequest(seedTxnId=100))
    assert _open(client) == 101                               # the refusal changed nothing


def test_materialization_rebuild_lock(client):
    """HiveServer2 4's ALTER MATERIALIZED VIEW ... REBUILD (AlterMaterializedViewRebuild
    Analyzer, DbTxnManager.acquireMaterializationRebuildLock): in its MATER_VIEW_REBUILD
    transaction it asks get_lock_materialization_rebuild(db, view, txnId) and gives up
    unless ACQUIRED; its MaterializationRebuildLockHeartbeater then calls
    heartbeat_lock_materialization_rebuild until it answers false. Hive 4
    (LockMaterializationRebuildFunction): LockResponse(lockid=txnId, ACQUIRED), or
    NOT_ACQUIRED while the view is being rebuilt; the lock goes with the commit."""
    first = _open(client, T.TxnType.MATER_VIEW_REBUILD)
    second = _open(client, T.TxnType.MATER_VIEW_REBUILD)
    r = client.get_lock_materialization_rebuild("default", "mv", first)
    assert (r.lockid, r.state) == (first, ACQUIRED)
    r = client.get_lock_materialization_rebuild("default", "mv", second)
    assert (r.lockid, r.state) == (second, NOT_ACQUIRED)
    assert client.get_lock_materialization_rebuild("default", "other_mv", second).state == ACQUIRED
    assert client.heartbeat_lock_materialization_rebuild("default", "mv", first) is True
    assert client.heartbeat_lock_materialization_rebuild("default", "mv", second) is False
    client.commit_txn(T.CommitTxnRequest(txnid=first))
    assert client.heartbeat_lock_materialization_rebuild("default", "mv", first) is False
    assert client.get_lock_materialization_rebuild("default", "mv", second).state == ACQUIRED
    client.abort_txns(T.AbortTxnsRequest(txn_ids=[second]))
    third = _open(client, T.TxnType.MATER_VIEW_REBUILD)
    assert client.get_lock_materialization_rebuild("default", "mv", third).state == ACQUIRED


def test_repl_tbl_writeid_state_of_a_bootstrap_load(client):
    """A bootstrap REPL LOAD of a transactional table (ReplTxnTask, REPL_WRITEID_STATE:
    DbTxnManager.replTableWriteIdState) sends the source's ValidWriteIdList of the table.
    Hive 4 (ReplTableWriteIdStateFunction): each aborted write id of the source gets a
    transaction opened and aborted here, the next write id follows the source's high-water
    mark, a major compaction per partition sent cleans the aborted data; a table that has
    write ids already is left alone (a replayed load)."""
    state = "default.r:5:9223372036854775807::2,4"
    client.repl_tbl_writeid_state(T.ReplTblWriteIdStateRequest(
        validWriteIdlist=state, user="repl", hostName="target", dbName="default",
        tableName="R", partNames=["p=1", "p=2"]))
    ids = client.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=["default.r"])).tblValidWriteIds[0]
    assert (ids.writeIdHighWaterMark, ids.invalidWriteIds) == (5, [2, 4])
    assert ids.abortedBits == bytes([0b11])
    compactions = client.show_compact(T.ShowCompactRequest()).compacts
    assert [(c.tablename, c.partitionname, c.type, c.state) for c in compactions] == [
        ("r", "p=1", T.CompactionType.MAJOR, "initiated"),
        ("r", "p=2", T.CompactionType.MAJOR, "initiated")]
    client.repl_tbl_writeid_state(T.ReplTblWriteIdStateRequest(       # replayed: no change
        validWriteIdlist="default.r:9:9223372036854775807::7", user="repl", hostName="target",
        dbName="default", tableName="r"))
    assert len(client.show_compact(T.ShowCompactRequest()).compacts) == 2
    txn = _open(client)
    assert client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
        dbName="default", tableName="r", txnIds=[txn])).txnToWriteIds[0].writeId == 6
    # no aborted write ids: only the next write id, no compaction
    client.repl_tbl_writeid_state(T.ReplTblWriteIdStateRequest(
        validWriteIdlist="default.s:3:9223372036854775807::", user="repl", hostName="target",
        dbName="default", tableName="s"))
    assert client.get_max_allocated_table_write_id(T.MaxAllocatedTableWriteIdRequest(
        dbName="default", tableName="s")).maxWriteId == 3
    assert len(client.show_compact(T.ShowCompactRequest()).compacts) == 2


def test_remaining_calls_are_never_forwarded():
    """Extension mode serves the transaction system itself (service/extension/forwarding.py)."""
    owned = owned_methods(frozenset())
    for method in ("repl_tbl_writeid_state", "seed_write_id", "seed_txn_id",
                   "get_lock_materialization_rebuild", "heartbeat_lock_materialization_rebuild",
                   "submit_for_cleanup", "find_next_compact", "find_next_compact2",
                   "update_compactor_state", "find_columns_with_stats", "mark_cleaned",
                   "mark_compacted", "mark_failed", "mark_refused",
                   "update_compaction_metrics_data", "remove_compaction_metrics_data",
                   "set_hadoop_jobid"):
        assert method in owned, method
