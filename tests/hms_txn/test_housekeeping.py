"""Timeouts: a transaction or txn-less lock whose client stops heartbeating is aborted /
removed by the server's housekeeping thread (short timeout), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time

from hms_txn.domain.events import notifications
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

SR, EX = 1, 3
ACQUIRED, WAITING = 1, 2
ABORTED, OPEN = 2, 3


def comp(ltype, table):
    return T.LockComponent(type=ltype, level=2, dbname="default", tablename=table)


def test_timed_out_txns_and_locks_are_reaped(hms_factory):
    hms = hms_factory({"hive.txn.timeout": "2s", "hive.timedout.txn.reaper.start": "300ms",
                       "hive.timedout.txn.reaper.interval": "250ms"})
    client = hms.client()
    silent, alive = client.open_txns(T.OpenTxnRequest(num_txns=2, user="u", hostname="h")).txn_ids
    held = client.lock(T.LockRequest(component=[comp(EX, "a")], txnid=silent, user="u",
                                     hostname="h"))
    free_silent = client.lock(T.LockRequest(component=[comp(EX, "b")], user="u", hostname="h"))
    free_alive = client.lock(T.LockRequest(component=[comp(SR, "c")], user="u", hostname="h"))
    blocked = client.lock(T.LockRequest(component=[comp(SR, "a")], txnid=alive, user="u",
                                        hostname="h"))
    assert (held.state, free_silent.state, blocked.state) == (ACQUIRED, ACQUIRED, WAITING)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        client.heartbeat(T.HeartbeatRequest(txnid=alive))
        client.heartbeat(T.HeartbeatRequest(lockid=free_alive.lockid))
        states = {t.id: t.state for t in client.get_open_txns_info().open_txns}
        if states.get(silent) == ABORTED:
            break
        time.sleep(0.3)
    assert states == {silent: ABORTED, alive: OPEN}
    # the txn-less lock goes in a sweep too (same timeout, same cadence): poll to a deadline
    deadline = time.monotonic() + 30
    while True:
        client.heartbeat(T.HeartbeatRequest(txnid=alive))
        client.heartbeat(T.HeartbeatRequest(lockid=free_alive.lockid))
        remaining = {e.lockid for e in client.show_locks(T.ShowLocksRequest()).locks}
        if free_silent.lockid not in remaining or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert held.lockid not in remaining and free_silent.lockid not in remaining
    assert {free_alive.lockid, blocked.lockid} <= remaining
    # the aborted transaction's lock is gone, so the waiter gets its lock
    assert client.check_lock(T.CheckLockRequest(lockid=blocked.lockid)).state == ACQUIRED
    with hms.ms.store.read() as conn:
        aborts = [json.loads(e.message)["txnid"] for e in notifications.next_events(conn, 0)
                  if e.event_type == "ABORT_TXN"]
    assert aborts == [silent]
    client.close()


def test_sweep_purges_old_events(hms_factory):
    hms = hms_factory({"hive.metastore.event.db.listener.timetolive": "1s",
                       "hive.timedout.txn.reaper.start": "1h"})
    client = hms.client()
    client.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h"))
    from hms_txn.service.txn.housekeeping import Housekeeper
    keeper = Housekeeper(hms.ms.config, hms.ms.units, hms.ms.txn_service, hms.ms.lock_service)
    assert keeper.run_once()["purged_events"] == 0
    deadline = time.monotonic() + 30                 # until the event is older than 1 s
    while (purged := keeper.run_once()["purged_events"]) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert purged == 1
    client.close()
