"""Read a snapshot of a Hive ACID table into Arrow, vectorized.

Entry points:

* :func:`read_table` -- the snapshot's rows as one ``pyarrow.Table``
* :func:`iter_batches` -- the same rows as a stream of ``pyarrow.RecordBatch``
* :func:`plan_splits` / :func:`read_split` (:func:`iter_split`: stripe by stripe) -- one unit
  of work per bucket id (its data files plus the delete files of the same bucket), for
  engines that fan out

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
   the same bucket's delete files are dropped (a hash semi join in Arrow's engine).
5. Original (pre-ACID) files get synthetic ROW__IDs: (0, V1(bucket id from the name), rows
   of the earlier original files of the same bucket id in full-path order + position).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc

from .layout import bucket_id_of_file, encode_bucket, parse_bucket_file
from .snapshot import AcidSnapshot, get_acid_state, _resolve_fs
from .valid_ids import RangeResponse, ValidWriteIdList

__all__ = [
    "OrcAcidError", "AcidSchemaError", "DataFile", "DeleteFile", "Split",
    "read_table", "iter_batches", "plan_splits", "plan_splits_for_snapshot", "read_split",
    "iter_split",
    "ROW_ID_TYPE", "infer_row_schema",
]

ROW_ID_TYPE = pa.struct([pa.field("writeid", pa.int64()), pa.field("bucketid", pa.int32()),
                         pa.field("rowid", pa.int64())])
ROW_ID_COLUMN = "ROW__ID"
_ACID_LOWER = ("operation", "originaltransaction", "bucket", "rowid", "currenttransaction",
               "row")


class OrcAcidError(Exception):
    """A file or directory that cannot be read as the ACID table it should be."""


class AcidSchemaError(OrcAcidError):
    """An ACID directory holds a file without the ACID event schema (or vice versa)."""


@dataclass(frozen=True)
class DataFile:
    path: str                     # relative to the table location
    kind: str                     # "base" | "delta" | "original" | "insert_only"
    bucket_id: int
    min_write_id: int = 0
    max_write_id: int = 0
    filter_current_txn: bool = False   # some ids of the dir's range are invalid
    side_file: Optional[str] = None


@dataclass(frozen=True)
class DeleteFile:
    path: str
    bucket_id: int
    filter_current_txn: bool = False


@dataclass(frozen=True)
class Split:
    """One bucket id's work: its data files (in read order) and its delete files."""
    location: str
    bucket_id: int
    data_files: Tuple[DataFile, ...]
    delete_files: Tuple[DeleteFile, ...]
    valid_write_ids: str
    insert_only: bool = False


# -- planning ---------------------------------------------------------------------------------

def _bucket_of(rel: str, strict: bool) -> int:
    name = rel.rsplit("/", 1)[-1]
    b = parse_bucket_file(name)
    if b is not None:
        return b.bucket_id
    if strict:
        raise AcidSchemaError(f"{rel}: not a bucket file name in an ACID directory")
    return bucket_id_of_file(name)


def plan_splits_for_snapshot(location: str, snap: AcidSnapshot, *, insert_only: bool = False
                             ) -> List[Split]:
    wids = snap.valid_write_ids
    data: dict = {}
    deletes: dict = {}

    def add(df: DataFile):
        data.setdefault(df.bucket_id, []).append(df)

    def side_for(rel: str, sides: Sequence[str]) -> Optional[str]:
        s = rel + "_flush_length"
        return s if s in sides else None

    # full-ACID directories hold bucket_N files; other names there (raw files written by
    # LOAD DATA, stray files) are rejected rather than guessed at
    strict = not insert_only
    if snap.base is not None:
        for rel in snap.base.files:
            add(DataFile(rel, "insert_only" if insert_only else "base",
                         _bucket_of(rel, strict), 0, snap.base.write_id, False,
                         side_for(rel, snap.base.side_files)))
    for d in snap.deltas:
        filt = wids.range_validity(d.min_write_id, d.max_write_id) is not RangeResponse.ALL
        for rel in d.files:
            add(DataFile(rel, "insert_only" if insert_only else "delta",
                         _bucket_of(rel, strict), d.min_write_id, d.max_write_id, filt,
                         side_for(rel, d.side_files)))
    for rel in snap.original_files:
        add(DataFile(rel, "insert_only" if insert_only else "original",
                     bucket_id_of_file(rel.rsplit("/", 1)[-1])))
    if not insert_only:
        for d in snap.delete_deltas:
            filt = wids.range_validity(d.min_write_id, d.max_write_id) is not RangeResponse.ALL
            for rel in d.files:
                b = _bucket_of(rel, True)
                deletes.setdefault(b, []).append(DeleteFile(rel, b, filt))
    elif snap.delete_deltas:
        raise OrcAcidError(f"{location}: insert-only table has delete deltas "
                           f"{[d.path for d in snap.delete_deltas]}")
    wstr = str(wids)
    return [Split(location, b, tuple(data[b]), tuple(deletes.get(b, ())), wstr, insert_only)
            for b in sorted(data)]


