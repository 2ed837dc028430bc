"""Lazy open_txns on SQLite: opens commit without an fsync, yet no id is ever reused.

See ``TxnManager`` in hms_txn/txn.py for the argument. These tests check its pieces: which
commits skip the fsync, that the reservation always covers the ids handed out, that after
an emulated power cut (the database as it was at the last fsync) ids handed out since are
skipped and reported as unknown, that a clean restart leaves no gap, and that notification
reads only show what is durable. On PostgreSQL every commit stays durable.
"""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import select

from hms_txn.config import Config
from hms_txn.errors import NoSuchTxn
from hms_txn.metastore import Metastore
from hms_txn.store.schema import next_txn_id
from hms_txn.txn import RESERVE_AHEAD


def _metastore(data_dir, url: str | None = None) -> Metastore:
    raw = {"hive.metastore.warehouse.dir": str(data_dir / "wh")}
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


class _Statements:
    """The SQL the store's writer connection runs (sqlite3's trace hook)."""

    def __init__(self, ms: Metastore):
        ms.txns.open_txns(1, "u", "h")          # the writer connection exists from here on
        self.seen: list[str] = []
        ms.store._writer.connection.driver_connection.set_trace_callback(self.seen.append)

    def take(self) -> list[str]:
        out, self.seen[:] = list(self.seen), []
        return out


def test_open_commits_without_fsync_and_everything_else_with(tmp_path):
    ms = _metastore(tmp_path)
    try:
        assert ms.store.lazy_commits
        sql = _Statements(ms)
        sql.take()
        txn = ms.txns.open_txns(1, "u", "h")[0]
        opened = sql.take()
        assert opened[0] == "PRAGMA synchronous=NORMAL" and opened[-1] == "PRAGMA synchronous=FULL"
        assert "COMMIT" in opened
        ms.txns.commit_txn(txn)
        committed = sql.take()
        assert "COMMIT" in committed
        assert not any(s.startswith("PRAGMA synchronous") for s in committed)
    finally:
        ms.close()


def test_reservation_covers_every_id_handed_out(tmp_path):
    ms = _metastore(tmp_path)
    try:
        extensions = 0
        reserved = 0
        handed_out = 0
        while handed_out < 3 * RESERVE_AHEAD:
            ids = ms.txns.open_txns(37, "u", "h")
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
        first = ms.txns.open_txns(3, "u", "h")
        ms.txns.commit_txn(first[0])             # durable: fsyncs the opens before it too
        image = tmp_path / "b"
        image.mkdir()
        target = sqlite3.connect(image / "metastore.sqlite")
        with sqlite3.connect(_sqlite_path(ms)) as source:
            source.backup(target)                # the database as of the last fsync
        target.close()
        lost = ms.txns.open_txns(2, "u", "h")   # lazy: lost in the "power cut"
        assert lost[0] == first[-1] + 1
    finally:
        ms.close()

    url = f"jdbc:sqlite:{image / 'metastore.sqlite'}"
    restarted = _metastore(image, url)
    try:
        fresh = restarted.txns.open_txns(1, "u", "h")[0]
        assert fresh > lost[-1]
        with pytest.raises(NoSuchTxn):
            restarted.txns.commit_txn(lost[0])
        open_ids = {i.id for i in restarted.txns.get_open_txns_info()[1]}
        assert set(first[1:]) <= open_ids and not open_ids & set(lost)
    finally:
        restarted.close()


def test_clean_restart_continues_without_a_gap(tmp_path):
    ms = _metastore(tmp_path)
    ids = ms.txns.open_txns(3, "u", "h")
    ms.close()
    again = _metastore(tmp_path)
    try:
        assert again.txns.open_txns(1, "u", "h")[0] == ids[-1] + 1
    finally:
        again.close()


def test_unclean_stop_skips_the_reserved_ids(tmp_path):
    ms = _metastore(tmp_path)
    ids = ms.txns.open_txns(3, "u", "h")
    reserved = _counter_rows(ms)[2]
    ms.store.dispose()                           # no close(): the reservation stays
    again = _metastore(tmp_path)
    try:
        assert again.txns.open_txns(1, "u", "h")[0] == reserved + 1 > ids[-1]
        # The opens before the stop survived it (a process stop loses nothing).
        open_ids = {i.id for i in again.txns.get_open_txns_info()[1]}
        assert set(ids) <= open_ids
    finally:
        again.close()


def test_notification_reads_wait_for_lazy_opens_to_be_durable(tmp_path):
    ms = _metastore(tmp_path)
    try:
        sql = _Statements(ms)
        start = ms.notifications.current_event_id()
        sql.take()
        txn = ms.txns.open_txns(1, "u", "h")[0]
        assert ms.store._unsynced
        sql.take()
        events = ms.notifications.next_events(start)
        assert [e.event_type for e in events] == ["OPEN_TXN"] and str(txn) in events[0].message
        durable = sql.take()
        assert "COMMIT" in durable and not any(s.startswith("PRAGMA synchronous") for s in durable)
        assert not ms.store._unsynced
        ms.notifications.next_events(start)     # nothing lazy since: no extra commit
        assert "COMMIT" not in sql.take()
    finally:
        ms.close()


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_commits_every_open_durably(tmp_path, db_overrides):
    ms = _metastore(tmp_path, db_overrides["javax.jdo.option.ConnectionURL"])
    try:
        assert not ms.store.lazy_commits
        ms.txns.open_txns(5, "u", "h")
        assert 2 not in _counter_rows(ms)
    finally:
        ms.close()
