"""Lazy commits on PostgreSQL: the same contract as on SQLite (tests/hms_txn/test_lazy_open.py;
the argument is in hms_txn/service/txn/transactions.py's docstring), with PostgreSQL's tools.

``open_txns`` and the commit of a transaction that wrote nothing commit with
``SET LOCAL synchronous_commit = off``; every other call commits synchronously (a commit
that finds out it recorded a write sets it back to ``on`` before its COMMIT). A crash of
the database server (``pg_ctl stop -m immediate``, then a start) may take back lazy
commits but no acknowledged durable call, and the running metastore, which outlives the
crash, never hands out a transaction id twice.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import event, select

from hms_txn.common.config import Config
from hms_txn.common.errors import NoSuchTxn
from hms_txn.domain.locks.locks import (DataOp, LockComponent, LockLevel, LockRequest, LockState,
                                        LockType)
from hms_txn.domain.txn.txn_records import COMMITTED, TxnState, TxnType
from hms_txn.server.metastore import Metastore
from hms_txn.store.schema import txn_to_write_id, txns
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.inprocess import calls
from tests.support.postgres import PostgresServer


def _metastore(data_dir, url: str) -> Metastore:
    ms = Metastore(Config({"hive.metastore.warehouse.dir": str(data_dir / "wh"),
                           "javax.jdo.option.ConnectionURL": url}), data_dir=str(data_dir))
    ms.start()
    return ms


class _Commits:
    """The ``synchronous_commit`` each COMMIT of this thread's transactions ran under, as
    the statements sent on the store's connections set it ("off": a lazy commit)."""

    def __init__(self, ms: Metastore):
        self.modes: list[str] = []
        self._mode = "on"
        self._thread = threading.get_ident()
        engine = ms.store.engine
        event.listen(engine, "begin", self._begin)
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)

    def _begin(self, conn) -> None:
        if threading.get_ident() == self._thread:
            self._mode = "on"

    def _statement(self, conn, cursor, statement, *_args) -> None:
        if threading.get_ident() == self._thread and statement.startswith(
                "SET LOCAL synchronous_commit TO "):
            self._mode = statement.rsplit(" ", 1)[1]

    def _commit(self, conn) -> None:
        if threading.get_ident() == self._thread:
            self.modes.append(self._mode)

    def take(self) -> list[str]:
        out, self.modes = self.modes, []
        return out


def _lock(ms: Metastore, txn: int, op: DataOp = DataOp.SELECT,
          kind: LockType = LockType.SHARED_READ) -> None:
    result = calls(ms).lock(LockRequest(
        [LockComponent(int(kind), int(LockLevel.TABLE), "db", "t", operation_type=int(op))],
        txn_id=txn, user="u", hostname="h"))
    assert result.state == LockState.ACQUIRED


@pytest.fixture
def pg_ms(tmp_path, postgres):
    ms = _metastore(tmp_path, postgres.create_database())
    yield ms
    ms.close()


def test_open_and_commits_that_wrote_nothing_are_lazy_everything_else_is_not(pg_ms):
    ms = pg_ms
    assert ms.units.lazy_commits
    watch = _Commits(ms)
    first = calls(ms).open_txns(1, "u", "h")[0]
    # The first raises the id reservation (hms_txn.domain.txn.txn): that commit is durable.
    assert watch.take() == ["on"]
    calls(ms).abort_txn(first)
    watch.take()
    txn = calls(ms).open_txns(1, "u", "h")[0]
    assert watch.take() == ["off"]
    calls(ms).commit_txn(txn)                                    # wrote nothing
    assert watch.take() == ["off"]
    ro = calls(ms).open_txns(1, "u", "h", txn_type=TxnType.READ_ONLY)[0]
    calls(ms).commit_txn(ro)
    assert watch.take() == ["off", "off"]
    reader = calls(ms).open_txns(1, "u", "h")[0]
    _lock(ms, reader)                                            # a lock: durable
    assert watch.take() == ["off", "on"]
    calls(ms).heartbeat(txn_id=reader)
    assert watch.take() == ["on"]
    calls(ms).commit_txn(reader)                                 # read locks only: lazy
    assert watch.take() == ["off"]
    writer = calls(ms).open_txns(1, "u", "h")[0]
    calls(ms).allocate_table_write_ids("db", "t", [writer])
    assert watch.take() == ["off", "on"]
    calls(ms).commit_txn(writer)          # found a write id: set back to on before COMMIT
    assert watch.take() == ["on"]
    inserter = calls(ms).open_txns(1, "u", "h")[0]
    _lock(ms, inserter, DataOp.INSERT, LockType.SHARED_WRITE)
    watch.take()
    calls(ms).commit_txn(inserter)        # a Hive 2.3 writer: its write is its lock
    assert watch.take() == ["on"]
    with_events = calls(ms).open_txns(1, "u", "h")[0]
    calls(ms).allocate_table_write_ids("db", "t", [with_events])
    watch.take()
    calls(ms).commit_txn(with_events, write_events=[
        t.WriteEventInfo(writeId=2, database="db", table="t",
                          files="delta_0000002_0000002_0000")])
    assert watch.take() == ["on"]        # known to write before it starts: never lazy
    aborted = calls(ms).open_txns(1, "u", "h")[0]
    watch.take()
    calls(ms).abort_txn(aborted)
    assert watch.take() == ["on"]


