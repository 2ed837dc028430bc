"""Lazy commits on PostgreSQL: the same contract as on SQLite (tests/hms_txn/test_lazy_open.py;
the argument is in hms_txn/service/txn/transactions.py's docstring), with PostgreSQL's tools.

``open_txns`` and the commit of a transaction that wrote nothing commit with
``synchronous_commit = off`` (set for the call's own transaction: by the PostgreSQL
function of the call, hms_txn.store.pg_functions, or by ``SET LOCAL`` on the Python path);
every other call commits synchronously (a commit that finds out it recorded a write sets
it back to ``on`` before its COMMIT). A crash of
the database server (``pg_ctl stop -m immediate``, then a start) may take back lazy
commits but no acknowledged durable call, and the running metastore, which outlives the
crash, never hands out a transaction id twice.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

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
    """The ``synchronous_commit`` each commit of the metastore's transaction calls obeyed
    ("off": a lazy commit), as the database saw it at the commit: a deferred constraint
    trigger on the tables those calls write records the setting when the transaction
    commits, whichever form the call took (one statement in autocommit: the PostgreSQL
    functions; a transaction with SET LOCAL: the Python path)."""

    _TABLES = ("txns", "hive_locks", "txn_to_write_id", "txn_components", "notification_log")

    def __init__(self, ms: Metastore):
        self._engine = ms.store.engine
        self._seen = 0
        with self._engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE test_commit_modes (txid bigint PRIMARY KEY, n bigserial, mode text)")
            conn.exec_driver_sql(
                "CREATE FUNCTION test_log_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN INSERT INTO test_commit_modes (txid, mode) VALUES (txid_current(), "
                "current_setting('synchronous_commit')) ON CONFLICT DO NOTHING; RETURN NULL; "
                "END $$")
            for table in self._TABLES:
                conn.exec_driver_sql(
                    f"CREATE CONSTRAINT TRIGGER test_commit_mode AFTER INSERT OR UPDATE OR "
                    f"DELETE ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                    f"EXECUTE FUNCTION test_log_commit_mode()")

    def take(self) -> list[str]:
        with self._engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT n, mode FROM test_commit_modes WHERE n > %(seen)s ORDER BY n",
                {"seen": self._seen}).all()
        if rows:
            self._seen = rows[-1][0]
        return [mode for _, mode in rows]


def _lock(ms: Metastore, txn: int, op: DataOp = DataOp.SELECT,
          kind: LockType = LockType.SHARED_READ) -> None:
    result = calls(ms).lock(LockRequest(
        [LockComponent(int(kind), int(LockLevel.TABLE), "db", "t", operation_type=int(op))],
        txn_id=txn, user="u", hostname="h"))
    assert result.state == LockState.ACQUIRED


@pytest.fixture(scope="module")
def durable_postgres():
    server = PostgresServer(durable=True).start()
    yield server
    server.stop()


def test_open_and_commits_that_wrote_nothing_are_lazy_everything_else_is_not(
        tmp_path, durable_postgres):
    ms = _metastore(tmp_path, durable_postgres.create_database())
    try:
        _lazy_and_durable_calls(ms)
    finally:
        ms.close()


def _lazy_and_durable_calls(ms: Metastore) -> None:
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
