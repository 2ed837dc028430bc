"""The transaction loop (hms_txn.server_loop): one thread serving the embedded default's
connections, transaction calls batched into one SQLite transaction, other calls handed to
a pool thread. The rest of the suite runs through it too (it is the default); these tests
cover what only the loop does."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.Thrift import TApplicationException
from thrift.transport import TTransport

from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore, ttypes as t
from tests.support.servers import InProcessServer, client_for

from .test_catalog import make_table
from .test_lazy_open import _commit_modes, _mode_after
from tests.support.inprocess import calls as inprocess


@pytest.fixture
def loop_server(tmp_path):
    server = InProcessServer(str(tmp_path / "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp_path}/metastore.sqlite",
        "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
    })
    assert server.server.transport.loop is not None
    yield server
    server.stop()


def _call_bytes(method: str, *args) -> bytes:
    buf = TTransport.TMemoryBuffer()
    client = ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(buf))
    getattr(client, "send_" + method)(*args)
    return buf.getvalue()


def _read_answer(sock: socket.socket, method: str):
    """Read one answer from ``sock`` with a real client's decoder."""
    class _Sock(TTransport.TTransportBase):
        def read(self, sz):
            return sock.recv(sz)
    trans = TTransport.TBufferedTransport(_Sock(), rbuf_size=1)
    client = ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(trans))
    return getattr(client, "recv_" + method)()


def test_concurrent_transaction_calls_share_batches_and_all_commit(loop_server):
    """16 clients open, lock, allocate and commit at once: calls are batched (fewer COMMITs
    than calls), every id is distinct and every commit that returned is committed."""
    with client_for(loop_server.port) as c:
        c.create_table(make_table("default", "tl", params={"transactional": "true"}))
    committed: list[int] = []
    write_ids: list[int] = []
    errors: list[BaseException] = []
    mu = threading.Lock()

    def worker():
        try:
            with client_for(loop_server.port) as c:
                for _ in range(25):
                    txn = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]
                    wid = c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                        dbName="default", tableName="tl", txnIds=[txn])).txnToWriteIds[0]
                    lock = c.lock(t.LockRequest(
                        component=[t.LockComponent(type=t.LockType.SHARED_WRITE,
                                                   level=t.LockLevel.TABLE, dbname="default",
                                                   tablename="tl",
                                                   operationType=t.DataOperationType.INSERT)],
                        txnid=txn, user="u", hostname="h"))
                    assert lock.state == t.LockState.ACQUIRED
                    c.commit_txn(t.CommitTxnRequest(txnid=txn))
                    with mu:
                        committed.append(txn)
                        write_ids.append(wid.writeId)
        except BaseException as err:  # reported below
            errors.append(err)

    before = (loop_server.server.transport.loop.batches, loop_server.server.transport.loop.batched_calls)
    threads = [threading.Thread(target=worker) for _ in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors[0]
    assert len(committed) == len(set(committed)) == 16 * 25
    assert sorted(write_ids) == list(range(1, 16 * 25 + 1))
    states = {inprocess(loop_server.ms).txn_state(x) for x in committed}
    assert {s.name for s in states} == {"COMMITTED"}
    with client_for(loop_server.port) as c:
        assert not c.show_locks(t.ShowLocksRequest()).locks
    batches = loop_server.server.transport.loop.batches - before[0]
    calls = loop_server.server.transport.loop.batched_calls - before[1]
    assert calls == 16 * 25 * 4
    assert batches < calls, "no two calls ever shared a batch"
    with client_for(loop_server.port) as c:     # the same numbers in fb303 counters
        counters = c.getCounters()
        assert counters["hms_txn.loop.batched.calls"] >= calls
        assert counters["hms_txn.loop.batches"] >= batches


def test_a_message_arriving_in_pieces_does_not_hold_up_others(loop_server):
    """A client that has sent half a call is waited for without blocking the loop; two
    calls sent back to back are answered in order."""
    message = _call_bytes("open_txns", t.OpenTxnRequest(1, "slow", "h"))
    with socket.create_connection(("127.0.0.1", loop_server.port)) as slow, \
            client_for(loop_server.port) as fast:
        slow.settimeout(30)
        for i, byte in enumerate(message):
            slow.sendall(bytes([byte]))
            if i % 7 == 0:    # meanwhile another client is served at once
                fast.commit_txn(t.CommitTxnRequest(
                    txnid=fast.open_txns(t.OpenTxnRequest(1, "fast", "h")).txn_ids[0]))
        txn = _read_answer(slow, "open_txns").txn_ids[0]
        two = _call_bytes("commit_txn", t.CommitTxnRequest(txnid=txn)) + \
            _call_bytes("get_open_txns")
        slow.sendall(two)
        assert _read_answer(slow, "commit_txn") is None
        assert txn not in (_read_answer(slow, "get_open_txns").open_txns or [])


def test_catalog_calls_go_to_a_pool_thread_and_the_connection_comes_back(loop_server):
    """Transaction calls, inline reads and catalog calls on one connection, including a
    catalog call larger than one read of the socket."""
    with client_for(loop_server.port) as c:
        c.create_database(t.Database(name="lp", description="", parameters={}))  # pool
        txn = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]            # loop
        assert c.get_database("lp").name == "lp"                                  # inline
        table = make_table("lp", "parts", keys=[("ds", "string")])
        c.create_table(table)
        many = [t.Partition(values=[f"{i:05d}-" + "x" * 200], dbName="lp", tableName="parts")
                for i in range(600)]                                              # > 64 KiB
        c.add_partitions(many)
        c.commit_txn(t.CommitTxnRequest(txnid=txn))
        assert len(c.get_partition_names("lp", "parts", -1)) == 600
        assert c.get_table("lp", "parts").tableName == "parts"
        assert inprocess(loop_server.ms).txn_state(txn).name == "COMMITTED"


