"""Hot statements: the few Core statements that transaction calls run on every call.

``Hot(stmt)`` wraps a SQLAlchemy Core statement built once (at import, with ``bindparam``
placeholders); ``Hot.execute(conn, params)`` runs it like ``conn.execute(stmt, params)``
and returns an object with the same ``first``/``scalar``/``scalar_one``/``all``/
``rowcount``/iteration interface.

Why this exists. On the embedded default (SQLite) open_txns, commit_txn, write id
allocation and lock are CPU-bound, and SQLAlchemy's execution path (execution context,
event dispatch, parameter processing, result wrapping) costs ~20 µs of Python per statement
where sqlite3 itself needs ~4 µs. open_txns + commit_txn run 9 statements, the writer path
(open, allocate write id, lock, commit) about 25. So on SQLite a hot statement is compiled
once by SQLAlchemy for the dialect and its SQL is run on the DBAPI connection of the
caller's SQLAlchemy ``Connection`` (inside the caller's transaction). Measured: CPU per
open+commit 455 -> 227 us, per writer operation 1,373 -> 643 us (in-process, SQLite); see
docs/benchmarks-history.md, "the transaction path".

What the shortcut leaves out is only what these statements do not use, and a statement
that would need it is executed through ``conn.execute`` instead (decided once per
statement): bind or result type processing (none exists for integers and strings on
sqlite3), Python-side column defaults (an INSERT must supply every column it compiles),
expanding IN lists and other post-compile parameters, and cursor-execute events (nothing in
hms-txn listens to them; ``echo`` does not log these statements). Driver errors are
wrapped into SQLAlchemy's ``DBAPIError`` subclasses as ``conn.execute`` wraps them, so
retries and error handling see the same exceptions. Other databases always go through
``conn.execute``: a client/server round trip dwarfs SQLAlchemy's overhead there.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Iterator, Sequence

from sqlalchemy import exc
from sqlalchemy.engine import Connection


class Hot:
    """A prebuilt Core statement with a direct path to the sqlite3 driver."""

    __slots__ = ("stmt", "_plans")

    def __init__(self, stmt):
        self.stmt = stmt
        # INSERT column keys (or None for other statements) -> _Plan, or False when the
        # statement must go through conn.execute.
        self._plans: dict[Any, Any] = {}

    def execute(self, conn: Connection, params: dict | Sequence[dict] | None = None):
        dialect = conn.dialect
        if dialect.name != "sqlite" or dialect.driver != "pysqlite" or not conn.in_transaction():
            return conn.execute(self.stmt, params)
        many = isinstance(params, (list, tuple))
        if many and not params:
            return conn.execute(self.stmt, params)
        first = params[0] if many else params
        key = tuple(first) if self.stmt.is_insert and first else None
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan.build(self.stmt, dialect, key)
        if plan is False:
            return conn.execute(self.stmt, params)
        return plan.run(conn, params, many)

    def rows(self, conn: Connection, params: dict | None = None) -> list:
        """All rows, as tuples to unpack (not to read by name): the driver's own tuples on
        the direct path, SQLAlchemy's rows otherwise."""
        result = self.execute(conn, params)
        return result._plain() if isinstance(result, _Result) else result.all()


class _Plan:
    __slots__ = ("sql", "order", "defaults", "row_type")

    def __init__(self, sql: str, order: tuple, defaults: dict, row_type):
        self.sql = sql
        self.order = order
        self.defaults = defaults
        self.row_type = row_type

    @classmethod
    def build(cls, stmt, dialect, column_keys):
        """Compile ``stmt`` once; False if it needs what the direct path does not do."""
        compiled = stmt.compile(dialect=dialect, column_keys=list(column_keys or ()) or None)
        if (compiled._bind_processors or getattr(compiled, "insert_prefetch", None)
                or getattr(compiled, "update_prefetch", None)
                or compiled.post_compile_params or compiled.literal_execute_params
                or compiled.positiontup is None):
            return False
        binds = compiled.binds
        order = tuple(compiled.positiontup)
        defaults = {}
        for name in order:
            bind = binds[name]
            if bind.callable is not None or bind.expanding:
                return False
            if not bind.required:
                defaults[name] = bind.value
        row_type = None
        columns = compiled._result_columns
        if columns:
            for keyname, _name, _objects, type_ in columns:
                if type_._cached_result_processor(dialect, None) is not None:
                    return False
            row_type = namedtuple("Row", [c[0] for c in columns], rename=True)
        return cls(compiled.string, order, defaults, row_type)

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
            if many:
                args = [self._args(p) for p in params]
                cursor = driver.executemany(self.sql, args)
            else:
                args = self._args(params)
                cursor = driver.execute(self.sql, args)
            if self.row_type is None:
                return _Result(None, None, cursor.rowcount)
            return _Result(cursor.fetchall(), self.row_type._make, cursor.rowcount)
        except dbapi.Error as err:
            raise exc.DBAPIError.instance(self.sql, args, err, dbapi.Error,
                                          dialect=conn.dialect) from err


class _Result:
    """The part of SQLAlchemy's ``Result`` interface the domain modules use.

    Rows become named tuples only when asked for (``first``, ``all``, iteration); ``scalar``
    and ``Hot.rows`` use the driver's plain tuples, which for a thousand rows saves the
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
