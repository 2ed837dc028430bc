"""Two server processes on one PostgreSQL database, each with every housekeeping role on
(timeout reaper, notification purge, compaction initiator, worker and cleaner), and no
leader: the roles' work is row-locked in the database (hms_txn.store.sql.lock_mutex,
``SELECT ... FOR UPDATE`` of the transactions it aborts), so whichever server gets there
first does it and the other finds nothing left.

Across a run in which one server is killed (SIGKILL) and restarted: each timed-out
transaction is aborted once (one ABORT_TXN event each), each range of a table's deltas is
compacted once (no two compactions of a table end at the same write id; a request the
killed server's worker held is revoked after ``hive.compactor.worker.timeout`` and run by
a live worker), and the obsolete directories are cleaned (nothing obsolete is left, and
every compaction's history entry says succeeded, or refused where a worker found nothing
worth compacting left).
"""

from __future__ import annotations

import json

from sqlalchemy import create_engine, select

from hms_txn.store.schema import notification_log
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_compactor import COMPACTED, FAST, Engine, listing, rows, wait_until
from tests.support.servers import ServerProcess

TABLES = ("t0", "t1", "t2")
FINISHED = {"succeeded", "refused"}


def test_two_servers_share_every_housekeeping_role_without_doing_anything_twice(
        tmp_path, postgres):
    url = postgres.create_database()
    conf = {**FAST, "javax.jdo.option.ConnectionURL": url,
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
            "hive.txn.timeout": "3s", "hive.timedout.txn.reaper.start": "0s",
            "hive.timedout.txn.reaper.interval": "200ms",
            # A request the killed server was working on goes back to the queue after this
            # (Hive's revokeTimedoutWorkers), for either server's worker to run.
            "hive.compactor.worker.timeout": "5s"}
    a = ServerProcess(str(tmp_path / "a"), conf)
    b = ServerProcess(str(tmp_path / "b"), conf)
    servers = {"a": a, "b": b}
    try:
        ea, eb = Engine(a.client()), Engine(b.client())
        locations = {name: ea.create(name) for name in TABLES}
        for name in TABLES:
            ea.overwrite(name, rows(range(100)))
        # Transactions nobody heartbeats: the reapers of both servers race to abort them.
        abandoned = [ea.open() for _ in range(4)] + [eb.open() for _ in range(4)]
        # Twelve small inserts per table, through both servers: each table crosses the
        # initiator's delta threshold; both initiators, workers and cleaners may see it.
        for i in range(12):
            for k, name in enumerate(TABLES):
                engine = ea if (i + k) % 2 else eb
                engine.insert(name, rows(range(1000 + 10 * i, 1000 + 10 * i + 3)))
            if i == 6:
                # One server dies in the middle of it all, and comes back.
                eb.c.close()
                b.kill9()
                b = servers["b"] = ServerProcess(str(tmp_path / "b"), conf, port=b.port)
                eb = Engine(b.client())
        expected = {name: ea.read_as_query(name) for name in TABLES}

        def settled() -> bool:
            for name in TABLES:
                cs = ea.compactions(name)
                if not any(c.state == "succeeded" for c in cs) or not all(
                        c.state in FINISHED for c in cs):
                    return False
                hw = max(c.hightestWriteId for c in cs if c.state == "succeeded")
                if any(n.startswith("delta_") and not COMPACTED.match(n)
                       and int(n.split("_")[1]) <= hw for n in listing(locations[name])):
                    return False
            return True

        try:
            wait_until(settled, timeout=90, what="compaction and cleaning of every table")
        except AssertionError:
            raise AssertionError({name: ([(c.id, c.state, c.type, c.hightestWriteId, c.workerid)
                                          for c in ea.compactions(name)],
                                         listing(locations[name])) for name in TABLES})

        def reaped() -> bool:
            states = {i.id: i.state for i in ea.c.get_open_txns_info().open_txns}
            return all(states.get(t) != T.TxnState.OPEN for t in abandoned)

        wait_until(reaped, timeout=60, what="the reapers")
        for name in TABLES:
            cs = ea.compactions(name)
            # The initiators of both servers saw the same deltas; each range was compacted
            # by one worker once: no two compactions of a table end at the same write id.
            # (A request a worker found nothing worth compacting for is refused: no work.)
            ends = [c.hightestWriteId for c in cs if c.state == "succeeded"]
            assert len(ends) == len(set(ends)), cs
            assert ea.read(name) == expected[name]
            names = listing(locations[name])
            hw = max(ends)
            compacted = [n for n in names if COMPACTED.match(n)]
            assert len(compacted) == 1, names         # the newest output; the rest cleaned
            assert all(int(n.split("_")[1]) > hw for n in names
                       if n.startswith("delta_") and not COMPACTED.match(n)), names
    finally:
        for server in servers.values():
            server.stop()
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            messages = conn.execute(select(notification_log.c.message).where(
                notification_log.c.event_type == "ABORT_TXN")).scalars().all()
    finally:
        engine.dispose()
    aborts = [json.loads(m)["txnid"] for m in messages]
    for txn in abandoned:
        assert aborts.count(txn) == 1, f"transaction {txn} aborted {aborts.count(txn)} times"