def test_a_failed_commit_answers_each_call_of_the_batch_with_an_error(loop_server,
                                                                      monkeypatch):
    """When the batch's COMMIT fails (a full disk, an I/O error) nothing in it happened,
    and each caller is told so instead of getting an answer."""
    store = loop_server.ms.store
    real_batch = store.batch

    class DiskFull(Exception):
        pass

    def failing_batch(lazy=False, wait=True):
        import contextlib

        @contextlib.contextmanager
        def run():
            with real_batch(lazy, wait):
                yield
                raise DiskFull("disk I/O error")
        return run()

    with client_for(loop_server.port) as c:
        hwm = c.get_open_txns().txn_high_water_mark
        monkeypatch.setattr(store, "batch", failing_batch)
        with pytest.raises(TApplicationException, match="nothing was changed"):
            c.open_txns(t.OpenTxnRequest(1, "u", "h"))
        monkeypatch.setattr(store, "batch", real_batch)
        after = c.get_open_txns()
        assert after.txn_high_water_mark == hwm and not after.open_txns
        txn = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]
        c.commit_txn(t.CommitTxnRequest(txnid=txn))


def test_a_long_write_elsewhere_holds_up_only_the_calls_that_need_the_writer(loop_server):
    """While another thread holds SQLite's writer (a long catalog write), the loop goes on
    answering table reads, and the transaction calls that arrive meanwhile wait on a pool
    thread, then are answered, durable, once the writer is free."""
    with client_for(loop_server.port) as c:
        c.create_table(make_table("default", "busy"))
    writing = threading.Event()
    release = threading.Event()

    def long_write():
        with loop_server.ms.store.write():
            writing.set()
            release.wait(60)

    writer = threading.Thread(target=long_write)
    writer.start()
    opened: list[int] = []
    try:
        assert writing.wait(30)
        with client_for(loop_server.port) as waiting, client_for(loop_server.port) as reader:
            opener = threading.Thread(target=lambda: opened.extend(
                waiting.open_txns(t.OpenTxnRequest(2, "u", "h")).txn_ids))
            opener.start()
            deadline = time.monotonic() + 30
            while not loop_server.server.transport.loop._away and time.monotonic() < deadline:
                time.sleep(0.01)
            assert loop_server.server.transport.loop._away, "open_txns was not handed to a pool thread"
            for _ in range(20):      # the loop is not blocked behind the writer
                assert reader.get_table("default", "busy").tableName == "busy"
                assert reader.get_database("default").name == "default"
            assert not opened and opener.is_alive()
            release.set()
            opener.join(30)
            assert len(opened) == 2
            # The connection came back to the loop and is served as before.
            waiting.commit_txn(t.CommitTxnRequest(txnid=opened[0]))
            waiting.abort_txn(t.AbortTxnRequest(txnid=opened[1]))
            assert inprocess(loop_server.ms).txn_state(opened[0]).name == "COMMITTED"
            assert inprocess(loop_server.ms).txn_state(opened[1]).name == "ABORTED"
            assert not loop_server.server.transport.loop._away
    finally:
        release.set()
        writer.join(30)


def test_garbage_closes_only_that_connection(loop_server):
    with socket.create_connection(("127.0.0.1", loop_server.port)) as bad, \
            client_for(loop_server.port) as good:
        bad.settimeout(30)
        bad.sendall(b"\x80\x01\x00\x01" + b"\xff" * 64)   # a CALL whose name length is absurd
        assert bad.recv(100) == b""
        assert good.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids


@pytest.mark.parametrize("conf", [{"hms_txn.server.txn.loop": "false"},
                                  {"hive.metastore.thrift.framed.transport.enabled": "true"}])
