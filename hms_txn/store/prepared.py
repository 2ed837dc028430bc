"""Prepared statements: the few Core statements that transaction calls run on every call,
compiled once and run on the driver directly (sqlite3; psycopg 3 for PostgreSQL).

``Prepared(stmt)`` wraps a SQLAlchemy Core statement built once (at import, with
``bindparam`` placeholders); ``Prepared.execute(conn, params)`` runs it like
``conn.execute(stmt, params)`` and returns an object with the same ``first``/``scalar``/
``scalar_one``/``all``/``rowcount``/iteration interface.

Why this exists. On the embedded default (SQLite) open_txns, commit_txn, write id
allocation and lock are CPU-bound, and SQLAlchemy's execution path (execution context,
event dispatch, parameter processing, result wrapping) costs several times what sqlite3
itself needs per statement. open_txns + commit_txn run 10 statements, the writer path
(open, allocate write id, lock, commit) about 25. So on SQLite a prepared statement is
compiled once by SQLAlchemy for the dialect and its SQL is run on the DBAPI connection of
the caller's SQLAlchemy ``Connection`` (inside the caller's transaction). When it was
introduced: CPU per open+commit 455 -> 227 us, per writer operation 1,373 -> 643 us
(in-process, SQLite; docs/benchmarks-history.md, "the transaction path").

Why not SQLAlchemy's public execution API. Measured 2026-11-25 on SQLAlchemy 2.1.9,
CPython 3.11, 2 shared cores busy with other work (load average 2.5-14, so wall times are
noise; compare the CPU rows, not absolute numbers): in-process open_txns + commit_txn on
SQLite, process CPU per pair, best of 5 rounds of 1,500-2,000 pairs, 6-9 runs per route,
the routes run one after the other (``python -m hms_bench.prepared_path
{prepared,driver_sql,execute}``):

    this module's direct path                        590-690 us/pair
    conn.exec_driver_sql(SQL compiled once)        1,130-1,340 us/pair   (+70-110%)
    conn.execute(stmt) (compiled cache on)         1,395-1,690 us/pair   (+120-180%)

and per statement in one transaction, best of 5 x 20,000, one-row SELECT by key / one-row
UPDATE (``python -m hms_bench.prepared_path --statement``, the calmest run): conn.execute
64 / 54 us, exec_driver_sql with the SQL compiled once 88 / 28 us, this module 17 / 10.5 us,
sqlite3 alone 10.5 / 6.3 us. ``exec_driver_sql`` still builds an execution context,
dispatches events and wraps the result (for a SELECT, without the compiled statement's
result map, it is slower than ``conn.execute``). Issue 29 would have taken the public route
had it cost at most ~5% more per open+commit pair; it costs 70% or more, so the direct path
stays, confined to this module.

What this module relies on. No underscore name of SQLAlchemy, but these attributes of the
compiled statement, documented by SQLAlchemy as Core internals (``SQLCompiler``), not as
stable API: ``string``, ``positiontup``, ``binds``, ``insert_prefetch``,
``update_prefetch``, ``post_compile_params``, ``literal_execute_params``; plus
``BindParameter.callable/expanding/required/value/type``, ``TypeEngine.dialect_impl``/
``bind_processor``/``result_processor``, ``exported_columns``, ``DBAPIError.instance``,
``Connection.connection.driver_connection`` and ``Dialect.loaded_dbapi``.
tests/hms_txn/test_prepared_contract.py checks each of them against the installed
SQLAlchemy and fails naming what changed; pyproject pins SQLAlchemy to the minor it was
checked on. This is the only module of hms_txn that reads a compiled statement; the
engine (store/engine.py) also sends its transaction control (BEGIN, SAVEPOINT, the
durability marker) to the driver connection, through the same public
``driver_connection``.

What the shortcut leaves out is only what these statements do not use, and a statement
that would need it is executed through ``conn.execute`` instead (decided once per
statement): bind or result type processing (none exists for integers and strings on
sqlite3), Python-side column defaults (an INSERT must supply every column it compiles),
expanding IN lists and other post-compile parameters, and the execution events other than
``before_cursor_execute`` (nothing in hms-txn listens to them; ``echo`` does not log these
statements). Rows are named after the
cursor's column names, which are the keys ``conn.execute`` gives them. Driver errors are
wrapped into SQLAlchemy's ``DBAPIError`` subclasses as ``conn.execute`` wraps them, so
retries and error handling see the same exceptions. Listeners of ``before_cursor_execute``
(tests watching the statements sent) are told of each statement.

PostgreSQL too (psycopg 3 only; other drivers go through ``conn.execute``). A round trip
does not dwarf SQLAlchemy's overhead there, as one would think: measured 2026-11-25 on this
2-core machine (idle), a one-row SELECT in a transaction costs 187 us of our CPU through
``conn.execute``, 100 us on a new psycopg cursor and 76 us on a reused one (wall 210 / 123
/ 99 us), and the transaction calls were CPU-bound in our process (open_txns + commit_txn
3.1 ms of CPU per pair for 15 statements with BEGIN and COMMIT, 4.1 ms wall). The plan is
the same idea with psycopg's named placeholders (``%(name)s``) and one reused cursor per
driver connection; a driver error meaning the connection is gone invalidates it first.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Iterator, Sequence

from sqlalchemy import ARRAY, exc
from sqlalchemy.engine import Connection


class Prepared:
    """A prebuilt Core statement with a direct path to the sqlite3 driver."""

    __slots__ = ("stmt", "_plans")

    def __init__(self, stmt):
        self.stmt = stmt
        # (dialect name, INSERT column keys or None for other statements) -> its plan, or
        # False when the statement must go through conn.execute.
        self._plans: dict[Any, Any] = {}

    def execute(self, conn: Connection, params: dict | Sequence[dict] | None = None):
        dialect = conn.dialect
        if _plan_kind(dialect) is None or not conn.in_transaction():
            return conn.execute(self.stmt, params)
        many = isinstance(params, (list, tuple))
        if many and not params:
            return conn.execute(self.stmt, params)
        first = params[0] if many else params
        key = (dialect.name, tuple(first) if self.stmt.is_insert and first else None)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _plan_kind(dialect).build(self.stmt, dialect, key[1])
        if plan is False:
            return conn.execute(self.stmt, params)
        return plan.run(conn, params, many)

    def runs_on_driver(self, dialect, column_keys: Sequence[str] | None = None) -> bool:
        """Whether ``execute`` runs this statement on the driver directly for ``dialect``
        inside a transaction (an INSERT: with values for ``column_keys``), rather than
        through ``conn.execute``."""
        if _plan_kind(dialect) is None:
            return False
        key = (dialect.name, tuple(column_keys) if self.stmt.is_insert and column_keys else None)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _plan_kind(dialect).build(self.stmt, dialect, key[1])
        return plan is not False

    def rows(self, conn: Connection, params: dict | None = None) -> list:
        """All rows, as tuples to unpack (not to read by name): the driver's own tuples on
        the direct path, SQLAlchemy's rows otherwise."""
        result = self.execute(conn, params)
        return result._plain() if isinstance(result, _Result) else result.all()


