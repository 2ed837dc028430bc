"""INSERT [OVERWRITE], DELETE and UPDATE of ``hms_txn.tables`` (MERGE: ``merge``).

Each is one statement of a transaction of the shared core (``hms_txn.clients.acid.txns``):
its write id, statement id(s) and lock come from ``begin_statement``, its files are written
here in the caller's process by ``orc_acid.table_io`` -- the functions Spark's tasks run, so
the files are the ones ``spark.hive_acid`` writes -- and ``finish_statement`` records them
for the commit's write events.

* INSERT: the rows are cut into slices of at least ``ROWS_PER_WRITER`` rows, one writer id
  (``bucket_N`` file) each, written on a thread pool (pyarrow encodes ORC without the
  GIL); partitioned tables get one file per (partition, slice).
* DELETE / UPDATE (Hive's split update): the target is read at the transaction's snapshot
  with its ROW__IDs, partition by partition (memory bounded by one partition's matching
  rows); a deleted row becomes a delete event in ``delete_delta_W_W_S`` (in the file of its
  decoded bucket), an updated row also a new version in ``delta_W_W_(S+1)``.

Bucketed tables: DELETE and UPDATE keep each row in its bucket; INSERT (and MERGE's
inserts) would need Spark's hash of the bucketing columns and are refused.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from orc_acid.table_io import BUCKET_COL, OP_COL, ROW_ID, ReadUnit, dml_task, write_inserts

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError
from hms_txn.clients.acid.statements import assignments, partition_check
from hms_txn.clients.acid.table_schema import table_schema, write_spec
from hms_txn.clients.acid.txns import Transactions, Txn
from hms_txn.clients.tables import predicates as P
from hms_txn.clients.tables.reads import ReadPlan, iter_batches, plan_read

ROWS_PER_WRITER = 500_000
MAX_WRITERS = 4096          # writer ids are bucket numbers: 0..4095


# -- input ----------------------------------------------------------------------------------

def as_arrow(data, what: str = "data") -> pa.Table:
    """An Arrow table of ``data``: a pyarrow Table / RecordBatch / RecordBatchReader, a
    pandas DataFrame, or anything ``pyarrow.table`` takes (a dict of columns, a Polars
    DataFrame through the Arrow PyCapsule interface)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    try:
        return pa.table(data)
    except (TypeError, ValueError, pa.ArrowException) as e:
        raise HiveAcidError(f"{what}: cannot make an Arrow table of a "
                            f"{type(data).__name__} ({e})") from None


def conform_input(info: M.TableInfo, table: pa.Table) -> pa.Table:
    """The rows as the table's columns (data, then partition columns), matched by name
    (case-insensitive) or else by position, cast to the table's types."""
    schema = table_schema(info)
    mapping = info.column_mapping(table.column_names)
    by_target = {dst: src for src, dst in mapping.items()}
    cols = []
    for f in schema:
        col = table.column(by_target[f.name])
        if col.type != f.type:
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise HiveAcidError(f"{info.full_name}.{f.name} is {f.type}; the data's "
                                    f"{by_target[f.name]!r} ({col.type}) does not cast: "
                                    f"{e}") from None
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=schema)


def project(table: pa.Table, exprs: Dict[str, pc.Expression]) -> pa.Table:
    """``table``'s rows as the expressions (in row order)."""
    return acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
        acero.Declaration("project", acero.ProjectNodeOptions(list(exprs.values()),
                                                              list(exprs)))
    ]).to_table(use_threads=False)


def refuse_bucketed_insert(info: M.TableInfo, what: str) -> None:
    if info.num_buckets > 0:
        raise HiveAcidError(
            f"{what}: {info.full_name} is bucketed; inserting needs the bucketing hash "
            f"Spark computes: insert with spark.hive_acid.insert (DELETE and UPDATE work here)")


# -- INSERT ---------------------------------------------------------------------------------

def insert(core: Transactions, txn: Txn, info: M.TableInfo, data, *, overwrite: bool = False,
           dynamic_overwrite: bool = False, threads: Optional[int] = None) -> int:
    """INSERT [OVERWRITE] ``data`` into the table as one statement of ``txn``; -> rows."""
    what = f"{'INSERT OVERWRITE' if overwrite else 'INSERT INTO'} {info.full_name}"
    M.require_acid(info)
    refuse_bucketed_insert(info, what)
    rows = conform_input(info, as_arrow(data, what))
    st = core.begin_statement(txn, info, "overwrite" if overwrite else "insert",
                              dynamic_overwrite=dynamic_overwrite)
    spec = write_spec(info, st.write_id, st.statement_id, "overwrite" if overwrite else "append")
    threads = max(1, threads or os.cpu_count() or 1)
    n = rows.num_rows
    writers = max(1, min(MAX_WRITERS, math.ceil(n / ROWS_PER_WRITER)))
    step = math.ceil(n / writers) if n else 0
    slices = [rows.slice(i * step, step) for i in range(writers)] if n else []
    if len(slices) > 1:
        with ThreadPoolExecutor(max_workers=min(threads, len(slices)),
                                thread_name_prefix="hms-txn-write") as ex:
            written = list(ex.map(lambda a: write_inserts(spec, slices[a], a),
                                  range(len(slices))))
    else:
        written = [write_inserts(spec, s, i) for i, s in enumerate(slices)]
    core.finish_statement(txn, st, [f for files in written for f in files])
    return n