def test_thread_per_connection_when_switched_off_or_framed(tmp_path, conf):
    server = InProcessServer(str(tmp_path / "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp_path}/metastore.sqlite",
        "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"), **conf})
    try:
        assert server.server.transport.loop is None
        framed = conf.get("hive.metastore.thrift.framed.transport.enabled") == "true"
        with client_for(server.port, framed=framed) as c:
            txn = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]
            c.commit_txn(t.CommitTxnRequest(txnid=txn))
            assert inprocess(server.ms).txn_state(txn).name == "COMMITTED"
    finally:
        server.stop()


def test_stop_with_connections_open_returns(loop_server):
    """Idle connections, and one whose catalog call has only half arrived (a pool thread
    is waiting for the rest), do not hold up stop."""
    clients = [client_for(loop_server.port) for _ in range(4)]
    opened = [cm.__enter__() for cm in clients]
    for c in opened:
        c.open_txns(t.OpenTxnRequest(1, "u", "h"))
    half = _call_bytes("create_database", t.Database(name="x" * 100, parameters={}))
    stalled = socket.create_connection(("127.0.0.1", loop_server.port))
    stalled.sendall(half[:len(half) // 2])
    deadline = time.monotonic() + 30
    while not loop_server.server.transport.loop._away and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loop_server.server.transport.loop._away, "the catalog call did not reach a pool thread"
    began = time.monotonic()
    loop_server.stop()
    assert time.monotonic() - began < 30     # not held up (a stalled read waits 1 h)
    stalled.settimeout(10)
    assert stalled.recv(100) == b""       # closed, with no answer to a call never completed
    stalled.close()
    for cm in clients:
        cm.__exit__(None, None, None)


def test_old_style_unversioned_messages_are_served(loop_server):
    """Clients that write message headers without the version word (strictWrite off, as
    some old Thrift clients do) are framed and answered like the others."""
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.transport import TSocket
    sock = TSocket.TSocket("127.0.0.1", loop_server.port)
    transport = TTransport.TBufferedTransport(sock)
    transport.open()
    try:
        c = ThriftHiveMetastore.Client(TBinaryProtocol(transport, strictWrite=False))
        txn = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]        # loop
        assert c.get_database("default").name == "default"                # inline
        assert "default" in c.get_all_databases()                          # pool
        c.commit_txn(t.CommitTxnRequest(txnid=txn))
        assert inprocess(loop_server.ms).txn_state(txn).name == "COMMITTED"
    finally:
        transport.close()


def _thread_cpu_seconds(native_id: int) -> float:
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_loop_spins_only_right_after_serving(loop_server):
    """After a call the loop looks for the next one for a moment without sleeping
    (hms_txn.server.txn.loop.spin, 200 µs by default); an idle loop sleeps."""
    loop = loop_server.server.transport.loop
    assert loop.spin == pytest.approx(200e-6)
    with client_for(loop_server.port) as c:
        for _ in range(50):
            txn = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]
            c.commit_txn(t.CommitTxnRequest(txnid=txn))
        before = _thread_cpu_seconds(loop._thread.native_id)
        time.sleep(2.0)
        idle_cpu = _thread_cpu_seconds(loop._thread.native_id) - before
        assert idle_cpu < 0.1, f"the idle loop used {idle_cpu:.2f} s of CPU in 2 s"
        assert c.get_database("default").name == "default"    # and wakes up for a call


def test_commits_over_the_loop_are_lazy_only_for_transactions_that_wrote_nothing(loop_server):
    """A read-only transaction's commit_txn is answered without an fsync; a writer's is
    answered only after a durable COMMIT (hms_txn.txn.TxnManager, "Lazy commit_txn")."""
    store = loop_server.ms.store
    with client_for(loop_server.port) as c:
        c.create_table(make_table("default", "lz", params={"transactional": "true"}))
        reader = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]
        writer = c.open_txns(t.OpenTxnRequest(1, "u", "h")).txn_ids[0]
        c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName="default", tableName="lz", txnIds=[writer]))
        seen: list[str] = []
        store._writer.connection.driver_connection.set_trace_callback(seen.append)
        try:
            modes = []
            mode = "FULL"     # allocate_table_write_ids committed durably
            for txn in (reader, writer):
                seen.clear()
                c.commit_txn(t.CommitTxnRequest(txnid=txn))
                modes.append(_commit_modes(list(seen), mode))
                mode = _mode_after(list(seen), mode)
        finally:
            store._writer.connection.driver_connection.set_trace_callback(None)
    assert modes == [["NORMAL"], ["NORMAL", "FULL"]]
    assert inprocess(loop_server.ms).txn_state(reader).name == "COMMITTED"
    assert inprocess(loop_server.ms).txn_state(writer).name == "COMMITTED"
