"""Reading and writing one statement's files in a (partitioned) table: what an engine's tasks
run -- Spark's Python workers for ``spark.hive_acid``, the caller's process for
``hms_txn.tables`` -- so both write the same files.

Writers follow Hive's rules: one file per (partition, writer id, statement id) in
``delta_W_W_SSSS`` / ``base_W`` / ``delete_delta_W_W_SSSS``; the writer id is the bucket
number of a bucketed table, else the task's number (Spark's partition index); delete events go to the
file of the *decoded* bucket of the deleted row. A partition's directory is its name as the
metastore has it (``orc_acid.layout.partition_dir_name``); a null or empty value is the
default partition.

Files go through ``orc_acid`` with the table's file system (``WriteSpec.filesystem``,
``ReadUnit.filesystem``: a pickled pyarrow file system, None for the local disk), so tasks
write to and read from S3, Azure, GCS or HDFS as they do locally; see ``orc_acid.writer``
for what a write relies on there (one upload per file; visibility is the metastore commit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import orc_acid
from orc_acid import fs as afs
from orc_acid.layout import DEFAULT_PARTITION_NAME, format_base, format_bucket_file, \
    format_delete_delta, format_delta, partition_dir_name

ROW_ID = "ROW__ID"
OP_COL = "__hive_acid_op"        # merge/update: "D" delete, "U" delete+insert, "I" insert
BUCKET_COL = "__hive_acid_bucket"
MAX_WRITER_ID = 4095


def part_value_strings(col: pa.Array) -> List[str]:
    if pa.types.is_timestamp(col.type):
        s = pc.strftime(col, format="%Y-%m-%d %H:%M:%S")
    else:
        s = pc.cast(col, pa.string())
    # Hive's rule: a null and an empty value are both the default partition (one group,
    # one directory: two groups would write the same file names into it)
    return [v if v else DEFAULT_PARTITION_NAME for v in s.to_pylist()]


def group_rows(table: pa.Table, key_cols: Sequence[str]) -> List[Tuple[tuple, pa.Table]]:
    """Split ``table`` by the distinct values of ``key_cols`` (keys rendered as strings for
    partition columns; integers stay integers)."""
    if not key_cols or table.num_rows == 0:
        return [((), table)] if table.num_rows else []
    rendered = []
    for c in key_cols:
        col = table.column(c).combine_chunks()
        if pa.types.is_integer(col.type) and c == BUCKET_COL:
            rendered.append(col.to_numpy(zero_copy_only=False).astype(np.int64))
        else:
            rendered.append(np.array(part_value_strings(col), dtype=object))
    if len(rendered) == 1:
        keys = rendered[0]
        uniq, inverse = np.unique(keys, return_inverse=True)
        groups = [((u,), np.nonzero(inverse == i)[0]) for i, u in enumerate(uniq)]
    else:
        tuples = list(zip(*[r.tolist() for r in rendered]))
        index: Dict[tuple, List[int]] = {}
        for i, k in enumerate(tuples):
            index.setdefault(k, []).append(i)
        groups = [(k, np.asarray(v)) for k, v in index.items()]
    return [(k, table.take(pa.array(idx))) for k, idx in groups]


# -- writing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class WriteSpec:
    """What a write task needs (picklable): the table, ids, and how to write."""
    location: str
    data_schema: pa.Schema           # table data columns (Arrow types of the table)
    part_keys: Tuple[str, ...]
    write_id: int
    statement_id: int
    mode: str = "append"             # append | overwrite | dml
    insert_only: bool = False
    file_format: str = "orc"
    bucketed: bool = False
    compression: str = "zlib"        # the table's orc.compress (Hive's default: ZLIB)
    filesystem: object = None        # pyarrow FileSystem of location (None: local disk)
    file_version: str = "0.12"       # the table's orc.write.format (Hive's default: 0.12)

    @property
    def options(self):
        return orc_acid.WriterOptions(compression=self.compression,
                                      file_version=self.file_version)


def _unlink_if_exists(fs, path: str) -> None:
    # a file of an earlier attempt of the same task (same writer id, write id, statement)
    try:
        afs.delete_file(fs, path)
    except FileNotFoundError:
        pass


def _write_insert(spec: WriteSpec, part_dir: str, writer_id: int, data: pa.Table,
                  statement_id: int) -> List[str]:
    if writer_id > MAX_WRITER_ID:
        raise ValueError(f"writer id {writer_id} > {MAX_WRITER_ID}: reduce the number of Spark "
                         f"partitions of the data written")
    fs = spec.filesystem
    if spec.insert_only:
        name = f"{writer_id:06d}_0"
        d = format_base(spec.write_id) if spec.mode == "overwrite" else \
            format_delta(spec.write_id, spec.write_id, statement_id)
        _unlink_if_exists(fs, os.path.join(part_dir, d, name))
        return orc_acid.write_insert_only(
            part_dir, spec.write_id, data, statement_id=statement_id, file_name=name,
            file_format=spec.file_format, overwrite=spec.mode == "overwrite",
            options=spec.options, filesystem=fs)
    if spec.mode == "overwrite":
        _unlink_if_exists(fs, os.path.join(part_dir, format_base(spec.write_id),
                                           format_bucket_file(writer_id)))
        return orc_acid.write_base(part_dir, spec.write_id, writer_id, data,
                                   statement_id=statement_id, row_schema=spec.data_schema,
                                   options=spec.options, filesystem=fs)
    _unlink_if_exists(fs, os.path.join(part_dir, format_delta(spec.write_id, spec.write_id,
                                                              statement_id),
                                       format_bucket_file(writer_id)))
    return orc_acid.write_delta(part_dir, spec.write_id, statement_id, writer_id, data,
                                row_schema=spec.data_schema, options=spec.options,
                                filesystem=fs)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns of ``schema`` (by name) cast to its types."""
    cols = []
    for f in schema:
        col = table.column(f.name)
        if col.type != f.type:
            col = col.cast(f.type)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=schema)


