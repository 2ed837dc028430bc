"""Partition event marking (``markPartitionForEvent``, ``isPartitionMarkedForEvent``): a
table's partition, named by a key -> value map, is marked as having had an event (Hive has
one, LOAD_DONE), as Hive's ``ObjectStore`` records it in ``PARTITION_EVENTS``.

The table must exist; the partition need not. The map must give a value for every partition
key (and nothing else: the counts must match); the partition is stored as its values joined
by ``,`` in key order. Database and table names are kept as sent (the table is looked up
case-insensitively but the mark is not: marking ``DB.T`` is not a mark of ``db.t``, as in
Hive). Marks never expire (Hive's default ``metastore.event.clean.freq`` is 0: no cleaner).
Hive notifies its listeners of the mark (LOAD_PARTITION_DONE), which write no notification
event.
"""

from __future__ import annotations

import json

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.model import catalog, names
from hms_txn.domain.txn.txn_records import now_ms
from hms_txn.store.schema import partition_events

LOAD_DONE = 1
_c = partition_events.c


class UnknownTable(MetastoreError):
    """UnknownTableException."""


class InvalidPartition(MetastoreError):
    """InvalidPartitionException."""


def _partition_string(conn: Connection, db: str | None, table: str | None,
                      spec: dict[str, str] | None, event_type: int | None) -> str:
    row = catalog.table_row(conn, names.lower(db), names.lower(table))
    if row is None:
        raise UnknownTable(f"Table: {table} is not found.")
    keys = catalog.partition_keys(json.loads(row.doc))
    spec = spec or {}
    if len(keys) != len(spec):
        raise InvalidPartition(
            f"Number of partition columns in table: {len(keys)} doesn't match with number of "
            f"supplied partition values: {len(spec)}")
    values = []
    for key in keys:
        if spec.get(key) is None:
            raise InvalidPartition(f"No value found for partition column: {key}")
        values.append(spec[key])
    if event_type != LOAD_DONE:
        raise MetastoreError(f"unknown partition event type {event_type!r}")
    return ",".join(values)


def mark(conn: Connection, catalog_name: str, db: str | None, table: str | None,
         spec: dict[str, str] | None, event_type: int | None) -> None:
    part = _partition_string(conn, db, table, spec, event_type)
    conn.execute(insert(partition_events).values(
        cat_name=catalog_name, db_name=db, tbl_name=table, part_name=part,
        event_type=event_type, event_time=now_ms()))


def is_marked(conn: Connection, catalog_name: str, db: str | None, table: str | None,
              spec: dict[str, str] | None, event_type: int | None) -> bool:
    part = _partition_string(conn, db, table, spec, event_type)
    return conn.execute(select(_c.id).where(
        (_c.cat_name == catalog_name) & (_c.db_name == db) & (_c.tbl_name == table)
        & (_c.part_name == part) & (_c.event_type == event_type)).limit(1)).first() is not None
