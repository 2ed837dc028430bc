"""Read a snapshot of a Hive ACID table into Arrow, vectorized.

Entry points:

* :func:`read_table` -- the snapshot's rows as one ``pyarrow.Table``
* :func:`iter_batches` -- the same rows as a stream of ``pyarrow.RecordBatch``
* :func:`read_split` (:func:`iter_split`: stripe by stripe) -- one unit of work per bucket
  id (its data files plus the delete files of the same bucket; ``orc_acid.splits`` plans
  them), for engines that fan out

Files are opened by ``orc_acid.table_files``; the row filters (write id validity, delete
events) are ``orc_acid.event_filters``.

What happens per data file (no per-row Python anywhere):

1. Open it (ORC via pyarrow; for a streaming delta with a ``_flush_length`` side file only
   the flushed prefix, which is itself a complete ORC file).
2. ACID files: check the event schema (ACID column names compared case-insensitively, so
   the lower-case variants some writers produce are fine) and read only the needed columns:
   the ROW__ID columns when there are deletes or ``with_row_id``, ``currentTransaction``
   when the directory's write id range is not entirely valid, and the projected ``row``
   fields. ``row`` fields are matched to the table schema by position, so ``_col0``-style
   names are accepted.
3. Rows whose currentTransaction is not valid in the snapshot are dropped (streaming
   deltas span several write ids, some aborted or open).
4. Rows whose (originalTransaction, bucket, rowId) appears among the valid delete events of
   the same bucket's delete files are dropped.
5. Original (pre-ACID) files get synthetic ROW__IDs: (0, V1(bucket id from the name), rows
   of the earlier original files of the same bucket id in full-path order + position).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc

from .event_filters import DeleteSet, keep_mask, read_delete_set, valid_mask
from .layout import encode_bucket
from .splits import DataFile, Split, plan_splits
from .table_files import (AcidSchemaError, OrcAcidError, TableFiles, acid_column_names,
                          cast_column, infer_row_schema, schema_from_any_file)
from .valid_ids import ValidWriteIdList, as_valid_write_ids

__all__ = ["read_table", "iter_batches", "read_split", "iter_split", "ROW_ID_TYPE"]

ROW_ID_TYPE = pa.struct([pa.field("writeid", pa.int64()), pa.field("bucketid", pa.int32()),
                         pa.field("rowid", pa.int64())])
ROW_ID_COLUMN = "ROW__ID"


# -- reading ------------------------------------------------------------------------------

@dataclass
class _Ctx:
    files: TableFiles
    wids: ValidWriteIdList
    schema: pa.Schema                 # output table columns (full table schema)
    proj: List[int]                   # positions of the output columns in the schema
    with_row_id: bool
    exc_np: np.ndarray = field(default=None)

    def __post_init__(self):
        self.exc_np = np.asarray(self.wids.exceptions, dtype=np.int64)


def _conform(cols: List[pa.ChunkedArray], n: int, ctx: _Ctx, path: str) -> List[pa.Array]:
    """File row fields (by position) -> the projected output columns with the table types."""
    out = []
    for pos in ctx.proj:
        target = ctx.schema.field(pos)
        if pos < len(cols):
            out.append(cast_column(cols[pos], target.type,
                                   f"{path}: column {pos} ({target.name})"))
        else:  # column added to the table after this file was written
            out.append(pa.nulls(n, type=target.type))
    return out


def _build(ctx: _Ctx, cols: List, row_id: Optional[Tuple], n: int) -> pa.Table:
    arrays, names = [], []
    if ctx.with_row_id:
        arrays.append(_row_id_struct(*row_id))
        names.append(ROW_ID_COLUMN)
    arrays.extend(cols)
    names.extend(ctx.schema.field(p).name for p in ctx.proj)
    if not arrays:
        return _empty_width_table(n)
    return pa.Table.from_arrays(arrays, names=names)


def _concat(ctx: _Ctx, tables: List[pa.Table]) -> pa.Table:
    if not tables:
        return _output_schema(ctx).empty_table()
    if tables[0].num_columns == 0:   # count only: concat_tables would drop the row count
        return _empty_width_table(sum(t.num_rows for t in tables))
    return pa.concat_tables(tables)


def _empty_width_table(n: int) -> pa.Table:
    """A table with n rows and no columns."""
    return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])


def _row_id_struct(o, b, r) -> pa.ChunkedArray:
    o = o.combine_chunks() if isinstance(o, pa.ChunkedArray) else o
    b = b.combine_chunks() if isinstance(b, pa.ChunkedArray) else b
    r = r.combine_chunks() if isinstance(r, pa.ChunkedArray) else r
    return pa.chunked_array([pa.StructArray.from_arrays(
        [o.cast(pa.int64()), b.cast(pa.int32()), r.cast(pa.int64())],
        fields=list(ROW_ID_TYPE))], type=ROW_ID_TYPE)


def _stripes(f: orc.ORCFile, columns: List[str]) -> Iterator[pa.Table]:
    """The file's rows one stripe at a time (bounded memory; a consumer such as a Spark
    task starts on the first stripe while the next is decoded)."""
    for i in range(f.nstripes):
        yield pa.Table.from_batches([f.read_stripe(i, columns=columns)])


def _iter_acid_file(ctx: _Ctx, df: DataFile, deletes: Optional[DeleteSet]
                    ) -> Iterator[pa.Table]:
    f = ctx.files.open_orc(df.path, df.side_file)
    if f is None:  # streaming file with nothing flushed yet
        return
    path = ctx.files.full(df.path)
    names = acid_column_names(f.schema)
    if names is None:
        raise AcidSchemaError(f"{path}: file in an ACID directory without the ACID event "
                              f"schema (operation, originalTransaction, bucket, rowId, "
                              f"currentTransaction, row): got {f.schema.names}")
    row_fields = list(f.schema.field(5).type)
    need_ids = ctx.with_row_id or deletes is not None
    cols = []
    if need_ids:
        cols += [names["originaltransaction"], names["bucket"], names["rowid"]]
    if df.filter_current_txn:
        cols.append(names["currenttransaction"])
    row_name = names["row"]
    wanted = [p for p in ctx.proj if p < len(row_fields)]
    cols += [f"{row_name}.{row_fields[p].name}" for p in wanted]
    if not cols:  # count only
        cols = [names["currenttransaction"]]
    for t in _stripes(f, cols):
        yield _acid_rows(ctx, df, deletes, t, names, row_fields, wanted, need_ids, path)


def _acid_rows(ctx: _Ctx, df: DataFile, deletes: Optional[DeleteSet], t: pa.Table,
               names: dict, row_fields: List[pa.Field], wanted: List[int], need_ids: bool,
               path: str) -> pa.Table:
    """Rows of one stripe of an ACID file: invalid transactions and deleted rows dropped,
    the projected ``row`` fields as table columns."""
    n = t.num_rows
    keep = None
    if df.filter_current_txn:
        keep = valid_mask(ctx.wids, t.column(names["currenttransaction"]).to_numpy(),
                          ctx.exc_np)
    ids = None
    if need_ids:
        ids = (t.column(names["originaltransaction"]), t.column(names["bucket"]),
               t.column(names["rowid"]))
        dmask = keep_mask(deletes, ids)
        if dmask is not None:
            keep = dmask if keep is None else (keep & dmask)
    # row fields by position
    row_cols: List = [None] * len(row_fields)
    if wanted:
        rowcol = t.column(names["row"])
        sub = {fl.name: i for i, fl in enumerate(rowcol.type)}
        for p in wanted:
            child = pa.chunked_array(
                [ch.field(sub[row_fields[p].name]) for ch in rowcol.chunks],
                type=rowcol.type.field(sub[row_fields[p].name]).type)
            row_cols[p] = child
    out_cols = _conform(row_cols, n, ctx, path)
    table = _build(ctx, out_cols, ids, n)
    if keep is not None and not keep.all():
        table = table.filter(pa.array(keep))
    return table


def _iter_original_file(ctx: _Ctx, df: DataFile, f: orc.ORCFile,
                        deletes: Optional[DeleteSet], row_offset: int) -> Iterator[pa.Table]:
    """Rows of an original (pre-ACID) file; synthetic ROW__IDs continue at ``row_offset``."""
    path = ctx.files.full(df.path)
    fields = list(f.schema)
    wanted = [p for p in ctx.proj if p < len(fields)]
    bucket = encode_bucket(df.bucket_id, 0)
    for t, n in _stripes_counted(f, [fields[p].name for p in wanted]):
        row_cols: List = [None] * len(fields)
        for p in wanted:
            row_cols[p] = t.column(fields[p].name)
        out_cols = _conform(row_cols, n, ctx, path)
        ids = None
        keep = None
        if ctx.with_row_id or deletes is not None:
            ids = (pa.chunked_array([np.zeros(n, dtype=np.int64)]),
                   pa.chunked_array([np.full(n, bucket, dtype=np.int32)]),
                   pa.chunked_array([np.arange(row_offset, row_offset + n, dtype=np.int64)]))
            keep = keep_mask(deletes, ids)
        row_offset += n
        table = _build(ctx, out_cols, ids, n)
        if keep is not None:
            table = table.filter(pa.array(keep))
        yield table


def _stripes_counted(f: orc.ORCFile, names: List[str]
                     ) -> Iterator[Tuple[Optional[pa.Table], int]]:
    """(stripe table of ``names``, its row count); with no names only the row count of the
    whole file, from its footer (nothing to decode)."""
    if names:
        for t in _stripes(f, names):
            yield t, t.num_rows
    else:
        yield None, f.nrows


def _iter_insert_only_file(ctx: _Ctx, df: DataFile) -> Iterator[pa.Table]:
    files = ctx.files
    path = files.full(df.path)
    if files.is_parquet(df.path):
        import pyarrow.parquet as pq
        try:
            pf = pq.ParquetFile(path if files.fs is None else files.fs.open_input_file(path))
        except (pa.ArrowException, OSError) as e:
            raise OrcAcidError(f"{path}: not a readable Parquet file ({e})") from e
        fields = list(pf.schema_arrow)
        wanted = [p for p in ctx.proj if p < len(fields)]
        names = [fields[p].name for p in wanted]
        chunks = ((pf.read_row_group(i, columns=names),
                   pf.metadata.row_group(i).num_rows) for i in range(pf.num_row_groups))
    else:
        f = files.open_orc(df.path, df.side_file)
        if f is None:  # streaming file with nothing flushed yet
            return
        fields = list(f.schema)
        wanted = [p for p in ctx.proj if p < len(fields)]
        chunks = _stripes_counted(f, [fields[p].name for p in wanted])
    for t, n in chunks:
        row_cols: List = [None] * len(fields)
        for p in wanted:
            row_cols[p] = t.column(fields[p].name)
        yield _build(ctx, _conform(row_cols, n, ctx, path), None, n)


def _iter_split_tables(ctx: _Ctx, split: Split) -> Iterator[pa.Table]:
    """The split's rows, one table per stripe (row group) of each data file, in order."""
    deletes = None if split.insert_only else read_delete_set(
        ctx.files, ctx.wids, split.delete_files, ctx.exc_np)
    orig_offset = 0
    for df in split.data_files:
        if df.kind == "insert_only":
            yield from _iter_insert_only_file(ctx, df)
        elif df.kind == "original":
            f = ctx.files.open_orc(df.path)
            yield from _iter_original_file(ctx, df, f, deletes, orig_offset)
            orig_offset += f.nrows
        else:
            yield from _iter_acid_file(ctx, df, deletes)


