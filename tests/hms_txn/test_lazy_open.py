"""Lazy commits on SQLite: open_txns, and commit_txn of a transaction that wrote nothing,
commit without an fsync, yet no id is ever reused and no write is ever acknowledged before
it is durable.

See ``TxnManager`` in hms_txn/txn.py for the argument. These tests check its pieces: which
commits skip the fsync, that the reservation always covers the ids handed out, that after
an emulated power cut (the database as it was at the last fsync) ids handed out since are
skipped and reported as unknown and a lost read-only commit is undone by the reaper, that
a clean restart leaves no gap, and that notification reads only show what is durable. The
same contract on PostgreSQL: tests/hms_txn/test_lazy_commit_postgres.py.
"""

from __future__ import annotations

import sqlite3
import time

import pytest
from sqlalchemy import select

from hms_txn.common.config import Config
from hms_txn.common.errors import NoSuchTxn
from hms_txn.domain.locks.locks import (DataOp, LockComponent, LockLevel, LockRequest, LockState,
                                        LockType)
from hms_txn.server.metastore import Metastore
from hms_txn.store.schema import next_txn_id, tbls
from hms_txn.domain.txn.txn import RESERVE_AHEAD
from hms_txn.domain.txn.txn_records import TxnState, TxnType
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.inprocess import calls


def _metastore(data_dir, url: str | None = None, **conf: str) -> Metastore:
    raw = {"hive.metastore.warehouse.dir": str(data_dir / "wh"), **conf}
    if url is not None:
        raw["javax.jdo.option.ConnectionURL"] = url
    ms = Metastore(Config(raw), data_dir=str(data_dir))
    ms.start()
    return ms


def _counter_rows(ms: Metastore) -> dict[int, int]:
    with ms.store.read() as conn:
        return {r.id: r.next_id for r in conn.execute(select(next_txn_id))}


def _sqlite_path(ms: Metastore) -> str:
    return ms.store.url[len("sqlite:///"):]


def _image_of(ms: Metastore, image):
    """A copy of ``ms``'s database in the new directory ``image``: taken right after a
    durable call, it is what a power cut at that moment would leave."""
    image.mkdir()
    target = sqlite3.connect(image / "metastore.sqlite")
    with sqlite3.connect(_sqlite_path(ms)) as source:
        source.backup(target)
    target.close()
    return image


def _url_of(image) -> str:
    return f"jdbc:sqlite:{image / 'metastore.sqlite'}"


class _Statements:
    """The SQL the store's writer connection runs (sqlite3's trace hook), and the
    ``synchronous`` setting it runs under (kept from one commit to the next)."""

    def __init__(self, ms: Metastore):
        calls(ms).open_txns(1, "u", "h")          # the writer connection exists from here on
        self.seen: list[str] = []
        self.mode = "NORMAL" if ms.store._writer_lazy else "FULL"
        ms.store._writer.connection.driver_connection.set_trace_callback(self.seen.append)

    def take(self) -> list[str]:
        out, self.seen[:] = list(self.seen), []
        self.mode = _mode_after(out, self.mode)
        return out

    def commit_modes(self) -> list[str]:
        """The setting each COMMIT since the last look ran under (FULL: fsynced)."""
        start = self.mode
        return _commit_modes(self.take(), start)


def _commit_modes(statements: list[str], mode: str = "FULL") -> list[str]:
    """The ``synchronous`` setting each COMMIT in ``statements`` ran under (FULL: fsynced),
    starting from ``mode``."""
    modes = []
    for sql in statements:
        if sql.startswith("PRAGMA synchronous="):
            mode = sql.split("=", 1)[1]
        elif sql == "COMMIT":
            modes.append(mode)
    return modes


def _mode_after(statements: list[str], mode: str) -> str:
    for sql in statements:
        if sql.startswith("PRAGMA synchronous="):
            mode = sql.split("=", 1)[1]
    return mode


def _read_lock(ms: Metastore, txn: int, op: DataOp = DataOp.SELECT,
               kind: LockType = LockType.SHARED_READ) -> int:
    result = calls(ms).lock(LockRequest(
        [LockComponent(int(kind), int(LockLevel.TABLE), "db", "t", operation_type=int(op))],
        txn_id=txn, user="u", hostname="h"))
    assert result.state == LockState.ACQUIRED
    return result.lock_id


