"""The contract between hms_txn.store.prepared and the installed SQLAlchemy.

``Prepared`` runs SQLite statements on the driver with SQL that SQLAlchemy compiled once,
and decides from the compiled statement whether that is safe (see the module docstring for
why it exists and what it measured). It reads attributes that SQLAlchemy documents only as
Core internals (``SQLCompiler.positiontup``, ``binds``, ``insert_prefetch``, ...), so a
SQLAlchemy upgrade may change them without notice. Each test here checks one assumption
against the installed SQLAlchemy and, when it no longer holds, fails saying what changed.
If one fails after an upgrade: fix hms_txn/store/prepared.py (or route the statement kind
through ``conn.execute``), then move the pin of SQLAlchemy in pyproject.toml.
"""

from __future__ import annotations

import importlib
import re
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy import (BigInteger, Boolean, Column, DateTime, Integer, MetaData, String, Table,
                        Text, bindparam, create_engine, exc, func, insert, select, update)

from hms_txn.store.prepared import Prepared

ROOT = Path(__file__).resolve().parents[2]
VERSION = sqlalchemy.__version__


def _changed(what: str) -> str:
    return (f"SQLAlchemy {VERSION} changed what hms_txn.store.prepared relies on: {what}. "
            f"Adapt hms_txn/store/prepared.py before moving the SQLAlchemy pin in pyproject.toml.")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


@pytest.fixture(scope="module")
def dialect():
    return create_engine("sqlite://").dialect


_md = MetaData()
_t = Table("t", _md,
           Column("a", Integer, primary_key=True, autoincrement=False),
           Column("b", String(10)),
           Column("c", BigInteger, default=0),
           Column("e", Integer, default=lambda: 1, onupdate=lambda: 2),
           Column("f", DateTime),
           Column("g", Boolean))


def test_installed_sqlalchemy_is_the_pinned_minor():
    [pin] = re.findall(r'^\s*"(sqlalchemy\b[^"]*)"', (ROOT / "pyproject.toml").read_text(),
                       re.M | re.I)
    low = re.search(r">=\s*([\d.]+)", pin)
    high = re.search(r"<\s*([\d.]+)", pin)
    assert low and high, f"pyproject.toml must pin SQLAlchemy to one minor (>=X.Y.Z,<X.Y+1): {pin}"
    assert _version(low.group(1)) <= _version(VERSION) < _version(high.group(1)), (
        f"SQLAlchemy {VERSION} is installed, but hms_txn.store.prepared was checked against "
        f"{pin}: run this file's tests against it, adapt prepared.py if one fails, then move "
        f"the pin.")


def test_sqlite_compiles_to_positional_parameters_named_in_order(dialect):
    assert dialect.paramstyle == "qmark", _changed(f"SQLite's paramstyle is {dialect.paramstyle}")
    stmt = (update(_t).values(b=bindparam("p_b"), c=bindparam("p_c"))
            .where(_t.c.a == bindparam("p_a")))
    compiled = stmt.compile(dialect=dialect, column_keys=["b", "c"])
    order = compiled.positiontup
    assert order is not None and compiled.string.count("?") == len(order), _changed(
        f"SQLCompiler.positiontup no longer names each '?' of the SQL: {order!r} for "
        f"{compiled.string!r}")
    # The direct path binds parameters in positiontup's order: check it against the driver.
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b VARCHAR(10), c BIGINT, e INTEGER, "
               "f DATETIME, g BOOLEAN)")
    db.execute("INSERT INTO t (a, b, c, e) VALUES (1, 'x', 0, 0)")
    values = {"p_a": 1, "p_b": "y", "p_c": 5, "e": 9}
    db.execute(compiled.string, [values[name] for name in order])
    assert db.execute("SELECT b, c, e FROM t WHERE a = 1").fetchone() == ("y", 5, 9), _changed(
        "binding values in SQLCompiler.positiontup's order no longer sets the named columns")


def test_binds_carry_value_required_callable_and_expanding(dialect):
    stmt = (select(_t.c.a).where(_t.c.b == "x").where(_t.c.a == bindparam("p_default", value=3))
            .where(_t.c.c == bindparam("p_required")))
    compiled = stmt.compile(dialect=dialect)
    binds = compiled.binds
    missing = [name for name in compiled.positiontup if name not in binds]
    assert not missing, _changed(f"SQLCompiler.binds lacks the positional names {missing}")
    by_name = {name: binds[name] for name in compiled.positiontup}
    literal = next(b for n, b in by_name.items() if n not in ("p_default", "p_required"))
    assert (literal.required, literal.value) == (False, "x"), _changed(
        "a literal's BindParameter is no longer required=False with its value in .value")
    assert (by_name["p_default"].required, by_name["p_default"].value) == (False, 3), _changed(
        "bindparam(value=...) is no longer required=False with the value in .value")
    assert by_name["p_required"].required is True, _changed(
        "bindparam() without a value is no longer required=True")
    for bind in by_name.values():
        assert bind.callable is None and bind.expanding is False, _changed(
            "a plain BindParameter has a .callable or is .expanding")
    called = select(_t.c.a).where(_t.c.a == bindparam("p", callable_=lambda: 1))
    [bind] = called.compile(dialect=dialect).binds.values()
    assert bind.callable is not None, _changed("BindParameter.callable is not set by callable_")


