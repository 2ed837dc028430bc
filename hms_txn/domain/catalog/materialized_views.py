"""Materialized views: the ones enabled for query rewriting, their creation metadata (the
source tables and the snapshot a view was built from, ``Table.creationMetadata``), and
whether their sources changed since (``get_materialization_invalidation_info``)."""

from __future__ import annotations

import copy
import json
from typing import Iterable

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from orc_acid.valid_ids import ValidIdListError, ValidTxnWriteIdList
from hms_txn.common.errors import InvalidInput

from hms_txn.domain.events import event_messages, notifications
from hms_txn.domain.model import names
from hms_txn.domain.txn.compaction_queue import READY_FOR_CLEANING, SUCCEEDED
from hms_txn.domain.model.catalog import (MATERIALIZED_VIEW, Doc, database_row, dumps, get_tables,
                                          list_databases, require_table)
from hms_txn.store.schema import (compaction_queue, completed_compactions,
                                  completed_txn_components, tbls)


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
    notifications.append(conn, ctx.message_format,
                         event_messages.alter_table(ctx, before, after))


def invalidation(conn: Connection, tables_used: Iterable[str],
                 snapshot: str | None) -> tuple[bool, bool] | None:
    """Hive's TxnHandler.getMaterializationInvalidationInfo: (whether a source table had an
    UPDATE or DELETE committed, whether one was compacted, with a write id the view's
    snapshot does not see). None -- Hive's null -- when the view names no source table,
    has Iceberg table snapshots, or its snapshot lacks a source table.

    ``snapshot`` is the view's ``CreationMetadata.validTxnList``: a ValidTxnWriteIdList,
    or Hive 4's MaterializationSnapshot JSON holding one under ``validTxnList``.
    """
    tables = sorted(set(tables_used or ()))
    if not tables:
        return None
    text = snapshot or ""
    try:
        if text.lstrip().startswith("{"):
            doc = json.loads(text)
            if doc.get("tableSnapshots"):
                return None
            text = doc.get("validTxnList") or ""
        seen = ValidTxnWriteIdList.parse(text)
    except (ValueError, ValidIdListError) as err:
        raise InvalidInput(f"invalid materialization snapshot {snapshot!r}: {err}") from None
    modified = compacted = False
    for full in tables:
        valid = seen.table(full)
        if valid is None:
            return None
        db, _, name = full.partition(".")
        ctc = completed_txn_components.c
        writes = conn.execute(select(ctc.write_id).where(
            ctc.db_name == db.lower(), ctc.tbl_name == name.lower(), ctc.update_delete == "Y",
            ctc.write_id.is_not(None))).scalars()
        modified = modified or any(not valid.is_write_id_valid(w) for w in writes)
        for queue, state in ((completed_compactions, SUCCEEDED),
                             (compaction_queue, READY_FOR_CLEANING)):
            ids = conn.execute(select(queue.c.highest_write_id).where(
                queue.c.db_name == db.lower(), queue.c.tbl_name == name.lower(),
                queue.c.state == state, queue.c.highest_write_id.is_not(None))).scalars()
            compacted = compacted or any(not valid.is_write_id_valid(w) for w in ids)
    return modified, compacted