@pytest.fixture(scope="module")
def durable_postgres():
    server = PostgresServer(durable=True).start()
    yield server
    server.stop()


def _wal(ms: Metastore, which: str) -> int:
    return ms.store.read_call(lambda conn: conn.exec_driver_sql(
        f"SELECT pg_current_wal_{which}_lsn() - '0/0'::pg_lsn").scalar())


def test_notification_reads_flush_lazy_commits_first(tmp_path, durable_postgres):
    """Events are served only once durable (event ids must not be reused under a client
    that has seen them): the read first flushes the WAL as far as it was written, lazy
    commits of every server process on the database included."""
    ms = _metastore(tmp_path, durable_postgres.create_database())
    try:
        start = calls(ms).current_event_id()
        calls(ms).abort_txn(calls(ms).open_txns(1, "u", "h")[0])   # the reservation, raised
        txn = calls(ms).open_txns(1, "u", "h")[0]
        written = _wal(ms, "insert")
        assert _wal(ms, "flush") < written     # the lazy open sits in WAL buffers
        events = calls(ms).next_events(start)
        assert [e.event_type for e in events][-1] == "OPEN_TXN"
        assert str(txn) in events[-1].message
        assert _wal(ms, "flush") >= written
    finally:
        ms.close()


def test_database_crash_loses_no_acknowledged_durable_call_and_reuses_no_id(
        tmp_path, durable_postgres):
    ms = _metastore(tmp_path, durable_postgres.create_database())
    try:
        durable: dict[int, int] = {}        # committed txn -> its write id
        handed_out: list[int] = []
        for _ in range(20):
            txn = calls(ms).open_txns(1, "u", "h")[0]
            handed_out.append(txn)
            ((_, write_id),) = calls(ms).allocate_table_write_ids("db", "t", [txn])
            calls(ms).commit_txn(txn)                                # durable: a write id
            durable[txn] = write_id
        # Lazy commits last: with the WAL writer at its slowest, they sit in WAL buffers.
        lazy_open = calls(ms).open_txns(5, "u", "h")
        handed_out += lazy_open
        durable_postgres.crash_and_restart()

        # The pooled connections died with the server: read_call retries on a new one.
        states = ms.store.read_call(lambda conn: dict(
            conn.execute(select(txns.c.txn_id, txns.c.state)).all()))
        write_ids = ms.store.read_call(lambda conn: dict(
            conn.execute(select(txn_to_write_id.c.txn_id, txn_to_write_id.c.write_id)).all()))
        for txn, write_id in durable.items():
            assert states.get(txn) == COMMITTED and write_ids[txn] == write_id, txn
        lost = [t for t in lazy_open if t not in states]
        assert lost, "the crash took back none of the lazy opens: the test shows nothing"
        for txn in lost:                 # its client learns it is gone
            with pytest.raises(NoSuchTxn):
                calls(ms).commit_txn(txn)
        # The same running metastore goes on: the first new connection saw the restart
        # and moved the counter past the reservation, so no id is handed out again.
        after = calls(ms).open_txns(10, "u", "h")
        assert min(after) > max(handed_out)
        calls(ms).commit_txn(after[0])
        assert calls(ms).txn_state(after[0]) == TxnState.COMMITTED
    finally:
        ms.close()