class _Plan:
    __slots__ = ("sql", "order", "defaults", "make_row")

    def __init__(self, sql: str, order: tuple, defaults: dict):
        self.sql = sql
        self.order = order
        self.defaults = defaults
        self.make_row = None        # named tuples of the cursor's columns, made on first use

    @classmethod
    def build(cls, stmt, dialect, column_keys):
        """Compile ``stmt`` once; False if it needs what the direct path does not do."""
        found = _compile_direct(stmt, dialect, column_keys)
        if found is None or found[0].positiontup is None:
            return False
        compiled, defaults = found
        return cls(compiled.string, tuple(compiled.positiontup), defaults)

    def _args(self, params: dict | None) -> list:
        if not params:
            return [self.defaults[name] for name in self.order]
        defaults = self.defaults
        return [params[name] if name in params else defaults[name] for name in self.order]

    def run(self, conn: Connection, params, many: bool) -> "_Result":
        driver = conn.connection.driver_connection
        dbapi = conn.dialect.loaded_dbapi
        args: Any = None
        try:
            args = [self._args(p) for p in params] if many else self._args(params)
            if conn.dispatch.before_cursor_execute:
                _announce(conn, None, self.sql, args, many)
            if many:
                cursor = driver.executemany(self.sql, args)
            else:
                cursor = driver.execute(self.sql, args)
            return _fetch(self, cursor)
        except dbapi.Error as err:
            raise exc.DBAPIError.instance(self.sql, args, err, dbapi.Error,
                                          dialect=conn.dialect) from err


