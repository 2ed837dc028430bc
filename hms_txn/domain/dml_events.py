"""The events of data changes that clients report: INSERT (``fire_listener_event``) and
ACID_WRITE_EVENT (``add_write_notification_log``).

Their messages name the table and partition the files went into, with the objects as
Thrift-JSON; ``ObjectSource`` finds those objects (in our catalog, or, in extension mode,
in the upstream metastore).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from sqlalchemy.engine import Connection

from hms_txn.common.errors import NoSuchObject
from hms_txn.domain import names, notifications
from hms_txn.domain.catalog import (Doc, ObjectJson, partition_name, partition_rows,
                                    require_table)
from hms_txn.domain.txn_records import require_open


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


def _encode_file(path: str, subdir: str | None) -> str:
    """Hive's ``ReplChangeManager.encodeFileUri`` without a change-management root:
    ``<file>###<subdir>`` (the checksum is only written together with a cm root)."""
    return f"{path}###{subdir or ''}"


class DmlEvents:
    def __init__(self, source: ObjectSource, object_json: ObjectJson | None = None):
        self.source = source
        self.object_json = object_json

    def _obj_json(self, kind: str, doc: Doc | None) -> str | None:
        if doc is None or self.object_json is None:
            return None
        return self.object_json(kind, doc)

    def fire_insert(self, conn: Connection, db: str, table: str,
                    inserts: list[tuple[list[str] | None, bool, list[str], list[str] | None]]
                    ) -> list[int]:
        """Write one INSERT event per ``(partition values, replace, files, subdirs)``.

        Messages follow Hive's ``JSONInsertMessage``: server, servicePrincipal, cat, db,
        table, tableType, tableObjJson, ptnObjJson (partitioned inserts), timestamp,
        replace ("true"/"false") and files.
        """
        batch = []
        for part_vals, replace, files, subdirs in inserts:
            table_doc, part_doc = self.source.objects(conn, db, table, part_vals)
            message: dict[str, Any] = {
                "server": "", "servicePrincipal": "", "cat": table_doc.get("catName") or "hive",
                "db": table_doc["dbName"], "table": table_doc["tableName"],
                "tableType": table_doc.get("tableType"),
            }
            obj = self._obj_json("Table", table_doc)
            if obj is not None:
                message["tableObjJson"] = obj
            pobj = self._obj_json("Partition", part_doc)
            if pobj is not None:
                message["ptnObjJson"] = pobj
            message["timestamp"] = int(time.time())
            message["replace"] = "true" if replace else "false"
            message["files"] = [_encode_file(f, subdirs[i] if subdirs and i < len(subdirs) else None)
                                for i, f in enumerate(files)]
            batch.append(("INSERT", message, table_doc["dbName"], table_doc["tableName"]))
        return notifications.append_many(conn, batch)

    def add_write_notification(self, conn: Connection, txn_id: int, write_id: int, db: str,
                               table: str, files: list[str], subdirs: list[str] | None,
                               partition_values: list[str] | None) -> int:
        """An ACID_WRITE_EVENT for a write inside an open transaction (Hive's
        ``add_write_notification_log``), fields as Hive's ``JSONAcidWriteMessage``."""
        require_open(conn, txn_id)
        table_doc, part_doc = self.source.objects(conn, db, table, partition_values)
        part_name = None
        if part_doc is not None:
            part_name = partition_name(table_doc, part_doc["values"])
        message: dict[str, Any] = {
            "txnid": txn_id, "writeId": write_id, "timestamp": int(time.time()),
            "server": "", "servicePrincipal": "",
            "database": table_doc["dbName"], "table": table_doc["tableName"],
            "partition": part_name,
            "tableObjJson": self._obj_json("Table", table_doc),
            "partitionObjJson": self._obj_json("Partition", part_doc),
            "files": [_encode_file(f, subdirs[i] if subdirs and i < len(subdirs) else None)
                      for i, f in enumerate(files)],
        }
        return notifications.append(conn, "ACID_WRITE_EVENT", message,
                                    db_name=table_doc["dbName"], tbl_name=table_doc["tableName"])
