"""What one read of an ACID table reads, and reading it, for ``hms_txn.tables``.

A read is planned at a snapshot the caller holds (a read lock's, or its transaction's):

* the columns: the projection plus those the condition uses (dropped again at the end);
* the partitions: the top-level AND terms of a SQL condition that use partition columns
  only go to the metastore as a ``get_partitions_by_filter`` filter where its grammar can
  say them (``predicates.metastore_filter``), and the partitions it answers are checked
  with those terms locally (the metastore compares non-integral keys as text);
* the units: ``orc_acid``'s splits of each partition (one per bucket id), each cut into one
  per data file (``orc_acid.splits.split_per_file``) so that files decode in parallel;
* the row filter: the whole condition, evaluated by ``orc_acid.table_io.read_unit`` stripe
  by stripe, before rows are cut into batches (pyarrow's ORC reader takes no predicate and
  exposes no stripe statistics, so stripes are decoded, never skipped).

Reading runs the units on a thread pool (pyarrow decodes ORC without the GIL), in order.
A stream (``iter_batches``) has at most ``threads + 1`` units decoded ahead of its
consumer: memory stays bounded by that many data files, and a worker that finishes before
the unit ahead of it has the next one to decode instead of waiting for the consumer. A
whole-table read (``read_all``) keeps every unit anyway, so it queues them all: no worker
ever waits for another's unit to be consumed.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from orc_acid.splits import split_per_file
from orc_acid.table_io import ROW_ID, ReadUnit, partition_value_array, read_unit

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError
from hms_txn.clients.acid.scans import plan_units, scan_targets
from hms_txn.clients.acid.table_schema import data_schema, table_schema
from hms_txn.clients.tables import predicates as P

log = logging.getLogger("hms_txn.tables")

BATCH_ROWS = 131072


def resolve_columns(schema: pa.Schema, columns: Sequence[str], what: str) -> List[str]:
    """``columns`` as the schema names them (case-insensitive); HiveAcidError otherwise."""
    by_lower = {n.lower(): n for n in schema.names}
    if isinstance(columns, str):
        raise HiveAcidError(f"columns: give a list of names, not the string {columns!r}")
    bad = [c for c in columns if str(c).lower() not in by_lower]
    if bad:
        raise HiveAcidError(f"columns {bad} are not in {what}, whose columns are "
                            f"{[n for n in schema.names if n != ROW_ID]}")
    return [by_lower[str(c).lower()] for c in columns]


@dataclass
class ReadPlan:
    info: M.TableInfo
    units: List[ReadUnit]
    data_schema: pa.Schema
    read_schema: pa.Schema          # what each unit yields (projection + condition columns)
    out_names: List[str]            # what the caller gets
    row_filter: Optional[pc.Expression]

    @property
    def out_schema(self) -> pa.Schema:
        return pa.schema([self.read_schema.field(n) for n in self.out_names])


def plan_read(ms: M.MetastoreConnection, info: M.TableInfo, txns: str, write_ids: str, *,
              columns: Optional[Sequence[str]] = None, where=None,
              txn_partitions: Sequence[str] = (), with_row_id: bool = False) -> ReadPlan:
    """The plan of a read of ``info`` at the snapshot (``txns``, ``write_ids``)."""
    full = table_schema(info, with_row_id)
    qualifiers = (info.name, info.full_name)
    out = resolve_columns(full, columns, info.full_name) if columns is not None else \
        list(full.names)
    needed = set(out)
    part_terms = []
    row_filter = None
    if isinstance(where, pc.Expression):
        row_filter, needed = where, set(full.names)
    elif where is not None:
        node = P.parse(where, "where")
        row_filter = P.Compiler(P.schema_resolver(full, qualifiers), where).compile(node)
        by_lower = {n.lower(): n for n in full.names}
        needed |= {by_lower[name] for _, name in P.columns_of(node)}
        parts = {k.lower() for k in info.part_names}
        part_terms = [t for t in P.split_conjuncts(node)
                      if {c for _, c in P.columns_of(t)} <= parts and P.columns_of(t)]
    read_schema = pa.schema([f for f in full if f.name in needed])
    targets = _targets(ms, info, full, txn_partitions, part_terms, qualifiers)
    units = [ReadUnit(sp, u.part_values, u.filesystem)
             for u in plan_units(info, txns, write_ids, targets)
             for sp in split_per_file(u.split)]
    return ReadPlan(info, units, data_schema(info), read_schema, out, row_filter)


def _targets(ms, info: M.TableInfo, full: pa.Schema, txn_partitions, part_terms, qualifiers):
    """The partitions to read: pruned by the metastore, then checked locally."""
    if not info.partition_keys or not part_terms:
        return scan_targets(ms, info, txn_partitions)
    term = P.and_all(part_terms)
    key_types = dict(info.partition_keys)
    listed = None
    ms_filter = P.metastore_filter(term, key_types)
    if ms_filter:
        try:
            listed = M.list_partitions(ms, info, ms_filter)
        except M.T.MetaException as e:       # a filter this metastore cannot evaluate
            log.debug("get_partitions_by_filter(%s) refused: %s", ms_filter, e)
    if listed is None:
        listed = M.list_partitions(ms, info)
    values = [v for _, v, _ in listed] + [M.partition_values(n) for n in txn_partitions]
    keys = pa.schema([full.field(k) for k in info.part_names])
    typed = pa.table({f.name: pa.concat_arrays(
        [partition_value_array(v[i], f.type, 1) for v in values]) if values else
        pa.array([], f.type) for i, f in enumerate(keys)}, schema=keys)
    test = P.Compiler(P.schema_resolver(keys, qualifiers), "").compile(term)
    typed = typed.append_column("__i", pa.array(range(len(values)), pa.int64()))
    kept = {tuple(values[i]) for i in typed.filter(test).column("__i").to_pylist()}
    return scan_targets(ms, info, txn_partitions, lambda v: tuple(v) in kept, listed)


def iter_batches(plan: ReadPlan, threads: Optional[int] = None, *,
                 ahead: Optional[int] = None) -> Iterator[pa.RecordBatch]:
    """The plan's rows, unit after unit, decoded by ``threads`` threads at most ``ahead``
    units (default ``threads + 1``) ahead of the consumer (see the module docstring)."""
    threads = max(1, threads or os.cpu_count() or 1)
    ahead = max(1, ahead or threads + 1)
    project = plan.out_names != plan.read_schema.names

    def run(unit: ReadUnit) -> List[pa.RecordBatch]:
        return list(read_unit(unit, plan.data_schema, plan.read_schema,
                              batch_rows=BATCH_ROWS, row_filter=plan.row_filter))

    if not plan.units:
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hms-txn-read") as ex:
        pending = deque()
        units = iter(plan.units)
        try:
            for unit in units:
                pending.append(ex.submit(run, unit))
                if len(pending) >= ahead:
                    break
            while pending:
                batches = pending.popleft().result()
                nxt = next(units, None)
                if nxt is not None:
                    pending.append(ex.submit(run, nxt))
                for b in batches:
                    yield b.select(plan.out_names) if project else b
        finally:
            for f in pending:
                f.cancel()


def read_all(plan: ReadPlan, threads: Optional[int] = None) -> pa.Table:
    """The plan's rows as one table (every unit queued at once: all are kept anyway)."""
    return pa.Table.from_batches(list(iter_batches(plan, threads, ahead=len(plan.units))),
                                 schema=plan.out_schema)
