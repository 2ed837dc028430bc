"""Database engine set-up and transaction helpers.

SQLite (the embedded default) and PostgreSQL go through the same code; the differences
live here:

* SQLite runs in WAL mode with ``synchronous=FULL`` so a committed call survives a crash
  or ``kill -9``. Write transactions start with ``BEGIN IMMEDIATE`` (taking the write lock
  up front instead of failing on a lock upgrade later) and are serialized inside the
  process by a mutex, so threads queue instead of spinning on SQLITE_BUSY.
* PostgreSQL runs at READ COMMITTED; code that must serialize (id counters, lock
  granting) takes row locks with ``SELECT ... FOR UPDATE``. Serialization failures and
  deadlocks are retried by ``Store.transaction``.
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

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRYABLE_PG_CODES = {"40001", "40P01"}  # serialization_failure, deadlock_detected


class Store:
    """An SQLAlchemy engine plus the transaction discipline the domain modules rely on."""

    def __init__(self, url: str, *, pool_size: int = 10, echo: bool = False):
        self.url = url
        self.engine: Engine = _make_engine(url, pool_size=pool_size, echo=echo)
        self.dialect = self.engine.dialect.name
        self.is_sqlite = self.dialect == "sqlite"
        # In-process writer queue for SQLite; a no-op for client/server databases.
        self._write_mutex = threading.Lock() if self.is_sqlite else contextlib.nullcontext()

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A read-write transaction; commits on success, rolls back on error."""
        with self._write_mutex:
            with self.engine.connect() as conn:
                if self.is_sqlite:
                    conn = conn.execution_options(hms_begin="BEGIN IMMEDIATE")
                with conn.begin():
                    yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction: one consistent snapshot on SQLite (WAL) and PostgreSQL."""
        with self.engine.connect() as conn:
            if not self.is_sqlite:
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    def transaction(self, fn: Callable[[Connection], T], *, attempts: int = 8) -> T:
        """Run ``fn(conn)`` in a write transaction, retrying on deadlock/serialization errors."""
        for attempt in range(1, attempts + 1):
            try:
                with self.write() as conn:
                    return fn(conn)
            except DBAPIError as err:
                if attempt == attempts or not self._retryable(err):
                    raise
                log.debug("retrying transaction after %s (attempt %d)", err.orig, attempt)
                time.sleep(min(0.2, 0.005 * 2 ** attempt) * random.random())
        raise AssertionError("unreachable")

    def _retryable(self, err: DBAPIError) -> bool:
        if self.is_sqlite:
            return isinstance(err, OperationalError) and "locked" in str(err.orig).lower()
        code = getattr(err.orig, "pgcode", None) or getattr(err.orig, "sqlstate", None)
        return code in _RETRYABLE_PG_CODES

    def dispose(self) -> None:
        self.engine.dispose()


def _make_engine(url: str, *, pool_size: int, echo: bool) -> Engine:
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
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn):  # pragma: no cover - driver callback
            conn.exec_driver_sql(conn.get_execution_options().get("hms_begin", "BEGIN"))

        return engine
    return create_engine(url, echo=echo, pool_size=pool_size, max_overflow=pool_size * 4,
                         pool_pre_ping=True)
