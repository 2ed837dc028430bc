"""32 client threads on two `hms-txn serve` processes sharing one PostgreSQL database.

The clients open transactions, take locks of every type on a few tables and partitions,
wait for them with check_lock, allocate write ids and commit or abort, for a fixed time.
Afterwards:

* no transaction id, lock id or (per table) write id was handed out twice, and write ids
  are exactly 1..N per table;
* no two conflicting locks were ever held at the same time: each client records the
  interval from the ACQUIRED answer to its commit/abort/unlock request, which lies inside the
  time the server really held the lock, so two conflicting intervals must never overlap;
  a monitor also samples show_locks on both servers for conflicting ACQUIRED pairs;
* every commit that returned success is committed in the database, and every transaction
  whose commit failed or that was aborted is not.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest
from sqlalchemy import select

from hms_txn.common.config import load
from hms_txn.store import Store
from hms_txn.store.schema import txns
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.support.servers import ServerProcess, connect

pytestmark = pytest.mark.postgres

SR, SW, EX, XW = 1, 2, 3, 4
ACQUIRED, WAITING = 1, 2
SELECT, INSERT, UPDATE = 1, 2, 3
WAITS = {  # symmetric for the table/partition-level locks used here
    SR: {SR: False, SW: False, XW: False, EX: True},
    SW: {SR: False, SW: False, XW: True, EX: True},
    XW: {SR: False, SW: True, XW: True, EX: True},
    EX: {SR: True, SW: True, XW: True, EX: True},
}
TABLES = ["t0", "t1", "t2", "t3"]
PARTS = [None, "k=1", "k=2"]
THREADS = 32
RUN_SECONDS = 12.0
MAX_SECONDS = 90
MIN_HOLDS = 100


def overlapping(a, b) -> bool:
    if a["table"] != b["table"]:
        return False
    return a["part"] is None or b["part"] is None or a["part"] == b["part"]


def conflicting(a, b) -> bool:
    return (a["txn"] != b["txn"] or a["txn"] == 0) and overlapping(a, b) and \
        WAITS[a["type"]][b["type"]]


@pytest.fixture
def two_servers(postgres, tmp_path):
    url = postgres.create_database()
    overrides = {"javax.jdo.option.ConnectionURL": url,
                 "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
                 "hms_txn.db.pool.size": "20"}
    servers = [ServerProcess(str(tmp_path / f"s{i}"), overrides) for i in range(2)]
    yield servers, overrides
    for s in servers:
        s.stop()


def test_two_servers_32_clients(two_servers):
    servers, overrides = two_servers
    started = time.monotonic()
    records: list[dict] = []
    opened: list[int] = []
    lock_ids: list[int] = []
    write_ids: dict[str, list[int]] = defaultdict(list)
    committed_ok: list[int] = []
    not_committed: list[int] = []
    errors: list[str] = []
    sampled_violations: list[str] = []
    guard = threading.Lock()

    def done() -> bool:
        # At least RUN_SECONDS and enough lock holds to mean something; a loaded machine
        # gets more time, up to MAX_SECONDS.
        elapsed = time.monotonic() - started
        return (elapsed >= RUN_SECONDS and len(records) > MIN_HOLDS) or elapsed >= MAX_SECONDS

    def worker(n: int) -> None:
        rnd = random.Random(n)
        client = connect(servers[n % 2].port)
        try:
            while not done():
                txnless = rnd.random() < 0.1
                ltype = rnd.choice([SR, SR, SW, SW, XW, EX])
                table, part = rnd.choice(TABLES), rnd.choice(PARTS)
                txn = 0
                if not txnless:
                    txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user=f"w{n}",
                                                            hostname="h")).txn_ids[0]
                    with guard:
                        opened.append(txn)
                op = SELECT if ltype == SR else (INSERT if rnd.random() < 0.3 else UPDATE)
                comp = T.LockComponent(type=ltype, level=3 if part else 2, dbname="default",
                                       tablename=table, partitionname=part, operationType=op,
                                       isTransactional=True)
                resp = client.lock(T.LockRequest(component=[comp], txnid=txn or None,
                                                 user=f"w{n}", hostname="h"))
                with guard:
                    lock_ids.append(resp.lockid)
                state, waited = resp.state, time.monotonic()
                while state == WAITING and time.monotonic() - waited < 5:
                    time.sleep(rnd.uniform(0.005, 0.02))
                    state = client.check_lock(T.CheckLockRequest(lockid=resp.lockid)).state
                if state != ACQUIRED:  # gave up waiting
                    if txn:
                        client.abort_txn(T.AbortTxnRequest(txnid=txn))
                        with guard:
                            not_committed.append(txn)
                    else:
                        client.unlock(T.UnlockRequest(lockid=resp.lockid))
                    continue
                t_acq = time.monotonic()
                if txn and op != SELECT:
                    r = client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
                        dbName="default", tableName=table, txnIds=[txn]))
                    with guard:
                        write_ids[table].append(r.txnToWriteIds[0].writeId)
                time.sleep(rnd.uniform(0, 0.004))
                rec = {"txn": txn, "lock": resp.lockid, "type": ltype, "table": table,
                       "part": part, "t0": t_acq, "t1": time.monotonic()}
                with guard:
                    records.append(rec)
                if not txn:
                    client.unlock(T.UnlockRequest(lockid=resp.lockid))
                elif rnd.random() < 0.75:
                    try:
                        client.commit_txn(T.CommitTxnRequest(txnid=txn))
                        with guard:
                            committed_ok.append(txn)
                    except T.TxnAbortedException:  # write-write conflict: first committer won
                        with guard:
                            not_committed.append(txn)
                else:
                    client.abort_txn(T.AbortTxnRequest(txnid=txn))
                    with guard:
                        not_committed.append(txn)
        except Exception as err:  # pragma: no cover - reported below
            with guard:
                errors.append(f"worker {n}: {type(err).__name__}: {err}")
        finally:
            client.close()

    def monitor() -> None:
        clients = [connect(s.port) for s in servers]
        try:
            i = 0
            while not done():
                locks = clients[i % 2].show_locks(T.ShowLocksRequest()).locks
                i += 1
                held = [{"txn": e.txnid or 0, "lock": e.lockid, "type": e.type,
                         "table": e.tablename, "part": e.partname}
                        for e in locks if e.state == ACQUIRED]
                for x in range(len(held)):
                    for y in range(x + 1, len(held)):
                        a, b = held[x], held[y]
                        if a["lock"] != b["lock"] and conflicting(a, b):
                            sampled_violations.append(f"{a} and {b}")
                time.sleep(0.05)
        finally:
            for c in clients:
                c.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    threads.append(threading.Thread(target=monitor))
    for t in threads:
        t.start()
    for t in threads:
        t.join(MAX_SECONDS + 60)
    assert not errors, errors[:5]
    assert not sampled_violations, sampled_violations[:5]
    assert len(records) > MIN_HOLDS, f"too little work done: {len(records)} lock holds"

    # ids never handed out twice
    assert len(opened) == len(set(opened))
    assert len(lock_ids) == len(set(lock_ids))
    for table, ids in write_ids.items():
        assert sorted(ids) == list(range(1, len(ids) + 1)), table

    # no two conflicting locks held at once
    by_table = defaultdict(list)
    for r in records:
        by_table[r["table"]].append(r)
    for table, recs in by_table.items():
        recs.sort(key=lambda r: r["t0"])
        active: list[dict] = []
        for r in recs:
            active = [a for a in active if a["t1"] > r["t0"]]
            for a in active:
                assert not conflicting(a, r), f"held together: {a} and {r}"
            active.append(r)

    # every successful commit is committed; nothing else is
    config = load(None, overrides)
    store = Store(config.database_url("."))
    try:
        with store.read() as conn:
            state = dict(conn.execute(select(txns.c.txn_id, txns.c.state)).all())
    finally:
        store.dispose()
    assert len(state) == len(opened)
    assert all(state[t] == "c" for t in committed_ok)
    assert all(state[t] == "a" for t in not_committed)
    assert len(committed_ok) > 30
