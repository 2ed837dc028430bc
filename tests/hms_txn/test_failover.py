"""Several server processes on one PostgreSQL database, and clients that fail over.

16 client processes, each configured with both servers (``thrift://a,thrift://b``, as
``hive.metastore.uris`` takes them) through ``hms_txn.wire.failover.connect_failover``, run
transactions (open, a write id on a shared table, an exclusive lock on another, commit)
while server A is killed with SIGKILL twice and restarted. Afterwards: every client has
finished, every acknowledged commit is committed in the database, no transaction id and no
write id was handed out twice, and no two exclusive locks were held at the same time.

The client's failover follows Hive's client (RetryingMetaStoreClient.invoke and
HiveMetaStoreClient.reconnect, 2.3): a call that fails on its connection is retried once
after a reconnect; ``lock`` is never retried (IMetaStoreClient.lock is
``@RetrySemantics.CannotRetry``), so a client whose lock call failed aborts its
transaction instead.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

from sqlalchemy import create_engine, select

from hms_txn.domain.txn.txn_records import COMMITTED
from hms_txn.store.schema import txn_to_write_id, txns
from hms_txn.wire.client import ClientOptions
from hms_txn.wire.failover import connect_failover
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.servers import ServerProcess

CLIENTS = 16
ROUNDS = 25


def _exclusive_lock(client, txn: int) -> bool:
    """An exclusive lock on db.locked for ``txn``, waited for; False if it failed."""
    component = t.LockComponent(type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE,
                                 dbname="db", tablename="locked",
                                 operationType=t.DataOperationType.NO_TXN)
    try:
        rsp = client.lock(t.LockRequest(component=[component], txnid=txn, user="u",
                                        hostname=f"client-{os.getpid()}"))
        while rsp.state == t.LockState.WAITING:
            time.sleep(0.005)
            rsp = client.check_lock(t.CheckLockRequest(lockid=rsp.lockid, txnid=txn))
    except Exception:   # the lock is not retried (CannotRetry); the caller aborts
        return False
    return rsp.state == t.LockState.ACQUIRED


def _client(uris: str, worker: int, out) -> None:
    opened, committed, held = [], [], []
    try:
        # A short connection lifetime spreads the clients over both servers again after
        # a failover moved them all to B, so that the second kill of A hits some too.
        client = connect_failover(uris, options=ClientOptions(timeout=30), retry_delay=0.3,
                                  connect_retries=20, lifetime=1.0)
        for _ in range(ROUNDS):
            txn = None
            try:
                txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user="u",
                                                        hostname="h")).txn_ids[0]
                opened.append(txn)
                rsp = client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                    dbName="db", tableName="shared", txnIds=[txn]))
                write_id = rsp.txnToWriteIds[0].writeId
                if not _exclusive_lock(client, txn):
                    raise RuntimeError("lock failed")
                acquired = time.monotonic()
                time.sleep(0.02)               # a window in which another holder would show
                released = time.monotonic()    # before the commit call: surely still held
                client.commit_txn(t.CommitTxnRequest(txnid=txn))
                committed.append((txn, write_id))
                held.append((acquired, released, txn))
            except Exception:  # noqa: BLE001 - the transaction is abandoned
                if txn is not None:
                    try:
                        client.abort_txn(t.AbortTxnRequest(txnid=txn))
                    except Exception:  # noqa: BLE001 - the reaper aborts it
                        pass
        client.close()
        out.put((worker, opened, committed, held, client.failovers, None))
    except Exception as err:  # noqa: BLE001
        out.put((worker, opened, committed, held, 0, repr(err)))


def test_sixteen_clients_fail_over_while_a_server_is_killed_twice(tmp_path, postgres):
    url = postgres.create_database()
    conf = {"javax.jdo.option.ConnectionURL": url,
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
            "hive.txn.timeout": "20s"}
    a = ServerProcess(str(tmp_path / "a"), conf)
    b = ServerProcess(str(tmp_path / "b"), conf)
    port_a = a.port
    uris = f"thrift://127.0.0.1:{port_a},thrift://127.0.0.1:{b.port}"
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(uris, w, out), daemon=True)
             for w in range(CLIENTS)]
    kills = 0
    try:
        for p in procs:
            p.start()
        for _ in range(2):
            time.sleep(2.0)
            a.kill9()                          # SIGKILL
            kills += 1
            time.sleep(1.0)
            a = ServerProcess(str(tmp_path / "a"), conf, port=port_a)
        results = [out.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        a.stop()
        b.stop()
    assert kills == 2
    assert sum(r[4] for r in results) >= 2, "no client failed over: the kills hit nobody"
    assert all(fatal is None for *_, fatal in results), [r[5] for r in results if r[5]]
    assert all(not p.is_alive() for p in procs)
    opened = [txn for r in results for txn in r[1]]
    committed = [c for r in results for c in r[2]]
    held = sorted(h for r in results for h in r[3])
    assert len(opened) == len(set(opened)), "a transaction id was handed out twice"
    write_ids = [w for _, w in committed]
    assert len(write_ids) == len(set(write_ids)), "a write id was handed out twice"
    # The kills cost some calls, but most transactions went through on either server.
    assert len(committed) >= CLIENTS * ROUNDS // 2
    for (_, end, txn), (start, _, other) in zip(held, held[1:]):
        assert end <= start, f"exclusive locks of {txn} and {other} were held together"
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            states = dict(conn.execute(select(txns.c.txn_id, txns.c.state)).all())
            stored = dict(conn.execute(select(txn_to_write_id.c.txn_id,
                                              txn_to_write_id.c.write_id)
                                       .where(txn_to_write_id.c.tbl_name == "shared")).all())
    finally:
        engine.dispose()
    for txn, write_id in committed:
        assert states.get(txn) == COMMITTED, f"acknowledged commit of {txn} lost"
        assert stored.get(txn) == write_id