def _output_schema(ctx: _Ctx) -> pa.Schema:
    fields = []
    if ctx.with_row_id:
        fields.append(pa.field(ROW_ID_COLUMN, ROW_ID_TYPE))
    fields += [ctx.schema.field(p) for p in ctx.proj]
    return pa.schema(fields)


def _make_ctx(location: str, valid_write_ids, schema, columns, with_row_id, filesystem,
              splits, insert_only) -> _Ctx:
    wids = as_valid_write_ids(valid_write_ids)
    if with_row_id and insert_only:
        raise ValueError("insert-only tables have no ROW__ID")
    if schema is None:
        schema = infer_row_schema(location, splits, filesystem)
        if schema is None:
            schema = schema_from_any_file(location, filesystem, insert_only) or pa.schema([])
    elif not isinstance(schema, pa.Schema):
        schema = pa.schema(schema)
    schema = schema.remove_metadata()
    if columns is None:
        proj = list(range(len(schema)))
    else:
        names = schema.names
        lower = {n.lower(): i for i, n in enumerate(names)}
        proj = []
        for c in columns:
            if c in names:
                proj.append(names.index(c))
            elif c.lower() in lower:
                proj.append(lower[c.lower()])
            else:
                raise KeyError(f"column {c!r} not in table columns {names}")
    return _Ctx(TableFiles(location, filesystem), wids, schema, proj, with_row_id)


