"""PostgreSQL's side of the store's transaction discipline (the rest is in
hms_txn.store.engine):

* Lazy commits (PostgreSQL): the transaction starts with ``SET LOCAL synchronous_commit
  = off``: its commit returns before its WAL is flushed (the WAL writer flushes it within
  ``wal_writer_delay``, and any later synchronous commit flushes it along, since WAL is
  one sequence). ``insist_durable(conn)`` sets it back to ``on`` inside the transaction,
  which is what the COMMIT then obeys: no second commit is needed. ``make_durable()``
  compares the WAL's insert and flush positions and, if anything may be unflushed (from
  any server process on the database), makes one synchronous commit. A database server
  that restarts after a crash may have lost lazy commits, which the server processes
  outlived: the first new connection after a restart (``pg_postmaster_start_time`` moved)
  runs ``on_database_restart`` (the id reservation's recovery, hms_txn.domain.txn.txn) before
  any transaction on a new connection proceeds.
* One statement per call: the transaction calls run as functions
  (hms_txn.store.pg_functions), each call one statement in autocommit, so no BEGIN, SET
  LOCAL or COMMIT round trip: ``statement_connection`` gives the connection, and the
  function sets ``synchronous_commit`` for its own implicit transaction (off for a lazy
  call, back on when it finds it must be durable), which is what that transaction's commit
  obeys. A statement in autocommit cannot be retried when its connection dies under it
  (it may have committed), so a connection that the server closed while it was idle in
  the pool (a restart) is found before the statement is sent: its socket has something to
  read (the server's goodbye, or its end), which costs one non-blocking poll instead of a
  ping's round trip.
* Why psycopg 3 (``postgresql+psycopg``, what a ``jdbc:postgresql:`` URL maps to): it
  prepares a statement on the server once a connection has run it five times, so the
  transaction calls' fixed statements are parsed and planned once per connection instead
  of on every call. Measured 2026-11-25 in-process on a PostgreSQL with fsync and
  synchronous_commit on (lazy commits in effect), 300 calls each, 2 shared cores at load
  average 6: open_txns 2.3 ms wall / 1.65 ms CPU per call with psycopg 3 against 4.6 ms /
  1.53 ms with psycopg2; commit_txn 2.8 / 1.96 ms against 4.6 / 1.63 ms (psycopg 3 costs
  ~10% more client CPU and halves the time spent waiting for the server). Its pipeline
  mode (a call's statements sent without waiting for each answer) is not used: SQLAlchemy
  does not drive it, and most of a call's statements use the answer of the one before
  (ids from ``UPDATE ... RETURNING``), so a pipeline would batch little beyond BEGIN and
  ``SET LOCAL``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import select
import threading
import time
from typing import Callable, Iterator, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from hms_txn.store.prepared import run_fixed

log = logging.getLogger(__name__)

T = TypeVar("T")

_LAZY = "SET LOCAL synchronous_commit TO off"
_DURABLE = "SET LOCAL synchronous_commit TO on"
_IS_LAZY = "hms_txn.pg_lazy"        # Connection.info: this transaction is at _LAZY
# Whether WAL written so far may not be flushed yet (by a lazy commit of any process).
_WAL_BEHIND = "SELECT pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()"


def is_lazy(conn: Connection) -> bool:
    """Whether the call on ``conn`` may commit without a flush (its unit of work said so)."""
    return conn.info.get(_IS_LAZY, False)


def one_statement(engine: Engine, restarts: "RestartWatch | None",
                  recover: Callable[[Connection], None] | None, fn: Callable[[Connection], T],
                  lazy: bool, retryable: Callable[[DBAPIError], bool], attempts: int = 8) -> T:
    """``Store.one_statement``: ``fn(conn)`` on a ``statement_connection``, run again on a
    deadlock or serialization failure (the statement then rolled back), never after the
    statement may have committed."""
    for attempt in range(1, attempts + 1):
        try:
            with statement_connection(engine, restarts, recover, lazy) as conn:
                return fn(conn)
        except DBAPIError as err:
            if attempt == attempts or not retryable(err):
                raise
            log.debug("retrying statement after %s (attempt %d)", err.orig, attempt)
            time.sleep(min(0.2, 0.005 * 2 ** attempt) * random.random())
    raise AssertionError("unreachable")


@contextlib.contextmanager
def statement_connection(engine: Engine, restarts: "RestartWatch | None",
                         recover: Callable[[Connection], None] | None,
                         lazy: bool) -> Iterator[Connection]:
    """A pooled connection in autocommit for one statement (see the module docstring),
    alive when handed out, after the restart recovery if the database server restarted."""
    while True:
        conn = engine.connect()
        if not _closed_by_server(conn):
            break
        conn.invalidate()
        conn.close()
    try:
        if restarts is not None:
            restarts.recover_if_restarted(conn, recover)
        # Autocommit on the driver itself: SQLAlchemy's isolation-level option would set and
        # reset it through its execution options at every checkout, which cost more of our
        # CPU than the statement. Nothing here goes through SQLAlchemy's execution (the
        # direct path, hms_txn.store.prepared), so nothing there assumes a transaction.
        driver = conn.connection.driver_connection
        driver.autocommit = True
        conn.info[_IS_LAZY] = lazy
        try:
            yield conn
        finally:
            conn.info.pop(_IS_LAZY, None)
            if not conn.invalidated:
                driver.autocommit = False      # as the pool hands connections out
    finally:
        conn.close()


def _closed_by_server(conn: Connection) -> bool:
    """Whether an idle pooled connection was closed by the server (nothing is sent)."""
    pgconn = conn.connection.driver_connection.pgconn
    readable, _, _ = select.select([pgconn.socket], [], [], 0)
    if not readable:
        return False
    try:
        pgconn.consume_input()       # what arrived: a notice (alive) or the end (closed)
    except Exception:                # psycopg.OperationalError: the server closed it
        return True
    return pgconn.status != 0        # psycopg.pq.ConnStatus.OK


def begin_lazy(conn: Connection) -> None:
    """Inside a just begun transaction: its COMMIT will not wait for the WAL flush."""
    run_fixed(conn, _LAZY)
    conn.info[_IS_LAZY] = True


def end_transaction(conn: Connection) -> None:
    conn.info.pop(_IS_LAZY, None)


def insist_durable(conn: Connection) -> None:
    """The transaction's COMMIT waits for the flush after all (a no-op unless lazy): the
    setting at COMMIT is what counts, so the same commit becomes synchronous."""
    if conn.info.pop(_IS_LAZY, False):
        run_fixed(conn, _DURABLE)


def wal_behind(conn: Connection) -> bool:
    """Whether some WAL written so far may not be flushed yet."""
    return bool(conn.exec_driver_sql(_WAL_BEHIND).scalar())


class RestartWatch:
    """Notices, on each new connection, whether the database server restarted since the
    last one (``pg_postmaster_start_time`` moved): lazy commits may then be lost, and
    ``recover_if_restarted`` runs the recovery once before anything else proceeds."""

    def __init__(self, engine: Engine):
        self._started: object = None
        self.restarted = False
        self._lock = threading.Lock()
        event.listen(engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_conn, _record) -> None:  # pragma: no cover - driver callback
        cur = dbapi_conn.cursor()
        try:
            cur.execute("SELECT pg_postmaster_start_time()")
            started = cur.fetchone()[0]
        finally:
            cur.close()
            dbapi_conn.rollback()
        with self._lock:
            if self._started is not None and started != self._started:
                log.warning("the database server restarted (at %s): recovering what lazy "
                            "commits may have lost", started)
                self.restarted = True
            self._started = started

    def recover_if_restarted(self, conn: Connection,
                             recover: Callable[[Connection], None] | None) -> None:
        """After a restart: ``recover(conn)`` once, in a synchronous transaction of its own
        on ``conn`` (a new connection); every other caller waits for it (the lock), so no
        transaction on a new connection runs before it is done."""
        if not self.restarted:
            return
        with self._lock:
            if not self.restarted:
                return
            if recover is not None:
                with conn.begin():
                    recover(conn)
            self.restarted = False
