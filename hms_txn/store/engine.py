"""Database engine set-up and transaction helpers.

SQLite (the embedded default) and PostgreSQL go through the same code; the differences
live here:

* SQLite runs in WAL mode with ``synchronous=FULL`` so a committed call survives a crash
  or ``kill -9``. Write transactions start with ``BEGIN IMMEDIATE`` (taking the write lock
  up front instead of failing on a lock upgrade later) and are serialized inside the
  process by a mutex, so threads queue instead of spinning on SQLITE_BUSY.
* Group commit (SQLite): the fsync at COMMIT dominates a small transaction, and SQLite
  allows one writer at a time anyway, so ``Store.transaction`` calls that arrive while
  another is committing are run together, by whichever thread takes the writer mutex next,
  in one database transaction, each inside its own SAVEPOINT (but the first, which
  nothing precedes: ROLLBACK and a new BEGIN undo it). A call that fails rolls back only
  what it did; every call returns only after the shared COMMIT is durable, so the
  contract of a single transaction per call is unchanged while many clients share an
  fsync.
* SQLite writes all go through one connection, kept open and used only under the writer
  mutex, instead of a pool checkout (and reset) per transaction.
* Batches (SQLite): the server's transaction loop (``hms_txn.server_loop``) runs every
  call that is ready at once in one database transaction from one thread: ``Store.batch``
  opens it, each ``Store.transaction`` that thread makes inside runs in its own SAVEPOINT,
  and the calls other threads queued meanwhile join it before the COMMIT. Nothing in a
  batch is committed before the block exits, so the loop sends its answers only then.
* Lazy commits (SQLite): a call may ask for ``durable=False`` when losing it in a power cut
  (not a process crash) is harmless and it has made sure of that itself: ``open_txns``
  does, see ``hms_txn.txn``. Such a transaction commits with ``synchronous=NORMAL``: its
  WAL frames reach the operating system (so it survives ``kill -9``) but are not fsynced;
  the next durable commit fsyncs the WAL, and with it every lazy commit before it. The
  writer connection keeps the setting of its last commit and switches only when the next
  commit wants the other one, so a run of lazy calls (open_txns and commit_txn of a
  client's read-only queries, one after the other) pays for no switch at all.
  ``make_durable()`` forces that point for readers that must never see state a power cut
  could take back (the notification log as served to clients). A call that only learns
  from the database whether it may be lazy (``commit_txn``: did the transaction write
  anything?) asks for ``durable=False`` and calls ``insist_durable(conn)`` when it may
  not: its answer then waits for a durable commit after the lazy one (SQLite cannot
  change ``synchronous`` inside a transaction). That commit, and ``make_durable``'s,
  changes a counter (``_touch``): SQLite fsyncs at COMMIT only when there is a page to
  write (tests/hms_txn/test_fsync_syscalls.py watches the fdatasync calls).
* PostgreSQL runs at READ COMMITTED; code that must serialize (id counters, lock
  granting) takes row locks with ``SELECT ... FOR UPDATE``. Serialization failures and
  deadlocks are retried by ``Store.transaction``, and so is a call whose connection turned
  out to be dead before it committed anything (the database server restarted): the pool
  then drops every connection it had, so the retry runs on a new one. There is no
  checkout ping (it cost a round trip per call). No process-wide lock is held across a
  commit: concurrent commits overlap and PostgreSQL flushes them with shared WAL writes.
* Lazy commits on PostgreSQL, what a server process does when the database server
  restarts under it, and why psycopg 3: hms_txn.store.postgres.
* PostgreSQL's transaction calls are one statement each (``one_statement``, ``functions``:
  hms_txn.store.txn_functions and pg_functions); SQLite runs their Python path.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from typing import Callable, Iterator, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from hms_txn.store import postgres
from hms_txn.store.prepared import run_fixed
from hms_txn.store.txn_functions import TxnFunctions

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRYABLE_PG_CODES = {"40001", "40P01"}  # serialization_failure, deadlock_detected


class WriterBusy(Exception):
    """``Store.batch(wait=False)``: another thread is writing; nothing was run."""


class Store:
    """An SQLAlchemy engine plus the transaction discipline the domain modules rely on."""

    def __init__(self, url: str, *, pool_size: int = 10, echo: bool = False,
                 sqlite_synchronous: str = "FULL", group_commit: bool = True):
        self.url = url
        self.engine: Engine = _make_engine(url, pool_size=pool_size, echo=echo,
                                           synchronous=sqlite_synchronous)
        self.dialect = self.engine.dialect.name
        self.is_sqlite = self.dialect == "sqlite"
        # In-process writer queue for SQLite; a no-op for client/server databases.
        self._write_mutex = threading.Lock() if self.is_sqlite else contextlib.nullcontext()
        self.group_commit = group_commit and self.is_sqlite
        self._pending: list[_PendingCall] = []
        self._pending_lock = threading.Lock()
        self._writer: Connection | None = None   # SQLite: used only under _write_mutex
        # Lazy commits only make sense when commits are otherwise fsynced (PostgreSQL:
        # whatever the server's synchronous_commit, a lazy commit is never less durable).
        self.lazy_commits = ((self.is_sqlite and sqlite_synchronous.upper() == "FULL")
                             or self.dialect == "postgresql")
        self._unsynced = False     # a lazy commit happened since the last durable one
        # Whether the writer connection is at synchronous=NORMAL (see _commit_mode).
        self._writer_lazy = False
        self._batch: _Batch | None = None   # the open batch (under _write_mutex)
        # PostgreSQL: what runs after the database server restarted, before any transaction
        # on a new connection (see the module docstring); set by the serving process.
        self.on_database_restart: Callable[[Connection], None] | None = None
        self._restarts = postgres.RestartWatch(self.engine) if self.dialect == "postgresql" else None
        # The transaction calls' one-statement form, where this store has it (PostgreSQL on
        # psycopg 3: hms_txn.store.txn_functions); None: their Python path.
        self.functions: TxnFunctions | None = (
            TxnFunctions() if self.dialect == "postgresql"
            and self.engine.dialect.driver == "psycopg" else None)

    @contextlib.contextmanager
    def write(self, lazy: bool = False) -> Iterator[Connection]:
        """A read-write transaction; commits on success, rolls back on error. ``lazy``: a
        lazy commit (SQLite; see the module docstring)."""
        with self._write_mutex:
            if self.is_sqlite:
                conn = self._writer_connection()
                self._commit_mode(conn, lazy)
                with conn.begin():
                    yield conn
                return
            with self.engine.connect() as conn:
                if self._restarts is not None:
                    self._restarts.recover_if_restarted(conn, self.on_database_restart)
                with conn.begin():
                    if lazy:
                        postgres.begin_lazy(conn)
                    try:
                        yield conn
                    finally:
                        postgres.end_transaction(conn)

    @staticmethod
    def insist_durable(conn: Connection) -> None:
        """Inside ``transaction(fn, durable=False)``: this call must be durable after all
        (a no-op where every commit is)."""
        if conn.dialect.name == "postgresql":
            postgres.insist_durable(conn)
            return
        conn.info[_INSIST_DURABLE] = True

    @staticmethod
    def _insisted(conn: Connection) -> bool:
        """Whether the call just run asked for durability, forgetting it."""
        return conn.info.pop(_INSIST_DURABLE, False)

    def _touch_durably(self, conn: Connection) -> None:
        """A durable commit on the writer connection (caller holds the writer mutex, no
        transaction open): fsyncs the WAL, and with it every lazy commit before it."""
        self._commit_mode(conn, False)
        with conn.begin():
            _touch(conn)
        self._unsynced = False

    def _writer_connection(self) -> Connection:
        """SQLite's write connection (caller holds the writer mutex)."""
        conn = self._writer
        if conn is None or conn.closed or conn.invalidated:
            if conn is not None:
                conn.close()
            conn = self._writer = self.engine.connect().execution_options(
                hms_begin="BEGIN IMMEDIATE")
            self._writer_lazy = False    # a new connection starts with the configured setting
        return conn

    @contextlib.contextmanager
    def read(self, snapshot: bool = True) -> Iterator[Connection]:
        """A read-only transaction: one consistent snapshot on SQLite (WAL) and PostgreSQL.
        ``snapshot=False`` (PostgreSQL): each statement is its own transaction (autocommit:
        no BEGIN or COMMIT is sent), for reads whose statements are each consistent alone."""
        with self.engine.connect() as conn:
            if not self.is_sqlite:
                conn = conn.execution_options(
                    isolation_level="REPEATABLE READ" if snapshot else "AUTOCOMMIT")
            with conn.begin():
                yield conn

    def read_call(self, fn: Callable[[Connection], T], *, snapshot: bool = True) -> T:
        """``fn(conn)`` in ``read(snapshot)``, run again once if the connection was dead
        (the database server restarted; the pool has then dropped every old connection)."""
        try:
            with self.read(snapshot) as conn:
                return fn(conn)
        except DBAPIError as err:
            if self.is_sqlite or not err.connection_invalidated:
                raise
        with self.read(snapshot) as conn:
            return fn(conn)

    def transaction(self, fn: Callable[[Connection], T], *, attempts: int = 8,
                    durable: bool = True) -> T:
        """Run ``fn(conn)`` in a write transaction, retrying on deadlock/serialization errors.

        ``durable=False`` allows a lazy commit (see the module docstring); it is ignored
        where commits are not fsynced anyway or the database is not SQLite.
        """
        lazy = not durable and self.lazy_commits
        batch = self._batch
        if batch is not None and batch.owner == threading.get_ident():
            return batch.run(fn, lazy)
        for attempt in range(1, attempts + 1):
            try:
                if self.group_commit:
                    return self._grouped(fn, lazy)
                insisted = ran = False
                with self.write(lazy) as conn:
                    self._insisted(conn)
                    result = fn(conn)
                    ran = True
                    insisted = lazy and self._insisted(conn)
                if insisted:
                    self.transaction(_touch)
                return result
            except DBAPIError as err:
                # A dead connection is retried only if it died before the COMMIT was sent.
                dead = err.connection_invalidated and not ran and not self.is_sqlite
                if attempt == attempts or not (dead or self._retryable(err)):
                    raise
                log.debug("retrying transaction after %s (attempt %d)", err.orig, attempt)
                time.sleep(min(0.2, 0.005 * 2 ** attempt) * random.random())
        raise AssertionError("unreachable")

    def one_statement(self, fn: Callable[[Connection], T], *, lazy: bool = False) -> T:
        """PostgreSQL: ``fn(conn)`` sends one statement (a call of hms_txn.store.
        txn_functions), in autocommit: the statement is the transaction; ``lazy``: it may
        commit without a flush. Retried as ``transaction`` retries (hms_txn.store.postgres)."""
        return postgres.one_statement(self.engine, self._restarts, self.on_database_restart,
                                      fn, lazy and self.lazy_commits, self._retryable)

    @contextlib.contextmanager
    def batch(self, lazy: bool = False, wait: bool = True) -> Iterator[None]:
        """One SQLite transaction for every ``transaction()`` this thread makes inside the
        block (each in a SAVEPOINT but the first: a failing one undoes only itself),
        joined by the calls other threads queue meanwhile. Commits on exit, durably unless
        ``lazy`` and every call inside allowed a lazy commit; raises if the COMMIT fails,
        and then none of it happened. Until the block has exited nothing in it is
        committed: callers hold their answers until then. ``wait=False``: raise
        ``WriterBusy`` on entry, before the block runs, instead of waiting while another
        thread holds the writer."""
        if not self.is_sqlite:
            raise RuntimeError("Store.batch is for SQLite")
        lazy = lazy and self.lazy_commits
        joined: list[_PendingCall] = []
        if not self._write_mutex.acquire(blocking=wait):
            raise WriterBusy()
        try:
            conn = self._writer_connection()
            batch = _Batch(threading.get_ident(), conn)
            try:
                self._commit_mode(conn, lazy)
                with conn.begin():
                    self._batch = batch
                    try:
                        yield
                    finally:
                        self._batch = None
                    # Writers of other threads that queued while we held the writer: in
                    # this COMMIT too, rather than waiting for the next one.
                    if batch.broken is None:
                        with self._pending_lock:
                            joined, self._pending = self._pending, []
                        batch.run_calls(joined)
                    if batch.broken is not None:
                        raise batch.broken
                if lazy and batch.durable:
                    self._touch_durably(conn)   # a call inside needed its commit fsynced
            except BaseException as err:
                _fail(joined, err)
                self._finish(joined)
                raise
        finally:
            self._write_mutex.release()
        self._finish(joined)
        self._hand_over()

    def make_durable(self) -> None:
        """Return once every commit so far is fsynced (after lazy commits: one durable
        commit, which fsyncs the WAL up to its end). PostgreSQL: whichever server process
        made them, once the WAL is flushed as far as it was written when this was called."""
        if self.dialect == "postgresql":
            if self.read_call(postgres.wal_behind):
                self.transaction(_touch)
            return
        if not self._unsynced:
            return
        # Cleared first: a lazy commit racing with ours sets it again (at worst one
        # needless fsync later), and ours covers every lazy commit before it.
        self._unsynced = False
        try:
            self.transaction(_touch)
        except BaseException:
            self._unsynced = True
            raise

    def _commit_mode(self, conn: Connection, lazy: bool) -> None:
        """Make the next COMMIT on the writer connection lazy or durable (caller holds the
        writer mutex, no transaction open: SQLite only allows the switch outside one).
        Callers pass ``lazy`` only where ``lazy_commits`` holds. The setting stays until a
        commit wants the other: every durable commit comes through here (or through a
        fresh connection, which starts at the configured FULL), so none runs at NORMAL."""
        if lazy:
            self._unsynced = True    # before the commit: make_durable must not miss it
        if lazy == self._writer_lazy:
            return
        conn.connection.driver_connection.execute(
            "PRAGMA synchronous=NORMAL" if lazy else "PRAGMA synchronous=FULL")
        self._writer_lazy = lazy

    def _grouped(self, fn: Callable[[Connection], T], lazy: bool = False) -> T:
        call = _PendingCall(fn, lazy)
        with self._pending_lock:
            self._pending.append(call)
        while not call.done:
            if self._write_mutex.acquire(blocking=False):
                try:
                    # We lead: run every call queued so far, ours included, under one COMMIT.
                    with self._pending_lock:
                        batch, self._pending = self._pending, []
                    if batch:
                        self._run_batch(batch)
                finally:
                    self._write_mutex.release()
                self._hand_over()
            elif call.wake is None:
                # Only a call that has to wait needs a wake-up lock (most calls of a lone
                # client never do). Having made it, look at the mutex once more before
                # sleeping: a leader that finished meanwhile saw no lock to release.
                wake = threading.Lock()
                wake.acquire()
                call.wake = wake
            else:
                # Another thread leads. Its batch may include our call (then we return as
                # soon as it is durable, without queueing for the mutex), or it hands us
                # leadership when it is done; the timeout only covers a lost wake-up.
                call.wake.acquire(timeout=0.05)
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    def _run_batch(self, batch: list["_PendingCall"]) -> None:
        try:
            conn = self._writer_connection()
            # One durable call makes the whole batch durable (one fsync covers the WAL).
            lazy = all(call.lazy for call in batch)
            self._commit_mode(conn, lazy)
            with conn.begin():
                group = _Batch(threading.get_ident(), conn)
                group.run_calls(batch)
                if group.broken is not None:
                    raise group.broken
                insisted = group.durable
            if lazy and insisted:
                self._touch_durably(conn)
        except BaseException as err:  # BEGIN or COMMIT failed: no call of the batch happened
            _fail(batch, err)
        finally:
            self._finish(batch)

    @staticmethod
    def _finish(calls: list["_PendingCall"]) -> None:
        for call in calls:
            call.done = True       # before looking at wake: see _grouped
            if call.wake is not None:
                _signal(call.wake)

    def _hand_over(self) -> None:
        """After releasing the writer: wake a queued caller to lead the next group."""
        with self._pending_lock:
            waiting = self._pending[0] if self._pending else None
        if waiting is not None and waiting.wake is not None:
            _signal(waiting.wake)

    def _retryable(self, err: DBAPIError) -> bool:
        if self.is_sqlite:
            return isinstance(err, OperationalError) and "locked" in str(err.orig).lower()
        code = getattr(err.orig, "pgcode", None) or getattr(err.orig, "sqlstate", None)
        return code in _RETRYABLE_PG_CODES

    def dispose(self) -> None:
        with self._write_mutex:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        self.engine.dispose()


