"""The ACID clients' metastore connection (``hms_txn.clients.acid.metastore.
MetastoreConnection``, under ``hms_txn.tables`` and ``spark.hive_acid``) after a connection
breaks between a request and its answer: a call is reconnected and retried once, but not
``lock``, as Hive's client (``IMetaStoreClient.lock`` is ``@RetrySemantics.CannotRetry``;
``RetryingMetaStoreClient.invoke`` never retries it): the server has enqueued the lock, and a
retry would enqueue a second one, which nobody heartbeats or releases; the caller gets a
``HiveAcidError`` that says so.

A real server behind a TCP relay (tests/support/relay.py) that forwards a request and then,
when told to, drops the connection instead of passing the answer back.
"""

from __future__ import annotations

import pytest

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.support.relay import Relay
from tests.support.servers import InProcessServer


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = InProcessServer(str(tmp_path_factory.mktemp("hms")), {})
    yield s
    s.stop()


@pytest.fixture
def relay(server):
    r = Relay(server.port, server.host)
    yield r
    r.close()


def _read_lock(db: str) -> T.LockRequest:
    return T.LockRequest(component=[T.LockComponent(
        type=T.LockType.SHARED_READ, level=T.LockLevel.DB, dbname=db,
        operationType=T.DataOperationType.SELECT)],
        user="tester", hostname="localhost", agentInfo="test_acid_client_retries")


def _locks_on(client, db: str) -> list:
    return [lk for lk in client.show_locks(T.ShowLocksRequest(dbname=db)).locks
            if lk.dbname == db]


def test_a_call_whose_answer_was_lost_is_retried_on_a_new_connection(server, relay):
    conn = M.MetastoreConnection(f"thrift://127.0.0.1:{relay.port}")
    try:
        before = conn.get_open_txns().txn_high_water_mark
        relay.drop_next_answer.set()
        assert conn.get_open_txns().txn_high_water_mark == before   # answered by the retry
        assert relay.dropped == 1
    finally:
        conn.close()


def test_a_lock_whose_answer_was_lost_is_not_sent_again(server, relay):
    client = server.client()
    conn = M.MetastoreConnection(f"thrift://127.0.0.1:{relay.port}")
    try:
        conn.get_open_txns()                     # connected through the relay
        relay.drop_next_answer.set()
        with pytest.raises(HiveAcidError, match="broke before it answered lock.*not sent "
                                                "again"):
            conn.lock(_read_lock("default"))
        assert relay.dropped == 1
        # the server took the one request it was sent; a retry would have made it two
        held = _locks_on(client, "default")
        assert len(held) == 1, held
        client.unlock(T.UnlockRequest(lockid=held[0].lockid))
        # the connection reconnects for the next call, and a lock answered is kept
        got = conn.lock(_read_lock("default"))
        assert got.state == T.LockState.ACQUIRED
        assert [lk.lockid for lk in _locks_on(client, "default")] == [got.lockid]
        conn.unlock(T.UnlockRequest(lockid=got.lockid))
        assert _locks_on(client, "default") == []
    finally:
        conn.close()
        client.close()
