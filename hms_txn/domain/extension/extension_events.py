"""Extension mode's notification events (see docs/extension-mode.md).

``UpstreamObjects`` resolves tables and partitions from the upstream for the INSERT events
and ACID writes clients report (``dml_events``); ``ForwardedEvents`` writes the events of
catalog changes forwarded through us (CREATE/ALTER/DROP_TABLE, ADD/ALTER/DROP_PARTITION,
CREATE/ALTER/DROP_DATABASE, CREATE/DROP_FUNCTION) with the objects the upstream returned,
so our cache and notification readers see them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.events.event_messages.base import partition_name
from hms_txn.domain.model.warehouse import data_files

Doc = dict[str, Any]


class UpstreamObjects:
    """``dml_events.ObjectSource`` over the upstream's tables and partitions."""

    def __init__(self, tables):
        self.tables = tables      # clients.upstream.UpstreamTables

    def objects(self, conn: Connection, db: str, table: str, partition_values):
        table_doc = self.tables.get_table(names.lower(db), names.lower(table))
        part_doc = None
        if partition_values:
            part_doc = self.tables.get_partition(table_doc["dbName"], table_doc["tableName"],
                                                 [str(v) for v in partition_values])
        return table_doc, part_doc


class ForwardedEvents:
    """The events of catalog changes forwarded to the upstream, each written on the
    caller's connection as Hive 4 writes them (``messages``: ``event_messages``), with the
    objects the upstream holds before and after the change. ALTER_FUNCTION writes none
    (Hive has no such event): other hms-txn processes see an altered function within the
    function cache's time to live."""

    def __init__(self, messages: em.MessageContext):
        self.messages = messages

    def _log(self, conn: Connection, *entries: em.LogEntry | None) -> list[int]:
        return notifications.append(conn, self.messages.message_format, *entries)

    def database_created(self, conn: Connection, db: Doc) -> list[int]:
        return self._log(conn, em.create_database(self.messages, db))

    def database_altered(self, conn: Connection, before: Doc, after: Doc) -> list[int]:
        return self._log(conn, em.alter_database(self.messages, before, after))

    def database_dropped(self, conn: Connection, db: Doc) -> list[int]:
        return self._log(conn, em.drop_database(self.messages, db))

    def function_created(self, conn: Connection, function: Doc) -> list[int]:
        return self._log(conn, em.create_function(self.messages, function))

    def function_dropped(self, conn: Connection, function: Doc) -> list[int]:
        return self._log(conn, em.drop_function(self.messages, function))

    def table_created(self, conn: Connection, table: Doc) -> list[int]:
        files = data_files((table.get("sd") or {}).get("location"))
        return self._log(conn, em.create_table(self.messages, table, files))

    def table_altered(self, conn: Connection, before: Doc, after: Doc,
                      write_id: int | None = None) -> list[int]:
        """One ALTER_TABLE, also for a rename: its row names the new table, its message
        the old one (our caches drop both: ``event_messages.other_changed_tables``)."""
        return self._log(conn, em.alter_table(self.messages, before, after, write_id=write_id))

    def table_dropped(self, conn: Connection, table: Doc) -> list[int]:
        return self._log(conn, em.drop_table(self.messages, table))

    def partitions_added(self, conn: Connection, table: Doc, parts: list[Doc]) -> list[int]:
        files = {partition_name(table, p["values"]):
                 data_files((p.get("sd") or {}).get("location")) for p in parts}
        return self._log(conn, em.add_partitions(self.messages, table, parts, files))

    def partitions_altered(self, conn: Connection, table: Doc, before: list[Doc],
                           after: list[Doc]) -> list[int]:
        """One ALTER_PARTITION per (before, after) pair (a rename_partition is one)."""
        return self._log(conn, *(em.alter_partition(self.messages, table, b, a)
                                 for b, a in zip(before, after)))

    def partitions_dropped(self, conn: Connection, table: Doc,
                           values: list[list[str]]) -> list[int]:
        return self._log(conn, em.drop_partitions(self.messages, table, values))
