"""Reading an ACID table into a DataFrame: ``hive_acid.read`` (and through it the ACID
tables of ``hive_acid.sql`` queries and ``Transaction.read``), and the DataFrame of
``hive_acid.snapshot()``.

Both read the table at one snapshot on the JVM path (``_native``: hive_acid's JVM reader,
else Spark's ORC reader), or, where that path cannot read the snapshot exactly, through the
Python data source at the same snapshot (:func:`frame`). They differ in how long the
snapshot's files are protected from the compactor's Cleaner:

* inside ``transaction()``: the transaction's snapshot (its own earlier statements
  included); its open transaction blocks the Cleaner, no lock is taken;
* ``read()`` outside a transaction: a txn-less SHARED_READ lock, then the snapshot; the
  lock is a *lease* (``_leases``): heartbeated while the returned DataFrame, or any
  DataFrame, view or cache derived from it, can still be used, and released once the JVM
  no longer reaches its plan, when its SparkContext stops or at ``hive_acid.shutdown()``;
* ``snapshot()``: the same lock, held until its ``with`` block exits.

The snapshot is taken when the DataFrame is made and stays fixed for its life (as Delta
and Iceberg DataFrames do): every query on it sees the same rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import List, Optional, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as S

from orc_acid.layout import DEFAULT_PARTITION_NAME

from hms_txn.clients.acid import metastore as M
from . import _native as N
from . import _types as TY
from ._datasource import FORMAT
from ._driver import Driver, Txn
from ._errors import HiveAcidError
from ._scope import acid_table, snapshot_df
from ._session import registered_driver

log = logging.getLogger("spark.hive_acid")


@dataclass
class Frame:
    """A table's DataFrame at one snapshot and how it is read."""
    df: DataFrame
    reader: str                       # "jvm" | "orc" (both: native) | "python"
    fallback_reason: Optional[str]    # why not native (None when native)
    leased_by: Optional[str] = None   # the JVM reader class keeping its tables for the lease

    @property
    def native(self) -> bool:
        return self.reader != "python"


def _targets(session: SparkSession, d: Driver, info: M.TableInfo,
             partition_filter: Optional[str]) -> List[tuple]:
    if not info.partition_keys:
        if partition_filter:
            raise HiveAcidError(f"partition_filter: {info.full_name} is not partitioned")
        return [(info.location, ())]
    listed = M.list_partitions(d.ms, info)
    if partition_filter:
        keep = set(_matching_partitions(session, info, [v for _, v, _ in listed],
                                        partition_filter))
        listed = [p for i, p in enumerate(listed) if i in keep]
    return [(loc, tuple(values)) for _, values, loc in listed]


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


def frame(session: SparkSession, d: Driver, info: M.TableInfo, txns: str, write_ids: str, *,
          txn: Optional[Txn] = None, own: bool = False, columns: Optional[Sequence[str]] = None,
          partition_filter: Optional[str] = None, with_row_id: bool = False,
          native: bool = True, lease: Optional[str] = None) -> Frame:
    """``info``'s table at the snapshot (``txns``, ``write_ids``): natively where possible,
    else the Python data source pinned to the same snapshot (``own``: the transaction
    ``txn`` wrote the table; its uncommitted statements are read through it). ``lease``:
    the id under which the JVM reader keeps its tables (``_leases``)."""
    reason = None
    if not native:
        reason = "native=False"
    elif own:
        reason = "the transaction wrote to this table (its uncommitted statements)"
    if reason is None:
        try:
            missing = N.hadoop_connector_missing(session, info)
            if missing:
                raise N.Fallback(missing)
            plan = N.plan(info, txns, write_ids,
                          _targets(session, d, info, partition_filter))
            df, reader, leased_by = N.build(session, plan, columns, with_row_id, lease)
            return Frame(df, reader, None, leased_by)   # only partition_filter's were planned
        except N.Fallback as e:
            reason = str(e)
    log.info("hive_acid: %s read through the Python data source (%s)", info.full_name, reason)
    if with_row_id:
        N.output_struct(info, columns, True)       # validates the names
    if own:
        df = snapshot_df(session, d, txn, info, with_row_id=with_row_id)
    else:
        df = (session.read.format(FORMAT)
              .option("validTxnList", txns).option("validWriteIdList", write_ids)
              .option("withRowId", str(with_row_id).lower())
              .option("metastore.uris", d.uri).load(info.full_name))
    if partition_filter:
        if info.partition_keys:
            _matching_partitions(session, info, [], partition_filter, check=True)
        df = df.where(F.expr(partition_filter))     # pushed down: prunes
    if columns:
        N.output_struct(info, columns, False)
        df = df.select(*([F.col("ROW__ID")] if with_row_id else []),
                       *[F.col(f"`{c}`") for c in columns])
    return Frame(df, "python", reason)


def read(session: SparkSession, table: str, *, columns: Optional[Sequence[str]] = None,
         partition_filter: Optional[str] = None, with_row_id: bool = False) -> DataFrame:
    """The table at one snapshot as a DataFrame, read by the JVM reader (the Python data
    source where it cannot read the table exactly: see docs/spark.md). Inside
    ``transaction()``: the transaction's snapshot, its own statements included. Outside: a
    new snapshot under a read lock held while the DataFrame (or one derived from it) can
    be used. ``columns`` projects, ``partition_filter`` (Spark SQL on partition columns)
    prunes partitions before any file is listed, ``with_row_id`` adds ``ROW__ID``."""
    d = registered_driver(session)
    info = acid_table(d, table)
    info.check_columns(columns or [])           # before any lock is taken
    kw = dict(columns=columns, partition_filter=partition_filter, with_row_id=with_row_id)
    txn = d.active
    if txn is not None:
        wids = d.snapshot(txn, [info.full_name])[info.full_name]
        with txn.lock:
            own = info.full_name in txn.write_ids
        return frame(session, d, info, txn.txns, wids, txn=txn, own=own, **kw).df
    held = d.hold_read([info])
    try:
        f = frame(session, d, info, held["txns"], held["write_ids"][info.full_name],
                  lease=held["scan"], **kw)
        d.leases.hold(held["scan"], f.df, f.leased_by)
    except BaseException:
        d.release_read(held["scan"])
        raise
    return f.df