def write_inserts(spec: WriteSpec, table: pa.Table, task_id: int,
                  statement_id: Optional[int] = None) -> List[Tuple[str, str, int]]:
    """Write ``table`` (data columns + partition columns [+ bucket column]) as inserts.

    -> [(partition name, path relative to the table location, rows)]."""
    stmt = spec.statement_id if statement_id is None else statement_id
    keys = list(spec.part_keys) + ([BUCKET_COL] if spec.bucketed else [])
    out = []
    for key, part in group_rows(table, keys):
        pvals = key[:len(spec.part_keys)]
        pname = partition_dir_name(spec.part_keys, pvals) if spec.part_keys else ""
        writer_id = int(key[-1]) if spec.bucketed else task_id
        part_dir = os.path.join(spec.location, pname) if pname else spec.location
        data = conform(part, spec.data_schema)
        for p in _write_insert(spec, part_dir, writer_id, data, stmt):
            out.append((pname, os.path.relpath(p, spec.location), data.num_rows))
    return out


def write_deletes(spec: WriteSpec, table: pa.Table, statement_id: int, *,
                  check_unique: bool = False) -> List[Tuple[str, str, int]]:
    """Delete events for the ROW__IDs in ``table`` (+ partition columns)."""
    out = []
    for key, part in group_rows(table, list(spec.part_keys)):
        pname = partition_dir_name(spec.part_keys, key) if spec.part_keys else ""
        part_dir = os.path.join(spec.location, pname) if pname else spec.location
        rid = part.column(ROW_ID).combine_chunks()
        if check_unique and len(rid):
            flat = pa.Table.from_arrays(rid.flatten(), names=["w", "b", "r"])
            if flat.group_by(["w", "b", "r"]).aggregate([]).num_rows != flat.num_rows:
                raise ValueError("MERGE cardinality violation: a target row matches more than "
                                 "one source row")
        # files of an earlier attempt of this task are replaced
        flat_b = pc.struct_field(rid, [1]).to_numpy(zero_copy_only=False).astype(np.int64)
        for wid in np.unique((flat_b & 0x0FFF0000) >> 16):
            _unlink_if_exists(spec.filesystem, os.path.join(part_dir, format_delete_delta(
                spec.write_id, spec.write_id, statement_id), format_bucket_file(int(wid))))
        for p in orc_acid.write_delete_delta(part_dir, spec.write_id, statement_id,
                                             pa.table({ROW_ID: rid}),
                                             row_schema=spec.data_schema,
                                             options=spec.options,
                                             filesystem=spec.filesystem):
            out.append((pname, os.path.relpath(p, spec.location), 0))
    return out


