"""``with hive_acid.snapshot(spark, "db.t") as df:`` -- one snapshot of a table, held for the
block and scanned on the JVM path (``_native``; the DataFrame is made by ``_reads``).

Invariants:

* Outside a transaction the lock comes first, then the snapshot (``Scans.open``), and the
  lock is held (heartbeated, no lease) until the block exits: the compactor's Cleaner
  cannot remove a file the DataFrame reads while the block runs. Use ``df`` only inside it.
* Inside ``transaction()`` the snapshot is the transaction's; its open transaction blocks
  the Cleaner, no lock is taken.
* Where the JVM path cannot read the snapshot exactly (``_native.Fallback``; or the
  transaction wrote the table: its uncommitted statements) the same snapshot is read by
  the Python data source instead; ``Snapshot.native`` / ``fallback_reason`` say which.
"""

from __future__ import annotations

from typing import Optional, Sequence

from pyspark.sql import DataFrame, SparkSession

from ._driver import Driver
from ._reads import frame
from ._scope import acid_table
from ._session import registered_driver


class Snapshot:
    """``with hive_acid.snapshot(spark, "db.t") as df:`` (see :func:`snapshot`). After
    ``__enter__``: ``native`` (True: the JVM path; False: the Python data source),
    ``reader`` ("jvm": hive_acid's JVM reader, "orc": Spark's ORC reader, "python") and
    ``fallback_reason`` (why not native, or None)."""

    def __init__(self, session: SparkSession, table: str, *,
                 columns: Optional[Sequence[str]] = None,
                 partition_filter: Optional[str] = None, with_row_id: bool = False,
                 native: bool = True):
        self.session, self.table = session, table
        self.columns = list(columns) if columns else None
        self.partition_filter = partition_filter
        self.with_row_id = with_row_id
        self.want_native = native
        self.native: Optional[bool] = None
        self.reader: Optional[str] = None
        self.fallback_reason: Optional[str] = None
        self.txns: Optional[str] = None
        self.write_ids: Optional[str] = None
        self.lock_id: Optional[int] = None
        self._driver: Optional[Driver] = None
        self._held: Optional[str] = None

    def __enter__(self) -> DataFrame:
        d = self._driver = registered_driver(self.session)
        info = acid_table(d, self.table)
        info.check_columns(self.columns or [])        # before any lock is taken
        txn = d.active
        own = False
        if txn is not None:           # the transaction's snapshot; its open txn blocks cleaning
            self.txns = txn.txns
            self.write_ids = d.snapshot(txn, [info.full_name])[info.full_name]
            with txn.lock:
                own = info.full_name in txn.write_ids
        else:
            held = d.hold_read([info])
            self._held, self.lock_id = held["scan"], held["lock_id"]
            self.txns, self.write_ids = held["txns"], held["write_ids"][info.full_name]
        try:
            f = frame(self.session, d, info, self.txns, self.write_ids, txn=txn, own=own,
                      columns=self.columns, partition_filter=self.partition_filter,
                      with_row_id=self.with_row_id, native=self.want_native)
        except BaseException:
            self._release()
            raise
        self.native, self.reader, self.fallback_reason = f.native, f.reader, f.fallback_reason
        return f.df

    def __exit__(self, *exc) -> None:
        self._release()

    def _release(self) -> None:
        if self._held is not None and self._driver is not None:
            self._driver.release_read(self._held)
            self._held = None


def snapshot(session: SparkSession, table: str, *, columns: Optional[Sequence[str]] = None,
             partition_filter: Optional[str] = None, with_row_id: bool = False,
             native: bool = True) -> Snapshot:
    """``with hive_acid.snapshot(spark, "db.t") as df:`` -- the table at one snapshot, read on
    the JVM path (hive_acid's JVM reader), valid inside the block.

    Outside a transaction the snapshot is taken at entry under a txn-less SHARED_READ lock
    that is heartbeated until the block exits (so the compactor's Cleaner cannot remove the
    files the DataFrame reads); use ``df`` only inside the block. Inside ``transaction()`` it
    is the transaction's snapshot (no extra lock: the open transaction blocks the Cleaner).
    ``columns`` projects, ``partition_filter`` (Spark SQL on partition columns) prunes
    partitions before any file is listed, ``with_row_id`` adds ``ROW__ID``. Tables or
    snapshots this path cannot read exactly (see docs/spark.md) are read through the Python
    data source at the same snapshot instead (``Snapshot.native`` says which).
    ``hive_acid.read`` reads the same way, its lock held as long as the DataFrame is used."""
    return Snapshot(session, table, columns=columns, partition_filter=partition_filter,
                    with_row_id=with_row_id, native=native)