def test_what_sends_a_statement_to_conn_execute_is_visible_on_the_compiled_form(dialect):
    expanding = select(_t.c.a).where(_t.c.a.in_(bindparam("p", expanding=True)))
    compiled = expanding.compile(dialect=dialect)
    assert compiled.post_compile_params and compiled.binds["p"].expanding, _changed(
        "an expanding IN is no longer in SQLCompiler.post_compile_params")
    literal = select(_t.c.a).where(_t.c.a == bindparam("p", literal_execute=True))
    assert literal.compile(dialect=dialect).literal_execute_params, _changed(
        "a literal_execute parameter is no longer in SQLCompiler.literal_execute_params")
    # An INSERT compiled for some columns evaluates the others' Python-side defaults
    # (scalar or callable) in SQLAlchemy: the direct path must not take it.
    partial = insert(_t).compile(dialect=dialect, column_keys=["a", "b"])
    assert {c.key for c in partial.insert_prefetch} == {"c", "e"}, _changed(
        "SQLCompiler.insert_prefetch no longer lists the columns with Python-side defaults "
        f"an INSERT leaves out: {partial.insert_prefetch!r}")
    full = insert(_t).compile(dialect=dialect, column_keys=["a", "b", "c", "e", "f", "g"])
    assert not full.insert_prefetch and full.positiontup == list("abcefg"), _changed(
        "an INSERT compiled for all its columns (column_keys) prefetches defaults or "
        "binds other names")
    upd = update(_t).values(b=bindparam("p_b")).where(_t.c.a == bindparam("p_a"))
    assert [c.key for c in upd.compile(dialect=dialect).update_prefetch] == ["e"], _changed(
        "SQLCompiler.update_prefetch no longer lists the columns with Python-side onupdate")


def test_type_processors_are_visible_through_the_type_api(dialect):
    def processors(type_):
        impl = type_.dialect_impl(dialect)
        return impl.bind_processor(dialect), impl.result_processor(dialect, None)

    for type_ in (Integer(), BigInteger(), String(10), Text()):
        assert processors(type_) == (None, None), _changed(
            f"{type_!r} has a bind or result processor on SQLite: the transaction path's "
            "statements would all leave the direct path")
    for type_ in (DateTime(), Boolean()):
        bind, result = processors(type_)
        assert bind is not None and result is not None, _changed(
            f"{type_!r} no longer reports its SQLite processors through "
            "TypeEngine.dialect_impl().bind_processor()/result_processor()")


def test_exported_columns_are_the_columns_a_statement_returns():
    assert list(select(_t.c.a, _t.c.b).exported_columns) == [_t.c.a, _t.c.b], _changed(
        "Select.exported_columns is not the selected columns")
    assert list(update(_t).returning(_t.c.g).exported_columns) == [_t.c.g], _changed(
        "UpdateBase.exported_columns is not the RETURNING columns")
    assert list(insert(_t).exported_columns) == [], _changed(
        "an INSERT without RETURNING exports columns")
    assert insert(_t).is_insert and not select(_t).is_insert and not update(_t).is_insert, (
        _changed("Executable.is_insert"))


def test_row_names_from_the_cursor_are_the_keys_conn_execute_gives():
    engine = create_engine("sqlite://")
    _md.create_all(engine)
    statements = [
        select(_t.c.a, _t.c.b),
        select(func.count()).select_from(_t),
        select(_t.c.a.label("renamed"), (_t.c.a + 1)),
        update(_t).values(b="z").returning(_t.c.a, _t.c.b),
    ]
    with engine.begin() as conn:
        conn.execute(insert(_t), {"a": 1, "b": "x", "c": 0, "e": 0})
        driver = conn.connection.driver_connection
        for stmt in statements:
            compiled = stmt.compile(dialect=conn.dialect)
            params = compiled.construct_params()
            cursor = driver.execute(compiled.string,
                                    [params[name] for name in compiled.positiontup])
            names = [d[0] for d in cursor.description]
            cursor.fetchall()
            keys = list(conn.execute(stmt).keys())
            assert names == keys, _changed(
                f"conn.execute names the columns of {compiled.string!r} {keys}, the cursor "
                f"{names}: Prepared's rows would be read by other names")
    engine.dispose()


