"""Read and write Hive ACID tables from PySpark with snapshot isolation.

    from spark import hive_acid
    hive_acid.register(spark)                      # once per session
    df = spark.read.format("hive_acid").load("db.t")
    df.write.format("hive_acid").mode("append").save("db.t")      # or "overwrite"
    hive_acid.delete(spark, "db.t", "id < 10")
    hive_acid.update(spark, "db.t", set={"qty": "qty + 1"}, condition="id = 3")
    hive_acid.merge(spark, "db.t", src_df, on="t.id = s.id",
                    when_matched_update={"qty": "s.qty"}, when_not_matched_insert={...})
    with hive_acid.transaction(spark) as tx:       # several statements, one transaction
        tx.append("db.a", df); tx.delete("db.b", "x = 1")
    hive_acid.sql(spark, "MERGE INTO db.t USING ... ON ... WHEN MATCHED THEN UPDATE SET ...")
    hive_acid.write_stream(stream_df, "db.t", checkpoint_location="/chk")  # exactly-once sink
    with hive_acid.snapshot(spark, "db.t") as df:  # Spark's own ORC reader, lock held
        df.groupBy("day").count().show()

Reads: the driver takes a snapshot (ValidTxnList + the table's ValidWriteIdList) and a
SHARED_READ lock held while the scan runs; one Spark input partition per (table partition,
bucket id); executors read with ``orc_acid`` and return Arrow batches. Filters on partition
columns prune partitions; a user-given schema (``spark.read.schema("a INT, p STRING")``) or the
``columns`` option projects columns. Options: ``metastore.uris``, ``columns``,
``withRowId`` (adds ``ROW__ID``).

``snapshot()`` (``spark/_native.py``) reads the same snapshot's files with Spark's vectorized
ORC reader instead, the snapshot applied by Spark filters and an anti join with the delete
events; its lock lives as long as the ``with`` block (see docs/spark.md for its fallbacks).

Writes: one transaction per job (write id allocated, lock taken, heartbeated from the driver
process); tasks write ``delta_W_W_S/bucket_<task>`` (``base_W`` for overwrite); the commit
removes files of failed task attempts, registers new partitions, records dynamic partitions
and commits with write events; a failed job aborts its transaction and deletes its files,
including those of tasks that finish after the abort (``_attempts``).

UPDATE/DELETE/MERGE follow Hive's split update: ``delete_delta_W_W_S`` (events in the file of
each row's decoded bucket) plus ``delta_W_W_(S+1)`` for new row versions. They take a
SHARED_WRITE lock with operation UPDATE/DELETE and commit with ``exclWriteEnabled=false`` so
the metastore's write-write conflict check applies; the loser gets ``WriteConflictError``.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as S
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader,
                                    EqualTo, GreaterThan, GreaterThanOrEqual, In, InputPartition,
                                    IsNotNull, IsNull, LessThan, LessThanOrEqual,
                                    WriterCommitMessage)

_PUSHABLE = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In, IsNull,
             IsNotNull)

from . import _io
from . import _metastore as M
from . import _types as TY
from ._rpc import rpc

if TYPE_CHECKING:   # the driver module is imported by driver-side functions only
    from ._driver import Driver, Statement, Txn
from ._metastore import HiveAcidError, WriteConflictError

__all__ = ["register", "shutdown", "create_database", "create_table", "drop_table", "read", "insert", "delete", "update",
           "merge", "transaction", "Transaction", "snapshot", "Snapshot", "sql", "write_stream", "HiveAcidError",
           "WriteConflictError", "HiveAcidDataSource"]

FORMAT = "hive_acid"
_log = logging.getLogger("spark.hive_acid")
_drivers: Dict[str, Driver] = {}
_drivers_mu = threading.Lock()


# -- registration -----------------------------------------------------------------------------

def _session_uri(session: SparkSession, uri: Optional[str] = None) -> str:
    if uri:
        return uri
    for key in ("spark.hadoop.hive.metastore.uris", "spark.hive.metastore.uris"):
        try:
            v = session.conf.get(key, None)
        except Exception:
            v = None
        if v:
            return v
        v = session.sparkContext.getConf().get(key, None)
        if v:
            return v
    raise HiveAcidError("no metastore: pass uri=... or set spark.hadoop.hive.metastore.uris")


def _driver(session: SparkSession, uri: Optional[str] = None) -> "Driver":
    from ._driver import Driver
    uri = _session_uri(session, uri)
    with _drivers_mu:
        d = _drivers.get(uri)
        if d is None:
            bind, advertised = coordinator_hosts(session.sparkContext.getConf())
            d = _drivers[uri] = Driver(uri, bind_host=bind, advertised_host=advertised)
        return d


COORDINATOR_HOST = "spark.hive_acid.coordinator.host"


def coordinator_hosts(conf) -> Tuple[str, str]:
    """(address the driver's coordinator listens on, address its tasks call), from a
    SparkConf (anything with ``get(key, default)``; SparkContext settings, fixed for the
    process).

    Executor tasks call the coordinator (``_as_attempt``, read progress), so on a cluster it
    must listen where executors can reach the driver: ``spark.driver.bindAddress`` (else
    ``spark.driver.host``), and tasks call ``spark.driver.host``, as Spark's own executors
    do. With a ``local`` master every task runs on this host: loopback. ``COORDINATOR_HOST``
    overrides the listening address (0.0.0.0: every interface, tasks then call
    ``spark.driver.host``)."""
    def setting(key: str) -> str:
        return (conf.get(key, None) or "").strip()

    driver_host = setting("spark.driver.host")
    explicit = setting(COORDINATOR_HOST)
    if explicit:
        bind = explicit
        advertised = driver_host if explicit == "0.0.0.0" else explicit
    elif (setting("spark.master") or "local").startswith("local"):
        return "127.0.0.1", "127.0.0.1"
    else:
        bind = setting("spark.driver.bindAddress") or driver_host or "0.0.0.0"
        advertised = driver_host
    return bind, advertised or socket.getfqdn()


def register(session: SparkSession, uri: Optional[str] = None) -> None:
    """Register the ``hive_acid`` data source on ``session`` (metastore: ``uri`` or the
    session's ``spark.hadoop.hive.metastore.uris``)."""
    d = _driver(session, uri)
    cls = type("HiveAcidDataSource", (HiveAcidDataSource,), {
        "_defaults": {"metastore.uris": d.uri, "coordinator": d.address,
                      "authkey": d.authkey, "speculation": _speculation(session)},
        "__module__": __name__,
    })
    session.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    _lift_arrow_byte_limit(session)
    session.dataSource.register(cls)
    session.__dict__["_hive_acid_uri"] = d.uri


def _speculation(session: SparkSession) -> bool:
    """Is ``spark.speculation`` on? (A SparkContext setting: fixed for the session's life.)"""
    return str(session.sparkContext.getConf().get("spark.speculation", "false")).strip() \
        .lower() == "true"


def _refuse_speculation(on: bool) -> None:
    # Two attempts of one task write the same file name (writer id = task partition id),
    # each replacing the other's; when the losing attempt is killed between removing the
    # winner's file and publishing its own, the commit names a file that is gone.
    if on:
        raise HiveAcidError(
            "hive_acid writes need spark.speculation=false: speculative attempts of a task "
            "write the same ACID file, and a killed attempt can remove the committed one")


ARROW_MAX_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
_NO_BYTE_LIMIT = "2147483647"     # Int.MaxValue: Spark's "batches bounded by rows only"


def _lift_arrow_byte_limit(session: SparkSession) -> None:
    """Spark 4.1+ caps the Arrow batches it sends to Python workers (the rows a
    ``df.write.format("hive_acid")`` task or a ``mapInArrow`` receives) at
    ``spark.sql.execution.arrow.maxBytesPerBatch`` by measuring the batch being built after
    *every row*; with the struct-wrapped input of these operators that measurement was most of
    the JVM's time in an append (about half the append's wall time). Unless the session sets
    the key itself, set it to Int.MaxValue, the value for which Spark skips the check, so
    batches are bounded by ``spark.sql.execution.arrow.maxRecordsPerBatch`` (10,000 rows by
    default) only, as before Spark 4.1."""
    try:
        if session.conf.get(ARROW_MAX_BYTES, None) is None:
            session.conf.set(ARROW_MAX_BYTES, _NO_BYTE_LIMIT)
    except Exception:     # a Spark without the key: nothing to lift
        pass


def shutdown() -> None:
    """Abort this process's open hive_acid transactions, release its read locks and stop its
    background threads (also fine to skip: the metastore times them out)."""
    with _drivers_mu:
        drivers = list(_drivers.values())
        _drivers.clear()
    for d in drivers:
        d.close()


def _registered_driver(session: SparkSession) -> "Driver":
    uri = session.__dict__.get("_hive_acid_uri")
    if uri is None:
        register(session)
        uri = session.__dict__["_hive_acid_uri"]
    return _driver(session, uri)


# -- the data source --------------------------------------------------------------------------

class HiveAcidDataSource(DataSource):
    """``spark.read/write.format("hive_acid")``: use ``register(session)`` to install it."""

    _defaults: dict = {}

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def __init__(self, options):
        super().__init__(options)
        self.table_name = options.get("path") or options.get("table") or options.get(
            "dbtable")
        if not self.table_name:
            raise HiveAcidError("hive_acid: give the table as load('db.t') / save('db.t')")
        self.uri = options.get("metastore.uris") or self._defaults.get("metastore.uris")
        self.coordinator = self._defaults.get("coordinator")
        self.authkey = self._defaults.get("authkey")

    def _info(self) -> M.TableInfo:
        # schema() runs first, in another worker; the instance is pickled after it, so the
        # table description fetched there is reused by reader()/writer()
        info = self.__dict__.get("_cached_info")
        if info is None:
            info = rpc(self.coordinator, self.authkey, "table_info", self.table_name)
            self._cached_info = info
        return info

    def _flag(self, key: str) -> bool:
        return str(self.options.get(key, "false")).lower() == "true"

    def schema(self):
        info = self._info()
        st = TY.table_struct(info.columns, info.partition_keys,
                             with_row_id=self._flag("withRowId"))
        cols = self.options.get("columns")
        if cols:
            want = [c.strip() for c in cols.split(",")]
            by = {f.name.lower(): f for f in st.fields}
            st = S.StructType([by[c.lower()] for c in want])
        return st

    def reader(self, schema: S.StructType) -> "HiveAcidReader":
        return HiveAcidReader(self, schema)

    def writer(self, schema: S.StructType, overwrite: bool) -> "HiveAcidWriter":
        return HiveAcidWriter(self, schema, overwrite)


class HiveAcidPartition(InputPartition):
    def __init__(self, index: int, unit: _io.ReadUnit, scan: Optional[str]):
        super().__init__(index)
        self.index = index
        self.unit = unit
        self.scan = scan      # the driver's id of the scan (its read lock), None if pinned


class HiveAcidReader(DataSourceReader):
    def __init__(self, ds: HiveAcidDataSource, schema: S.StructType):
        self.ds_options = {str(k).lower(): v for k, v in ds.options.items()}
        self.uri = ds.uri
        self.coordinator = ds.coordinator
        self.authkey = ds.authkey
        self.table_name = ds.table_name
        info = ds._info()
        M.require_acid(info)
        self.info = info
        self.out_schema = TY.arrow_schema(schema)
        names = {n.lower(): n for n in info.data_names + info.part_names}
        for f in schema.fields:
            if f.name != "ROW__ID" and f.name.lower() not in names:
                raise HiveAcidError(f"column {f.name} is not in {info.full_name}")
        # the table's data columns, as Arrow types (what files are cast to)
        self.data_schema = TY.arrow_schema(TY.table_struct(info.columns, []))
        if any(f.name == "ROW__ID" for f in schema.fields) and info.insert_only:
            raise HiveAcidError(f"{info.full_name} is insert-only: it has no ROW__ID")
        self.part_filters: List = []

    def pushFilters(self, filters):
        parts = {p.lower() for p in self.info.part_names}
        for f in filters:
            if isinstance(f, _PUSHABLE) and len(f.attribute) == 1 and \
                    f.attribute[0].lower() in parts:
                self.part_filters.append(f)
            yield f      # Spark still evaluates every filter; pruning is an optimization

    def partitions(self):
        opts = self.ds_options
        txn_id = int(opts["txn"]) if opts.get("txn") else None
        txn_parts = [p for p in (opts.get("txnpartitions") or "").split("\n") if p]
        plan = rpc(self.coordinator, self.authkey, "plan_read", self.info, txn_id,
                   opts.get("validtxnlist"), opts.get("validwriteidlist"), txn_parts,
                   self.part_filters)
        return [HiveAcidPartition(i, u, plan["scan"]) for i, u in enumerate(plan["units"])]

    def read(self, partition):
        unit = getattr(partition, "unit", None)
        if unit is None:
            return iter(())
        return self._read(partition.index, unit, partition.scan)

    def _read(self, index: int, unit, scan) -> Iterator[pa.RecordBatch]:
        last = [time.monotonic()]

        def progress():
            if scan and time.monotonic() - last[0] > 10.0:
                last[0] = time.monotonic()
                _quiet_rpc(self.coordinator, self.authkey, "scan_progress", scan, index, False)

        # the reader's output schema, with partition columns named as the table's
        yield from _io.read_unit(unit, self.data_schema, self._physical_out(),
                                 batch_rows=int(self.ds_options.get("batchrows", 262144)),
                                 on_progress=progress)
        if scan:
            _quiet_rpc(self.coordinator, self.authkey, "scan_progress", scan, index, True)

    def _physical_out(self) -> pa.Schema:
        names = {n.lower(): n for n in self.info.data_names + self.info.part_names}
        fields = []
        for f in self.out_schema:
            real = f.name if f.name == "ROW__ID" else names[f.name.lower()]
            fields.append(pa.field(real, f.type, f.nullable))
        return pa.schema(fields)


def _quiet_rpc(*args):
    try:
        rpc(*args)
    except Exception:
        pass


@dataclass
class HiveAcidCommitMessage(WriterCommitMessage):
    files: list        # [(partition name, path relative to the table, rows)]


class HiveAcidWriter(DataSourceArrowWriter):
    def __init__(self, ds: HiveAcidDataSource, schema: S.StructType, overwrite: bool):
        info = ds._info()
        M.require_acid(info)
        if info.num_buckets and info.num_buckets > 0:
            raise HiveAcidError(
                f"{info.full_name} is bucketed: write it with hive_acid.insert(session, table, df)"
                f" (the data source cannot shuffle rows to their buckets)")
        _refuse_speculation(ds._defaults.get("speculation", False))
        self.coordinator, self.authkey = ds.coordinator, ds.authkey
        self.columns = _map_columns(info, [f.name for f in schema.fields])
        dynamic = str(ds.options.get("partitionOverwriteMode", "static")).lower() == "dynamic"
        txn_id = int(ds.options["txn"]) if ds.options.get("txn") else None
        r = rpc(self.coordinator, self.authkey, "begin_write", info.full_name, overwrite,
                txn_id, dynamic)
        self.token = r["token"]
        self.spec = _io.WriteSpec(
            location=info.location,
            data_schema=TY.arrow_schema(TY.table_struct(info.columns, [])),
            part_keys=tuple(info.part_names), write_id=r["write_id"],
            statement_id=r["statement_id"], mode="overwrite" if overwrite else "append",
            insert_only=info.insert_only, file_format=info.file_format,
            compression=info.compression)

    def write(self, iterator):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        batches = list(iterator)
        if not batches:
            return HiveAcidCommitMessage([])
        t = pa.Table.from_batches(batches)
        t = t.rename_columns([self.columns.get(n, n) for n in t.column_names])
        return HiveAcidCommitMessage(_as_attempt(
            (self.coordinator, self.authkey, self.token),
            lambda: _io.write_inserts(self.spec, t, task)))

    def commit(self, messages):
        files = [f for m in messages if m is not None for f in m.files]
        rpc(self.coordinator, self.authkey, "commit_write", self.token, files)

    def abort(self, messages):
        rpc(self.coordinator, self.authkey, "abort_write", self.token)


def _as_attempt(statement: tuple, write) -> list:
    """Run ``write()`` (-> the files written) as one task attempt of a statement, named by
    (coordinator address, authkey, token): an attempt that starts after its statement ended
    (the job failed or committed without it) writes nothing, and one that ends after that
    has its files swept by the driver (``_attempts``). -> the files to commit."""
    coordinator, authkey, token = statement
    attempt = secrets.token_hex(8)
    try:
        may_write = rpc(coordinator, authkey, "task_started", token, attempt)
    except (OSError, EOFError, AuthenticationError) as e:
        # Writing unguarded could leave a late attempt's files in the table: refuse, with
        # what to fix (the coordinator listens where coordinator_hosts says).
        raise HiveAcidError(
            f"this task cannot reach the hive_acid coordinator of the driver at "
            f"{coordinator[0]}:{coordinator[1]} ({type(e).__name__}: {e}); executors must "
            f"be able to connect to the driver there: see {COORDINATOR_HOST}, "
            f"spark.driver.host and spark.driver.bindAddress") from None
    if not may_write:
        return []
    try:
        files = write()
    except BaseException:
        _quiet_rpc(coordinator, authkey, "task_finished", token, attempt)
        raise
    if not rpc(coordinator, authkey, "task_finished", token, attempt):
        return []
    return files


def _map_columns(info: M.TableInfo, names: Sequence[str]) -> Dict[str, str]:
    """Incoming column names -> table column names (by name, case-insensitive, or by
    position when the names do not match)."""
    table_cols = info.data_names + info.part_names
    lower = {c.lower(): c for c in table_cols}
    if all(n.lower() in lower for n in names) and len(set(n.lower() for n in names)) == len(
            table_cols):
        return {n: lower[n.lower()] for n in names}
    if len(names) == len(table_cols):
        return dict(zip(names, table_cols))
    raise HiveAcidError(f"{info.full_name} has columns {table_cols}; the data has {list(names)}")


# -- the Python API: statements in one transaction ---------------------------------------------

def _info(d: Driver, table: str, *, full_acid: bool = False) -> M.TableInfo:
    info = M.table_info(d.ms, table)
    M.require_acid(info, full_acid=full_acid)
    return info


@contextlib.contextmanager
def _txn_scope(session: SparkSession):
    """The active multi-statement transaction of this thread, or a new one committed at the
    end (aborted on an exception)."""
    d = _registered_driver(session)
    if d.active is not None:
        yield d, d.active
        return
    txn = d.open_txn()
    try:
        yield d, txn
    except BaseException:
        d.abort(txn)
        raise
    d.commit(txn)


def _snapshot_df(session: SparkSession, d: Driver, txn: Txn, info: M.TableInfo, *,
                 with_row_id: bool = False) -> DataFrame:
    wids = d.snapshot(txn, [info.full_name])[info.full_name]
    own = "\n".join(d.txn_partitions(txn, info.full_name))
    return (session.read.format(FORMAT)
            .option("validTxnList", txn.txns).option("validWriteIdList", wids)
            .option("txnPartitions", own)
            .option("withRowId", str(with_row_id).lower())
            .option("metastore.uris", d.uri).load(info.full_name))


def read(session: SparkSession, table: str, *, columns: Optional[Sequence[str]] = None,
         with_row_id: bool = False) -> DataFrame:
    """The table as a DataFrame. Inside ``transaction()``: the transaction's snapshot
    (including its own earlier statements); otherwise a fresh snapshot per query."""
    d = _registered_driver(session)
    reader = session.read.format(FORMAT).option("metastore.uris", d.uri)
    if d.active is not None:
        info = _info(d, table)
        df = _snapshot_df(session, d, d.active, info, with_row_id=with_row_id)
    else:
        df = reader.option("withRowId", str(with_row_id).lower()).load(table)
    if columns:
        df = df.select(*columns)
    return df


def _spark_struct(info: M.TableInfo) -> S.StructType:
    return TY.table_struct(info.columns, info.partition_keys)


def _bucket_expr(info: M.TableInfo):
    cols = [F.col(c) for c in info.bucket_cols] or [F.col(info.data_names[0])]
    return F.pmod(F.hash(*cols), F.lit(info.num_buckets))


def _decoded_bucket(rid_col):
    return F.shiftright(F.col(rid_col + ".bucketid").bitwiseAND(0x0FFF0000), 16)


def _spec(info: M.TableInfo, st: Statement, mode: str) -> _io.WriteSpec:
    return _io.WriteSpec(location=info.location,
                         data_schema=TY.arrow_schema(TY.table_struct(info.columns, [])),
                         part_keys=tuple(info.part_names), write_id=st.write_id,
                         statement_id=st.statement_id, mode=mode,
                         insert_only=info.insert_only, file_format=info.file_format,
                         bucketed=info.num_buckets > 0, compression=info.compression)


_RESULT_SCHEMA = "part string, path string, rows long"


def _collect_files(df: DataFrame, fn, d: Driver, st: Statement) -> List[tuple]:
    """Run ``fn(rows, task id)`` (-> files written) on every partition of ``df`` as task
    attempts of ``st``. -> every file written."""
    _refuse_speculation(_speculation(df.sparkSession))
    statement = (d.address, d.authkey, st.token)

    def run(it):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        tid = ctx.partitionId() if ctx is not None else 0
        batches = list(it)
        res = _as_attempt(statement, lambda: fn(batches, tid)) if batches else []
        yield pa.RecordBatch.from_pydict(
            {"part": [r[0] for r in res], "path": [r[1] for r in res],
             "rows": [int(r[2]) for r in res]},
            schema=pa.schema([("part", pa.string()), ("path", pa.string()),
                              ("rows", pa.int64())]))
    return [(r.part, r.path, r.rows) for r in df.mapInArrow(run, _RESULT_SCHEMA).collect()]


def _conform_df(info: M.TableInfo, df: DataFrame) -> DataFrame:
    mapping = _map_columns(info, df.columns)
    struct = _spark_struct(info)
    types = {f.name: f.dataType for f in struct.fields}
    return df.select(*[F.col(f"`{src}`").cast(types[dst]).alias(dst)
                       for src, dst in mapping.items()]).select(
        *[F.col(f"`{c}`") for c in info.data_names + info.part_names])


def insert(session: SparkSession, table: str, df: DataFrame, *, overwrite: bool = False,
           dynamic_partition_overwrite: bool = False) -> None:
    """INSERT INTO (or INSERT OVERWRITE) ``table`` the rows of ``df`` (columns by name, else by
    position; partition columns included)."""
    with _txn_scope(session) as (d, txn):
        info = _info(d, table)
        st = d.begin_statement(txn, info, "overwrite" if overwrite else "insert",
                               dynamic_overwrite=dynamic_partition_overwrite)
        data = _conform_df(info, df)
        if info.num_buckets > 0:
            data = data.withColumn(_io.BUCKET_COL, _bucket_expr(info)).repartition(
                *[F.col(f"`{p}`") for p in info.part_names], F.col(_io.BUCKET_COL))
        elif data.rdd.getNumPartitions() > _io.MAX_WRITER_ID + 1:
            data = data.coalesce(_io.MAX_WRITER_ID + 1)
        spec = _spec(info, st, "overwrite" if overwrite else "append")

        def task(batches, tid):
            return _io.write_inserts(spec, pa.Table.from_batches(batches), tid)
        files = _collect_files(data, task, d, st)
        d.finish_statement(txn, st, files)


def _run_dml(d: Driver, txn: Txn, info: M.TableInfo, st: Statement, rows: DataFrame) -> None:
    """rows: OP_COL, ROW__ID, data columns, partition columns."""
    if info.num_buckets > 0:
        bcols = info.bucket_cols or info.data_names[:1]
        bucket = _decoded_bucket("ROW__ID")
        if all(c in rows.columns for c in bcols):
            bucket = F.coalesce(bucket, _bucket_expr(info))
        rows = rows.withColumn(_io.BUCKET_COL, bucket)
        key = F.col(_io.BUCKET_COL)
    else:
        present = [F.col(f"`{c}`") for c in info.data_names if c in rows.columns]
        spread = F.pmod(F.hash(*present), F.lit(1 << 16)) if present else F.lit(0)
        key = F.coalesce(_decoded_bucket("ROW__ID"), spread)
    rows = rows.repartition(*[F.col(f"`{p}`") for p in info.part_names], key)
    spec = _spec(info, st, "dml")
    files = _collect_files(rows, lambda batches, tid: _io.dml_task(spec, batches, tid), d, st)
    d.finish_statement(txn, st, files)


def _partition_check(info: M.TableInfo, cols: Sequence[str], what: str) -> None:
    bad = [c for c in cols if c.lower() in {p.lower() for p in info.part_names}]
    bad += [c for c in cols if c.lower() in {b.lower() for b in info.bucket_cols}
            and info.num_buckets > 0]
    if bad:
        raise HiveAcidError(f"{what}: cannot update partitioning/bucketing columns {bad}")


def delete(session: SparkSession, table: str, condition: Optional[str] = None) -> None:
    """DELETE FROM table [WHERE condition] (Spark SQL condition)."""
    with _txn_scope(session) as (d, txn):
        info = _info(d, table, full_acid=True)
        st = d.begin_statement(txn, info, "delete")
        df = _snapshot_df(session, d, txn, info, with_row_id=True)
        if condition:
            df = df.where(F.expr(condition))
        rows = df.select(F.lit("D").alias(_io.OP_COL), "ROW__ID",
                         *[F.col(f"`{c}`") for c in info.part_names])
        _run_dml(d, txn, info, st, rows)


def update(session: SparkSession, table: str, set: Dict[str, str],
           condition: Optional[str] = None) -> None:
    """UPDATE table SET col = expr, ... [WHERE condition] (Spark SQL expressions)."""
    with _txn_scope(session) as (d, txn):
        info = _info(d, table, full_acid=True)
        lower = {c.lower(): c for c in info.data_names + info.part_names}
        assignments = {}
        for k, v in set.items():
            if k.lower() not in lower:
                raise HiveAcidError(f"UPDATE {info.full_name}: no column {k}")
            assignments[lower[k.lower()]] = v
        _partition_check(info, list(assignments), f"UPDATE {info.full_name}")
        st = d.begin_statement(txn, info, "update")
        df = _snapshot_df(session, d, txn, info, with_row_id=True)
        if condition:
            df = df.where(F.expr(condition))
        types = {f.name: f.dataType for f in _spark_struct(info).fields}
        cols = [(F.expr(assignments[c]).cast(types[c]) if c in assignments else
                 F.col(f"`{c}`")).alias(c) for c in info.data_names + info.part_names]
        rows = df.select(F.lit("U").alias(_io.OP_COL), "ROW__ID", *cols)
        _run_dml(d, txn, info, st, rows)


def merge(session: SparkSession, table: str, source: Union[DataFrame, str], on: str, *,
          when_matched_update: Optional[Dict[str, str]] = None,
          when_matched_update_condition: Optional[str] = None,
          when_matched_delete: Union[bool, str, None] = None,
          when_not_matched_insert: Optional[Dict[str, str]] = None,
          when_not_matched_insert_condition: Optional[str] = None,
          clauses: Optional[List[tuple]] = None) -> None:
    """MERGE INTO table t USING source s ON <on> WHEN MATCHED [AND c] THEN UPDATE SET ... /
    DELETE, WHEN NOT MATCHED [AND c] THEN INSERT ... (Spark SQL expressions over ``t``/``s``).

    ``clauses`` (ordered, as SQL): ``("update", cond, {col: expr})``, ``("delete", cond)``,
    ``("insert", cond, {col: expr})``; the first clause whose condition holds applies. With
    the keyword form, a conditional matched clause is tried before an unconditional one."""
    if clauses is None:
        clauses = []
        matched = []
        if when_matched_update is not None:
            matched.append(("update", when_matched_update_condition, when_matched_update))
        if when_matched_delete:
            cond = None if when_matched_delete is True else when_matched_delete
            matched.append(("delete", cond))
        matched.sort(key=lambda c: c[1] is None)
        clauses += matched
        if when_not_matched_insert is not None:
            clauses.append(("insert", when_not_matched_insert_condition,
                            when_not_matched_insert))
    if not clauses:
        raise HiveAcidError("MERGE needs at least one WHEN clause")
    with _txn_scope(session) as (d, txn):
        info = _info(d, table, full_acid=True)
        all_cols = info.data_names + info.part_names
        lower = {c.lower(): c for c in all_cols}

        def norm(assign: Dict[str, str]) -> Dict[str, str]:
            out = {}
            for k, v in assign.items():
                if k.lower() not in lower:
                    raise HiveAcidError(f"MERGE {info.full_name}: no column {k}")
                out[lower[k.lower()]] = v
            return out
        clauses = [(c[0], c[1], norm(c[2])) if c[0] in ("update", "insert") else c
                   for c in clauses]
        for c in clauses:
            if c[0] == "update":
                _partition_check(info, list(c[2]), f"MERGE {info.full_name}")
        if isinstance(source, str):
            src = _source_df(session, d, txn, source)
        else:
            src = source
        st = d.begin_statement(txn, info, "update")
        tgt = _snapshot_df(session, d, txn, info, with_row_id=True)
        src = src.withColumn("__hive_acid_src", F.lit(True))
        has_insert = any(c[0] == "insert" for c in clauses)
        joined = tgt.alias("t").join(src.alias("s"), F.expr(on),
                                     "right" if has_insert else "inner")
        is_matched = F.col("t.ROW__ID").isNotNull()
        clause_idx = None
        for i in reversed(range(len(clauses))):
            kind, cond = clauses[i][0], clauses[i][1]
            base = is_matched if kind in ("update", "delete") else ~is_matched
            test = base & F.expr(cond) if cond else base
            clause_idx = F.when(test, F.lit(i)).otherwise(
                clause_idx if clause_idx is not None else F.lit(None).cast("int"))
        joined = joined.withColumn("__hive_acid_clause", clause_idx).where(
            F.col("__hive_acid_clause").isNotNull())
        kinds = {"update": "U", "delete": "D", "insert": "I"}
        op = None
        for i, c in enumerate(clauses):
            op = (F.when(F.col("__hive_acid_clause") == i, F.lit(kinds[c[0]])) if op is None
                  else op.when(F.col("__hive_acid_clause") == i, F.lit(kinds[c[0]])))
        types = {f.name: f.dataType for f in _spark_struct(info).fields}
        out_cols = []
        for col in all_cols:
            e = None
            for i, c in enumerate(clauses):
                if c[0] == "delete":
                    continue
                if c[0] == "update":
                    v = F.expr(c[2][col]) if col in c[2] else F.col(f"t.`{col}`")
                else:
                    v = F.expr(c[2][col]) if col in c[2] else F.lit(None)
                v = v.cast(types[col])
                e = F.when(F.col("__hive_acid_clause") == i, v) if e is None else \
                    e.when(F.col("__hive_acid_clause") == i, v)
            e = F.col(f"t.`{col}`") if e is None else e.otherwise(F.col(f"t.`{col}`"))
            out_cols.append(e.alias(col))
        rows = joined.select(op.alias(_io.OP_COL), F.col("t.ROW__ID").alias("ROW__ID"),
                             *out_cols)
        _run_dml(d, txn, info, st, rows)


def _source_df(session: SparkSession, d: Driver, txn: Txn, name: str) -> DataFrame:
    """A table name as a DataFrame: ACID tables of our metastore through hive_acid (in the
    transaction's snapshot), anything else (temp views, other tables) through Spark."""
    try:
        info = M.table_info(d.ms, name)
    except HiveAcidError:
        info = None
    if info is not None and info.transactional:
        return _snapshot_df(session, d, txn, info)
    return session.table(name)


# -- multi-statement transactions --------------------------------------------------------------

class Transaction:
    """Statements of one transaction (see :func:`transaction`)."""

    def __init__(self, session: SparkSession, driver: Driver, txn: Txn):
        self.session, self.driver, self.txn = session, driver, txn

    @property
    def id(self) -> int:
        return self.txn.id

    def read(self, table: str, **kw) -> DataFrame:
        return read(self.session, table, **kw)

    def append(self, table: str, df: DataFrame) -> None:
        insert(self.session, table, df)

    def overwrite(self, table: str, df: DataFrame, **kw) -> None:
        insert(self.session, table, df, overwrite=True, **kw)

    def delete(self, table: str, condition: Optional[str] = None) -> None:
        delete(self.session, table, condition)

    def update(self, table: str, set: Dict[str, str], condition: Optional[str] = None) -> None:
        update(self.session, table, set, condition)

    def merge(self, table: str, source, on: str, **kw) -> None:
        merge(self.session, table, source, on, **kw)

    def sql(self, statement: str):
        return sql(self.session, statement)

    def snapshot(self, table: str, **kw) -> "Snapshot":
        """``with tx.snapshot("db.t") as df:`` -- :func:`snapshot` at this transaction's
        snapshot (the module function inside the block does the same)."""
        return snapshot(self.session, table, **kw)

    def writer_options(self) -> Dict[str, str]:
        """Options making ``df.write.format("hive_acid")`` join this transaction."""
        return {"txn": str(self.txn.id)}


@contextlib.contextmanager
def transaction(session: SparkSession) -> Iterator[Transaction]:
    """``with hive_acid.transaction(spark) as tx:`` -- every hive_acid statement of this thread
    inside the block (``tx.*`` or the module functions) runs in one metastore transaction with
    one snapshot; committed at the end, aborted on an exception."""
    d = _registered_driver(session)
    if d.active is not None:
        raise HiveAcidError("transactions do not nest")
    txn = d.open_txn(multi=True)
    d.active = txn
    try:
        yield Transaction(session, d, txn)
    except BaseException:
        d.active = None
        d.abort(txn)
        raise
    d.active = None
    d.commit(txn)


# -- snapshot(): a scan by Spark's own ORC reader, lock held for the block -------------------

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
        d = self._driver = _registered_driver(self.session)
        info = _info(d, self.table)
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
        from . import _native as N
        reason = None
        if not self.want_native:
            reason = "native=False"
        elif own:
            reason = "the transaction wrote to this table (its uncommitted statements)"
        if reason is None:
            try:
                plan = N.plan(info, self.txns, self.write_ids, self._targets(d, info))
                df = N.build(self.session, plan, self.columns, self.with_row_id)
                self.native = True      # partition_filter: only matching partitions planned
                return df
            except N.Fallback as e:
                reason = str(e)
        self.native, self.fallback_reason = False, reason
        _log.info("hive_acid.snapshot(%s): Python data source (%s)", info.full_name, reason)
        want = self.columns
        if self.with_row_id:
            N.output_struct(info, want, True)       # validates the names
        if own:
            df = _snapshot_df(self.session, d, txn, info, with_row_id=self.with_row_id)
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
    from . import _native as N
    raw = S.StructType([S.StructField("__i", S.IntegerType())] + [
        S.StructField(f"__p{i}", S.StringType()) for i in range(len(info.part_names))])
    local = session.createDataFrame([(i, *v) for i, v in enumerate(values)], raw)
    typed = local.select("__i", *[
        F.when(F.col(f"__p{i}") == N.HIVE_DEFAULT_PARTITION, F.lit(None))
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


# -- Structured Streaming (spark/streaming.py) -------------------------------------------------

def write_stream(stream_df: DataFrame, table: str, checkpoint_location: str, **kw):
    """Start a streaming query writing each micro-batch of ``stream_df`` into the ACID table
    ``table`` as one transaction, exactly once across restarts (keywords ``query_name``,
    ``trigger``, ``sink_id``, ``write``, ``output_mode``: see
    :func:`spark.streaming.write_stream`)."""
    from .streaming import write_stream as start
    return start(stream_df, table, checkpoint_location, **kw)


# -- DDL -----------------------------------------------------------------------------------------

def create_table(session: SparkSession, table: str, schema: Union[S.StructType, str], *,
                 partition_by: Sequence[str] = (), buckets: Optional[int] = None,
                 bucket_by: Sequence[str] = (), insert_only: bool = False,
                 file_format: str = "orc", if_not_exists: bool = False,
                 properties: Optional[Dict[str, str]] = None) -> None:
    """CREATE a transactional table (full ACID ORC, or insert-only ORC/Parquet). ``schema``
    (a StructType or DDL string) includes the partition columns."""
    from ._metastore import T
    d = _registered_driver(session)
    if isinstance(schema, str):
        from pyspark.sql.types import _parse_datatype_string
        schema = _parse_datatype_string(schema)
        if not isinstance(schema, S.StructType):
            raise HiveAcidError("schema must be a struct")
    db, name = M.split_name(table)
    parts = [p.lower() for p in partition_by]
    by_name = {f.name.lower(): f for f in schema.fields}
    missing = [p for p in parts if p not in by_name]
    if missing:
        raise HiveAcidError(f"partition columns {missing} are not in the schema")
    cols = [T.FieldSchema(f.name.lower(), TY.spark_to_hive(f.dataType), "")
            for f in schema.fields if f.name.lower() not in parts]
    pkeys = [T.FieldSchema(p, TY.spark_to_hive(by_name[p].dataType), "") for p in parts]
    if file_format not in ("orc", "parquet"):
        raise HiveAcidError("file_format must be orc or parquet")
    if file_format == "parquet" and not insert_only:
        raise HiveAcidError("full-ACID tables are ORC; Parquet needs insert_only=True")
    if file_format == "orc":
        inf, outf, serde = M.ORC_INPUT, M.ORC_OUTPUT, M.ORC_SERDE
    else:
        inf, outf, serde = M.PARQUET_INPUT, M.PARQUET_OUTPUT, M.PARQUET_SERDE
    params = {"transactional": "true",
              "transactional_properties": "insert_only" if insert_only else "default",
              "bucketing_version": "2"}
    if file_format == "orc":
        codec = _orc_codec_of(session)
        if codec:
            params["orc.compress"] = codec
    params.update(properties or {})
    bcols = [b.lower() for b in bucket_by] or ([cols[0].name] if buckets else [])
    sd = T.StorageDescriptor(cols=cols, location=None, inputFormat=inf, outputFormat=outf,
                             compressed=False, numBuckets=buckets or -1,
                             serdeInfo=T.SerDeInfo(name=None, serializationLib=serde,
                                                   parameters={"serialization.format": "1"}),
                             bucketCols=bcols if buckets else [], sortCols=[], parameters={})
    t = T.Table(tableName=name, dbName=db, owner=M.USER, createTime=int(time.time()),
                lastAccessTime=0, retention=0, sd=sd, partitionKeys=pkeys, parameters=params,
                tableType="MANAGED_TABLE")
    try:
        d.ms.create_table(t)
    except T.AlreadyExistsException:
        if not if_not_exists:
            raise HiveAcidError(f"table {db}.{name} already exists") from None


# Spark's ORC codec names → the table property ``orc.compress`` that Hive's writers read.
_ORC_CODECS = {"none": "NONE", "uncompressed": "NONE", "snappy": "SNAPPY", "zlib": "ZLIB",
               "lz4": "LZ4", "zstd": "ZSTD"}


def _orc_codec_of(session: SparkSession) -> Optional[str]:
    """The codec a table created from this session gets: the session's own ORC codec
    (``spark.sql.orc.compression.codec``, snappy unless changed), so ACID tables cost what
    Spark's native ORC tables cost. A codec our writer cannot produce (lzo, brotli) leaves
    the property unset, i.e. Hive's default, ZLIB."""
    name = (session.conf.get("spark.sql.orc.compression.codec", "snappy") or "snappy")
    return _ORC_CODECS.get(name.strip().lower())


def create_database(session: SparkSession, name: str, *, location: Optional[str] = None
                    ) -> None:
    """CREATE DATABASE IF NOT EXISTS ``name`` in the metastore."""
    d = _registered_driver(session)
    from ._metastore import T
    try:
        d.ms.create_database(T.Database(name=name.lower(), description="",
                                        locationUri=location, parameters={},
                                        ownerName=M.USER, ownerType=1))
    except T.AlreadyExistsException:
        pass


def drop_table(session: SparkSession, table: str, *, if_exists: bool = True) -> None:
    from ._metastore import T
    d = _registered_driver(session)
    db, name = M.split_name(table)
    try:
        d.ms.drop_table(db, name, True)
    except T.NoSuchObjectException:
        if not if_exists:
            raise


def sql(session: SparkSession, statement: str):
    """Run one SQL statement: INSERT/UPDATE/DELETE/MERGE on ACID tables through hive_acid,
    anything else through ``session.sql`` (see ``spark/_sql.py``)."""
    from ._sql import run_sql
    return run_sql(session, statement)