def read_split(split: Split, *, schema=None, columns: Optional[Sequence[str]] = None,
               with_row_id: bool = False, filesystem=None) -> pa.Table:
    """Read one split. Pass the same ``schema`` to every split of a table (see
    :func:`infer_row_schema`) so their outputs line up; default: inferred from this split."""
    ctx = _make_ctx(split.location, split.valid_write_ids, schema, columns, with_row_id,
                    filesystem, [split], split.insert_only)
    return _concat(ctx, list(_iter_split_tables(ctx, split)))


def iter_split(split: Split, *, schema=None, columns: Optional[Sequence[str]] = None,
               with_row_id: bool = False, filesystem=None) -> Iterator[pa.Table]:
    """:func:`read_split` as a stream: one table per stripe (row group) of each data file,
    so memory stays bounded by a stripe and a consumer can start on the first rows while the
    rest is decoded. Yields nothing for an empty split."""
    ctx = _make_ctx(split.location, split.valid_write_ids, schema, columns, with_row_id,
                    filesystem, [split], split.insert_only)
    return _iter_split_tables(ctx, split)


def iter_batches(location: str, valid_write_ids, *, valid_txns=None,
                 columns: Optional[Sequence[str]] = None, with_row_id: bool = False,
                 schema=None, insert_only: bool = False, filesystem=None
                 ) -> Iterator[pa.RecordBatch]:
    """The snapshot's rows as record batches, one stripe at a time (bounded memory)."""
    splits = plan_splits(location, valid_write_ids, valid_txns=valid_txns,
                         insert_only=insert_only, filesystem=filesystem)
    ctx = _make_ctx(location, valid_write_ids, schema, columns, with_row_id, filesystem,
                    splits, insert_only)
    for sp in splits:
        for t in _iter_split_tables(ctx, sp):
            yield from t.to_batches()


