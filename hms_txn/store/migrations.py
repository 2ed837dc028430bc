"""Schema versioning: create a fresh schema, upgrade an older one, refuse a newer one.

Every table carries the version that introduced it (``info["since"]``). Upgrading from
version V creates the tables introduced after V and runs the data steps registered for
the versions in between, all in one database transaction, then records the new version.

On PostgreSQL the same transaction installs the transaction calls' functions, or replaces
them when the database's are older (they have a version of their own:
hms_txn.store.pg_functions).
"""

from __future__ import annotations

import logging
from typing import Callable

from sqlalchemy import inspect, select, text, update
from sqlalchemy.engine import Connection

from hms_txn.store import pg_functions
from hms_txn.store.engine import Store
# security_schema puts its tables on ``metadata``: imported here, so that every schema this
# module creates or upgrades has them.
from hms_txn.store import security_schema  # noqa: F401
from hms_txn.store.schema import SCHEMA_VERSION, metadata, notification_log, schema_version

log = logging.getLogger(__name__)


class SchemaError(Exception):
    """The database schema cannot be used by this version of hms-txn."""


# Versions: 1 catalog; 2 notification log, transactions, write ids, locks, compaction
# queue; 3 delegation tokens (``delegation_tokens``, ``next_delegation_token_id``); 4 a
# lighter notification log (see _lighter_notification_log); 5 the durability marker
# (``hms_durability_marker``, its row written on first use); 6 table constraints
# (``table_constraints``); 7 column statistics (``table_column_stats``,
# ``partition_column_stats``); 8 roles, privileges and Hive's small stores (token store,
# runtime statistics, types, partition events; the default roles are written by the server
# at start); 9 ACID write notifications (``txn_write_notification_log``); 10 catalogs and
# the catalog extras (``catalogs``, ``dataconnectors``, ``stored_procedures``, ``packages``,
# ``replication_metrics``); 11 the materialized-view rebuild locks and the compaction
# metrics (``materialization_rebuild_locks``, ``compaction_metrics``).
# Versions 2, 3, 5, 6, 7, 8, 9, 10 and 11 only add tables (created from their
# ``info["since"]``), so they need no data step; such an upgrade leaves every existing row alone.


def _lighter_notification_log(conn: Connection) -> None:
    """Version 4: no index on ``notification_log.event_time``, and on SQLite the event id
    is the table's rowid instead of a key in an index of its own. Each was one more page
    written, and fsynced, by every commit. Events keep their ids and contents."""
    conn.execute(text("DROP INDEX IF EXISTS ix_notification_log_time"))
    if conn.dialect.name != "sqlite" or _event_id_is_rowid(conn):
        return
    # SQLite cannot change a table's key in place: copy the events into a new table.
    count = conn.execute(text("SELECT count(*) FROM notification_log")).scalar_one()
    log.info("schema version 4: copying %d notification events into the rowid-keyed log",
             count)
    conn.execute(text("ALTER TABLE notification_log RENAME TO notification_log_v3"))
    notification_log.create(conn)
    columns = ", ".join(c.name for c in notification_log.columns)
    conn.execute(text(f"INSERT INTO notification_log ({columns}) "
                      f"SELECT {columns} FROM notification_log_v3"))
    conn.execute(text("DROP TABLE notification_log_v3"))


def _event_id_is_rowid(conn: Connection) -> bool:
    # A column is the rowid when it is the whole primary key and declared INTEGER exactly.
    columns = conn.execute(text("PRAGMA table_info(notification_log)")).all()
    keys = [c for c in columns if c.pk]
    return len(keys) == 1 and keys[0].name == "event_id" and keys[0].type.upper() == "INTEGER"


# version -> callable(conn) run after the tables of that version are created.
DATA_STEPS: dict[int, Callable[[Connection], None]] = {4: _lighter_notification_log}


def current_version(conn: Connection) -> int | None:
    if not inspect(conn).has_table(schema_version.name):
        return None
    return conn.execute(select(schema_version.c.version)).scalar_one_or_none()


def ensure_schema(store: Store, *, auto_upgrade: bool = True) -> int:
    """Bring the database to ``SCHEMA_VERSION`` (and, on PostgreSQL, its functions to
    ``pg_functions.FUNCTIONS_VERSION``); returns the schema version found before."""
    with store.write() as conn:
        found = _ensure_tables(conn, auto_upgrade)
        if conn.dialect.name == "postgresql":
            _ensure_functions(conn, auto_upgrade or not found)
        return found


def _ensure_tables(conn: Connection, auto_upgrade: bool) -> int:
    found = current_version(conn)
    if found is None:
        if inspect(conn).get_table_names():
            unknown = sorted(inspect(conn).get_table_names())[:5]
            log.warning("database has tables but no hms-txn schema version: %s", unknown)
        metadata.create_all(conn)
        conn.execute(schema_version.insert().values(id=1, version=SCHEMA_VERSION))
        log.info("created metastore schema version %d", SCHEMA_VERSION)
        return 0
    if found == SCHEMA_VERSION:
        return found
    if found > SCHEMA_VERSION:
        raise SchemaError(
            f"the database has metastore schema version {found}, newer than the "
            f"version {SCHEMA_VERSION} this hms-txn supports; upgrade hms-txn"
        )
    if not auto_upgrade:
        raise SchemaError(
            f"the database has metastore schema version {found}; this hms-txn needs "
            f"version {SCHEMA_VERSION}. Run `hms-txn upgrade-schema` or set "
            f"hms_txn.schema.auto.upgrade=true"
        )
    upgrade(conn, found)
    return found


def _ensure_functions(conn: Connection, may_install: bool) -> None:
    try:
        if not may_install and pg_functions.needs_install(conn):
            raise SchemaError(
                f"the database's PostgreSQL functions are not version "
                f"{pg_functions.FUNCTIONS_VERSION}, which this hms-txn needs. Run `hms-txn "
                f"upgrade-schema` or set hms_txn.schema.auto.upgrade=true")
        if pg_functions.ensure(conn):
            log.info("installed the PostgreSQL functions, version %d",
                     pg_functions.FUNCTIONS_VERSION)
    except pg_functions.NewerFunctions as err:
        raise SchemaError(str(err)) from None


def upgrade(conn: Connection, found: int) -> None:
    for version in range(found + 1, SCHEMA_VERSION + 1):
        new_tables = [t for t in metadata.sorted_tables if t.info.get("since") == version]
        metadata.create_all(conn, tables=new_tables)
        if version in DATA_STEPS:
            DATA_STEPS[version](conn)
        log.info("upgraded metastore schema to version %d (%s)", version,
                 ", ".join(t.name for t in new_tables) or "no new tables")
    conn.execute(update(schema_version).values(version=SCHEMA_VERSION))
