"""Small SQL building blocks shared by the domain modules (dialect differences live here)."""

from __future__ import annotations

import functools
import json
from typing import Callable, Iterable

from sqlalchemy import and_, any_, bindparam, func, insert, literal_column, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from hms_txn.store.prepared import Prepared
from hms_txn.store.schema import txn_mutex


def insert_ignore(conn: Connection, table, values: dict) -> None:
    """INSERT a row unless one with the same key exists (race-safe on PostgreSQL)."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert
        conn.execute(pg_insert(table).values(**values).on_conflict_do_nothing())
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert
        conn.execute(sqlite_insert(table).values(**values).on_conflict_do_nothing())
    else:  # pragma: no cover - other databases
        try:
            with conn.begin_nested():
                conn.execute(insert(table).values(**values))
        except IntegrityError:
            pass


def reserve_ids(conn: Connection, counter, count: int, *, key: dict | None = None,
                start: int = 1, column: str = "next_id") -> int:
    """Reserve ``count`` consecutive ids from a counter table; returns the first.

    The counter row holds the next id to hand out. The UPDATE ... RETURNING both bumps it
    and row-locks it until the caller's transaction ends, so no other transaction (in this
    or another server process) can be handed the same ids, and ids become visible in the
    order their transactions commit. A missing row (a fresh database) is created first,
    race-safely.
    """
    key = key or _SINGLETON_KEY
    bump = _bump_statement(counter, column, tuple(key))
    params = {"k_" + k: v for k, v in key.items()}
    params["count"] = count
    row = bump.execute(conn, params).first()
    if row is None:
        insert_ignore(conn, counter, {**key, column: start})
        row = bump.execute(conn, params).first()
    return int(row[0]) - count


_SINGLETON_KEY = {"id": 1}
# (counter table, column, key columns) -> its UPDATE ... RETURNING. Built once and executed
# with bound values: building a Core statement per call costs more than running it (and see
# hms_txn.store.prepared).
_BUMPS: dict[tuple, Prepared] = {}


def _bump_statement(counter, column: str, key_columns: tuple[str, ...]):
    cache_key = (counter.name, column, key_columns)
    stmt = _BUMPS.get(cache_key)
    if stmt is None:
        col = counter.c[column]
        cond = and_(*[counter.c[k] == bindparam("k_" + k) for k in key_columns])
        stmt = Prepared(update(counter).where(cond)
                        .values({column: col + bindparam("count", type_=col.type)}).returning(col))
        _BUMPS[cache_key] = stmt
    return stmt


def insert_numbered(conn: Connection, table, id_column: str, values: dict, counter,
                    column: str = "next_id") -> int | None:
    """PostgreSQL: take the next id of the single-row ``counter`` (``reserve_ids``'s kind)
    and insert ``values`` numbered with it into ``table``, in one statement (a CTE of the
    counter's ``UPDATE ... RETURNING``); returns the id. None where it is not done in one
    statement (SQLite, whose CTEs cannot update; a fresh database without the counter row):
    the caller then uses ``reserve_ids`` and its own INSERT."""
    if conn.dialect.name != "postgresql":
        return None
    stmt = _numbered_insert(table, id_column, counter, column, tuple(values))
    return stmt.execute(conn, {"v_" + k: v for k, v in values.items()}).scalar()


# (table, id column, counter, counter column, value columns) -> its statement
_NUMBERED: dict[tuple, Prepared] = {}


def _numbered_insert(table, id_column: str, counter, column: str, keys: tuple[str, ...]):
    cache_key = (table.name, id_column, counter.name, column, keys)
    stmt = _NUMBERED.get(cache_key)
    if stmt is None:
        col = counter.c[column]
        bump = (update(counter).where(counter.c.id == 1).values({column: col + 1})
                .returning((col - 1).label("taken")).cte("bump"))
        values = [bindparam("v_" + k, type_=table.c[k].type) for k in keys]
        stmt = Prepared(insert(table).from_select(
            [id_column, *keys], select(bump.c.taken, *values))
            .returning(table.c[id_column]))
        _NUMBERED[cache_key] = stmt
    return stmt


class ListQuery:
    """A statement filtered by ``column IN <values>`` where each list of values travels as
    one bound value.

    SQLAlchemy expands an ``IN`` list into one placeholder per value and renders that SQL on
    every call: ~1 ms of Python per 1,000 values. Reader snapshots carry every open and
    aborted transaction, so with a thousand open transactions ``get_valid_write_ids`` paid
    that for each table it was asked about. Here a list is a single value instead, a JSON
    array read by ``json_each`` on SQLite and an array compared with ``= ANY`` on
    PostgreSQL, so the SQL is fixed and compiled once per dialect (and on SQLite runs on the
    direct path of hms_txn.store.prepared). Both forms still walk the column's index once per
    value.

    ``lists`` names the statement's list parameters and their element types (``BigInteger``
    or ``String``); ``build(in_list)`` returns the statement, where ``in_list(column, name)``
    is the filter to put in it. ``bind(conn, values)`` turns a list into its bound value
    (one can serve several executions); ``execute`` runs the statement with the bound lists
    among its parameters.
    """

    def __init__(self, build: Callable[[Callable], object], lists: dict[str, object]):
        self._build = build
        self._lists = dict(lists)
        self._by_form: dict[str, Prepared] = {}   # "json", "array" or "expanding" -> statement

    @staticmethod
    def bind(conn: Connection, values: Iterable) -> object:
        values = list(values)
        return json.dumps(values) if _form(conn.dialect.name) == "json" else values

    def execute(self, conn: Connection, params: dict):
        form = _form(conn.dialect.name)
        stmt = self._by_form.get(form)
        if stmt is None:
            def in_list(column, name: str):
                return _in_list(column, name, self._lists[name], form)
            stmt = self._by_form[form] = Prepared(self._build(in_list))
        return stmt.execute(conn, params)


def _form(dialect: str) -> str:
    if dialect == "sqlite":
        return "json" if sqlite_has_json() else "expanding"
    return "array" if dialect == "postgresql" else "expanding"


@functools.cache
def sqlite_has_json() -> bool:
    """Whether this process's SQLite library has the JSON functions (built in since 3.38,
    an option before): without them the ids go in an expanding IN, slower but correct."""
    import sqlite3
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("SELECT json_valid('[]')")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def _in_list(column, name: str, item_type, form: str):
    if form == "json":
        return column.in_(select(literal_column("value")).select_from(func.json_each(bindparam(name))))
    if form == "array":
        return column == any_(bindparam(name, type_=ARRAY(item_type)))
    return column.in_(bindparam(name, expanding=True))


_MUTEX_ROW_LOCKED = Prepared(select(txn_mutex.c.name).where(txn_mutex.c.name == bindparam("p_name"))
                             .with_for_update())


def lock_mutex(conn: Connection, name: str) -> None:
    """Serialize a critical section named ``name`` across server processes until the
    caller's transaction ends: the row lock of its ``txn_mutex`` row. A no-op on SQLite,
    where every write transaction already excludes every other."""
    if conn.dialect.name == "sqlite":
        return
    params = {"p_name": name}
    if _MUTEX_ROW_LOCKED.execute(conn, params).first() is None:
        insert_ignore(conn, txn_mutex, {"name": name})
        _MUTEX_ROW_LOCKED.execute(conn, params).first()


def statements_are_round_trips(conn: Connection) -> bool:
    """Whether each statement costs a network round trip (a client/server database): two
    reads are then worth folding into one statement, which on SQLite, in process, they
    are not (one statement each stays simpler for its planner)."""
    return conn.dialect.name != "sqlite"


def writer_is_exclusive(conn: Connection) -> bool:
    """Whether a write transaction on this database excludes every other writer (SQLite):
    a read inside it then sees the latest committed state, so a look that PostgreSQL must
    split into a row lock and a second statement can be one statement."""
    return conn.dialect.name == "sqlite"