def test_open_commits_without_fsync_and_everything_else_with(tmp_path):
    ms = _metastore(tmp_path)
    try:
        assert ms.store.lazy_commits
        sql = _Statements(ms)
        sql.take()
        txn = calls(ms).open_txns(1, "u", "h")[0]
        assert sql.commit_modes() == ["NORMAL"]
        # A second open finds the connection lazy already: no switch to and fro.
        second = calls(ms).open_txns(1, "u", "h")[0]
        opened = sql.take()
        assert not any(s.startswith("PRAGMA") for s in opened)
        assert _commit_modes(opened, "NORMAL") == ["NORMAL"]
        calls(ms).allocate_table_write_ids("db", "t", [txn])
        allocated = sql.take()
        assert allocated[0] == "PRAGMA synchronous=FULL"
        assert _commit_modes(allocated, "NORMAL") == ["FULL"]
        _read_lock(ms, txn)
        assert sql.commit_modes() == ["FULL"]
        calls(ms).heartbeat(txn_id=txn)
        assert sql.commit_modes() == ["FULL"]
        calls(ms).abort_txn(txn)
        assert sql.commit_modes() == ["FULL"]
        calls(ms).abort_txn(second)
        assert sql.commit_modes() == ["FULL"]
    finally:
        ms.close()


def _wrote_nothing(ms: Metastore) -> int:
    return calls(ms).open_txns(1, "u", "h")[0]


def _read_only(ms: Metastore) -> int:
    return calls(ms).open_txns(1, "u", "h", txn_type=TxnType.READ_ONLY)[0]


def _read_locked(ms: Metastore) -> int:
    txn = calls(ms).open_txns(1, "u", "h")[0]
    _read_lock(ms, txn)
    return txn


@pytest.mark.parametrize("begin", [_wrote_nothing, _read_only, _read_locked])
def test_commit_of_a_transaction_that_wrote_nothing_is_lazy(tmp_path, begin):
    ms = _metastore(tmp_path)
    try:
        sql = _Statements(ms)
        txn = begin(ms)
        sql.take()
        calls(ms).commit_txn(txn)
        assert sql.commit_modes() == ["NORMAL"]
        assert ms.store._unsynced
        assert calls(ms).show_locks() == []
    finally:
        ms.close()


def _with_write_id(ms: Metastore) -> tuple[int, dict]:
    txn = calls(ms).open_txns(1, "u", "h")[0]
    calls(ms).allocate_table_write_ids("db", "t", [txn])
    return txn, {}


def _with_insert_lock(ms: Metastore) -> tuple[int, dict]:
    # A Hive 2.3 writer: no write id, the write is known from its lock's operation type.
    txn = calls(ms).open_txns(1, "u", "h")[0]
    _read_lock(ms, txn, DataOp.INSERT, LockType.SHARED_WRITE)
    return txn, {}


def _with_dynamic_partitions(ms: Metastore) -> tuple[int, dict]:
    txn, _ = _with_write_id(ms)
    calls(ms).add_dynamic_partitions(txn, 1, "db", "t", ["p=1"], DataOp.INSERT)
    return txn, {}


def _with_write_events(ms: Metastore) -> tuple[int, dict]:
    txn, _ = _with_write_id(ms)
    return txn, {"write_events": [t.WriteEventInfo(writeId=1, database="db", table="t",
                                                   files="delta_0000001_0000001_0000")]}


def _with_key_value(ms: Metastore) -> tuple[int, dict]:
    ms.units.write(lambda conn: ms.tables.create(conn, {
        "dbName": "default", "tableName": "sink", "parameters": {"_meta.progress": "0"},
        "sd": {"cols": [{"name": "x", "type": "int"}]}}))
    return _wrote_nothing(ms), {"key_value": (_table_id(ms), "_meta.progress", "42")}


def _compaction(ms: Metastore) -> tuple[int, dict]:
    return calls(ms).open_txns(1, "u", "h", txn_type=TxnType.COMPACTION)[0], {}


def _table_id(ms: Metastore) -> int:
    with ms.store.read() as conn:
        return conn.execute(select(tbls.c.tbl_id)).scalar_one()


@pytest.mark.parametrize("begin", [_with_write_id, _with_insert_lock, _with_dynamic_partitions,
                                   _with_write_events, _with_key_value, _compaction])
def test_commit_that_records_a_write_is_fsynced_before_it_returns(tmp_path, begin):
    ms = _metastore(tmp_path)
    try:
        sql = _Statements(ms)
        txn, extra = begin(ms)
        sql.take()
        calls(ms).commit_txn(txn, **extra)
        modes = sql.commit_modes()
        assert modes and modes[-1] == "FULL"
    finally:
        ms.close()


def test_a_batch_with_a_durable_commit_is_fsynced_before_the_batch_ends(tmp_path):
    """The transaction loop's batches: one of only opens and commits starts lazy; a
    commit in it that recorded a write makes the batch end with a durable commit."""
    ms = _metastore(tmp_path)
    try:
        sql = _Statements(ms)
        reader = calls(ms).open_txns(1, "u", "h")[0]
        writer, _ = _with_write_id(ms)
        sql.take()
        for txn, modes in [(reader, ["NORMAL"]), (writer, ["NORMAL", "FULL"])]:
            start = sql.mode
            with ms.store.batch(lazy=True):
                calls(ms).commit_txn(txn)
                inside = sql.take()
                assert "COMMIT" not in inside
            assert _commit_modes(inside + sql.take(), start) == modes
    finally:
        ms.close()


