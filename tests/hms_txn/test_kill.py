"""Crash safety under load: kill -9 the server again and again while 32 clients write.

Every call a client saw succeed must be in the database after the restarts, nothing a
client did not see succeed may be half-applied, no id is ever handed out twice, and the
transactions of clients that died with the server are aborted by the timeout with their
locks released.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from sqlalchemy import create_engine, text

from hms_txn.common.config import load
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import ServerProcess, client_for, connect

CYCLES = 12   # each cycle restarts the server (~3 s); 12 kill at 12 random points
CLIENTS = 32
TABLES = 4
TIMEOUT_S = 3


class Ledger:
    """What the clients were told, across all cycles."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.opened: list[int] = []
        self.write_ids: list[tuple[int, str, int]] = []  # (txn, table, write id)
        self.lock_ids: list[int] = []
        self.committed: list[int] = []

    def add(self, name: str, value) -> None:
        with self.lock:
            getattr(self, name).append(value)


def writer(port: int, ledger: Ledger, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    try:
        client = connect(port, timeout_ms=10000)
    except Exception:
        return
    try:
        while not stop.is_set():
            txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user="kill", hostname="test")).txn_ids[0]
            ledger.add("opened", txn)
            table = f"t{rng.randrange(TABLES)}"
            alloc = client.allocate_table_write_ids(
                t.AllocateTableWriteIdsRequest(dbName="default", tableName=table, txnIds=[txn]))
            ledger.add("write_ids", (txn, table, alloc.txnToWriteIds[0].writeId))
            resp = client.lock(t.LockRequest(component=[t.LockComponent(
                type=t.LockType.SHARED_WRITE, level=t.LockLevel.TABLE, dbname="default",
                tablename=table, operationType=t.DataOperationType.INSERT, isTransactional=True)],
                txnid=txn, user="kill", hostname="test"))
            ledger.add("lock_ids", resp.lockid)
            while resp.state == t.LockState.WAITING:
                resp = client.check_lock(t.CheckLockRequest(lockid=resp.lockid, txnid=txn))
            if rng.random() < 0.2:
                client.abort_txn(t.AbortTxnRequest(txnid=txn))
                continue
            client.commit_txn(t.CommitTxnRequest(txnid=txn))
            ledger.add("committed", txn)
    except Exception:
        pass  # the server died under us: whatever was not acknowledged is not in the ledger
    finally:
        try:
            client.close()
        except Exception:
            pass


def run_cycles(tmp_path, db_overrides) -> tuple[Ledger, dict]:
    overrides = dict(db_overrides)
    overrides.update({
        "hive.metastore.warehouse.dir": str(tmp_path / "wh"),
        "hive.txn.timeout": f"{TIMEOUT_S}s",
        "hive.timedout.txn.reaper.start": "200ms",
        "hive.timedout.txn.reaper.interval": "500ms",
    })
    data = str(tmp_path / "srv")
    server = ServerProcess(data, overrides)
    with client_for(server.port) as c:
        for i in range(TABLES):
            c.create_table(make_table("default", f"t{i}", params={"transactional": "true"}))
    ledger = Ledger()
    rng = random.Random(7)
    for cycle in range(CYCLES):
        stop = threading.Event()
        threads = [threading.Thread(target=writer, args=(server.port, ledger, stop, cycle * 100 + i))
                   for i in range(CLIENTS)]
        before = len(ledger.committed)
        for th in threads:
            th.start()
        # Let the clients get going (a slow machine needs longer), then kill at a random
        # point of their work.
        deadline = time.monotonic() + 30
        while len(ledger.committed) < before + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.5))
        server.kill9()
        stop.set()
        for th in threads:
            th.join(30)
        server = ServerProcess(data, overrides)
    return ledger, {"server": server, "overrides": overrides}


def test_kill_9_during_concurrent_writes(tmp_path, db_overrides):
    ledger, ctx = run_cycles(tmp_path, db_overrides)
    server = ctx["server"]
    try:
        assert len(ledger.committed) > CYCLES, "the clients made too little progress to test anything"
        # ids acknowledged to clients are never handed out twice
        assert not [i for i, n in Counter(ledger.opened).items() if n > 1]
        assert not [i for i, n in Counter(ledger.lock_ids).items() if n > 1]
        per_table = Counter((table, wid) for _, table, wid in ledger.write_ids)
        assert not [k for k, n in per_table.items() if n > 1]

        # the dead clients' transactions time out and release their locks
        deadline = time.monotonic() + TIMEOUT_S * 6
        with client_for(server.port) as c:
            while True:
                info = c.get_open_txns_info()
                open_ids = [x.id for x in info.open_txns if x.state == t.TxnState.OPEN]
                locks = c.show_locks(t.ShowLocksRequest()).locks or []
                if not open_ids and not locks:
                    break
                assert time.monotonic() < deadline, f"still open: {open_ids[:5]}, locks: {len(locks)}"
                time.sleep(0.5)

        config = load(None, ctx["overrides"])
        engine = create_engine(config.database_url(str(tmp_path / "srv")))
        with engine.connect() as db:
            state = dict(db.execute(text("SELECT txn_id, state FROM txns")).all())
            # every acknowledged commit is committed
            assert all(state.get(txn) == "c" for txn in ledger.committed)
            # every acknowledged open is known, acknowledged allocations are recorded
            assert all(txn in state for txn in ledger.opened)
            recorded = set(db.execute(text("SELECT txn_id, tbl_name, write_id FROM txn_to_write_id")).all())
            assert all(entry in recorded for entry in ledger.write_ids)
            # nothing half-applied: write ids are unique and dense per table, and belong to
            # transactions that exist
            rows = db.execute(text("SELECT tbl_name, write_id, txn_id FROM txn_to_write_id")).all()
            by_table: dict[str, list[int]] = {}
            for tbl, wid, txn in rows:
                by_table.setdefault(tbl, []).append(wid)
                assert txn in state
            for tbl, wids in by_table.items():
                assert sorted(wids) == list(range(1, len(wids) + 1)), tbl
            # no open transactions or locks left; components stay only for aborted
            # transactions (the cleaner needs them to find aborted data)
            for (txn,) in db.execute(text("SELECT DISTINCT txn_id FROM txn_components")):
                assert state[txn] == "a"
            assert db.execute(text("SELECT count(*) FROM hive_locks")).scalar() == 0
            assert "o" not in set(state.values())
            # committed components only for committed transactions
            for (txn,) in db.execute(text("SELECT DISTINCT txn_id FROM completed_txn_components")):
                assert state[txn] == "c"
            # the notification log is dense
            ids = [r[0] for r in db.execute(text("SELECT event_id FROM notification_log ORDER BY event_id"))]
            assert ids == list(range(ids[0], ids[0] + len(ids)))
        engine.dispose()
    finally:
        server.stop()
