"""The data changes clients report, recorded as Hive 4 records them: INSERT events
(``fire_listener_event``) in the notification log, and ACID writes
(``add_write_notification_log``, and a commit's ``writeEventInfos``) as write
notifications, which ``get_all_write_event_info`` serves (``notifications.write_notifications``)
and which Hive keeps out of the log (see ``event_messages``).

The records name the table and partition the files went into, with the objects as
Thrift-JSON; ``ObjectSource`` finds those objects (in our catalog, or, in extension mode,
in the upstream metastore).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, Sequence

from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError, NoSuchObject
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import partition_name, partition_rows, require_table
from hms_txn.domain.txn.txn_records import require_open

log = logging.getLogger(__name__)

Doc = dict[str, Any]


class ObjectSource(Protocol):
    def objects(self, conn: Connection, db: str, table: str,
                partition_values: list[str] | None) -> tuple[Doc, Doc | None]:
        """(table, partition or None) named by a data-change report."""


class CatalogObjects:
    """Tables and partitions from our own catalog."""

    @staticmethod
    def objects(conn: Connection, db: str, table: str,
                partition_values: list[str] | None) -> tuple[Doc, Doc | None]:
        tbl_id, table_doc = require_table(conn, names.lower(db), names.lower(table))
        part_doc = None
        if partition_values:
            part_name = partition_name(table_doc, [str(v) for v in partition_values])
            rows = partition_rows(conn, tbl_id, [part_name])
            if not rows:
                raise NoSuchObject(f"partition {part_name} of table "
                                   f"{table_doc['dbName']}.{table_doc['tableName']} does not exist")
            part_doc = rows[0][1]
        return table_doc, part_doc


class DmlEvents:
    """``messages`` builds the records; ``record_commit_writes``: whether a commit's
    ``writeEventInfos`` are recorded (``hive.metastore.dml.events``)."""

    def __init__(self, source: ObjectSource, messages: em.MessageContext, *,
                 record_commit_writes: bool = True):
        self.source = source
        self.messages = messages
        self.record_commit_writes = record_commit_writes

    def fire_insert(self, conn: Connection, db: str, table: str,
                    inserts: list[tuple[list[str] | None, bool, list[str], list[str] | None]]
                    ) -> list[int]:
        """Write one INSERT event per ``(partition values, replace, files, subdirs)``;
        returns their ids."""
        entries = []
        for part_vals, replace, files, subdirs in inserts:
            table_doc, part_doc = self.source.objects(conn, db, table, part_vals)
            entries.append(em.insert(self.messages, table_doc, part_doc, files,
                                     replace=replace, subdirs=subdirs))
        return notifications.append(conn, self.messages.message_format, *entries)

    def add_write_notification(self, conn: Connection, txn_id: int, write_id: int, db: str,
                               table: str, files: list[str], subdirs: list[str] | None,
                               partition_values: list[str] | None) -> None:
        """Record a write inside an open transaction (Hive's
        ``add_write_notification_log``): a write notification, no log event."""
        require_open(conn, txn_id)
        table_doc, part_doc = self.source.objects(conn, db, table, partition_values)
        notifications.add_write_notification(conn, em.write_notification(
            self.messages, txn_id, write_id, table_doc, part_doc, files, subdirs))

    def commit_writes(self, conn: Connection, txn_id: int, infos: Sequence[Doc]) -> None:
        """Record the ``writeEventInfos`` of a commit (``WriteEventInfo`` documents) as
        write notifications, when ``record_commit_writes``; in the commit's transaction,
        after the commit itself. An entry whose table or partition is not found is left
        out (logged): the record must not fail the commit it describes."""
        if not self.record_commit_writes:
            return
        for info in infos:
            try:
                table_doc, part_doc = self.source.objects(conn, info["database"], info["table"],
                                                          None)
                if info.get("partition"):
                    keys = [k["name"] for k in table_doc.get("partitionKeys") or []]
                    values = names.partition_values_from_name(keys, info["partition"])
                    part_doc = self.source.objects(conn, info["database"], info["table"],
                                                   values)[1]
            except MetastoreError as err:
                log.warning("commit of txnid:%d: write of %s.%s %s not recorded: %s", txn_id,
                            info["database"], info["table"], info.get("partition") or "", err)
                continue
            notifications.add_write_notification(conn, em.commit_write_notification(
                self.messages, txn_id, info, table_doc, part_doc))