def test_reservation_covers_every_id_handed_out(tmp_path):
    ms = _metastore(tmp_path)
    try:
        extensions = 0
        reserved = 0
        handed_out = 0
        while handed_out < 3 * RESERVE_AHEAD:
            ids = calls(ms).open_txns(37, "u", "h")
            handed_out = ids[-1]
            now = _counter_rows(ms)[2]
            assert now >= ids[-1], "an id was handed out beyond the durable reservation"
            extensions += now != reserved
            reserved = now
        # One durable extension per RESERVE_AHEAD ids, not one per call.
        assert 3 <= extensions <= 5
    finally:
        ms.close()


def test_power_cut_after_lazy_opens_never_reuses_their_ids(tmp_path):
    """Emulate a power cut: restart from a copy of the database taken at the last fsync.

    Opens after that point were committed lazily and are gone from the copy, as they
    could be after a real power cut. The restarted server must not hand their ids out
    again (their clients still hold them), and must answer for them as for transactions
    it does not know."""
    ms = _metastore(tmp_path / "a")
    try:
        first = calls(ms).open_txns(3, "u", "h")
        calls(ms).commit_txn(first[0])             # durable: fsyncs the opens before it too
        image = _image_of(ms, tmp_path / "b")    # the database as of the last fsync
        lost = calls(ms).open_txns(2, "u", "h")   # lazy: lost in the "power cut"
        assert lost[0] == first[-1] + 1
    finally:
        ms.close()

    restarted = _metastore(image, _url_of(image))
    try:
        fresh = calls(restarted).open_txns(1, "u", "h")[0]
        assert fresh > lost[-1]
        with pytest.raises(NoSuchTxn):
            calls(restarted).commit_txn(lost[0])
        open_ids = {i.id for i in calls(restarted).get_open_txns_info()[1]}
        assert set(first[1:]) <= open_ids and not open_ids & set(lost)
    finally:
        restarted.close()


def test_power_cut_after_a_lazy_commit_leaves_the_reaper_to_abort_it(tmp_path):
    """A read-only transaction whose lazy commit a power cut took back is open again
    (its open and read lock were made durable by the lock call); it wrote nothing, so
    the reaper aborting it after the timeout, locks and all, is as good as the commit."""
    ms = _metastore(tmp_path / "a")
    try:
        txn = _read_locked(ms)                   # lock() is durable, the open with it
        image = _image_of(ms, tmp_path / "b")    # the database as of the last fsync
        calls(ms).commit_txn(txn)                  # lazy: lost in the "power cut"
    finally:
        ms.close()

    restarted = _metastore(image, _url_of(image), **{
        "hive.txn.timeout": "1s", "hive.timedout.txn.reaper.start": "100ms",
        "hive.timedout.txn.reaper.interval": "200ms"})
    try:
        assert [lock.txn_id for lock in calls(restarted).show_locks()] == [txn]
        deadline = time.monotonic() + 30
        while calls(restarted).show_locks() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert calls(restarted).show_locks() == []
        aborted = {i.id for i in calls(restarted).get_open_txns_info()[1]
                   if i.state == TxnState.ABORTED}
        assert txn in aborted
    finally:
        restarted.close()


def test_clean_restart_continues_without_a_gap(tmp_path):
    ms = _metastore(tmp_path)
    ids = calls(ms).open_txns(3, "u", "h")
    ms.close()
    again = _metastore(tmp_path)
    try:
        assert calls(again).open_txns(1, "u", "h")[0] == ids[-1] + 1
    finally:
        again.close()


def test_unclean_stop_skips_the_reserved_ids(tmp_path):
    ms = _metastore(tmp_path)
    ids = calls(ms).open_txns(3, "u", "h")
    reserved = _counter_rows(ms)[2]
    ms.store.dispose()                           # no close(): the reservation stays
    again = _metastore(tmp_path)
    try:
        assert calls(again).open_txns(1, "u", "h")[0] == reserved + 1 > ids[-1]
        # The opens before the stop survived it (a process stop loses nothing).
        open_ids = {i.id for i in calls(again).get_open_txns_info()[1]}
        assert set(ids) <= open_ids
    finally:
        again.close()


def test_notification_reads_wait_for_lazy_opens_to_be_durable(tmp_path):
    ms = _metastore(tmp_path)
    try:
        sql = _Statements(ms)
        start = calls(ms).current_event_id()
        sql.take()
        txn = calls(ms).open_txns(1, "u", "h")[0]
        assert ms.store._unsynced
        sql.take()
        events = calls(ms).next_events(start)
        assert [e.event_type for e in events] == ["OPEN_TXN"] and str(txn) in events[0].message
        assert sql.commit_modes() == ["FULL"]
        assert not ms.store._unsynced
        calls(ms).next_events(start)     # nothing lazy since: no extra commit
        assert "COMMIT" not in sql.take()
    finally:
        ms.close()