class _PsycopgPlan:
    """The direct path on PostgreSQL through psycopg 3: the statement's SQL with named
    placeholders (``%(name)s``, SQLAlchemy's rendering for the dialect, casts included),
    run on one cursor kept per driver connection, which psycopg prepares on the server
    after a few runs (hms_txn.store.postgres, "Why psycopg 3"). A driver error that means
    the connection is gone invalidates it, as ``conn.execute`` does, so the store's retry
    and restart handling see ``connection_invalidated``."""

    __slots__ = ("sql", "defaults", "make_row")

    def __init__(self, sql: str, defaults: dict):
        self.sql = sql
        self.defaults = defaults
        self.make_row = None

    @classmethod
    def build(cls, stmt, dialect, column_keys):
        found = _compile_direct(stmt, dialect, column_keys)
        if found is None or found[0].positiontup is not None:
            return False
        compiled, defaults = found
        return cls(compiled.string, defaults)

    def _args(self, params: dict | None) -> dict:
        args = dict(self.defaults)
        if params:
            args.update(params)
        return args

    def run(self, conn: Connection, params, many: bool) -> "_Result":
        driver, cursor = _psycopg_cursor(conn)
        args: Any = None
        try:
            args = [self._args(p) for p in params] if many else self._args(params)
            if conn.dispatch.before_cursor_execute:
                _announce(conn, cursor, self.sql, args, many)
            if many:
                cursor.executemany(self.sql, args)
            else:
                cursor.execute(self.sql, args)
            return _fetch(self, cursor)
        except conn.dialect.loaded_dbapi.Error as err:
            raise _psycopg_error(conn, driver, cursor, err, self.sql, args) from err


def _psycopg_cursor(conn: Connection):
    """(psycopg connection, the cursor the direct path reuses on it)."""
    driver = conn.connection.driver_connection
    info = conn.info
    cursor = info.get(_CURSOR_KEY)
    if cursor is None or cursor.closed or cursor.connection is not driver:
        cursor = info[_CURSOR_KEY] = driver.cursor()
    return driver, cursor


def _psycopg_error(conn: Connection, driver, cursor, err, sql: str, args) -> exc.DBAPIError:
    """A psycopg error as ``conn.execute`` raises it; a connection it left dead is
    invalidated first."""
    gone = conn.dialect.is_disconnect(err, driver, cursor)
    if gone:
        conn.invalidate(err)
    return exc.DBAPIError.instance(sql, args, err, conn.dialect.loaded_dbapi.Error,
                                   connection_invalidated=gone, dialect=conn.dialect)


def run_fixed(conn: Connection, sql: str) -> None:
    """Run ``sql`` (a fixed statement without parameters or rows: ``SET LOCAL``, the
    durability marker's bump) in the caller's transaction on the driver: sqlite3's
    connection, psycopg's reused cursor; other drivers through ``exec_driver_sql``."""
    kind = _plan_kind(conn.dialect)
    if kind is _Plan:
        conn.connection.driver_connection.execute(sql)
    elif kind is _PsycopgPlan and conn.in_transaction():
        _FixedStatement(sql).run(conn, None, False)
    else:
        conn.exec_driver_sql(sql)


class DriverSQL(_PsycopgPlan):
    """SQL text with psycopg's named placeholders (``%(name)s``), run like a prepared
    statement's plan on psycopg's reused cursor, inside the caller's SQLAlchemy transaction
    or autocommit block: the store's one-statement calls (hms_txn.store.txn_functions),
    whose SQL is a function call written by hand rather than a Core statement."""
    __slots__ = ()

    def __init__(self, sql: str):
        super().__init__(sql, {})

    def _args(self, params: dict | None) -> dict | None:
        return params

    def execute(self, conn: Connection, params: dict) -> "_Result":
        return self.run(conn, params, False)

    def rows(self, conn: Connection, params: dict) -> list:
        """The rows as the driver's plain tuples (the statement returns rows: a function's
        answer)."""
        driver, cursor = _psycopg_cursor(conn)
        try:
            if conn.dispatch.before_cursor_execute:
                _announce(conn, cursor, self.sql, params, False)
            cursor.execute(self.sql, params)
            return cursor.fetchall()
        except conn.dialect.loaded_dbapi.Error as err:
            raise _psycopg_error(conn, driver, cursor, err, self.sql, params) from err


