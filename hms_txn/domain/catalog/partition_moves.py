"""Moving partitions between tables: ``exchange_partitions``, as Hive's HMSHandler does it.

The partitions of the source table that match a partial spec (``{key: value}`` for some of
the partition keys; the others match anything) move to the destination table, which must
have the same columns and partition keys and none of those partitions. In one transaction
the destination gets them (one ADD_PARTITION event) and the source loses them (one
DROP_PARTITION event per partition); the directory of the spec moves from under the source
table's location to the same place under the destination's once that has committed
(``warehouse.FileChanges``), and each moved partition's location says so. Hive's texts for
every refusal, all answered as MetaException (``Refused``).
"""

from __future__ import annotations

import copy
import json

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from hms_txn.common.errors import Refused
from hms_txn.domain.events import event_messages, notifications
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import (DDL_TIME, Doc, list_partitions, now_s, partition_keys,
                                          table_row)
from hms_txn.domain.model.warehouse import FileChanges, Warehouse
from hms_txn.store.schema import partitions


def _table(conn: Connection, db: str, name: str, role: str) -> tuple[int, Doc]:
    row = table_row(conn, names.lower(db), names.lower(name), for_update=True)
    if row is None:
        raise Refused(f"The {role} table hive.{names.lower(db)}.{names.lower(name)} not found")
    return row.tbl_id, json.loads(row.doc)


def _columns(doc: Doc, key: str) -> list[tuple[str, str]]:
    cols = (doc.get("sd") or {}).get("cols") if key == "cols" else doc.get("partitionKeys")
    return [(c["name"].lower(), (c.get("type") or "").lower()) for c in cols or []]


def exchange(conn: Connection, ctx: event_messages.MessageContext, warehouse: Warehouse,
             spec: dict[str, str] | None, source_db: str | None, source_name: str | None,
             dest_db: str | None, dest_name: str | None) -> tuple[list[Doc], FileChanges]:
    """Move the partitions of ``spec`` (see the module docstring); (the partitions as they
    are in the destination, the directory move)."""
    if None in (spec, source_db, source_name, dest_db, dest_name):
        raise Refused("The DB and table name for the source and destination tables, and the "
                      "partition specs must not be null.")
    dest_id, dest = _table(conn, dest_db, dest_name, "destination")
    source_id, source = _table(conn, source_db, source_name, "source")
    keys = partition_keys(source)
    lowered = {k.lower(): v for k, v in spec.items()}
    values = [lowered.get(k, "") for k in keys]
    _, rows = list_partitions(conn, source["dbName"], source["tableName"],
                              partial_values=values)
    if not rows:
        shown = ", ".join(f"{k}={v}" for k, v in spec.items())   # Java's Map.toString
        raise Refused(f"No partition is found with the values {{{shown}}} for the table "
                      f"{source['tableName']}")
    if (_columns(source, "cols") != _columns(dest, "cols")
            or _columns(source, "keys") != _columns(dest, "keys")):
        raise Refused("The tables have different schemas. Their partitions cannot be exchanged.")
    wanted = [name for name, _ in rows]
    present = conn.execute(select(partitions.c.part_name).where(
        partitions.c.tbl_id == dest_id, partitions.c.part_name.in_(wanted))).scalars().first()
    if present is not None:
        raise Refused(f"The partition {present} already exists in the table "
                      f"{dest['tableName']}")
    dest_root = (dest.get("sd") or {}).get("location")
    moved: list[Doc] = []
    for name, part in rows:
        doc = copy.deepcopy(part)
        doc["dbName"], doc["tableName"] = dest["dbName"], dest["tableName"]
        if dest_root:
            doc.setdefault("sd", {})["location"] = warehouse.child(dest_root, name)
        doc.setdefault("parameters", {})[DDL_TIME] = str(now_s())
        moved.append(doc)
    conn.execute(insert(partitions), [{"tbl_id": dest_id, "part_name": n,
                                       "doc": json.dumps(d, separators=(",", ":"))}
                                      for n, d in zip(wanted, moved)])
    conn.execute(delete(partitions).where(partitions.c.tbl_id == source_id,
                                          partitions.c.part_name.in_(wanted)))
    notifications.append(
        conn, ctx.message_format, event_messages.add_partitions(ctx, dest, moved),
        *(event_messages.drop_partitions(ctx, source, [part["values"]]) for _, part in rows))
    return moved, FileChanges(rename=_moved_directory(source, dest, keys, spec, warehouse))


def _moved_directory(source: Doc, dest: Doc, keys: list[str], spec: dict[str, str],
                     warehouse: Warehouse) -> list[tuple[str, str]]:
    """Hive moves the directory of the spec's leading keys (all of them when the spec names
    every key): ``<source location>/k1=v1/...`` to the same path under the destination."""
    lowered = {k.lower(): v for k, v in spec.items()}
    present = []
    for key in keys:
        if key not in lowered or lowered[key] == "":
            break
        present.append(key)
    src_root = (source.get("sd") or {}).get("location")
    dst_root = (dest.get("sd") or {}).get("location")
    if not present or not src_root or not dst_root:
        return []
    rel = names.make_partition_name(present, [lowered[k] for k in present])
    return [(warehouse.child(src_root, rel), warehouse.child(dst_root, rel))]
