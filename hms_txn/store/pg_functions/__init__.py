"""The PostgreSQL functions of the transaction calls: their SQL (the ``*.sql`` files of this
package) and their installation.

Why functions. On PostgreSQL every statement is a round trip and, measured, ~76 us of our
CPU on psycopg's direct path (hms_txn.store.prepared); an open+commit pair sent 9
statements and the writer path 22 (docs/benchmarks.md, issue 31). Each transaction call
is one function here, doing the call's reads, checks and writes inside the database and
answering in one row set: the call is one statement, in autocommit, so one round trip
(hms_txn.store.txn_functions runs them; ``Store.one_statement`` gives the connection).
SQLite keeps the Python path (in process, a statement is no round trip).

Versions. ``FUNCTIONS_VERSION`` numbers the SQL of this package; the database records the
version it has in ``hms_functions_version()``. The schema migrations
(hms_txn.store.migrations.ensure_schema) install the functions on a database without them
and replace them all when the recorded version is older: every function named ``hms_...``
in the schema is dropped and the files are run again, in the migration's transaction
(DDL is transactional on PostgreSQL: other server processes see the old set or the new one,
never a mix). A database whose version is newer than this package's is refused, as a newer
schema is. Change any SQL here -> raise ``FUNCTIONS_VERSION``. The ``hms_`` prefix is
reserved for these functions in the metastore's schema.

Conventions of the SQL: functions take the call's arguments as Python prepared them
(validated, names lower-cased, the notification messages' text around the holes the
database fills: hms_txn.domain.events.event_messages.templates), refuse with SQLSTATE ``HMnnn``
and the client's error text (common.sql lists the codes), and return ``o_``-named columns.
"""

from __future__ import annotations

import re
from importlib import resources

from sqlalchemy.engine import Connection

FUNCTIONS_VERSION = 1
# In dependency order (a SQL-language function is checked against what it calls when made).
FILES = ("common.sql", "txns.sql", "commit.sql", "write_ids.sql", "locks.sql", "compaction.sql")
PREFIX = "hms_"
# Installing is serialized across server processes starting together.
_INSTALL_LOCK = "SELECT pg_advisory_xact_lock(7311911, 42)"


class NewerFunctions(Exception):
    """The database has functions of a newer hms-txn."""


def statements() -> list[str]:
    """The CREATE statements of every file, in order: each file split before each
    ``CREATE`` at the start of a line (a statement's body never starts a line so)."""
    out = []
    for name in FILES:
        text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
        for chunk in re.split(r"(?m)^(?=CREATE )", text):
            if chunk.lstrip().startswith("CREATE "):
                out.append(chunk)
    out.append(f"CREATE FUNCTION {PREFIX}functions_version() RETURNS int "
               f"LANGUAGE sql IMMUTABLE AS $$ SELECT {FUNCTIONS_VERSION} $$")
    return out


def installed_version(conn: Connection) -> int | None:
    """The version of the functions the database has; None when it has none."""
    found = conn.exec_driver_sql(
        "SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = current_schema() AND p.proname = %(name)s",
        {"name": f"{PREFIX}functions_version"}).first()
    if found is None:
        return None
    return int(conn.exec_driver_sql(f"SELECT {PREFIX}functions_version()").scalar())


def needs_install(conn: Connection) -> bool:
    """Whether the functions are missing or older than this package's; raises
    ``NewerFunctions`` for newer ones."""
    found = installed_version(conn)
    if found is not None and found > FUNCTIONS_VERSION:
        raise NewerFunctions(
            f"the database has PostgreSQL functions of version {found}, newer than the "
            f"version {FUNCTIONS_VERSION} this hms-txn installs; upgrade hms-txn")
    return found != FUNCTIONS_VERSION


def ensure(conn: Connection) -> bool:
    """Install or replace the functions if the database's are missing or older (inside the
    caller's transaction); returns whether it did."""
    conn.exec_driver_sql(_INSTALL_LOCK)
    if not needs_install(conn):
        return False
    install(conn)
    return True


def install(conn: Connection) -> None:
    """Drop every ``hms_`` function of the schema and create this package's."""
    old = conn.exec_driver_sql(
        "SELECT p.oid::regprocedure::text FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = current_schema() AND p.proname LIKE %(prefix)s",
        {"prefix": PREFIX.replace("_", r"\_") + "%"}).scalars().all()
    # On the driver's cursor without parameters: no placeholder processing of the bodies'
    # format('...%s...') (SQLAlchemy's exec_driver_sql would hand the driver parameters).
    cursor = conn.connection.driver_connection.cursor()
    try:
        for signature in old:
            cursor.execute(f"DROP FUNCTION {signature}")
        for statement in statements():
            cursor.execute(statement)
    finally:
        cursor.close()
