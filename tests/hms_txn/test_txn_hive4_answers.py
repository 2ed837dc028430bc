"""The transaction family's answers where Hive 4 differs from Hive 3, and its Hive 4 calls:
compact2 of an object already queued, abort_Compactions,
get_latest_committed_compaction_info, add_write_ids_to_min_history,
update_transaction_statistics, add_write_notification_log_in_batch, and locks printed in
messages the way Hive's Java code prints them. Over Thrift, on SQLite and PostgreSQL."""

from __future__ import annotations


import pytest
from thrift.Thrift import TApplicationException

from hms_txn.domain.compaction.compaction_bookkeeping import finish
from hms_txn.store.schema import compaction_queue
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_locks import ACQUIRED, EX, NOT_ACQUIRED, SR, comp, lock

MINOR, MAJOR = 1, 2


def _compact(client, table="t", part=None, ctype=MAJOR):
    return client.compact2(T.CompactionRequest(dbname="default", tablename=table,
                                               partitionname=part, type=ctype))


def _set(hms, cid, **values):
    with hms.ms.store.write() as conn:
        conn.execute(compaction_queue.update().where(compaction_queue.c.id == cid)
                     .values(**values))


def _write(client, table="t", commit=True):
    """One transaction writing ``table``: its write id."""
    txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    wid = client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
        dbName="default", tableName=table, txnIds=[txn])).txnToWriteIds[0].writeId
    if commit:
        client.commit_txn(T.CommitTxnRequest(txnid=txn))
    return txn, wid


def test_compact2_of_a_queued_object_is_refused(hms, client):
    """Hive 4's CompactFunction.execute: an initiated or working entry of the object, or one
    ready for cleaning that compacted up to the table's compactor high-water mark, refuses
    the request: id -1, state "refused", not accepted, the entry in the message."""
    first = _compact(client)
    assert (first.id, first.state, first.accepted) == (1, "initiated", True)
    _set(hms, first.id, state="w")
    r = _compact(client, ctype=MINOR)
    assert (r.id, r.state, r.accepted, r.errormessage) == (
        -1, "refused", False, "Compaction is already scheduled with state='working' and id=1")
    assert _compact(client, part="p=1").accepted              # a partition is its own object
    _write(client)
    _write(client)
    _set(hms, first.id, state="r", highest_write_id=2)       # compacted up to write id 2
    r = _compact(client)
    assert (r.id, r.accepted, r.errormessage) == (
        -1, False, "Compaction is already scheduled with state='ready for cleaning' and id=1")
    txn, _ = _write(client, commit=False)       # an open write keeps the compactor's mark at 2
    assert not _compact(client).accepted
    client.commit_txn(T.CommitTxnRequest(txnid=txn))          # write id 3 committed: new work
    r = _compact(client)
    assert (r.state, r.accepted) == ("initiated", True)
    assert [c.id for c in client.show_compact(T.ShowCompactRequest()).compacts] == [1, 2, r.id]


def test_abort_compactions(hms, client):
    """Hive 4's AbortCompactionFunction: only initiated requests are aborted (to the history
    as "aborted"); other ids are answered with why not."""
    initiated = _compact(client, "a").id
    working = _compact(client, "b").id
    _set(hms, working, state="w")
    done = _compact(client, "c").id
    with hms.ms.store.write() as conn:
        finish(conn, done, "s")
    rsp = client.abort_Compactions(T.AbortCompactionRequest(
        compactionIds=[initiated, working, done, 99]))
    answers = {i: (e.compactionId, e.status, e.message) for i, e in rsp.abortedcompacts.items()}
    assert answers == {
        initiated: (initiated, "Success", "Successfully aborted compaction"),
        working: (working, "Error",
                  "Error while aborting compaction as compaction is in state-working"),
        done: (done, "Error",
               "Error while aborting compaction as compaction is in state-succeeded"),
        99: (99, "Error", "No Such Compaction Id Available")}
    [aborted] = [c for c in client.show_compact(T.ShowCompactRequest()).compacts
                 if c.id == initiated]
    assert (aborted.state, aborted.errorMessage) == (
        "aborted", "Compaction Aborted by Abort Comapction request.")
    assert client.abort_Compactions(T.AbortCompactionRequest(compactionIds=[])) \
        .abortedcompacts == {}


def test_latest_committed_compaction_info(hms, client):
    """TxnHandler.getLatestCommittedCompactionInfo: the newest succeeded or ready-for-cleaning
    compaction per partition, newest first, after lastCompactionId when given."""
    ids = {}
    for key, part, ctype in (("p1-old", "p=1", MINOR), ("p1", "p=1", MAJOR),
                             ("p2", "p=2", MINOR), ("p3", "p=3", MAJOR)):
        ids[key] = _compact(client, part=part, ctype=ctype).id
        if key == "p1-old":
            with hms.ms.store.write() as conn:
                finish(conn, ids[key], "s")
    with hms.ms.store.write() as conn:
        finish(conn, ids["p1"], "s")
        finish(conn, ids["p3"], "f")                          # failed: not committed
    _set(hms, ids["p2"], state="r")

    def latest(**kw):
        rsp = client.get_latest_committed_compaction_info(
            T.GetLatestCommittedCompactionInfoRequest(dbname="default", tablename="t", **kw))
        return [(c.id, c.dbname, c.tablename, c.partitionname, c.type) for c in rsp.compactions]

    assert latest() == [(ids["p2"], "default", "t", "p=2", MINOR),
                        (ids["p1"], "default", "t", "p=1", MAJOR)]
    assert latest(partitionnames=["p=1"]) == [(ids["p1"], "default", "t", "p=1", MAJOR)]
    assert latest(lastCompactionId=ids["p2"]) == []
    # the call declares no exception: Hive's MetaException reaches the client this way
    with pytest.raises(TApplicationException, match="Database name and table name cannot be "
                       "null."):
        client.get_latest_committed_compaction_info(
            T.GetLatestCommittedCompactionInfoRequest(tablename="t"))