# -- DELETE / UPDATE ------------------------------------------------------------------------

def target_plan(core: Transactions, txn: Txn, info: M.TableInfo, *, where=None,
                columns: Optional[Sequence[str]] = None, with_row_id: bool = True) -> ReadPlan:
    """The rows of the table at ``txn``'s snapshot (its own earlier statements included),
    with their ROW__IDs (first) unless ``with_row_id`` is false."""
    wids = core.snapshot(txn, [info.full_name])[info.full_name]
    return plan_read(core.ms, info, txn.txns, wids, columns=columns, where=where,
                     txn_partitions=core.txn_partitions(txn, info.full_name),
                     with_row_id=with_row_id)


def by_partition(plan: ReadPlan) -> Iterator[Tuple[tuple, ReadPlan]]:
    """The plan cut into one plan per table partition."""
    groups: Dict[tuple, List[ReadUnit]] = {}
    for u in plan.units:
        groups.setdefault(u.part_values, []).append(u)
    for key, units in groups.items():
        yield key, ReadPlan(plan.info, units, plan.data_schema, plan.read_schema,
                            plan.out_names, plan.row_filter)


def decoded_bucket(row_ids: pa.ChunkedArray) -> pa.Array:
    bucket = pc.struct_field(row_ids, [1])
    return pc.shift_right(pc.bit_wise_and(bucket, 0x0FFF0000), 16)


def write_dml(spec, rows: pa.Table, bucketed: bool) -> List[tuple]:
    """Write one partition's OP_COL/ROW__ID/... rows (``orc_acid.table_io.dml_task``)."""
    if rows.num_rows == 0:
        return []
    if bucketed:
        rows = rows.append_column(BUCKET_COL, decoded_bucket(rows.column(ROW_ID)))
    try:
        return dml_task(spec, rows.to_batches(), 0)
    except ValueError as e:      # MERGE cardinality violation
        raise HiveAcidError(str(e)) from None


def delete(core: Transactions, txn: Txn, info: M.TableInfo, where=None) -> int:
    """DELETE FROM the table [WHERE ``where``] as one statement of ``txn``; -> rows."""
    M.require_acid(info, full_acid=True)
    st = core.begin_statement(txn, info, "delete")
    spec = write_spec(info, st.write_id, st.statement_id, "dml")
    plan = target_plan(core, txn, info, where=where, columns=[ROW_ID] + info.part_names)
    files, count = [], 0
    for _, part in by_partition(plan):
        rows = pa.Table.from_batches(list(iter_batches(part)), schema=part.out_schema)
        rows = rows.add_column(0, OP_COL, pa.repeat(pa.scalar("D"), rows.num_rows))
        files += write_dml(spec, rows, info.num_buckets > 0)
        count += rows.num_rows
    core.finish_statement(txn, st, files)
    return count


def update(core: Transactions, txn: Txn, info: M.TableInfo, set: Dict[str, object],
           where=None) -> int:
    """UPDATE the table SET col = expr, ... [WHERE ``where``] as one statement of ``txn``
    (values: SQL expression text over the table's columns, pyarrow expressions, or Python
    values); -> rows."""
    M.require_acid(info, full_acid=True)
    what = f"UPDATE {info.full_name}"
    if not set:
        raise HiveAcidError(f"{what}: give the columns to set")
    assign = assignments(info, set, what)
    partition_check(info, list(assign), what)
    st = core.begin_statement(txn, info, "update")
    spec = write_spec(info, st.write_id, st.statement_id, "dml")
    plan = target_plan(core, txn, info, where=where)
    schema = plan.out_schema
    qualifiers = (info.name, info.full_name)
    exprs = {OP_COL: pc.scalar("U"), ROW_ID: pc.field(ROW_ID)}
    for f in schema:
        if f.name == ROW_ID:
            continue
        exprs[f.name] = (P.compile_value(assign[f.name], schema, f.type, qualifiers,
                                         f"SET {f.name}")
                         if f.name in assign else pc.field(f.name))
    files, count = [], 0
    for _, part in by_partition(plan):
        rows = pa.Table.from_batches(list(iter_batches(part)), schema=schema)
        if rows.num_rows == 0:
            continue
        try:
            new = project(rows, exprs)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise HiveAcidError(f"{what}: {e}") from None
        files += write_dml(spec, new, info.num_buckets > 0)
        count += rows.num_rows
    core.finish_statement(txn, st, files)
    return count