class _FixedStatement(_PsycopgPlan):
    __slots__ = ()

    def __init__(self, sql: str):
        super().__init__(sql, {})

    def _args(self, params: dict | None) -> None:
        return None


# Connection.info key: the psycopg cursor the direct path reuses on that driver connection.
_CURSOR_KEY = "hms_txn.prepared.cursor"


def _compile_direct(stmt, dialect, column_keys):
    """``stmt`` compiled for ``dialect`` (an INSERT: for ``column_keys``) and the default
    values of its optional binds; None if it needs what a direct path does not do (see
    the module docstring)."""
    compiled = stmt.compile(dialect=dialect, column_keys=list(column_keys or ()) or None)
    if (compiled.insert_prefetch or compiled.update_prefetch
            or compiled.post_compile_params or compiled.literal_execute_params
            or compiled.escaped_bind_names):
        return None
    defaults = {}
    for name, bind in compiled.binds.items():
        impl = bind.type.dialect_impl(dialect)
        if (bind.callable is not None or bind.expanding
                or (impl.bind_processor(dialect) is not None
                    and not _plain_array(impl, dialect))):
            return None
        if not bind.required:
            defaults[name] = bind.value
    for column in stmt.exported_columns:
        if column.type.dialect_impl(dialect).result_processor(dialect, None) is not None:
            return None
    return compiled, defaults


def _plain_array(impl, dialect) -> bool:
    """An ARRAY of a type without a bind processor: SQLAlchemy's processor only turns the
    value into a list of the same items, and the callers (``store.sql.ListQuery``) bind
    lists, which psycopg adapts to arrays itself."""
    item = getattr(impl, "item_type", None)
    return (isinstance(impl, ARRAY) and item is not None
            and item.dialect_impl(dialect).bind_processor(dialect) is None)


def _plan_kind(dialect):
    """The direct path's plan class for ``dialect``'s driver, or None (``conn.execute``)."""
    if dialect.name == "sqlite" and dialect.driver == "pysqlite":
        return _Plan
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        return _PsycopgPlan
    return None


def _fetch(plan, cursor) -> "_Result":
    """The result of the statement ``plan`` just ran on ``cursor``: its rows, named after
    the cursor's columns the first time (both drivers' descriptions start with the name)."""
    description = cursor.description
    if description is None:
        return _Result(None, None, cursor.rowcount)
    make = plan.make_row
    if make is None:
        make = plan.make_row = namedtuple(
            "Row", [column[0] for column in description], rename=True)._make
    return _Result(cursor.fetchall(), make, cursor.rowcount)


def _announce(conn: Connection, cursor, sql: str, args, many: bool) -> None:
    """Tell ``before_cursor_execute`` listeners (tests that watch the statements sent) what
    ``conn.execute`` would have told them; nothing listens in production."""
    conn.dispatch.before_cursor_execute(conn, cursor, sql, args, None, many)


class _Result:
    """The part of SQLAlchemy's ``Result`` interface the domain modules use.

    Rows become named tuples only when asked for (``first``, ``all``, iteration); ``scalar``
    and ``Prepared.rows`` use the driver's plain tuples, which for a thousand rows saves the
    ~0.3 ms of building them.
    """

    __slots__ = ("_raw", "_make", "_rows", "rowcount")

    def __init__(self, raw: list | None, make, rowcount: int):
        self._raw = raw
        self._make = make
        self._rows: list | None = None
        self.rowcount = rowcount

    def _plain(self) -> list:
        if self._raw is None:
            raise exc.ResourceClosedError("This result object does not return rows.")
        return self._raw

    def _fetched(self) -> list:
        rows = self._rows
        if rows is None:
            raw = self._plain()
            make = self._make
            rows = self._rows = raw if make is None else [make(r) for r in raw]
        return rows

    def first(self):
        rows = self._fetched()
        return rows[0] if rows else None

    def scalar(self):
        rows = self._plain()
        return rows[0][0] if rows else None

    def scalar_one(self):
        rows = self._plain()
        if not rows:
            raise exc.NoResultFound("No row was found when one was required")
        if len(rows) > 1:
            raise exc.MultipleResultsFound("Multiple rows were found when exactly one was required")
        return rows[0][0]

    def all(self) -> list:
        return self._fetched()

    def __iter__(self) -> Iterator:
        return iter(self._fetched())
