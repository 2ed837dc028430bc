"""Schema versioning and the store's transaction discipline, on both backends."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import bindparam, insert, inspect, select, update

from hms_txn.domain.events.event_messages import LogEntry, WriteNotification
from hms_txn.store import SchemaError, Store, ensure_schema
from hms_txn.store.engine import WriterBusy
from hms_txn.store.schema import SCHEMA_VERSION, metadata, schema_version


@pytest.fixture
def store(backend, request, tmp_path):
    if backend == "postgres":
        url = request.getfixturevalue("postgres").create_database()
    else:
        url = f"sqlite:///{tmp_path}/store.sqlite"
    s = Store(url)
    yield s
    s.dispose()


def _create_version(store: Store, version: int) -> None:
    """Lay down the schema as a release at ``version`` had it."""
    with store.write() as conn:
        tables = [t for t in metadata.sorted_tables if t.info["since"] <= version]
        metadata.create_all(conn, tables=tables)
        conn.execute(insert(schema_version).values(id=1, version=version))


def test_fresh_database_gets_current_schema(store):
    assert ensure_schema(store) == 0
    with store.read() as conn:
        assert conn.execute(select(schema_version.c.version)).scalar_one() == SCHEMA_VERSION
    assert ensure_schema(store) == SCHEMA_VERSION  # idempotent


def test_older_schema_is_upgraded(store):
    _create_version(store, 1)
    with store.read() as conn:
        assert not inspect(conn).has_table("notification_log")
    assert ensure_schema(store) == 1
    with store.read() as conn:
        assert inspect(conn).has_table("notification_log")
        assert conn.execute(select(schema_version.c.version)).scalar_one() == SCHEMA_VERSION


def test_version_2_is_upgraded_to_3_keeping_its_data(store):
    """Version 3 adds the delegation token tables; rows of version 2 tables stay."""
    from hms_txn.store.schema import next_txn_id
    _create_version(store, 2)
    with store.write() as conn:
        conn.execute(insert(next_txn_id).values(id=1, next_id=42))
        assert not inspect(conn).has_table("delegation_tokens")
    assert ensure_schema(store) == 2
    with store.read() as conn:
        assert inspect(conn).has_table("delegation_tokens")
        assert inspect(conn).has_table("next_delegation_token_id")
        assert conn.execute(select(next_txn_id.c.next_id)).scalar_one() == 42
        assert conn.execute(select(schema_version.c.version)).scalar_one() == SCHEMA_VERSION


def _version_3_notification_log(store: Store) -> None:
    """Replace the notification log with the shape it had before version 4: a BIGINT key
    (on SQLite an index beside the table) and an index on event_time."""
    from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text
    old = MetaData()
    log = Table("notification_log", old,
                Column("event_id", BigInteger, primary_key=True, autoincrement=False),
                Column("event_time", Integer, nullable=False),
                Column("event_type", String(64), nullable=False),
                Column("cat_name", String(128)), Column("db_name", String(128)),
                Column("tbl_name", String(128)), Column("message", Text, nullable=False),
                Column("message_format", String(32)))
    Index("ix_notification_log_time", log.c.event_time)
    with store.write() as conn:
        conn.exec_driver_sql("DROP TABLE notification_log")
        old.create_all(conn)


def test_version_3_is_upgraded_to_4_keeping_every_event(store):
    """Version 4 drops the event_time index and, on SQLite, makes the event id the rowid;
    the events, their ids and the id counter come through unchanged."""
    from hms_txn.domain.events.notifications import append, next_events
    from hms_txn.store.schema import notification_sequence
    _create_version(store, 3)
    _version_3_notification_log(store)
    with store.write() as conn:
        conn.execute(insert(notification_sequence).values(id=1, next_event_id=1))
        append(conn, "json-0.2", *(LogEntry("OPEN_TXN", {"txnIds": [i]}, None, None, None)
                                   for i in range(300)))
        append(conn, "json-0.2", LogEntry("CREATE_TABLE", {"t": "x"}, "db", "x", "hive"))
        before = next_events(conn, 0, 1000)
    assert ensure_schema(store) == 3
    with store.write() as conn:
        assert next_events(conn, 0, 1000) == before
        assert "ix_notification_log_time" not in {
            ix["name"] for ix in inspect(conn).get_indexes("notification_log")}
        if store.is_sqlite:
            key = [c for c in conn.exec_driver_sql("PRAGMA table_info(notification_log)")
                   if c.pk]
            assert [(c.name, c.type) for c in key] == [("event_id", "INTEGER")]
            assert not inspect(conn).has_table("notification_log_v3")
        assert append(conn, "json-0.2", LogEntry("DROP_TABLE", {}, "db", "x", "hive")) == \
            [before[-1].event_id + 1]
        assert conn.execute(select(schema_version.c.version)).scalar_one() == SCHEMA_VERSION
    assert ensure_schema(store) == SCHEMA_VERSION


def test_older_schema_refused_without_auto_upgrade(store):
    _create_version(store, 1)
    with pytest.raises(SchemaError, match="upgrade-schema"):
        ensure_schema(store, auto_upgrade=False)


def test_newer_schema_is_refused(store):
    ensure_schema(store)
    with store.write() as conn:
        conn.execute(update(schema_version).values(version=SCHEMA_VERSION + 1))
    with pytest.raises(SchemaError, match="newer"):
        ensure_schema(store)


def test_write_transactions_serialize(store):
    """Concurrent read-modify-write transactions never lose an update."""
    ensure_schema(store)
    from hms_txn.store.schema import notification_sequence
    with store.write() as conn:
        conn.execute(insert(notification_sequence).values(id=1, next_event_id=0))

    def bump(conn):
        value = conn.execute(select(notification_sequence.c.next_event_id)
                             .where(notification_sequence.c.id == 1).with_for_update()).scalar_one()
        conn.execute(update(notification_sequence).values(next_event_id=value + 1))

    def worker():
        for _ in range(25):
            store.transaction(bump)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    with store.read() as conn:
        assert conn.execute(select(notification_sequence.c.next_event_id)).scalar_one() == 200


def test_prepared_statements_match_conn_execute(store):
    """A Prepared statement returns what conn.execute returns (SQLite takes the driver path)."""
    from sqlalchemy.exc import IntegrityError

    from hms_txn.store.prepared import Prepared
    from hms_txn.store.schema import txns
    ensure_schema(store)
    row = {"txn_id": 7, "state": "o", "txn_type": 0, "started_ms": 1, "last_heartbeat_ms": 1,
           "heartbeat_count": 0, "user_name": "u", "host": "h", "agent_info": None}
    ins = Prepared(insert(txns))
    sel = Prepared(select(txns.c.txn_id, txns.c.state, txns.c.agent_info)
                   .where(txns.c.txn_id >= bindparam("p_min")).order_by(txns.c.txn_id))
    bump = Prepared(update(txns).where(txns.c.txn_id == bindparam("p_txn"))
                    .where(txns.c.state == "o")
                    .values(heartbeat_count=txns.c.heartbeat_count + 1).returning(txns.c.txn_type))
    with store.write() as conn:
        ins.execute(conn, row)
        ins.execute(conn, [dict(row, txn_id=8), dict(row, txn_id=9, agent_info="a")])
        rows = sel.execute(conn, {"p_min": 8}).all()
        assert rows == conn.execute(sel.stmt, {"p_min": 8}).all()
        assert [(r.txn_id, r.agent_info) for r in rows] == [(8, None), (9, "a")]
        assert [tuple(r) for r in sel.rows(conn, {"p_min": 8})] == [tuple(r) for r in rows]
        assert bump.execute(conn, {"p_txn": 9}).scalar() == 0
        assert bump.execute(conn, {"p_txn": 99}).first() is None
        assert sel.execute(conn, {"p_min": 100}).scalar() is None
    # A driver error surfaces as SQLAlchemy's exception, like conn.execute raises it.
    with pytest.raises(IntegrityError):
        with store.write() as conn:
            ins.execute(conn, row)
    # A row that leaves out a column with a Python-side default, and a statement run
    # outside a transaction, go through conn.execute.
    partial = {k: v for k, v in row.items() if k not in ("txn_type", "heartbeat_count")}
    with store.write() as conn:
        ins.execute(conn, dict(partial, txn_id=10))
    with store.engine.connect() as conn:
        assert sel.execute(conn, {"p_min": 10}).one().txn_id == 10
        conn.rollback()


@pytest.mark.parametrize("sqlite_json", [True, False])
def test_list_query_finds_the_rows_of_the_listed_values(store, sqlite_json, monkeypatch):
    """``ListQuery`` binds any number of values as one value per list (a JSON array on
    SQLite, an array on PostgreSQL), for integer and string lists alike; a SQLite without
    JSON functions gets an expanding IN instead."""
    from sqlalchemy import BigInteger, String
    from hms_txn.store import sql
    from hms_txn.store.schema import txns
    monkeypatch.setattr(sql, "sqlite_has_json", lambda: sqlite_json)
    ensure_schema(store)
    query = sql.ListQuery(
        lambda in_list: select(txns.c.txn_id).where(in_list(txns.c.txn_id, "p_ids"))
        .where(in_list(txns.c.user_name, "p_users"))
        .where(txns.c.state == bindparam("p_state")).order_by(txns.c.txn_id),
        {"p_ids": BigInteger, "p_users": String})
    base = {"txn_type": 0, "started_ms": 1, "last_heartbeat_ms": 1, "heartbeat_count": 0,
            "host": "h", "agent_info": None}
    with store.write() as conn:
        conn.execute(insert(txns), [dict(base, txn_id=i, state="o" if i % 3 else "a",
                                         user_name=f"u{i % 4}") for i in range(1, 2001)])
    wanted = list(range(1, 2001, 2)) + [5000, 6000]       # 1,000 present, 2 absent
    with store.read() as conn:
        ids = query.bind(conn, wanted)
        users = query.bind(conn, ["u1", "u3", "nobody"])   # every odd id's user
        assert [r.txn_id for r in query.execute(conn, {"p_state": "o", "p_ids": ids,
                                                       "p_users": users})] == \
            [i for i in range(1, 2001, 2) if i % 3]
        assert [r.txn_id for r in query.execute(conn, {"p_state": "a", "p_ids": ids,
                                                       "p_users": users})] == \
            [i for i in range(1, 2001, 2) if i % 3 == 0]
        assert [r.txn_id for r in query.execute(conn, {
            "p_state": "o", "p_ids": ids, "p_users": query.bind(conn, ["u1"])})] == \
            [i for i in range(1, 2001, 4) if i % 3]
        assert query.execute(conn, {"p_state": "o", "p_ids": query.bind(conn, []),
                                    "p_users": users}).all() == []


def _set_version(v):
    """A store transaction that sets the schema version row to ``v`` (and returns it)."""
    def work(conn):
        conn.execute(update(schema_version).values(version=v))
        return v
    return work


def _read_version(store: Store) -> int:
    with store.read() as conn:
        return conn.execute(select(schema_version.c.version)).scalar_one()


def test_batch_runs_each_call_in_its_own_savepoint_and_commits_at_the_end(tmp_path):
    """Store.batch (SQLite, the server's transaction loop): a failing call undoes only
    itself; nothing is visible to readers before the block exits; a write another thread
    queues meanwhile joins the batch and returns once it is committed."""
    store = Store(f"sqlite:///{tmp_path}/batch.sqlite")
    ensure_schema(store)

    def failing(conn):
        conn.execute(update(schema_version).values(version=-1))
        raise ValueError("refused")

    other: dict = {}
    try:
        with store.batch():
            assert store.transaction(_set_version(100)) == 100
            with pytest.raises(ValueError):
                store.transaction(failing)
            assert _read_version(store) == SCHEMA_VERSION      # nothing committed yet
            th = threading.Thread(target=lambda: other.setdefault(
                "result", store.transaction(lambda conn: conn.execute(
                    select(schema_version.c.version)).scalar_one())))
            th.start()
            deadline = time.monotonic() + 30
            while not store._pending and time.monotonic() < deadline:
                time.sleep(0.01)
            assert store._pending, "the other thread's call did not queue"
            assert "result" not in other              # it waits for the batch's COMMIT
        th.join(30)
        assert other["result"] == 100                 # ran inside the batch, after ours
        assert _read_version(store) == 100
    finally:
        store.dispose()


def test_batch_whose_savepoint_cannot_be_closed_does_not_commit(tmp_path):
    """If a call's savepoint cannot be released or rolled back, what the transaction holds
    is unknown: the batch raises instead of committing, and none of it happened."""
    from sqlite3 import OperationalError
    store = Store(f"sqlite:///{tmp_path}/broken.sqlite")
    ensure_schema(store)

    def releases_our_savepoint(conn):
        conn.connection.driver_connection.execute("RELEASE hms_call")
        conn.execute(update(schema_version).values(version=300))

    try:
        with pytest.raises(OperationalError, match="no such savepoint"):
            with store.batch():
                store.transaction(_set_version(200))
                with pytest.raises(OperationalError, match="no such savepoint"):
                    store.transaction(releases_our_savepoint)
        assert _read_version(store) == SCHEMA_VERSION
        store.transaction(_set_version(201))     # the store goes on working
        assert _read_version(store) == 201
    finally:
        store.dispose()


def test_batch_runs_its_first_transaction_without_a_savepoint(tmp_path):
    """Store.batch: the first transaction runs without a SAVEPOINT, as nothing precedes
    it in the database transaction; when it fails, a ROLLBACK and a new BEGIN undo exactly
    what it did, the error reaches the caller, and what runs next in the batch (in
    savepoints) still commits. The same holds for a group of queued calls."""
    store = Store(f"sqlite:///{tmp_path}/first.sqlite")
    ensure_schema(store)
    store.transaction(_set_version(600))
    seen: list[str] = []

    def failing(conn):
        conn.execute(update(schema_version).values(version=-1))
        raise ValueError("refused")

    try:
        store._writer.connection.driver_connection.set_trace_callback(seen.append)
        with store.batch():
            with pytest.raises(ValueError):
                store.transaction(failing)
            assert seen[1:] == ["UPDATE hms_schema_version SET version=-1", "ROLLBACK",
                                "BEGIN IMMEDIATE"]
            assert store.transaction(_set_version(601)) == 601    # in a savepoint again
        assert "SAVEPOINT hms_call" in seen and seen[-1] == "COMMIT"
        assert _read_version(store) == 601

        seen.clear()
        with store.batch():
            assert store.transaction(_set_version(602)) == 602
        assert not any("SAVEPOINT" in s or "RELEASE" in s for s in seen)
        assert _read_version(store) == 602

        seen.clear()
        with store.batch():
            with pytest.raises(ValueError):
                store.transaction(failing)
        assert seen[-1] == "COMMIT" and _read_version(store) == 602   # nothing of it left

        seen.clear()
        with pytest.raises(ValueError):             # a queued call, alone in its group
            store.transaction(failing)
        assert "ROLLBACK" in seen and not any("SAVEPOINT" in s for s in seen)
        assert store.transaction(_set_version(603)) == 603
        assert _read_version(store) == 603
    finally:
        store.dispose()


def test_batch_that_must_not_wait_raises_writer_busy_and_runs_nothing(tmp_path):
    """Store.batch(wait=False) while another thread holds the writer: WriterBusy on entry,
    before its block runs; once the writer is free, the same batch runs and commits."""
    store = Store(f"sqlite:///{tmp_path}/busy.sqlite")
    ensure_schema(store)
    writing, release = threading.Event(), threading.Event()

    def long_write():
        with store.write() as conn:
            conn.execute(update(schema_version).values(version=400))
            writing.set()
            release.wait(30)

    th = threading.Thread(target=long_write)
    th.start()
    ran = []
    try:
        assert writing.wait(30)
        with pytest.raises(WriterBusy):
            with store.batch(wait=False):
                ran.append(store.transaction(_set_version(500)))
        assert ran == []
        release.set()
        th.join(30)
        with store.batch(wait=False):
            ran.append(store.transaction(_set_version(501)))
        assert ran == [501] and _read_version(store) == 501
    finally:
        release.set()
        th.join(30)
        store.dispose()


def test_purge_walks_the_log_in_id_order_and_never_takes_a_recent_event(store):
    """Purging by time without an event_time index: events before the first recent one
    (in id order) go; a recent event is never deleted, also when an older time follows it
    (a clock stepped back); a log of old events only is emptied. ACID write notifications
    older than the time to live go with them."""
    from hms_txn.domain.events.notifications import (add_write_notification, append, next_events,
                                                     purge_older_than, write_notifications)
    from hms_txn.store.schema import notification_log, notification_sequence
    ensure_schema(store)
    now = int(time.time())
    ages = [7200, 7000, 10, 5000, 0]       # seconds; the TTL below is one hour
    with store.write() as conn:
        conn.execute(insert(notification_sequence).values(id=1, next_event_id=1))
        ids = append(conn, "json-0.2", *(LogEntry("OPEN_TXN", {"i": i}, None, None, None)
                                         for i in range(len(ages))))
        for event_id, age in zip(ids, ages):
            conn.execute(update(notification_log).where(notification_log.c.event_id == event_id)
                         .values(event_time=now - age))
        for txn_id, age in ((1, 7200), (2, 10)):
            add_write_notification(conn, WriteNotification(txn_id, 1, "db", "t", "", "{}", None,
                                                           "f###", now - age))
    assert store.transaction(lambda conn: purge_older_than(conn, 3600)) == 2
    with store.read() as conn:
        assert [e.event_id for e in next_events(conn, 0, 100)] == ids[2:]
        assert [len(write_notifications(conn, t)) for t in (1, 2)] == [0, 1]
    with store.write() as conn:
        conn.execute(update(notification_log).values(event_time=now - 7200))
    assert store.transaction(lambda conn: purge_older_than(conn, 3600)) == 3
    with store.read() as conn:
        assert next_events(conn, 0, 100) == []
