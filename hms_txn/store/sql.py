"""Small SQL building blocks shared by the domain modules (dialect differences live here)."""

from __future__ import annotations

from sqlalchemy import and_, insert, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError


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
    key = key or {"id": 1}
    col = counter.c[column]
    cond = and_(*[counter.c[k] == v for k, v in key.items()])
    bump = update(counter).where(cond).values({column: col + count}).returning(col)
    row = conn.execute(bump).first()
    if row is None:
        insert_ignore(conn, counter, {**key, column: start})
        row = conn.execute(bump).first()
    return int(row[0]) - count
