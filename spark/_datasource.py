"""``spark.read/write.format("hive_acid")``: the Python data source (``register()`` installs it).

Every method here runs in one of Spark's Python workers, never in the user's driver
process: the planner's (``schema()``, ``reader()``, ``writer()``, ``commit()``) or an
executor task's (``read()``, ``write()``). Whatever needs the transaction or a lock is asked
of the driver's coordinator (``_coordinator``), whose address and key the registered
subclass carries in ``_defaults``:

* reads: ``plan_read`` (snapshot + read lock + one input partition per (table partition,
  bucket id), partitions pruned by the pushed filters), then each task reads its unit with
  ``orc_acid`` and reports progress (``scan_progress``) so the lock ends with the scan;
* writes: ``begin_write`` (a transaction of its own, or the one named by the ``txn``
  option), each task writes as a task attempt of the statement (``_attempts``), then
  ``commit_write`` / ``abort_write``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, List, Optional

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import types as S
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader,
                                    InputPartition, WriterCommitMessage)

from hms_txn.clients.acid import metastore as M
# what a task needs to write a statement (shared with hms_txn.tables: the same files)
from hms_txn.clients.acid.table_schema import write_spec
from orc_acid import table_io as _io

from . import _types as TY
from ._attempts import refuse_speculation, run_as_attempt
from ._errors import HiveAcidError
from ._rpc import quiet_rpc, rpc
from ._scans import PRUNING_FILTERS


FORMAT = "hive_acid"


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
            unknown = [c for c in want if c.lower() not in by]
            if unknown:
                raise HiveAcidError(f"columns: {unknown} not in {info.full_name}, whose "
                                    f"columns are {[f.name for f in st.fields]}")
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
            if isinstance(f, PRUNING_FILTERS) and len(f.attribute) == 1 and \
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
                quiet_rpc(self.coordinator, self.authkey, "scan_progress", scan, index, False)

        # the reader's output schema, with partition columns named as the table's
        yield from _io.read_unit(unit, self.data_schema, self._physical_out(),
                                 batch_rows=int(self.ds_options.get("batchrows", 262144)),
                                 on_progress=progress)
        if scan:
            quiet_rpc(self.coordinator, self.authkey, "scan_progress", scan, index, True)

    def _physical_out(self) -> pa.Schema:
        names = {n.lower(): n for n in self.info.data_names + self.info.part_names}
        fields = []
        for f in self.out_schema:
            real = f.name if f.name == "ROW__ID" else names[f.name.lower()]
            fields.append(pa.field(real, f.type, f.nullable))
        return pa.schema(fields)


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
        refuse_speculation(ds._defaults.get("speculation", False))
        self.coordinator, self.authkey = ds.coordinator, ds.authkey
        self.columns = info.column_mapping([f.name for f in schema.fields])
        dynamic = str(ds.options.get("partitionOverwriteMode", "static")).lower() == "dynamic"
        txn_id = int(ds.options["txn"]) if ds.options.get("txn") else None
        r = rpc(self.coordinator, self.authkey, "begin_write", info.full_name, overwrite,
                txn_id, dynamic)
        self.token = r["token"]
        self.spec = write_spec(info, r["write_id"], r["statement_id"],
                               "overwrite" if overwrite else "append")

    def write(self, iterator):
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        batches = list(iterator)
        if not batches:
            return HiveAcidCommitMessage([])
        t = pa.Table.from_batches(batches)
        t = t.rename_columns([self.columns.get(n, n) for n in t.column_names])
        return HiveAcidCommitMessage(run_as_attempt(
            (self.coordinator, self.authkey, self.token),
            lambda: _io.write_inserts(self.spec, t, task)))

    def commit(self, messages):
        files = [f for m in messages if m is not None for f in m.files]
        rpc(self.coordinator, self.authkey, "commit_write", self.token, files)

    def abort(self, messages):
        rpc(self.coordinator, self.authkey, "abort_write", self.token)
