"""Write ids over a real Thrift client, on SQLite and PostgreSQL: allocation rules,
reader snapshots (get_valid_write_ids), dynamic partitions, max allocated write id."""

from __future__ import annotations

import pytest

from hms_txn.store.schema import completed_txn_components, txn_components
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList

UPDATE, INSERT = 3, 2


def open_txns(client, n=1):
    return client.open_txns(T.OpenTxnRequest(num_txns=n, user="u", hostname="h")).txn_ids


def alloc(client, table, txns, db="default"):
    r = client.allocate_table_write_ids(
        T.AllocateTableWriteIdsRequest(dbName=db, tableName=table, txnIds=list(txns)))
    return [(x.txnId, x.writeId) for x in r.txnToWriteIds]


def max_wid(client, table, db="default"):
    return client.get_max_allocated_table_write_id(
        T.MaxAllocatedTableWriteIdRequest(dbName=db, tableName=table)).maxWriteId


def snapshot(client, current=None):
    """A reader's ValidTxnList built from get_open_txns the way Hive clients build it."""
    r = client.get_open_txns()
    hwm = r.txn_high_water_mark if current is None else min(current, r.txn_high_water_mark)
    aborted = {t for i, t in enumerate(r.open_txns)
               if i // 8 < len(r.abortedBits) and r.abortedBits[i // 8] >> (i % 8) & 1}
    exc = [t for t in r.open_txns if t <= hwm and t != current]
    return ValidTxnList(hwm, open_ids=[t for t in exc if t not in aborted],
                        aborted_ids=[t for t in exc if t in aborted])


def write_ids(client, tables, valid_txns):
    r = client.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=list(tables), validTxnList=str(valid_txns)))
    out = {}
    for t in r.tblValidWriteIds:
        flags = [bool(t.abortedBits[i // 8] >> (i % 8) & 1) if i // 8 < len(t.abortedBits)
                 else False for i in range(len(t.invalidWriteIds))]
        out[t.fullTableName] = ValidWriteIdList(
            t.fullTableName, t.writeIdHighWaterMark,
            open_ids=[w for w, a in zip(t.invalidWriteIds, flags) if not a],
            aborted_ids=[w for w, a in zip(t.invalidWriteIds, flags) if a],
            min_open=t.minOpenWriteId)
    return out


def test_allocation_rules(client):
    t1, t2, t3, t4 = open_txns(client, 4)
    assert alloc(client, "T1", [t2, t1]) == [(t1, 1), (t2, 2)]      # contiguous, by txn id
    assert alloc(client, "t1", [t1]) == [(t1, 1)]                   # idempotent, lower-cased
    assert alloc(client, "t1", [t3]) == [(t3, 3)]
    assert alloc(client, "t2", [t3]) == [(t3, 1)]                   # per table from 1
    assert alloc(client, "t1", [t1, t4]) == [(t1, 1), (t4, 4)]      # only t4 is new
    assert max_wid(client, "t1") == 4 and max_wid(client, "T2") == 1
    assert max_wid(client, "none") == 0

    # all-or-nothing: one bad transaction and nothing is allocated
    t5, t6, t7 = open_txns(client, 3)
    client.abort_txn(T.AbortTxnRequest(txnid=t6))
    with pytest.raises(T.TxnAbortedException, match=f"txnid:{t6}"):
        alloc(client, "t1", [t5, t6])
    client.commit_txn(T.CommitTxnRequest(txnid=t7))
    with pytest.raises(T.NoSuchTxnException, match=f"txnid:{t7} already committed"):
        alloc(client, "t1", [t5, t7])
    with pytest.raises(T.NoSuchTxnException, match="no such transaction txnid:999"):
        alloc(client, "t1", [t5, 999])
    assert max_wid(client, "t1") == 4
    assert alloc(client, "t1", [t5]) == [(t5, 5)]


def test_valid_write_ids_snapshot(client):
    t = open_txns(client, 6)
    for txn in t:
        alloc(client, "tab", [txn])          # write ids 1..6 = txns 1..6
    client.commit_txn(T.CommitTxnRequest(txnid=t[0]))
    client.abort_txn(T.AbortTxnRequest(txnid=t[1]))
    client.commit_txn(T.CommitTxnRequest(txnid=t[3]))
    client.abort_txn(T.AbortTxnRequest(txnid=t[5]))
    # open: 3 and 5; aborted: 2 and 6
    snap = snapshot(client)
    got = write_ids(client, ["default.tab", "default.empty"], snap)
    tab = got["default.tab"]
    assert (tab.high_watermark, tab.open_ids, tab.aborted_ids, tab.min_open) == \
        (6, (3, 5), (2, 6), 3)
    assert str(tab) == "default.tab:6:3:3,5:2,6"
    assert tab.is_valid(1) and tab.is_valid(4) and not tab.is_valid(3)
    assert str(got["default.empty"]) == "default.empty:0:9223372036854775807::"

    # a reader whose snapshot was taken earlier (hwm 4) does not see later write ids
    older = ValidTxnList(4, open_ids=[3], aborted_ids=[2])
    tab = write_ids(client, ["default.tab"], older)["default.tab"]
    assert str(tab) == "default.tab:4:3:3:2"

    # a reader inside txn 3: its snapshot ends at itself, and its own write id is visible
    mine = snapshot(client, current=t[2])
    assert str(mine) == "3:9223372036854775807::2"
    assert str(write_ids(client, ["default.tab"], mine)["default.tab"]) == \
        "default.tab:3:9223372036854775807::2"

    # the write id path: the snapshot of the transaction that wrote write id 4
    r = client.get_valid_write_ids(T.GetValidWriteIdsRequest(fullTableNames=["default.tab"],
                                                             writeId=4))
    assert r.tblValidWriteIds[0].writeIdHighWaterMark == 4
    assert r.tblValidWriteIds[0].invalidWriteIds == [2, 3]

    with pytest.raises(T.MetaException, match="fullTableName"):
        client.get_valid_write_ids(T.GetValidWriteIdsRequest(fullTableNames=["nodot"],
                                                             validTxnList=str(snap)))


def test_add_dynamic_partitions(hms, client):
    t1, t2, t3 = open_txns(client, 3)
    (_, w1), = alloc(client, "dp", [t1])
    (_, w2), = alloc(client, "dp", [t2])
    client.add_dynamic_partitions(T.AddDynamicPartitions(
        txnid=t1, writeid=w1, dbname="default", tablename="DP",
        partitionnames=["k=1", "k=2"], operationType=UPDATE))
    client.add_dynamic_partitions(T.AddDynamicPartitions(
        txnid=t2, writeid=w2, dbname="default", tablename="dp",
        partitionnames=["k=2"], operationType=UPDATE))
    with hms.ms.store.read() as conn:
        rows = conn.execute(txn_components.select().where(txn_components.c.txn_id == t1)).all()
    assert sorted((r.db_name, r.tbl_name, r.part_name, r.write_id, r.operation_type)
                  for r in rows) == [("default", "dp", "k=1", w1, UPDATE),
                                     ("default", "dp", "k=2", w1, UPDATE)]
    client.commit_txn(T.CommitTxnRequest(txnid=t1))
    with hms.ms.store.read() as conn:
        done = conn.execute(completed_txn_components.select()
                            .where(completed_txn_components.c.txn_id == t1)).all()
    assert sorted(r.part_name for r in done) == ["k=1", "k=2"]
    # the partitions recorded this way take part in write-write conflict detection
    with pytest.raises(T.TxnAbortedException, match="default/dp/k=2"):
        client.commit_txn(T.CommitTxnRequest(txnid=t2, exclWriteEnabled=False))
    # the transaction must be open
    client.abort_txn(T.AbortTxnRequest(txnid=t3))
    with pytest.raises(T.TxnAbortedException):
        client.add_dynamic_partitions(T.AddDynamicPartitions(
            txnid=t3, writeid=1, dbname="default", tablename="dp", partitionnames=["k=3"]))
    with pytest.raises(T.NoSuchTxnException):
        client.add_dynamic_partitions(T.AddDynamicPartitions(
            txnid=500, writeid=1, dbname="default", tablename="dp", partitionnames=["k=3"]))


def test_high_watermark_is_the_highest_write_id_not_the_highest_txns(client):
    """Write ids follow allocation order: the later txn may hold the lower write id."""
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    from tests.hms_txn.test_catalog import make_table
    client.create_table(make_table("default", "order_t", params={"transactional": "true"}))
    t1, t2 = client.open_txns(T.OpenTxnRequest(num_txns=2, user="u", hostname="h")).txn_ids

    def alloc(txn):
        return client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
            dbName="default", tableName="order_t", txnIds=[txn])).txnToWriteIds[0].writeId

    assert alloc(t2) == 1 and alloc(t1) == 2
    client.commit_txn(T.CommitTxnRequest(txnid=t1))
    client.abort_txn(T.AbortTxnRequest(txnid=t2))
    res = client.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=["default.order_t"], validTxnList=f"{t2}:9223372036854775807::{t2}"))
    ids = res.tblValidWriteIds[0]
    assert ids.writeIdHighWaterMark == 2      # t1's committed write id 2 is visible
    assert ids.invalidWriteIds == [1]          # t2's aborted write id
    assert ids.abortedBits == b"\x01"