def read_table(location: str, valid_write_ids, *, valid_txns=None,
               columns: Optional[Sequence[str]] = None, with_row_id: bool = False,
               row_ids: Optional[bool] = None, schema=None, insert_only: bool = False,
               filesystem=None, use_threads: bool = True) -> pa.Table:
    """Read the snapshot of an ACID table (or partition) directory.

    ``location``: local path, ``file://`` URI or a pyarrow.fs URI (or a path inside
    ``filesystem``). ``valid_write_ids``: the table's ValidWriteIdList (string or object).
    ``valid_txns``: ValidTxnList deciding ``_vT`` directory visibility (None: all visible).
    ``columns``: projection (table column names). ``with_row_id`` (alias ``row_ids``): add a
    ``ROW__ID`` struct<writeid, bucketid, rowid> column first. ``schema``: the table columns
    (pyarrow schema); file ``row`` fields are mapped to it by position and cast to its types;
    default: the names/types found in the files. ``insert_only``: the table is
    ``transactional_properties=insert_only`` (plain ORC/Parquet files, no ROW__ID).
    """
    if row_ids is not None:
        with_row_id = bool(row_ids)
    splits = plan_splits(location, valid_write_ids, valid_txns=valid_txns,
                         insert_only=insert_only, filesystem=filesystem)
    ctx = _make_ctx(location, valid_write_ids, schema, columns, with_row_id, filesystem,
                    splits, insert_only)

    def run(sp: Split) -> List[pa.Table]:
        return list(_iter_split_tables(ctx, sp))

    if use_threads and len(splits) > 1:
        with ThreadPoolExecutor(max_workers=min(len(splits), os.cpu_count() or 2)) as ex:
            results = list(ex.map(run, splits))
    else:
        results = [run(sp) for sp in splits]
    return _concat(ctx, [t for ts in results for t in ts])