def test_round_trips_of_open_and_commit(pg_ms):
    """The statements open_txns and a read-only commit_txn send (each one round trip, plus
    the driver's BEGIN and the COMMIT): the notification event's id and row are one
    statement (hms_txn.store.sql.insert_numbered), no checkout ping precedes them, and
    none goes through SQLAlchemy's execution path (hms_txn.store.prepared)."""
    ms = pg_ms
    calls(ms).abort_txn(calls(ms).open_txns(1, "u", "h")[0])   # the reservation, raised
    sent: list[str] = []
    through_sqlalchemy: list[str] = []
    me = threading.get_ident()

    def watch(conn, cursor, statement, parameters, context, executemany):
        if threading.get_ident() == me:     # not the metadata cache's or housekeeping's
            sent.append(statement.split()[0])
            if context is not None:         # the direct path has no execution context
                through_sqlalchemy.append(statement)

    event.listen(ms.store.engine, "before_cursor_execute", watch)
    txn = calls(ms).open_txns(1, "u", "h")[0]
    # SET LOCAL; the id counter's UPDATE ... RETURNING; the txns row, whose INSERT also
    # reads the id reservation after the counter's lock (hms_txn.domain.txn.txn); the
    # OPEN_TXN event.
    assert sent == ["SET", "UPDATE", "INSERT", "WITH"]
    sent.clear()
    calls(ms).commit_txn(txn)
    # SET LOCAL; the row locked; its components; the state, whose UPDATE also reads
    # whether it has write ids (after the lock: hms_txn.domain.txn.txn_commit); the
    # COMMIT_TXN event.
    assert sent == ["SET", "SELECT", "SELECT", "UPDATE", "WITH"]
    # every one of them on psycopg's cursor directly (hms_txn.store.prepared)
    assert through_sqlalchemy == []


def test_valid_write_ids_of_a_given_snapshot_are_one_statement_without_a_transaction(pg_ms):
    """get_valid_write_ids with the reader's ValidTxnList (what HiveServer2, Trino and
    Impala send): the tables' counters, the ids above the snapshot and its exceptions' ids
    in one statement (hms_txn.domain.txn.writeids), run in autocommit, so no BEGIN or COMMIT
    either: one round trip. The answer is the one the snapshot defines."""
    ms = pg_ms
    c = calls(ms)
    txns_ = c.open_txns(4, "u", "h")
    for txn in txns_:
        c.allocate_table_write_ids("db", "t", [txn])           # write ids 1..4
    c.commit_txn(txns_[0])
    c.abort_txn(txns_[1])
    snapshot = ms.txn_service.get_open_txns()                   # 2 aborted, 3 and 4 open
    valid_txns = f"{snapshot.txn_high_water_mark}:{txns_[2]}:{txns_[2]},{txns_[3]}:{txns_[1]}"
    later = c.open_txns(1, "u", "h")[0]
    c.allocate_table_write_ids("db", "t", [later])              # above the snapshot
    sent: list[tuple[str, bool]] = []
    me = threading.get_ident()

    def watch(conn, cursor, statement, *_):
        if threading.get_ident() == me:
            sent.append((statement.split()[0], conn.connection.driver_connection.autocommit))

    event.listen(ms.store.engine, "before_cursor_execute", watch)
    answer = ms.txn_service.get_valid_write_ids(t.GetValidWriteIdsRequest(
        fullTableNames=["db.t", "db.none"], validTxnList=valid_txns))
    event.remove(ms.store.engine, "before_cursor_execute", watch)
    assert sent == [("SELECT", True)]
    tab, none = answer.tblValidWriteIds
    assert (tab.writeIdHighWaterMark, tab.invalidWriteIds, tab.minOpenWriteId) == (4, [2, 3, 4], 3)
    assert (none.writeIdHighWaterMark, none.invalidWriteIds) == (0, [])