def test_min_history_and_transaction_statistics_are_accepted(client):
    """HiveServer2 4 sends add_write_ids_to_min_history after get_valid_write_ids for every
    ACID read (DbTxnManager.addWriteIdsToMinHistory) and fails the query on any error; Hive's
    BasicStatsTask sends update_transaction_statistics after ACID writes."""
    txn, wid = _write(client, commit=False)
    client.add_write_ids_to_min_history(txn, {"default.t": wid})
    client.update_transaction_statistics(T.UpdateTransactionalStatsRequest(
        tableId=1, insertCount=3, updatedCount=0, deletedCount=1))
    client.commit_txn(T.CommitTxnRequest(txnid=txn))


def test_add_write_notification_log_in_batch(client):
    """Hive 4's handler: one ACID write per request for the batch's table, recorded as
    add_write_notification_log records it (a TXN_WRITE_NOTIFICATION_LOG row, which
    get_all_write_event_info reads; DbNotificationListener.onAcidWrite adds no log event);
    requests for partitions that do not exist are dropped; an empty batch writes nothing."""
    client.create_table(make_table("default", "pt", keys=[("k", "string")],
                                   params={"transactional": "true"}))
    sd = client.get_table_acid_aware("default", "pt").sd
    sd.location += "/k=1"
    client.add_partition(T.Partition(values=["1"], dbName="default", tableName="pt", sd=sd,
                                     parameters={}))
    txn, wid = _write(client, "pt", commit=False)
    start = client.get_current_notificationEventId().eventId

    def request(values, path):
        return T.WriteNotificationLogRequest(
            txnId=txn, writeId=wid, db="default", table="pt", partitionVals=values,
            fileInfo=T.InsertEventRequestData(filesAdded=[path], subDirectoryList=["delta_1_1"]))

    client.add_write_notification_log_in_batch(T.WriteNotificationLogBatchRequest(
        catalog="hive", db="default", table="pt",
        requestList=[request(["1"], "f1"), request(["2"], "f2")]))
    writes = client.get_all_write_event_info(T.GetAllWriteEventInfoRequest(txnId=txn))
    assert [(w.table, w.partition, w.writeId) for w in writes] == [("pt", "k=1", wid)]
    assert "f1###delta_1_1" in writes[0].files and "f2" not in writes[0].files
    client.add_write_notification_log_in_batch(T.WriteNotificationLogBatchRequest(
        catalog="hive", db="default", table="pt", requestList=[]))
    with pytest.raises(TApplicationException) as err:       # declares no exception
        client.add_write_notification_log_in_batch(T.WriteNotificationLogBatchRequest(
            catalog="hive", db="default", table="nope", requestList=[request(["1"], "f")]))
    assert err.value.type == TApplicationException.INTERNAL_ERROR
    assert client.get_current_notificationEventId().eventId == start
    assert len(client.get_all_write_event_info(T.GetAllWriteEventInfoRequest(txnId=txn))) == 1
    client.commit_txn(T.CommitTxnRequest(txnid=txn))


def test_locks_in_messages_print_as_hive_prints_them(client):
    """Hive's LockInfo.toString: "lockid:N intLockId:N txnid:N db:.. table:.. partition:..
    state:.. type:..", an unset name as null (CheckLockFunction's zero-wait read message,
    TxnHandler.unlock's refusal)."""
    holder = lock(client, comp(EX, table="t"))
    assert holder.state == ACQUIRED
    txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    r = lock(client, comp(SR, table="t"), txn=txn, zeroWaitReadEnabled=True)
    assert r.state == NOT_ACQUIRED
    assert r.errorMessage == (
        f"Unable to acquire read lock due to an existing exclusive lock {{lockid:"
        f"{holder.lockid} intLockId:1 txnid:0 db:default table:t partition:null "
        f"state:ACQUIRED type:EXCLUSIVE}}")
    client.unlock(T.UnlockRequest(lockid=holder.lockid))
    held = lock(client, comp(SR), txn=txn)
    with pytest.raises(T.TxnOpenException) as err:
        client.unlock(T.UnlockRequest(lockid=held.lockid))
    assert err.value.message == (
        f"Unlocking locks associated with transaction not permitted.  lockid:{held.lockid} "
        f"intLockId:1 txnid:{txn} db:default table:null partition:null state:ACQUIRED "
        f"type:SHARED_READ")
