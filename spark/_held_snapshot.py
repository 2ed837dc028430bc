"""``with hive_acid.snapshot(spark, "db.t") as df:`` -- one snapshot of a table, held for the
block and scanned by Spark's own ORC reader (``_native``).

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

import logging
from typing import List, Optional, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as S

from hms_txn.clients.acid import metastore as M
from orc_acid.layout import DEFAULT_PARTITION_NAME

from . import _native as N
from . import _types as TY
from ._datasource import FORMAT
from ._driver import Driver
from ._errors import HiveAcidError
from ._scope import acid_table, snapshot_df
from ._session import registered_driver


log = logging.getLogger("spark.hive_acid")


class Snapshot:
    """``with hive_acid.snapshot(spark, "db.t") as df:`` (see :func:`snapshot`). After
    ``__enter__``: ``native`` (True: Spark's ORC reader; False: the Python data source) and
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
            return self._dataframe(d, info, txn, own)
        except BaseException:
            self._release()
            raise

    def __exit__(self, *exc) -> None:
        self._release()

    def _release(self) -> None:
        if self._held is not None and self._driver is not None:
            self._driver.release_read(self._held)
            self._held = None

    def _targets(self, d: Driver, info: M.TableInfo) -> List[tuple]:
        if not info.partition_keys:
            if self.partition_filter:
                raise HiveAcidError(f"partition_filter: {info.full_name} is not partitioned")
            return [(info.location, ())]
        listed = M.list_partitions(d.ms, info)
        if self.partition_filter:
            keep = set(_matching_partitions(self.session, info,
                                            [v for _, v, _ in listed], self.partition_filter))
            listed = [p for i, p in enumerate(listed) if i in keep]
        return [(loc, tuple(values)) for _, values, loc in listed]

    def _dataframe(self, d: Driver, info: M.TableInfo, txn, own: bool) -> DataFrame:
        reason = None
        if not self.want_native:
            reason = "native=False"
        elif own:
            reason = "the transaction wrote to this table (its uncommitted statements)"
        if reason is None:
            try:
                missing = N.hadoop_connector_missing(self.session, info)
                if missing:
                    raise N.Fallback(missing)
                plan = N.plan(info, self.txns, self.write_ids, self._targets(d, info))
                df = N.build(self.session, plan, self.columns, self.with_row_id)
                self.native = True      # partition_filter: only matching partitions planned
                return df
            except N.Fallback as e:
                reason = str(e)
        self.native, self.fallback_reason = False, reason
        log.info("hive_acid.snapshot(%s): Python data source (%s)", info.full_name, reason)
        want = self.columns
        if self.with_row_id:
            N.output_struct(info, want, True)       # validates the names
        if own:
            df = snapshot_df(self.session, d, txn, info, with_row_id=self.with_row_id)
        else:
            df = (self.session.read.format(FORMAT)
                  .option("validTxnList", self.txns).option("validWriteIdList", self.write_ids)
                  .option("withRowId", str(self.with_row_id).lower())
                  .option("metastore.uris", d.uri).load(info.full_name))
        if self.partition_filter:
            if info.partition_keys:
                _matching_partitions(self.session, info, [], self.partition_filter, check=True)
            df = df.where(F.expr(self.partition_filter))     # pushed down: prunes
        if want:
            N.output_struct(info, want, False)
            df = df.select(*([F.col("ROW__ID")] if self.with_row_id else []),
                           *[F.col(f"`{c}`") for c in want])
        return df


def _matching_partitions(session: SparkSession, info: M.TableInfo, values: List[List[str]],
                         condition: str, check: bool = False) -> List[int]:
    """Indexes of the partitions (raw value lists) for which the Spark SQL ``condition`` on
    partition columns holds (evaluated on a local relation: no job). ``check``: only verify
    that the condition uses partition columns only."""
    if not values and not check:
        return []
    raw = S.StructType([S.StructField("__i", S.IntegerType())] + [
        S.StructField(f"__p{i}", S.StringType()) for i in range(len(info.part_names))])
    local = session.createDataFrame([(i, *v) for i, v in enumerate(values)], raw)
    typed = local.select("__i", *[
        F.when(F.col(f"__p{i}") == DEFAULT_PARTITION_NAME, F.lit(None))
        .otherwise(F.col(f"__p{i}")).cast(TY.hive_to_spark(t)).alias(k)
        for i, (k, t) in enumerate(info.partition_keys)])
    try:
        filtered = typed.where(F.expr(condition))
        if check:
            filtered.schema       # analysis only
            return []
        got = filtered.select("__i").collect()
    except Exception as e:
        raise HiveAcidError(f"partition_filter {condition!r} on {info.full_name}: only the "
                            f"partition columns {info.part_names} may be used ({e})") from None
    return [r[0] for r in got]


def snapshot(session: SparkSession, table: str, *, columns: Optional[Sequence[str]] = None,
             partition_filter: Optional[str] = None, with_row_id: bool = False,
             native: bool = True) -> Snapshot:
    """``with hive_acid.snapshot(spark, "db.t") as df:`` -- the table at one snapshot, read by
    Spark's own vectorized ORC reader (the snapshot applied by Spark filters and an anti join
    with the delete events), valid inside the block.

    Outside a transaction the snapshot is taken at entry under a txn-less SHARED_READ lock
    that is heartbeated until the block exits (so the compactor's Cleaner cannot remove the
    files the DataFrame reads); use ``df`` only inside the block. Inside ``transaction()`` it
    is the transaction's snapshot (no extra lock: the open transaction blocks the Cleaner).
    ``columns`` projects, ``partition_filter`` (Spark SQL on partition columns) prunes
    partitions before any file is listed, ``with_row_id`` adds ``ROW__ID``. Tables or
    snapshots this path cannot read exactly (see docs/spark.md) are read through the Python
    data source at the same snapshot instead (``Snapshot.native`` says which)."""
    return Snapshot(session, table, columns=columns, partition_filter=partition_filter,
                    with_row_id=with_row_id, native=native)