def plan_splits(location: str, valid_write_ids, *, valid_txns=None, insert_only: bool = False,
                filesystem=None) -> List[Split]:
    """List the table, select the snapshot and group its files by bucket id."""
    snap = get_acid_state(location, valid_write_ids, valid_txns, filesystem=filesystem)
    return plan_splits_for_snapshot(location, snap, insert_only=insert_only)


# -- file access ------------------------------------------------------------------------------

class _Files:
    def __init__(self, location: str, filesystem=None):
        self.fs, self.root = _resolve_fs(location, filesystem)
        self.root = self.root.rstrip("/") if self.root != "/" else self.root

    def full(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def read_bytes(self, rel: str) -> bytes:
        p = self.full(rel)
        if self.fs is None:
            with open(p, "rb") as fh:
                return fh.read()
        with self.fs.open_input_stream(p) as fh:
            return fh.read()

    def size(self, rel: str) -> int:
        p = self.full(rel)
        if self.fs is None:
            return os.path.getsize(p)
        return self.fs.get_file_info(p).size

    def read_prefix(self, rel: str, length: int) -> bytes:
        p = self.full(rel)
        if self.fs is None:
            with open(p, "rb") as fh:
                return fh.read(length)
        with self.fs.open_input_file(p) as fh:
            return fh.read(length)

    def open_orc(self, rel: str, side_file: Optional[str] = None) -> Optional[orc.ORCFile]:
        """The ORC file, or for a streaming file with a ``_flush_length`` side file its
        prefix up to the last recorded length; None when nothing was flushed yet (length 0,
        or an empty side file). A side file deleted since the listing means the writer
        closed the file: it is then read whole."""
        p = self.full(rel)
        try:
            if side_file is not None:
                try:
                    length = _flush_length(self.read_bytes(side_file))
                except FileNotFoundError:
                    length = -1
                if length is None or length == 0:
                    return None
                if length > 0 and length < self.size(rel):
                    return orc.ORCFile(pa.BufferReader(self.read_prefix(rel, length)))
            if self.fs is None:
                return orc.ORCFile(p)
            return orc.ORCFile(self.fs.open_input_file(p))
        except FileNotFoundError:
            raise
        except (pa.ArrowException, OSError, ValueError) as e:
            raise OrcAcidError(f"{p}: not a readable ORC file ({e})") from e

    def is_parquet(self, rel: str) -> bool:
        p = self.full(rel)
        if self.fs is None:
            with open(p, "rb") as fh:
                return fh.read(4) == b"PAR1"
        with self.fs.open_input_file(p) as fh:
            return fh.read(4) == b"PAR1"


def _flush_length(side: bytes) -> Optional[int]:
    n = len(side) // 8
    if n == 0:
        return None
    return int.from_bytes(side[(n - 1) * 8:n * 8], "big", signed=True)


def _acid_names(schema: pa.Schema) -> Optional[dict]:
    """lower-case ACID name -> actual column name, or None when not the event schema."""
    names = schema.names
    if len(names) != 6 or tuple(n.lower() for n in names) != _ACID_LOWER:
        return None
    if not pa.types.is_struct(schema.field(5).type):
        return None
    return {n.lower(): n for n in names}


def _row_fields_of(f: orc.ORCFile, acid: bool) -> List[pa.Field]:
    if acid:
        return list(f.schema.field(5).type)
    return list(f.schema)


def _looks_positional(fields: Sequence[pa.Field]) -> bool:
    return bool(fields) and all(
        fl.name.startswith("_col") and fl.name[4:].isdigit() for fl in fields)


def infer_row_schema(location: str, splits: Sequence[Split], filesystem=None
                     ) -> Optional[pa.Schema]:
    """Table columns as stored in the files (first file whose fields are not ``_colN``)."""
    files = _Files(location, filesystem)
    first = None
    for sp in splits:
        for df in sp.data_files:
            if df.kind == "insert_only" and files.is_parquet(df.path):
                import pyarrow.parquet as pq
                fields = list(pq.read_schema(files.full(df.path), filesystem=files.fs))
            else:
                f = files.open_orc(df.path, df.side_file)
                if f is None:  # streaming file with nothing flushed yet
                    continue
                acid = _acid_names(f.schema) is not None and df.kind in ("base", "delta")
                fields = _row_fields_of(f, acid)
            if first is None:
                first = fields
            if not _looks_positional(fields):
                return pa.schema(fields)
    return None if first is None else pa.schema(first)


def _schema_from_any_file(location: str, filesystem, insert_only: bool) -> Optional[pa.Schema]:
    """When the snapshot selects no file, take the table columns from the newest data file
    in any base/delta directory (obsolete, aborted or invisible ones included): reading an
    empty snapshot still yields the table's columns."""
    from .snapshot import list_table_dir
    from .layout import parse_base, parse_delta
    candidates = []
    for rel in list_table_dir(location, filesystem):
        if rel.endswith("/") or rel.count("/") != 1:
            continue
        d, name = rel.split("/")
        pd = parse_delta(d)
        pb = parse_base(d)
        if (pd is None or pd.is_delete) and pb is None:
            continue
        if name.startswith(("_", ".")) or name.endswith("_flush_length"):
            continue
        top = pb.write_id if pb is not None else pd.max_write_id
        candidates.append((top, rel))
    files = _Files(location, filesystem)
    for _, rel in sorted(candidates, reverse=True):
        try:
            if insert_only and files.is_parquet(rel):
                import pyarrow.parquet as pq
                return pq.read_schema(files.full(rel), filesystem=files.fs).remove_metadata()
            f = files.open_orc(rel)
        except (OrcAcidError, OSError):
            continue
        acid = _acid_names(f.schema) is not None and not insert_only
        fields = _row_fields_of(f, acid)
        if fields and not _looks_positional(fields):
            return pa.schema(fields)
    return None


# -- reading ------------------------------------------------------------------------------

@dataclass
class _Ctx:
    files: _Files
    wids: ValidWriteIdList
    schema: pa.Schema                 # output table columns (full table schema)
    proj: List[int]                   # positions of the output columns in the schema
    with_row_id: bool
    exc_np: np.ndarray = field(default=None)

    def __post_init__(self):
        self.exc_np = np.asarray(self.wids.exceptions, dtype=np.int64)


def _valid_mask(ctx: _Ctx, ct: pa.ChunkedArray) -> np.ndarray:
    arr = ct.to_numpy()
    mask = arr <= ctx.wids.high_watermark
    if len(ctx.exc_np):
        mask &= ~np.isin(arr, ctx.exc_np)
    return mask


def _read_delete_keys(ctx: _Ctx, delete_files: Sequence[DeleteFile]) -> Optional["_DeleteSet"]:
    parts = []
    for dfile in delete_files:
        f = ctx.files.open_orc(dfile.path)
        names = _acid_names(f.schema)
        if names is None:
            raise AcidSchemaError(f"{ctx.files.full(dfile.path)}: delete delta file without "
                                  f"the ACID event schema: {f.schema.names}")
        cols = [names["originaltransaction"], names["bucket"], names["rowid"]]
        if dfile.filter_current_txn:
            cols.append(names["currenttransaction"])
        t = f.read(columns=cols)
        if dfile.filter_current_txn:
            t = t.filter(pa.array(_valid_mask(ctx, t.column(3))))
        if t.num_rows:
            parts.append(pa.Table.from_arrays(
                [t.column(0).cast(pa.int64()), t.column(1).cast(pa.int32()),
                 t.column(2).cast(pa.int64())], names=["o", "b", "r"]))
    if not parts:
        return None
    return _DeleteSet(pa.concat_tables(parts))


def delete_key_groups(location: str, valid_write_ids, delete_files: Sequence[DeleteFile], *,
                      filesystem=None) -> Dict[Tuple[int, int], np.ndarray]:
    """The valid delete events of ``delete_files`` (as planned for a snapshot: those whose
    directory holds invalid write ids are filtered by currentTransaction), grouped by
    (originalTransaction, bucket) -> sorted int64 rowIds. For engines that apply deletes
    themselves (the Spark JVM scan path)."""
    wids = (valid_write_ids if isinstance(valid_write_ids, ValidWriteIdList)
            else ValidWriteIdList.parse(valid_write_ids))
    ctx = _Ctx(_Files(location, filesystem), wids, pa.schema([]), [], False)
    found = _read_delete_keys(ctx, delete_files)
    return {} if found is None else found.groups


class _DeleteSet:
    """Valid delete events of one split, grouped by (originalTransaction, bucket) with the
    rowIds of each group sorted, so that a data file whose rows share one (or a few) such
    pairs -- every insert delta, IOW base and original file does -- is matched with a
    binary search per row instead of a hash join."""

    MAX_GROUPS_PER_FILE = 64

    def __init__(self, keys: pa.Table):
        o = keys.column("o").to_numpy()
        b = keys.column("b").to_numpy()
        r = keys.column("r").to_numpy()
        if not self._sorted(o, b, r):
            order = pc.sort_indices(keys, sort_keys=[("o", "ascending"), ("b", "ascending"),
                                                     ("r", "ascending")])
            keys = keys.take(order)
            order = order.to_numpy()
            o, b, r = o[order], b[order], r[order]
        self.table = keys
        self.size = len(r)
        change = np.flatnonzero((o[1:] != o[:-1]) | (b[1:] != b[:-1])) + 1
        starts = np.concatenate(([0], change))
        ends = np.concatenate((change, [len(r)]))
        self.groups = {(int(o[s]), int(b[s])): r[s:e] for s, e in zip(starts, ends)}

    @staticmethod
    def _sorted(o: np.ndarray, b: np.ndarray, r: np.ndarray) -> bool:
        """Already in key order? (Delete deltas are written sorted, Hive's and ours: one
        file's events need no sort.)"""
        do, db = np.diff(o), np.diff(b)
        return bool(((do > 0) | ((do == 0) & ((db > 0) | ((db == 0) & (np.diff(r) >= 0)))))
                    .all())

    @staticmethod
    def _hits(rowid: np.ndarray, dels: np.ndarray) -> np.ndarray:
        n = len(rowid)
        if n > 1 and int(rowid[-1]) - int(rowid[0]) == n - 1 and bool(
                (np.diff(rowid) == 1).all()):
            # consecutive rowIds (a stripe of any file our writer or Hive writes): mark the
            # deleted ones by position instead of a binary search per row
            r0 = int(rowid[0])
            lo, hi = np.searchsorted(dels, [r0, r0 + n])
            hit = np.zeros(n, dtype=bool)
            hit[dels[lo:hi] - r0] = True
            return hit
        idx = np.searchsorted(dels, rowid)
        idx[idx == len(dels)] = len(dels) - 1
        return dels[idx] == rowid

    def keep_mask(self, o_col, b_col, r_col) -> Optional[np.ndarray]:
        """-> boolean keep-mask for the rows with these keys, or None if nothing is deleted."""
        o = np.asarray(o_col.to_numpy(), dtype=np.int64)
        b = np.asarray(b_col.to_numpy(), dtype=np.int64)
        r = np.asarray(r_col.to_numpy(), dtype=np.int64)
        if len(o) == 0:
            return None
        uo = np.unique(o) if o[0] != o[-1] or o.min() != o.max() else o[:1]
        ub = np.unique(b) if b[0] != b[-1] or b.min() != b.max() else b[:1]
        if len(uo) * len(ub) <= self.MAX_GROUPS_PER_FILE:
            deleted = None
            single = len(uo) == 1 and len(ub) == 1
            for ov in uo:
                for bv in ub:
                    dels = self.groups.get((int(ov), int(bv)))
                    if dels is None:
                        continue
                    if single:
                        hit = self._hits(r, dels)
                    else:
                        sel = (o == ov) & (b == bv)
                        hit = np.zeros(len(r), dtype=bool)
                        hit[sel] = self._hits(r[sel], dels)
                    deleted = hit if deleted is None else (deleted | hit)
            if deleted is None or not deleted.any():
                return None
            return ~deleted
        # many distinct (originalTransaction, bucket) pairs (e.g. a compacted base): hash join
        n = len(o)
        probe = pa.Table.from_arrays(
            [pa.array(o), pa.array(b.astype(np.int32)), pa.array(r),
             pa.array(np.arange(n, dtype=np.int64))], names=["o", "b", "r", "i"])
        hit = probe.join(self.table, keys=["o", "b", "r"], join_type="left semi",
                         use_threads=True)
        if hit.num_rows == 0:
            return None
        keep = np.ones(n, dtype=bool)
        keep[hit.column("i").to_numpy()] = False
        return keep


def _apply_deletes(keys: Tuple[pa.ChunkedArray, pa.ChunkedArray, pa.ChunkedArray],
                   deletes: Optional[_DeleteSet]) -> Optional[np.ndarray]:
    """-> boolean keep-mask, or None when nothing is deleted."""
    if deletes is None or deletes.size == 0:
        return None
    return deletes.keep_mask(*keys)


def _conform(cols: List[pa.ChunkedArray], n: int, ctx: _Ctx, path: str) -> List[pa.Array]:
    """File row fields (by position) -> the projected output columns with the table types."""
    out = []
    for pos in ctx.proj:
        target = ctx.schema.field(pos)
        if pos < len(cols):
            col = cols[pos]
            if col.type != target.type:
                try:
                    col = col.cast(target.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise AcidSchemaError(
                        f"{path}: column {pos} ({target.name}) has type {col.type}, "
                        f"table says {target.type}: {e}") from e
            out.append(col)
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


def _iter_acid_file(ctx: _Ctx, df: DataFile, deletes: Optional[_DeleteSet]
                    ) -> Iterator[pa.Table]:
    f = ctx.files.open_orc(df.path, df.side_file)
    if f is None:  # streaming file with nothing flushed yet
        return
    path = ctx.files.full(df.path)
    names = _acid_names(f.schema)
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


def _acid_rows(ctx: _Ctx, df: DataFile, deletes: Optional[_DeleteSet], t: pa.Table,
               names: dict, row_fields: List[pa.Field], wanted: List[int], need_ids: bool,
               path: str) -> pa.Table:
    """Rows of one stripe of an ACID file: invalid transactions and deleted rows dropped,
    the projected ``row`` fields as table columns."""
    n = t.num_rows
    keep = None
    if df.filter_current_txn:
        keep = _valid_mask(ctx, t.column(names["currenttransaction"]))
    ids = None
    if need_ids:
        ids = (t.column(names["originaltransaction"]), t.column(names["bucket"]),
               t.column(names["rowid"]))
        dmask = _apply_deletes(ids, deletes)
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
                        deletes: Optional[_DeleteSet], row_offset: int) -> Iterator[pa.Table]:
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
            keep = _apply_deletes(ids, deletes)
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
    deletes = None if split.insert_only else _read_delete_keys(ctx, split.delete_files)
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
    wids = valid_write_ids if isinstance(valid_write_ids, ValidWriteIdList) else \
        ValidWriteIdList.parse(valid_write_ids)
    if with_row_id and insert_only:
        raise ValueError("insert-only tables have no ROW__ID")
    if schema is None:
        schema = infer_row_schema(location, splits, filesystem)
        if schema is None:
            schema = _schema_from_any_file(location, filesystem, insert_only) or pa.schema([])
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
    return _Ctx(_Files(location, filesystem), wids, schema, proj, with_row_id)


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