def _signal(wake: threading.Lock) -> None:
    """Wake the call waiting on ``wake``. A plain lock used as a binary semaphore (held
    while there is nothing to say) costs a fraction of a ``threading.Event``, whose
    Python-level Condition took a quarter of the server's Python time with 16 clients."""
    try:
        wake.release()
    except RuntimeError:   # already signalled and not yet consumed
        pass


# Connection.info key: the call running on this connection must commit durably.
_INSIST_DURABLE = "hms_txn.insist_durable"


def _touch(conn: Connection) -> None:
    """The write of a durable commit that has nothing else to write: one more on the
    durability marker's counter. It must change a value: SQLite writes no page for an
    UPDATE that leaves its row as it was, and a COMMIT with no page to write fsyncs
    nothing, which would leave the lazy commits before it unsynced."""
    run_fixed(conn, _BUMP_MARKER)


# An upsert: the first touch a database ever has makes the row.
_BUMP_MARKER = ("INSERT INTO hms_durability_marker (id, n) VALUES (1, 1) "
                "ON CONFLICT (id) DO UPDATE SET n = hms_durability_marker.n + 1")


class _Batch:
    """An open ``Store.batch`` (or a group of queued calls): its thread, connection,
    whether a call in it needs a durable commit, whether it must not commit, and whether
    nothing has run in its database transaction yet."""
    __slots__ = ("owner", "conn", "driver", "durable", "broken", "bare")

    def __init__(self, owner: int, conn: Connection):
        self.owner = owner
        self.conn = conn
        self.driver = conn.connection.driver_connection
        self.durable = False
        self.broken: BaseException | None = None
        # The first call needs no savepoint: nothing precedes it in the database
        # transaction, so ROLLBACK and a new BEGIN undo exactly what it did. That costs
        # nothing unless it fails, where a SAVEPOINT and its RELEASE cost two statements
        # every time, and most batches with one client hold one call (a sixth of a lone
        # open_txns' statements).
        self.bare = True

    def run(self, fn: Callable[[Connection], T], lazy: bool) -> T:
        bare, self.bare = self.bare, False
        # SAVEPOINTs on the driver connection: SQLAlchemy's begin_nested() costs several
        # times more and tracks nothing we need.
        if not bare:
            self.driver.execute("SAVEPOINT hms_call")
        Store._insisted(self.conn)
        try:
            result = fn(self.conn)
        except BaseException:
            # Rolled back: whatever it insisted on no longer needs an fsync.
            Store._insisted(self.conn)
            if bare:
                self._restart()
            else:
                self._end("ROLLBACK TO hms_call", "RELEASE hms_call")
            raise
        if not bare:
            self._end("RELEASE hms_call")
        if Store._insisted(self.conn) or not lazy:
            self.durable = True
        return result

    def _restart(self) -> None:
        """Undo everything in the database transaction and begin it again, behind
        SQLAlchemy's back (its transaction goes on and commits the new one)."""
        try:
            if self.driver.in_transaction:
                self.driver.execute("ROLLBACK")
            self.driver.execute("BEGIN IMMEDIATE")
        except BaseException as err:
            self.broken = err
            raise

    def _end(self, *statements: str) -> None:
        try:
            for sql in statements:
                self.driver.execute(sql)
        except BaseException as err:
            # The savepoint could not be closed: what the transaction now holds is
            # unknown, so it must not commit (Store.batch and _run_batch check this).
            self.broken = err
            raise

    def run_calls(self, calls: list["_PendingCall"]) -> None:
        """Run queued calls, each in its own savepoint, keeping each one's result or error."""
        for call in calls:
            try:
                call.result = self.run(call.fn, call.lazy)
            except BaseException as err:
                call.error = err


