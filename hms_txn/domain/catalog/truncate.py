"""TRUNCATE: ``truncate_table`` and ``truncate_table_req``, as Hive 4's metastore does it
(HMSHandler.truncateTableInternal; TruncateTableHandler in newer Hive).

What is truncated: an unpartitioned table's location, or the locations of the partitions
named (all of them when none are named). Then:

* A transactional table keeps its files: each location gets an empty ``base_<writeId>``
  with a ``_metadata_acid`` marker of data format "truncated"
  (``Warehouse.add_truncate_base``), which hides everything older from readers once the
  write id commits; the cleaner removes the rest. The write id is the one the client
  allocated for the truncating transaction (``allocate_table_write_ids``); without one
  (the deprecated ``truncate_table`` sends -1) this is refused, where Hive would write a
  ``base_-000001``.
* Any other table loses its files (the directories stay), after the commit.
* The client may say otherwise in the environment context: ``truncateSkipDataDeletion``
  (what HiveServer2 sends, true when the ACID base is used) true keeps a plain table's
  files, false deletes a transactional table's instead of writing the base.

Every truncated table or partition gets its basic statistics that are present
(``numFiles``, ``numRows``, ``totalSize``, ``rawDataSize``, ``numFilesErasureCoded``) set
to 0, ``COLUMN_STATS_ACCURATE`` set to basic statistics only (column statistics no longer
accurate), the write id when there is one, and an ALTER_TABLE or ALTER_PARTITION event
whose ``isTruncateOp`` is true.
"""

from __future__ import annotations

import copy
import json
from typing import Mapping

from sqlalchemy import update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import Refused
from hms_txn.domain.events import event_messages, notifications
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import (DDL_TIME, Doc, dumps, is_transactional, list_partitions,
                                          now_s, partition_keys, require_table)
from hms_txn.domain.model.warehouse import FileChanges
from hms_txn.store.schema import partitions, tbls

# StatsSetupConst.SUPPORTED_STATS
BASIC_STATS = ("numFiles", "numRows", "totalSize", "rawDataSize", "numFilesErasureCoded")
COLUMN_STATS_ACCURATE = "COLUMN_STATS_ACCURATE"
SKIP_DATA_DELETION = "truncateSkipDataDeletion"


def truncated_parameters(params: Mapping[str, str] | None) -> dict[str, str]:
    """Hive's updateStatsForTruncate: present basic stats to 0, basic stats accurate,
    column statistics no longer accurate."""
    out = dict(params or {})
    for key in BASIC_STATS:
        if key in out:
            out[key] = "0"
    out[COLUMN_STATS_ACCURATE] = json.dumps({"BASIC_STATS": "true"}, separators=(",", ":"))
    return out


def _skip_data_deletion(env: Mapping[str, str] | None, default: bool) -> bool:
    value = (env or {}).get(SKIP_DATA_DELETION)
    return default if value is None else str(value).strip().lower() == "true"


def truncate(conn: Connection, ctx: event_messages.MessageContext, db: str | None,
             table_name: str | None, part_names: list[str] | None, write_id: int | None,
             env: Mapping[str, str] | None = None) -> tuple[list[str], FileChanges]:
    """Truncate (see the module docstring); (the locations that need an empty base at
    ``write_id`` -- to be written before the commit --, the file changes after it)."""
    tbl_id, table = require_table(conn, names.lower(db), names.lower(table_name),
                                  for_update=True)
    write_id = -1 if write_id is None else int(write_id)
    acid = is_transactional(table)
    use_base = acid and _skip_data_deletion(env, True)
    if use_base and write_id <= 0:
        raise Refused(
            f"Cannot truncate transactional table {table['dbName']}.{table['tableName']} "
            "without a write id: allocate one for the truncating transaction "
            "(allocate_table_write_ids) and send it with truncate_table_req")
    delete_files = not use_base and not _skip_data_deletion(env, acid)
    if partition_keys(table):
        locations = _truncate_partitions(conn, ctx, tbl_id, table, part_names, write_id)
    else:
        locations = [(table.get("sd") or {}).get("location")]
        _truncate_table_row(conn, ctx, tbl_id, table, write_id)
    locations = [loc for loc in locations if loc]
    if use_base:
        return locations, FileChanges()
    return [], FileChanges(empty=locations if delete_files else [])


def _truncate_table_row(conn: Connection, ctx: event_messages.MessageContext, tbl_id: int,
                        table: Doc, write_id: int) -> None:
    doc = copy.deepcopy(table)
    doc["parameters"] = truncated_parameters(doc.get("parameters"))
    # Hive notifies before it sets the table's write id: the event's table has the old one.
    entry = event_messages.alter_table(ctx, doc, doc, is_truncate=True, write_id=write_id)
    if write_id > 0:
        doc["writeId"] = write_id
    conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(doc=dumps(doc)))
    notifications.append(conn, ctx.message_format, entry)


def _truncate_partitions(conn: Connection, ctx: event_messages.MessageContext, tbl_id: int,
                         table: Doc, part_names: list[str] | None, write_id: int) -> list[str]:
    _, rows = list_partitions(conn, table["dbName"], table["tableName"],
                              part_names=part_names)
    entries, locations = [], []
    for name, part in rows:
        doc = copy.deepcopy(part)
        doc["parameters"] = truncated_parameters(doc.get("parameters"))
        doc["parameters"][DDL_TIME] = str(now_s())
        if write_id > 0:
            doc["writeId"] = write_id
        conn.execute(update(partitions).where(partitions.c.tbl_id == tbl_id,
                                              partitions.c.part_name == name)
                     .values(doc=dumps(doc)))
        entries.append(event_messages.alter_partition(ctx, table, doc, doc, is_truncate=True))
        locations.append((doc.get("sd") or {}).get("location"))
    notifications.append(conn, ctx.message_format, *entries)
    return locations