def _expected(allocated: dict[int, int], snap: ValidTxnList, table: str) -> str:
    """A table's ValidWriteIdList worked out from its txn -> write id map (no history).
    When no transaction the snapshot covers holds a write id on the table, the high
    watermark is the highest allocated write id (Hive's TxnHandler reads its counter), and
    every id is invalid."""
    covered = [w for t, w in allocated.items() if t <= snap.high_watermark]
    hwm = max(covered, default=max(allocated.values(), default=0))
    invalid = sorted((w, snap.is_aborted(t)) for t, w in allocated.items()
                     if w <= hwm and not snap.is_valid(t))
    return str(ValidWriteIdList(table, hwm, open_ids=[w for w, a in invalid if not a],
                                aborted_ids=[w for w, a in invalid if a]))


@pytest.mark.parametrize("open_count", [60, 1100])
def test_snapshot_with_many_open_and_aborted_transactions(client, open_count):
    """Snapshots carrying many exceptions, as on a busy cluster: up to 1,000 of them are
    looked up in one statement for all the tables; beyond 1,000 each table's ids are read
    instead. Each way, the answer is the one worked out from the allocations."""
    allocated: dict[str, dict[int, int]] = {"hot": {}, "cold": {}, "mixed": {}, "none": {}}

    def write(table, txns):
        allocated[table].update(alloc(client, table, txns))

    # An old transaction that stays open, with a write on "mixed", then committed history.
    (old,) = open_txns(client)
    write("mixed", [old])
    for table in ("hot", "cold", "mixed"):
        history = open_txns(client, 5)
        write(table, history)
        for txn in history:
            client.commit_txn(T.CommitTxnRequest(txnid=txn))
    # Many transactions opened after every write to "cold": some write to "hot", some abort.
    batch = [t for n in range(0, open_count, 1000)
             for t in open_txns(client, min(1000, open_count - n))]  # hive.txn.max.open.batch
    write("hot", batch[::3])
    write("mixed", batch[1::7])
    client.abort_txns(T.AbortTxnsRequest(txn_ids=batch[::5]))
    for txn in batch[-4:]:
        client.commit_txn(T.CommitTxnRequest(txnid=txn))
    (late,) = open_txns(client)
    write("hot", [late])

    def assert_as_worked_out(snap):
        names = [f"default.{t}" for t in allocated]
        got = write_ids(client, names, snap)
        for table, ids in allocated.items():
            assert str(got[f"default.{table}"]) == _expected(ids, snap, f"default.{table}"), table

    snap = snapshot(client)
    assert len(snap.exceptions) == open_count - 4 + 2 - len(
        [t for t in batch[::5] if t in batch[-4:]])
    assert_as_worked_out(snap)
    # A reader whose snapshot ends inside the batch sees the later write ids as invalid.
    middle = batch[open_count // 2]
    assert_as_worked_out(ValidTxnList(
        middle, open_ids=[t for t in snap.open_ids if t <= middle],
        aborted_ids=[t for t in snap.aborted_ids if t <= middle]))
    # Once the old transaction commits, every exception is newer than any write to "cold".
    client.commit_txn(T.CommitTxnRequest(txnid=old))
    without_old = snapshot(client)
    assert without_old.exceptions[0] > max(allocated["cold"])
    assert_as_worked_out(without_old)


@pytest.mark.parametrize("seed", [7, 8])
def test_every_snapshot_of_several_tables_matches_the_allocations(client, seed):
    """Random allocations (in any txn order), commits and aborts over four tables of two
    databases whose names cross: asking for a.x, b.x and A.Y must not take in b.y's write
    ids, though all are read together. Every snapshot taken along the way, read again at
    the end, gets the answer worked out from the allocations: later writers stay invalid
    to an older snapshot, and a table first written after it has only invalid ids."""
    import random
    rng = random.Random(seed)
    tables = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
    allocated: dict[tuple[str, str], dict[int, int]] = {key: {} for key in tables}
    open_now: list[int] = []
    snaps = []
    for _ in range(40):
        open_now += open_txns(client, rng.randint(1, 3))
        for txn in rng.sample(open_now, k=min(len(open_now), 3)):
            db, table = rng.choice(tables)
            allocated[(db, table)].update(alloc(client, table, [txn], db=db))
        for txn in rng.sample(open_now, k=rng.randint(0, min(2, len(open_now)))):
            open_now.remove(txn)
            if rng.random() < 0.3:
                client.abort_txn(T.AbortTxnRequest(txnid=txn))
            else:
                client.commit_txn(T.CommitTxnRequest(txnid=txn))
        snaps.append(snapshot(client))
    asked = {"a.x": ("a", "x"), "b.x": ("b", "x"), "A.Y": ("a", "y"), "b.none": ("b", "none")}
    allocated[("b", "none")] = {}
    # The sequence covers what the test is about: b.y written, and a snapshot older than
    # every write to a table asked for.
    assert allocated[("b", "y")]
    assert any(ids and min(ids) > snap.high_watermark
               for snap in snaps for ids in (allocated[key] for key in asked.values()))
    for snap in snaps:
        got = write_ids(client, list(asked), snap)
        assert set(got) == set(asked)
        for name, key in asked.items():
            assert str(got[name]) == _expected(allocated[key], snap, name), (name, str(snap))