def _fail(calls: list["_PendingCall"], err: BaseException) -> None:
    """The shared BEGIN or COMMIT failed: every call without an error of its own gets it."""
    for call in calls:
        if call.error is None:
            call.result, call.error = None, err


class _PendingCall:
    __slots__ = ("fn", "lazy", "result", "error", "done", "wake")

    def __init__(self, fn: Callable[[Connection], object], lazy: bool = False):
        self.fn = fn
        self.lazy = lazy
        self.result: object = None
        self.error: BaseException | None = None
        self.done = False
        self.wake: threading.Lock | None = None   # made when the call has to wait (held)


# SQLite checkpoints the WAL into the database file from the committing call once the WAL
# holds this many pages; a checkpoint fsyncs the WAL and the database file. Transaction
# calls write ~6 WAL pages each but keep rewriting the same few (id counters, the newest
# leaves of txns and of the notification log), so a checkpoint copies few pages whatever
# its interval, and at SQLite's default of 1,000 pages its two fsyncs came every ~75
# open+commit pairs (4% of all fsyncs, and a slow call for whoever triggered it). Four
# times fewer checkpoints; the WAL file grows to ~16 MB and stays within one wal-index
# hash segment (4,096 frames), so a reader's page look-up still searches one table.
_WAL_AUTOCHECKPOINT_PAGES = 4000


def _make_engine(url: str, *, pool_size: int, echo: bool, synchronous: str = "FULL") -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url, echo=echo, pool_size=pool_size, max_overflow=64,
            connect_args={"check_same_thread": False, "timeout": 60},
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):  # pragma: no cover - driver callback
            # Take transaction control away from the sqlite3 module so BEGIN is ours.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={synchronous}")
            cur.execute(f"PRAGMA wal_autocheckpoint={_WAL_AUTOCHECKPOINT_PAGES}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn):  # pragma: no cover - driver callback
            # On the driver connection: exec_driver_sql would cost more than the BEGIN.
            conn.connection.driver_connection.execute(
                conn.get_execution_options().get("hms_begin", "BEGIN"))

        return engine
    # No pool_pre_ping: Store.transaction retries a call whose connection was dead.
    return create_engine(url, echo=echo, pool_size=pool_size, max_overflow=pool_size * 4)