def dml_task(spec: WriteSpec, batches: Iterable[pa.RecordBatch], task_id: int
             ) -> List[Tuple[str, str, int]]:
    """One task of an UPDATE/DELETE/MERGE: rows carry OP_COL ('D', 'U' or 'I'), ROW__ID (null
    for 'I'), the new data columns and the partition columns. Deletes go to statement S,
    inserts (new row versions) to S+1 (Hive's split update)."""
    batches = list(batches)
    if not batches:
        return []
    table = pa.Table.from_batches(batches)
    if table.num_rows == 0:
        return []
    op = table.column(OP_COL)
    out = []
    dels = table.filter(pc.is_in(op, pa.array(["D", "U"])))
    if dels.num_rows:
        out += write_deletes(spec, dels, spec.statement_id, check_unique=True)
    ins = table.filter(pc.is_in(op, pa.array(["U", "I"])))
    if ins.num_rows:
        out += write_inserts(spec, ins, task_id, statement_id=spec.statement_id + 1)
    return out


# -- reading ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadUnit:
    """One input partition: a bucket id's files of one table partition."""
    split: object                      # orc_acid.Split
    part_values: Tuple[Tuple[str, str], ...] = ()
    filesystem: object = None          # pyarrow FileSystem of the split (None: local disk)


def partition_value_array(value: str, typ: pa.DataType, n: int) -> pa.Array:
    """A partition's raw value (its name's text; the default partition: null) as ``n``
    values of the column's Arrow type."""
    if value is None or value == DEFAULT_PARTITION_NAME:
        return pa.nulls(n, type=typ)
    if pa.types.is_timestamp(typ):
        scalar = pc.strptime(pa.array([value]), format="%Y-%m-%d %H:%M:%S", unit=typ.unit)
        arr = scalar.cast(typ)
    else:
        arr = pa.array([value]).cast(typ)
    return pa.repeat(arr[0], n) if n else pa.array([], type=typ)


def read_unit(unit: ReadUnit, data_schema: pa.Schema, out_schema: pa.Schema,
              batch_rows: int = 262144, on_progress=None, row_filter=None
              ) -> Iterator[pa.RecordBatch]:
    """Rows of one unit as record batches in ``out_schema`` (any subset/order of ROW__ID,
    data columns and partition columns), stripe by stripe: Spark consumes the first batches
    while the next stripe is decoded, and memory stays bounded by a stripe. ``row_filter``
    (a ``pyarrow.compute.Expression`` over ``out_schema``'s columns) keeps the rows it is
    true for, stripe by stripe, before any batch is cut."""
    if unit is None:
        return
    names = out_schema.names
    with_row_id = ROW_ID in names
    data_cols = [n for n in names if n in data_schema.names]
    pvals = dict(unit.part_values)
    consts: Dict[str, pa.Array] = {}      # partition column -> constant array (longest so far)
    for t in orc_acid.iter_split(unit.split, schema=data_schema, columns=data_cols,
                                 with_row_id=with_row_id, filesystem=unit.filesystem):
        n = t.num_rows
        if n == 0:
            continue
        cols = []
        for f in out_schema:
            if f.name in pvals:
                c = consts.get(f.name)
                if c is None or len(c) < n:
                    c = consts[f.name] = partition_value_array(pvals[f.name], f.type, n)
                cols.append(c.slice(0, n))
            else:
                col = t.column(f.name)
                if col.type != f.type:
                    col = col.cast(f.type)
                cols.append(col)
        out = pa.Table.from_arrays(cols, schema=out_schema)
        if row_filter is not None:
            out = out.filter(row_filter)
        for b in out.to_batches(max_chunksize=batch_rows):
            yield b
            if on_progress is not None:
                on_progress()
