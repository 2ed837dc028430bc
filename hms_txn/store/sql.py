"""Small SQL building blocks shared by the domain modules (dialect differences live here)."""

from __future__ import annotations

from sqlalchemy import and_, bindparam, insert, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from .hot import Hot


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
# hms_txn.store.hot).
_BUMPS: dict[tuple, Hot] = {}


def _bump_statement(counter, column: str, key_columns: tuple[str, ...]):
    cache_key = (counter.name, column, key_columns)
    stmt = _BUMPS.get(cache_key)
    if stmt is None:
        col = counter.c[column]
        cond = and_(*[counter.c[k] == bindparam("k_" + k) for k in key_columns])
        stmt = Hot(update(counter).where(cond)
                   .values({column: col + bindparam("count", type_=col.type)}).returning(col))
        _BUMPS[cache_key] = stmt
    return stmt
