"""Materialized views: the ones enabled for query rewriting, and their creation metadata
(the source tables and the snapshot a view was built from, ``Table.creationMetadata``)."""

from __future__ import annotations

import copy

from sqlalchemy import update
from sqlalchemy.engine import Connection

from hms_txn.domain import event_messages, names, notifications
from hms_txn.domain.catalog import (MATERIALIZED_VIEW, Doc, database_row, dumps, get_tables,
                                    list_databases, require_table)
from hms_txn.store.schema import tbls


def for_rewriting(conn: Connection, db: str | None) -> list[Doc]:
    """The materialized views with rewriting enabled, of ``db`` (of every database for
    None; none for a database that does not exist, as Hive answers)."""
    out = []
    for name in [names.lower(db)] if db is not None else list_databases(conn):
        if database_row(conn, name) is None:
            continue
        out += [d for d in get_tables(conn, name, None)
                if d.get("tableType") == MATERIALIZED_VIEW and d.get("rewriteEnabled")]
    return out


def set_creation_metadata(conn: Connection, ctx: event_messages.MessageContext, db: str,
                          name: str, metadata: Doc) -> None:
    """Store a view's creation metadata. Hive writes no event for it; this writes an
    ALTER_TABLE so that every metadata cache (ours, other hms-txn processes, extension
    mode's) drops the changed table."""
    tbl_id, before = require_table(conn, names.lower(db), names.lower(name), for_update=True)
    after = copy.deepcopy(before)
    after["creationMetadata"] = metadata
    conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(doc=dumps(after)))
    notifications.append_entries(conn, [event_messages.alter_table(ctx, before, after)])
