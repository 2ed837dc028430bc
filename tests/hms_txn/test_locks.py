"""Locks over a real Thrift client, on SQLite and PostgreSQL: the 4.x conflict matrix,
all-or-nothing grants, the fair queue, same-transaction locks, unlock/check_lock rules,
show_locks filters and order, zero-wait reads."""

from __future__ import annotations

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

SR, SW, EX, XW = 1, 2, 3, 4
NAMES = {SR: "SHARED_READ", SW: "SHARED_WRITE", EX: "EXCLUSIVE", XW: "EXCL_WRITE"}
ACQUIRED, WAITING, NOT_ACQUIRED = 1, 2, 4
DB, TABLE, PART = 1, 2, 3

# request (row) x earlier lock (column): True = must wait
MATRIX = {
    SR: {SR: False, SW: False, XW: False, EX: True},
    SW: {SR: False, SW: False, XW: True, EX: True},
    XW: {SR: False, SW: True, XW: True, EX: True},
    EX: {SR: True, SW: True, XW: True, EX: True},
}


def comp(ltype, db="default", table=None, part=None, op=None):
    level = PART if part else TABLE if table else DB
    c = T.LockComponent(type=ltype, level=level, dbname=db, tablename=table, partitionname=part)
    if op is not None:
        c.operationType = op
    return c


def lock(client, *comps, txn=None, **kw):
    return client.lock(T.LockRequest(component=list(comps), txnid=txn, user="bob",
                                     hostname="h2", **kw))


def check(client, lock_id):
    return client.check_lock(T.CheckLockRequest(lockid=lock_id)).state


def open_txn(client):
    return client.open_txns(T.OpenTxnRequest(num_txns=1, user="bob", hostname="h2")).txn_ids[0]


def test_conflict_matrix(client):
    n = 0
    for req, row in MATRIX.items():
        for earlier, waits in row.items():
            for level in ("table", "partition", "table-vs-partition"):
                n += 1
                table = f"m{n}"
                first = comp(earlier, table=table, part="p=1" if level == "partition" else None)
                second = comp(req, table=table,
                              part="p=1" if level in ("partition", "table-vs-partition") else None)
                assert lock(client, first).state == ACQUIRED
                got = lock(client, second).state
                want = WAITING if waits else ACQUIRED
                assert got == want, f"{NAMES[req]} after {NAMES[earlier]} ({level}): {got}"
    # different partitions and different tables never overlap
    for req in MATRIX:
        n += 1
        assert lock(client, comp(EX, table=f"m{n}", part="p=1")).state == ACQUIRED
        assert lock(client, comp(req, table=f"m{n}", part="p=2")).state == ACQUIRED
        assert lock(client, comp(req, table=f"m{n}x")).state == ACQUIRED
    # other databases never overlap
    assert lock(client, comp(EX, db="db1")).state == ACQUIRED
    assert lock(client, comp(EX, db="db2", table="x")).state == ACQUIRED


def test_db_level_read_exception(client):
    # a DB-level SHARED_READ and a table/partition EXCLUSIVE do not block each other...
    assert lock(client, comp(SR, db="d1")).state == ACQUIRED
    assert lock(client, comp(EX, db="d1", table="t")).state == ACQUIRED
    assert lock(client, comp(EX, db="d1", table="u", part="k=1")).state == ACQUIRED
    assert lock(client, comp(SR, db="d1")).state == ACQUIRED
    # ...but a DB-level EXCLUSIVE blocks everything below it, and a table read waits for it
    assert lock(client, comp(EX, db="d2")).state == ACQUIRED
    assert lock(client, comp(SR, db="d2", table="t")).state == WAITING
    assert lock(client, comp(SR, db="d2")).state == WAITING
    # and a table EXCLUSIVE blocks a table read
    assert lock(client, comp(SR, db="d1", table="t")).state == WAITING


def test_all_or_nothing_and_fair_queue(client):
    l1 = lock(client, comp(SR, table="a"))
    assert l1.state == ACQUIRED
    # two components: one free, one blocked -> both wait
    l2 = lock(client, comp(EX, table="b"), comp(EX, table="a"))
    assert l2.state == WAITING
    shown = {(e.lockid, e.tablename): e for e in client.show_locks(T.ShowLocksRequest()).locks}
    assert shown[(l2.lockid, "b")].state == WAITING and shown[(l2.lockid, "a")].state == WAITING
    assert (shown[(l2.lockid, "a")].blockedByExtId, shown[(l2.lockid, "a")].blockedByIntId) == \
        (l1.lockid, 1)
    # b is not held by l2, but l2 is ahead in the queue for a: a new read of a waits (fair
    # queue), while a read of b... also waits, because l2 asks for b exclusively first
    l3 = lock(client, comp(SR, table="a"))
    assert l3.state == WAITING
    assert lock(client, comp(SR, table="b")).state == WAITING
    assert lock(client, comp(SR, table="c")).state == ACQUIRED
    assert check(client, l3.lockid) == WAITING
    client.unlock(T.UnlockRequest(lockid=l1.lockid))
    assert check(client, l3.lockid) == WAITING          # still behind l2
    assert check(client, l2.lockid) == ACQUIRED         # both components at once
    assert {e.state for e in client.show_locks(T.ShowLocksRequest()).locks
            if e.lockid == l2.lockid} == {ACQUIRED}
    client.unlock(T.UnlockRequest(lockid=l2.lockid))
    assert check(client, l3.lockid) == ACQUIRED


def test_same_txn_never_conflicts(client):
    t = open_txn(client)
    assert lock(client, comp(EX, table="t"), txn=t).state == ACQUIRED
    assert lock(client, comp(EX, table="t"), comp(SW, table="t"), txn=t).state == ACQUIRED
    assert lock(client, comp(XW, db="default"), txn=t).state == ACQUIRED
    assert lock(client, comp(SR, table="t")).state == WAITING   # another owner does wait


