"""Extension mode's notification events (see docs/extension-mode.md).

``UpstreamObjects`` resolves tables and partitions from the upstream for the INSERT and
ACID_WRITE events clients report (``dml_events``); ``ForwardedEvents`` writes the events
of catalog changes forwarded through us (CREATE/ALTER/DROP_TABLE, ADD/ALTER/DROP_PARTITION,
CREATE/ALTER/DROP_DATABASE, functions) with the objects the upstream returned, so our cache
and notification readers see them.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.engine import Connection

from hms_txn.domain import names, notifications
from hms_txn.domain.catalog import ObjectJson

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
    caller's connection (``object_json`` as for ``tables.Tables``)."""

    def __init__(self, object_json: ObjectJson | None = None):
        self.object_json = object_json

    def _obj_json(self, kind: str, doc: Doc | None) -> str | None:
        if doc is None or self.object_json is None:
            return None
        return self.object_json(kind, doc)

    @staticmethod
    def _log(conn: Connection, event_type: str, db: str, table: str | None, message: Doc) -> int:
        message = {"server": "", "servicePrincipal": "", **message}
        message.setdefault("timestamp", int(time.time()))
        db = names.lower(db)
        table = names.lower(table) if table else None
        return notifications.append(conn, event_type, message, db_name=db, tbl_name=table)

    @staticmethod
    def _keys(table: Doc) -> list[str]:
        return [k["name"].lower() for k in table.get("partitionKeys") or []]

    def database_changed(self, conn: Connection, event_type: str, name: str) -> int:
        return self._log(conn, event_type, name, None, {"db": names.lower(name)})

    def function_changed(self, conn: Connection, event_type: str, db: str, name: str, function: Doc | None) -> int:
        """CREATE/ALTER/DROP_FUNCTION (Hive's messages: db, functionObjJson or
        functionName)."""
        message: Doc = {"db": names.lower(db), "functionName": names.lower(name)}
        obj = self._obj_json("Function", function)
        if obj is not None:
            message["functionObjJson"] = obj
        return self._log(conn, event_type, db, None, message)

    def table_created(self, conn: Connection, table: Doc) -> int:
        message = {"db": table["dbName"], "table": table["tableName"],
                   "tableType": table.get("tableType")}
        obj = self._obj_json("Table", table)
        if obj is not None:
            message["tableObjJson"] = obj
        return self._log(conn, "CREATE_TABLE", table["dbName"], table["tableName"], message)

    def table_altered(self, conn: Connection, db: str, name: str, before: Doc | None, after: Doc | None) -> list[int]:
        """ALTER_TABLE on the old name (and, for a rename, on the new one too, so caches
        holding either name drop it)."""
        message: Doc = {"db": names.lower(db), "table": names.lower(name),
                        "tableType": (before or after or {}).get("tableType"),
                        "isTruncateOp": "false",
                        "writeId": int((after or {}).get("writeId") or -1)}
        if before is not None and after is not None and self.object_json:
            message["tableObjBeforeJson"] = self._obj_json("Table", before)
            message["tableObjAfterJson"] = self._obj_json("Table", after)
        ids = [self._log(conn, "ALTER_TABLE", db, name, message)]
        if after is not None and (names.lower(after.get("dbName")), names.lower(after.get("tableName"))) \
                != (names.lower(db), names.lower(name)):
            ids.append(self._log(conn, "ALTER_TABLE", after["dbName"], after["tableName"], message))
        return ids

    def table_dropped(self, conn: Connection, db: str, name: str, table: Doc | None) -> int:
        message: Doc = {"db": names.lower(db), "table": names.lower(name)}
        obj = self._obj_json("Table", table)
        if obj is not None:
            message["tableObjJson"] = obj
        return self._log(conn, "DROP_TABLE", db, name, message)

    def partitions_added(self, conn: Connection, table: Doc, parts: list[Doc]) -> int | None:
        if not parts:
            return None
        keys = self._keys(table)
        message: Doc = {"db": table["dbName"], "table": table["tableName"],
                        "partitions": [dict(zip(keys, p.get("values") or [])) for p in parts]}
        if self.object_json:
            message["tableObjJson"] = self._obj_json("Table", table)
            message["partitionListJson"] = [self._obj_json("Partition", p) for p in parts]
        return self._log(conn, "ADD_PARTITION", table["dbName"], table["tableName"], message)

    def partitions_altered(self, conn: Connection, db: str, name: str, parts: list[Doc]) -> list[int]:
        ids = []
        for part in parts:
            message: Doc = {"db": names.lower(db), "table": names.lower(name),
                            "isTruncateOp": "false", "values": list(part.get("values") or [])}
            obj = self._obj_json("Partition", part)
            if obj is not None:
                message["partitionObjAfterJson"] = obj
            ids.append(self._log(conn, "ALTER_PARTITION", db, name, message))
        return ids

    def partitions_dropped(self, conn: Connection, db: str, name: str, values: list[list[str]],
                           table: Doc | None = None) -> int:
        keys = self._keys(table) if table else []
        message: Doc = {"db": names.lower(db), "table": names.lower(name),
                        "partitions": [dict(zip(keys, v)) if keys else {"values": v} for v in values]}
        return self._log(conn, "DROP_PARTITION", db, name, message)