def test_the_driver_connection_runs_in_the_connections_transaction():
    engine = create_engine("sqlite://")
    _md.create_all(engine)
    with engine.connect() as conn:
        assert conn.dialect.name == "sqlite" and conn.dialect.driver == "pysqlite", _changed(
            "the sqlite:// dialect's name/driver")
        assert conn.dialect.loaded_dbapi.Error is sqlite3.Error, _changed(
            "Dialect.loaded_dbapi.Error is not the base of sqlite3's errors")
        conn.begin()
        assert conn.in_transaction()
        driver = conn.connection.driver_connection
        assert isinstance(driver, sqlite3.Connection), _changed(
            "Connection.connection.driver_connection is not the sqlite3 connection")
        driver.execute("INSERT INTO t (a, b, c, e) VALUES (5, 'x', 0, 0)")
        assert conn.execute(select(_t.c.b).where(_t.c.a == 5)).scalar() == "x", _changed(
            "a write on driver_connection is not seen by the Connection")
        conn.rollback()
        assert conn.execute(select(_t.c.b).where(_t.c.a == 5)).scalar() is None, _changed(
            "Connection.rollback() does not undo a write made on driver_connection")
        conn.rollback()
    engine.dispose()


def test_driver_errors_wrap_into_the_exceptions_conn_execute_raises():
    engine = create_engine("sqlite://")
    _md.create_all(engine)
    row = {"a": 1, "b": "x", "c": 0, "e": 0, "f": None, "g": None}
    with engine.begin() as conn:
        conn.execute(insert(_t), row)
        with pytest.raises(exc.DBAPIError) as through_sqlalchemy:
            conn.execute(insert(_t), row)
    err = sqlite3.IntegrityError("UNIQUE constraint failed: t.a")
    wrapped = exc.DBAPIError.instance("INSERT ...", [1], err, sqlite3.Error,
                                      dialect=engine.dialect)
    assert type(wrapped) is type(through_sqlalchemy.value), _changed(
        f"DBAPIError.instance wraps sqlite3.IntegrityError as {type(wrapped).__name__}, "
        f"conn.execute raises {type(through_sqlalchemy.value).__name__}")
    assert wrapped.orig is err, _changed("DBAPIError.instance(...).orig")
    engine.dispose()


_PRODUCT_MODULES = ["hms_txn.domain.txn.txn", "hms_txn.domain.txn.txn_records",
                    "hms_txn.domain.locks.locks", "hms_txn.domain.txn.txn_commit",
                    "hms_txn.domain.txn.writeids", "hms_txn.domain.events.notifications",
                    "hms_txn.store.sql"]


def _product_statements():
    for name in _PRODUCT_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if isinstance(value, Prepared):
                yield f"{name}.{attr}", value


def test_the_transaction_paths_statements_take_the_direct_path(dialect):
    """After an upgrade, a statement that silently leaves the direct path costs the
    transaction calls their speed: every statement but those with an expanding IN list
    (which SQLAlchemy must expand) compiles to a plan."""
    found = dict(_product_statements())
    assert len(found) > 20
    off = []
    for name, stmt in found.items():
        keys = tuple(stmt.stmt.table.columns.keys()) if stmt.stmt.is_insert else None
        expanding = any(b.expanding for b in stmt.stmt.compile(dialect=dialect).binds.values())
        if stmt.runs_on_driver(dialect, keys) == expanding:
            off.append(name)
    assert not off, _changed(f"these statements changed path (direct <-> conn.execute): {off}")


@pytest.fixture(scope="module")
def psycopg_dialect():
    return create_engine("postgresql+psycopg://u@127.0.0.1:1/db").dialect


def test_psycopg_compiles_to_named_placeholders(psycopg_dialect):
    """The PostgreSQL direct path passes a dict: SQLAlchemy renders psycopg's named
    placeholders (``%(name)s``) under the bind names, with no positional order and no
    escaped names."""
    dialect = psycopg_dialect
    assert dialect.paramstyle == "pyformat", _changed(f"psycopg's paramstyle is {dialect.paramstyle}")
    compiled = select(_t.c.b).where(_t.c.a == bindparam("p_a"), _t.c.b == bindparam("p_b")) \
        .compile(dialect=dialect)
    assert compiled.positiontup is None, _changed("psycopg's statements carry a positiontup")
    assert not compiled.escaped_bind_names, _changed("plain bind names are escaped for psycopg")
    assert "%(p_a)s" in compiled.string and "%(p_b)s" in compiled.string, _changed(
        f"psycopg's placeholders: {compiled.string}")
    assert set(compiled.binds) == {"p_a", "p_b"}, _changed("compiled.binds keys")


def test_the_transaction_paths_statements_take_the_direct_path_on_psycopg(psycopg_dialect):
    """As on SQLite: on PostgreSQL through psycopg every statement of the transaction
    paths but those with an expanding IN list runs on the driver."""
    off = []
    for name, stmt in _product_statements():
        keys = tuple(stmt.stmt.table.columns.keys()) if stmt.stmt.is_insert else None
        expanding = any(b.expanding for b in
                        stmt.stmt.compile(dialect=psycopg_dialect).binds.values())
        if stmt.runs_on_driver(psycopg_dialect, keys) == expanding:
            off.append(name)
    assert not off, _changed(f"these statements changed path on psycopg: {off}")
