"""Adding, altering, renaming and dropping partitions (see ``catalog`` for the stored form).

Each change runs on the caller's connection, writes its notification event there, and
returns the directory changes to make once it has committed (``warehouse.FileChanges``).
"""

from __future__ import annotations

import copy
import json

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import AlreadyExists, InvalidObject, InvalidOperation, NoSuchObject
from hms_txn.domain.stats import column_stats
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.model.catalog import (DDL_TIME, Doc, dumps, is_external, now_s, partition_keys,
                                          partition_name, partition_rows, require_table)
from hms_txn.domain.catalog.plain_form import stored_partition
from hms_txn.domain.model.warehouse import FileChanges, Warehouse
from hms_txn.store.schema import partitions


class Partitions:
    """Partition changes (``messages`` as for ``tables.Tables``)."""

    def __init__(self, warehouse: Warehouse, messages: em.MessageContext):
        self.warehouse = warehouse
        self.messages = messages

    def _log(self, conn: Connection, *entries: em.LogEntry | None) -> None:
        notifications.append(conn, self.messages.message_format, *entries)

    def _prepare(self, table: Doc, part: Doc) -> tuple[str, Doc]:
        keys = partition_keys(table)
        label = f"{table['dbName']}.{table['tableName']}"
        if not keys:
            raise InvalidObject(f"table {label} is not partitioned")
        values = part.get("values")
        if values is None or len(values) != len(keys):
            raise InvalidObject(
                f"partition values {values!r} do not match the partition keys "
                f"({', '.join(keys)}) of table {label}")
        if any(v is None for v in values):
            raise InvalidObject(f"partition values {values!r} of table {label} contain a null")
        if part.get("dbName") and names.lower(part["dbName"]) != table["dbName"] or \
           part.get("tableName") and names.lower(part["tableName"]) != table["tableName"]:
            raise InvalidObject(
                f"partition names table {part.get('dbName')}.{part.get('tableName')}, not {label}")
        doc = copy.deepcopy(stored_partition(part, table))
        doc["dbName"], doc["tableName"] = table["dbName"], table["tableName"]
        doc["values"] = [str(v) for v in values]
        name = names.make_partition_name(keys, doc["values"])
        sd = doc.get("sd")
        if not sd:
            sd = copy.deepcopy(table.get("sd") or {})
            sd["location"] = None
            doc["sd"] = sd
        if not sd.get("location") and table.get("sd", {}).get("location"):
            sd["location"] = self.warehouse.child(table["sd"]["location"], name)
        params = dict(doc.get("parameters") or {})
        params[DDL_TIME] = str(now_s())
        doc["parameters"] = params
        doc["createTime"] = doc.get("createTime") or now_s()
        doc.setdefault("lastAccessTime", 0)
        doc["catName"] = "hive"
        return name, doc

    def _add_fast_stats(self, part: Doc) -> None:
        """Like the Java metastore (hive.stats.autogather): a partition added over a
        directory that already holds files (Spark and Hive write the files first, then
        add the partition) gets ``numFiles``/``totalSize`` unless it carries both."""
        params = part["parameters"]
        if "numFiles" in params and "totalSize" in params:
            return
        stats = self.warehouse.quick_stats((part.get("sd") or {}).get("location"))
        if stats is not None:
            params.update(stats)

    def add(self, conn: Connection, db: str, table_name: str, parts: list[Doc], *,
            if_not_exists: bool = False) -> tuple[list[Doc], FileChanges]:
        """Add ``parts``; (the partitions added, their directories to make)."""
        db, table_name = names.lower(db), names.lower(table_name)
        tbl_id, table = require_table(conn, db, table_name, for_update=True)
        prepared: dict[str, Doc] = {}
        for part in parts:
            name, doc = self._prepare(table, part)
            if name in prepared:
                raise InvalidObject(f"partition {name} appears twice in the request")
            prepared[name] = doc
        if not prepared:
            return [], FileChanges()
        existing = set(conn.execute(
            select(partitions.c.part_name).where(partitions.c.tbl_id == tbl_id,
                                                  partitions.c.part_name.in_(list(prepared)))
        ).scalars())
        if existing and not if_not_exists:
            raise AlreadyExists(
                f"partition {sorted(existing)[0]} of table {db}.{table_name} already exists")
        added = [d for n, d in prepared.items() if n not in existing]
        for doc in added:
            self._add_fast_stats(doc)
        if added:
            conn.execute(insert(partitions), [
                {"tbl_id": tbl_id, "part_name": n, "doc": dumps(d)}
                for n, d in prepared.items() if n not in existing])
            files = {n: self.warehouse.data_files((d.get("sd") or {}).get("location"))
                     for n, d in prepared.items() if n not in existing}
            self._log(conn, em.add_partitions(self.messages, table, added, files))
        return added, FileChanges(create=[(d.get("sd") or {}).get("location") for d in added])

    def alter(self, conn: Connection, db: str, table_name: str, parts: list[Doc], *,
              valid_write_ids: str | None = None, write_id: int = -1) -> None:
        db, table_name = names.lower(db), names.lower(table_name)
        tbl_id, table = require_table(conn, db, table_name, for_update=True)
        altered = []
        for part in parts:
            name = partition_name(table, part.get("values") or [])
            row = conn.execute(select(partitions.c.part_id, partitions.c.doc).where(
                partitions.c.tbl_id == tbl_id, partitions.c.part_name == name)).first()
            if row is None:
                raise InvalidOperation(f"partition {name} of table {db}.{table_name} does not exist")
            old = json.loads(row.doc)
            doc = copy.deepcopy(stored_partition(part, table))
            doc["dbName"], doc["tableName"] = db, table_name
            doc["values"] = old["values"]
            doc["createTime"] = old.get("createTime")
            doc["catName"] = "hive"
            if not doc.get("sd"):
                doc["sd"] = old.get("sd")
            elif not doc["sd"].get("location"):
                doc["sd"]["location"] = (old.get("sd") or {}).get("location")
            params = dict(doc.get("parameters") or {})
            params[DDL_TIME] = str(now_s())
            doc["parameters"] = params
            column_stats.partition_altered(conn, table, row.part_id, old, doc, valid_write_ids,
                                           write_id)
            conn.execute(update(partitions).where(partitions.c.part_id == row.part_id)
                         .values(doc=dumps(doc)))
            altered.append(em.alter_partition(self.messages, table, old, doc))
        self._log(conn, *altered)

    def rename(self, conn: Connection, db: str, table_name: str, old_values: list[str],
               new_part: Doc) -> FileChanges:
        db, table_name = names.lower(db), names.lower(table_name)
        files = FileChanges()
        tbl_id, table = require_table(conn, db, table_name, for_update=True)
        old_name = partition_name(table, old_values)
        new_name, doc = self._prepare(table, new_part)
        row = conn.execute(select(partitions.c.part_id, partitions.c.doc).where(
            partitions.c.tbl_id == tbl_id, partitions.c.part_name == old_name)).first()
        if row is None:  # HiveAlterHandler.alterPartition's text
            raise InvalidOperation("Unable to rename partition because old partition does not exist")
        if conn.execute(select(partitions.c.part_id).where(
                partitions.c.tbl_id == tbl_id, partitions.c.part_name == new_name)).first():
            raise InvalidOperation(f"partition {new_name} of table {db}.{table_name} already exists")
        old = json.loads(row.doc)
        old_loc = (old.get("sd") or {}).get("location")
        table_loc = (table.get("sd") or {}).get("location")
        if old_loc and table_loc and old_loc == self.warehouse.child(table_loc, old_name):
            doc["sd"]["location"] = self.warehouse.child(table_loc, new_name)
            files.rename.append((old_loc, doc["sd"]["location"]))
        conn.execute(update(partitions).where(partitions.c.part_id == row.part_id)
                     .values(part_name=new_name, doc=dumps(doc)))
        self._log(conn, em.alter_partition(self.messages, table, old, doc))
        return files

    def drop(self, conn: Connection, db: str, table_name: str, part_values: list[list[str]], *,
             delete_data: bool, if_exists: bool = False) -> tuple[list[Doc], FileChanges]:
        """Drop the partitions of ``part_values``; (the partitions dropped, their
        directories to delete when ``delete_data`` and the table owns its data)."""
        db, table_name = names.lower(db), names.lower(table_name)
        tbl_id, table = require_table(conn, db, table_name, for_update=True)
        wanted = [partition_name(table, v) for v in part_values]
        rows = dict(partition_rows(conn, tbl_id, wanted))
        missing = [n for n in wanted if n not in rows]
        if missing and not if_exists:
            raise NoSuchObject(f"partition {missing[0]} of table {db}.{table_name} does not exist")
        if not rows:
            return [], FileChanges()
        conn.execute(delete(partitions).where(partitions.c.tbl_id == tbl_id,
                                              partitions.c.part_name.in_(list(rows))))
        self._log(conn, em.drop_partitions(self.messages, table,
                                           [d["values"] for d in rows.values()]))
        dropped = list(rows.values())
        files = FileChanges()
        if delete_data and not is_external(table):
            files.delete.extend((d.get("sd") or {}).get("location") for d in dropped)
        return dropped, files