def test_lock_needs_open_txn(client):
    t1, t2 = client.open_txns(T.OpenTxnRequest(num_txns=2, user="u", hostname="h")).txn_ids
    client.abort_txn(T.AbortTxnRequest(txnid=t1))
    client.commit_txn(T.CommitTxnRequest(txnid=t2))
    with pytest.raises(T.TxnAbortedException, match=f"txnid:{t1} already aborted"):
        lock(client, comp(SR, table="t"), txn=t1)
    with pytest.raises(T.NoSuchTxnException, match=f"txnid:{t2} is already committed"):
        lock(client, comp(SR, table="t"), txn=t2)
    with pytest.raises(T.NoSuchTxnException, match="No such transaction txnid:1000"):
        lock(client, comp(SR, table="t"), txn=1000)
    assert not client.show_locks(T.ShowLocksRequest()).locks


def test_unlock_and_check_lock_rules(client):
    with pytest.raises(T.NoSuchLockException, match="No such lock lockid:42"):
        client.check_lock(T.CheckLockRequest(lockid=42))
    client.unlock(T.UnlockRequest(lockid=42))                       # missing: silent
    free = lock(client, comp(EX, table="t"))
    client.unlock(T.UnlockRequest(lockid=free.lockid))              # txn-less: removed
    t1, t2 = client.open_txns(T.OpenTxnRequest(num_txns=2, user="u", hostname="h")).txn_ids
    held = lock(client, comp(EX, table="t"), txn=t1)
    waiting = lock(client, comp(EX, table="t"), txn=t2)
    assert (held.state, waiting.state) == (ACQUIRED, WAITING)
    with pytest.raises(T.TxnOpenException, match="not permitted"):
        client.unlock(T.UnlockRequest(lockid=held.lockid))
    client.unlock(T.UnlockRequest(lockid=waiting.lockid))           # waiting txn lock: removed
    assert [e.lockid for e in client.show_locks(T.ShowLocksRequest()).locks] == [held.lockid]
    with pytest.raises(T.NoSuchLockException):
        client.check_lock(T.CheckLockRequest(lockid=waiting.lockid))
    # check_lock heartbeats the owning transaction
    before = {t.id: t.heartbeatCount for t in client.get_open_txns_info().open_txns}[t1]
    assert check(client, held.lockid) == ACQUIRED
    after = {t.id: t.heartbeatCount for t in client.get_open_txns_info().open_txns}[t1]
    assert after == before + 1


def test_show_locks_filters_and_order(client):
    t = open_txn(client)
    a = lock(client, comp(SR, db="Sales", table="Orders", part="d=1"))
    b = lock(client, comp(EX, db="sales", table="orders"), txn=t)     # waits for the read
    c = lock(client, comp(SW, db="sales", table="items"))
    d = lock(client, comp(EX, db="hr"))
    assert a.state == ACQUIRED and b.state == WAITING
    every = client.show_locks(T.ShowLocksRequest()).locks
    # acquired first, then the stronger type, then by id
    assert [(e.lockid, e.state) for e in every] == [
        (d.lockid, ACQUIRED), (c.lockid, ACQUIRED), (a.lockid, ACQUIRED), (b.lockid, WAITING)]
    e = {x.lockid: x for x in every}
    assert (e[a.lockid].dbname, e[a.lockid].tablename, e[a.lockid].partname) == \
        ("sales", "orders", "d=1")
    assert e[a.lockid].user == "bob" and e[a.lockid].hostname == "h2"
    assert e[a.lockid].acquiredat and e[b.lockid].acquiredat is None
    assert e[b.lockid].txnid == t and e[a.lockid].txnid == 0
    assert e[a.lockid].lockIdInternal == 1
    ids = lambda **kw: sorted(x.lockid for x in client.show_locks(T.ShowLocksRequest(**kw)).locks)  # noqa
    assert ids(dbname="SALES") == sorted([a.lockid, b.lockid, c.lockid])
    assert ids(dbname="sales", tablename="orders") == sorted([a.lockid, b.lockid])
    assert ids(dbname="sales", tablename="orders", partname="d=1") == [a.lockid]
    assert ids(txnid=t) == [b.lockid]
    assert ids(dbname="nope") == []


def test_zero_wait_read_is_not_acquired(client):
    t = open_txn(client)
    assert lock(client, comp(EX, table="t")).state == ACQUIRED
    r = lock(client, comp(SR, table="t"), txn=t, zeroWaitReadEnabled=True)
    assert r.state == NOT_ACQUIRED
    assert "Unable to acquire read lock due to an existing exclusive lock" in r.errorMessage
    assert not client.show_locks(T.ShowLocksRequest(txnid=t)).locks


def test_commit_releases_the_transactions_locks(client):
    """commit_txn releases every lock of its transaction, granted or waiting (it skips the
    release only for a transaction that never locked anything)."""
    blocker = lock(client, comp(EX, table="held"))
    t = open_txn(client)
    assert lock(client, comp(SR, table="r"), txn=t).state == ACQUIRED
    assert lock(client, comp(SW, table="held"), txn=t).state == WAITING
    plain = open_txn(client)
    client.commit_txn(T.CommitTxnRequest(txnid=plain))
    assert {e.txnid for e in client.show_locks(T.ShowLocksRequest()).locks} == {0, t}
    client.commit_txn(T.CommitTxnRequest(txnid=t))
    assert [e.lockid for e in client.show_locks(T.ShowLocksRequest()).locks] == [blocker.lockid]
