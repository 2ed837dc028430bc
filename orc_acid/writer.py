"""Write Hive full-ACID (v2) ORC files: insert deltas, delete deltas, updates, bases.

Every data file has the ACID event schema, in this order and with these names::

    operation:int, originalTransaction:bigint, bucket:int, rowId:bigint,
    currentTransaction:bigint, row:struct<...table columns...>

and the footer user metadata Hive writers put there: ``hive.acid.key.index`` (one
``originalTransaction,bucket,rowId;`` per stripe, the stripe's last key), ``hive.acid.stats``
(``inserts,updates,deletes``) and ``hive.acid.version`` = ``2``. Each base/delta directory
also gets ``_orc_acid_version`` holding the single byte ``2``.

How: columns are assembled with pyarrow (no per-row Python), the file is written by pyarrow's
ORC writer into memory and the footer metadata added by rewriting the file tail there (see
``_orc_tail`` for why): a file is held in memory whole before it is stored (one bucket file
of one statement). Inserts (deltas, bases) go faster: pyarrow encodes only the table columns
and ``_insert_file`` splices in the five ACID columns, whose values it knows in closed form
(the same file, without the cost of encoding them value by value). Then, by file system
(``orc_acid.fs``):

* local disk (and file systems that rename): written to a hidden temporary name in the target
  directory (not fsync'ed) and moved to its final name with a no-replace link, so a crash
  never leaves a partial file under a name a reader picks up, and a second writer of the
  same (write id, bucket, statement) fails instead of overwriting;
* object stores (S3, Azure, GCS): one upload under the final name -- an object appears whole
  or not at all, so no temporary name and no rename are needed (nor possible: S3 has no
  atomic rename). The existence check before it is not atomic with the upload; uniqueness
  of (write id, bucket, statement id, attempt) comes from the metastore's write ids, not from
  the store. A reader ignores a delta of an uncommitted write id, so a file is visible
  exactly from the metastore commit on (the model of Hive on S3); a failed writer's files
  stay invisible (aborted write id) until the cleaner deletes them.

Writer settings follow Hive's delta writer where pyarrow allows: ZLIB, 16 MiB stripes, no
block padding, row index stride 10000. Hive uses a 16 KiB compression buffer; ORC C++ only
accepts multiples of 64 KiB, so 64 KiB is used (readers take any buffer size).

Locations: local paths, ``file:`` URIs or any scheme of ``orc_acid.fs`` (``s3a://``,
``abfs://``...); every function takes an optional ``filesystem`` (a pyarrow FileSystem; the
location is then a path in it, or a URI turned into one).
"""

from __future__ import annotations

import os
import uuid
from typing import List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc

from . import fs as afs
from ._insert_file import encode_insert_file
from ._orc_tail import OrcTail, OrcTailError
from .layout import (ACID_FORMAT_FILE, MAX_BUCKET_ID, MAX_STATEMENT_ID, ORC_ACID_VERSION,
                     encode_bucket, format_base, format_bucket_file, format_delete_delta,
                     format_delta)

__all__ = [
    "ACID_FIELD_NAMES", "OP_INSERT", "OP_UPDATE", "OP_DELETE",
    "acid_schema", "write_delta", "write_delete_delta", "write_update", "write_base",
    "write_acid_file", "write_insert_file", "write_insert_only", "WriterOptions",
]

OP_INSERT, OP_UPDATE, OP_DELETE = 0, 1, 2
ACID_FIELD_NAMES = ("operation", "originalTransaction", "bucket", "rowId",
                    "currentTransaction", "row")

STRIPE_SIZE = 16 * 1024 * 1024
COMPRESSION_BLOCK_SIZE = 64 * 1024
ROW_INDEX_STRIDE = 10000


class WriterOptions:
    """ORC settings for the files written (defaults: Hive's delta writer)."""

    def __init__(self, compression: str = "zlib", stripe_size: int = STRIPE_SIZE,
                 compression_block_size: int = COMPRESSION_BLOCK_SIZE,
                 row_index_stride: int = ROW_INDEX_STRIDE, batch_size: int = 64 * 1024,
                 file_version: str = "0.12"):
        self.compression = compression
        # ORC's file format version ("0.12": Hive's default; "0.11": run-length encoding v1
        # for integers, which ORC C++ writes 2-3 times faster at about the same size; every
        # ORC reader reads both, Hive writes 0.11 with hive.exec.orc.write.format=0.11)
        self.file_version = file_version
        self.stripe_size = stripe_size
        self.compression_block_size = compression_block_size
        self.row_index_stride = row_index_stride
        self.batch_size = batch_size


DEFAULT_OPTIONS = WriterOptions()


def orc_writer_kwargs(opts: WriterOptions) -> dict:
    """pyarrow ORC writer arguments for ``opts`` (no padding between stripes, so the
    stripes' offsets are what the footer says)."""
    return dict(compression=opts.compression, stripe_size=opts.stripe_size,
                compression_block_size=opts.compression_block_size,
                row_index_stride=opts.row_index_stride, batch_size=opts.batch_size,
                padding_tolerance=0.0, file_version=opts.file_version)


def acid_footer_items(key_index: str, inserts: int, updates: int, deletes: int) -> list:
    """The footer user metadata of an ACID file, as Hive's writers put it."""
    return [("hive.acid.key.index", key_index.encode("utf-8")),
            ("hive.acid.stats", f"{inserts},{updates},{deletes}".encode("ascii")),
            ("hive.acid.version", str(ORC_ACID_VERSION).encode("ascii"))]


def encode_orc(events: pa.Table, opts: WriterOptions) -> pa.Buffer:
    """``events`` as one ORC file in memory, written with ``opts``."""
    sink = pa.BufferOutputStream()
    orc.write_table(events, sink, **orc_writer_kwargs(opts))
    return sink.getvalue()


def as_row_schema(row_schema) -> pa.Schema:
    """The table columns given as a schema, a struct type or a list of fields."""
    if isinstance(row_schema, pa.Schema):
        return row_schema.remove_metadata()
    if isinstance(row_schema, pa.StructType):
        return pa.schema(list(row_schema))
    return pa.schema(row_schema)


def acid_schema(row_schema) -> pa.Schema:
    """The ACID event schema with ``row`` = struct of the table columns."""
    rs = as_row_schema(row_schema)
    return pa.schema([
        pa.field("operation", pa.int32()),
        pa.field("originalTransaction", pa.int64()),
        pa.field("bucket", pa.int32()),
        pa.field("rowId", pa.int64()),
        pa.field("currentTransaction", pa.int64()),
        pa.field("row", pa.struct(list(rs))),
    ])


def as_table(data) -> pa.Table:
    """Rows given as a Table, a RecordBatch or a dict of columns, as a Table."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, dict):
        return pa.table(data)
    raise TypeError(f"expected a pyarrow Table or RecordBatch, got {type(data).__name__}")


def ensure_acid_dir(d: str, filesystem=None) -> None:
    """Create the base/delta directory ``d`` with its ``_orc_acid_version`` marker. Locally
    written under a hidden name and renamed (a reader never sees a partial marker); on an
    object store one upload (whole or nothing; rewriting it is harmless: same content)."""
    fs, d = afs.resolve(d, filesystem)
    marker = afs.join(d, ACID_FORMAT_FILE)
    content = str(ORC_ACID_VERSION).encode("ascii")
    if fs is not None and not afs.can_rename(fs):
        afs.write_bytes(fs, marker, content)
        return
    afs.makedirs(fs, d)
    if afs.exists(fs, marker):
        return
    tmp = afs.join(d, f".{ACID_FORMAT_FILE}.{uuid.uuid4().hex}.tmp")
    afs.write_bytes(fs, tmp, content)
    if fs is None:
        os.replace(tmp, marker)
    else:
        fs.move(tmp, marker)


def _publish(tmp: str, final: str) -> None:
    """Move tmp to final without ever replacing an existing file."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        os.unlink(tmp)
        raise FileExistsError(
            f"{final} already exists: (write id, bucket, statement id) must be unique per "
            f"writer") from None
    except OSError:
        # file systems without hard links: best effort check + rename
        if os.path.exists(final):
            os.unlink(tmp)
            raise FileExistsError(f"{final} already exists") from None
        os.rename(tmp, final)
        return
    os.unlink(tmp)


def _stripe_rows(data: bytes) -> List[int]:
    try:
        return OrcTail.of_bytes(data).stripe_row_counts()
    except OrcTailError:
        f = orc.ORCFile(pa.BufferReader(data))
        return [f.read_stripe(i, columns=["operation"]).num_rows for i in range(f.nstripes)]


def publish_bytes(fs, path: str, data) -> None:
    """Put a finished file (bytes, or a list of buffers: its consecutive parts) under its
    final name, never replacing one (``fs`` None: local).

    Local: temporary name + no-replace link. Other file systems that rename (HDFS): check,
    write under a temporary name, rename. Object stores: check, one upload."""
    if afs.exists(fs, path):
        raise FileExistsError(f"{path} already exists: (write id, bucket, statement id) "
                              f"must be unique per writer")
    d, _, name = path.rpartition("/")
    if fs is not None and not afs.can_rename(fs):
        afs.write_bytes(fs, path, data)
        return
    afs.makedirs(fs, d)
    tmp = afs.join(d, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        afs.write_bytes(fs, tmp, data)
        if fs is None:
            _publish(tmp, path)
        else:
            fs.move(tmp, path)
    finally:
        if afs.exists(fs, tmp):
            afs.delete_file(fs, tmp)


def write_acid_file(path: str, events: pa.Table, *, inserts: int = 0, updates: int = 0,
                    deletes: int = 0, options: Optional[WriterOptions] = None,
                    filesystem=None) -> str:
    """Write an ACID event table (already in the exact ACID schema) to ``path``.

    Adds the Hive footer metadata; publishes whole (``publish_bytes``); refuses to replace a
    file. Returns the path written (in the file system's terms)."""
    opts = options or DEFAULT_OPTIONS
    names = tuple(events.schema.names)
    if names != ACID_FIELD_NAMES:
        raise ValueError(f"events must have the ACID columns {ACID_FIELD_NAMES}, got {names}")
    fs, path = afs.resolve(path, filesystem)
    data = encode_orc(events, opts)
    counts = _stripe_rows(data)
    if sum(counts) != events.num_rows:
        raise OrcTailError(f"stripe row counts {counts} do not add up to {events.num_rows}")
    ends = np.cumsum(np.asarray(counts, dtype=np.int64)) - 1
    ends = ends[np.asarray(counts) > 0]
    if len(ends):
        idx = pa.array(ends)
        otid = events.column("originalTransaction").take(idx).to_pylist()
        bkt = events.column("bucket").take(idx).to_pylist()
        rid = events.column("rowId").take(idx).to_pylist()
        key_index = "".join(f"{o},{b},{r};" for o, b, r in zip(otid, bkt, rid))
    else:
        key_index = ""
    data = OrcTail.of_bytes(data, path).with_user_metadata(
        acid_footer_items(key_index, inserts, updates, deletes))
    publish_bytes(fs, path, data)
    return path


def _row_struct_chunks(data: pa.Table, row_schema: pa.Schema) -> pa.ChunkedArray:
    chunks = []
    fields = list(row_schema)
    for batch in data.to_batches():
        chunks.append(pa.StructArray.from_arrays(batch.columns, fields=fields))
    if not chunks:
        return pa.chunked_array([], type=pa.struct(fields))
    return pa.chunked_array(chunks, type=pa.struct(fields))


def insert_events(data: pa.Table, write_id: int, bucket_prop: int, row_id_start: int,
                  row_schema: Optional[pa.Schema]) -> pa.Table:
    """``data`` (table columns, by position) as insert events of ``write_id``: ROW__IDs
    (write_id, ``bucket_prop``, ``row_id_start``...), currentTransaction = write_id."""
    data, row_schema = conform_rows(data, row_schema)
    n = data.num_rows
    return pa.Table.from_arrays([
        pa.array(np.zeros(n, dtype=np.int32)),
        pa.array(np.full(n, write_id, dtype=np.int64)),
        pa.array(np.full(n, bucket_prop, dtype=np.int32)),
        pa.array(np.arange(row_id_start, row_id_start + n, dtype=np.int64)),
        pa.array(np.full(n, write_id, dtype=np.int64)),
        _row_struct_chunks(data, row_schema),
    ], schema=acid_schema(row_schema))


def conform_rows(data: pa.Table, row_schema) -> Tuple[pa.Table, pa.Schema]:
    """``data`` (table columns, by position) with the names and types of ``row_schema``
    (default: its own) -> (rows, row schema)."""
    if row_schema is None:
        return data, data.schema.remove_metadata()
    row_schema = as_row_schema(row_schema)
    if len(row_schema) != data.num_columns:
        raise ValueError(f"data has {data.num_columns} columns, row schema "
                         f"{len(row_schema)}")
    return data.rename_columns(row_schema.names).cast(row_schema), row_schema


def write_insert_file(path: str, data: pa.Table, write_id: int, bucket_property: int, *,
                      row_schema=None, options: Optional[WriterOptions] = None,
                      filesystem=None) -> str:
    """``data`` as one file of insert events of ``write_id`` (ROW__IDs (write_id,
    ``bucket_property``, 0..n-1)) at ``path``: pyarrow encodes the rows, the ACID columns
    are spliced in (``orc_acid._insert_file``: the same file, without their encoding cost);
    published as :func:`write_acid_file` does."""
    opts = options or DEFAULT_OPTIONS
    rows, _ = conform_rows(data, row_schema)
    fs, path = afs.resolve(path, filesystem)
    if rows.num_columns == 0:     # no table column to encode: the whole event table
        return write_acid_file(path, insert_events(rows, write_id, bucket_property, 0, None),
                               inserts=rows.num_rows, options=opts, filesystem=fs)
    parts, _ = encode_insert_file(rows, write_id, bucket_property, 0,
                                  compression=opts.compression, stripe_size=opts.stripe_size,
                                  compression_block_size=opts.compression_block_size,
                                  row_index_stride=opts.row_index_stride,
                                  batch_size=opts.batch_size)
    publish_bytes(fs, path, parts)
    return path


def _check_ids(write_id: int, bucket_id: int, statement_id: int) -> None:
    if write_id < 1:
        raise ValueError(f"write id must be >= 1, got {write_id}")
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise ValueError(f"bucket id {bucket_id} outside 0..{MAX_BUCKET_ID}")
    if not 0 <= statement_id <= MAX_STATEMENT_ID:
        raise ValueError(f"statement id {statement_id} outside 0..{MAX_STATEMENT_ID}")


def write_delta(table_dir: str, write_id: int, statement_id: int, bucket_id: int, data,
                *, row_schema=None, attempt: Optional[int] = None,
                options: Optional[WriterOptions] = None, filesystem=None) -> List[str]:
    """INSERT: ``delta_W_W_SSSS/bucket_NNNNN`` holding ``data`` as insert events.

    ROW__IDs: (W, BucketCodec.V1(bucket_id, statement_id), 0..n-1). ``row_schema``: the
    table columns (names/types for the ``row`` struct; ``data`` columns map by position);
    default: ``data``'s own schema. Returns the paths written (empty for an empty insert:
    no file is left behind)."""
    data = as_table(data)
    _check_ids(write_id, bucket_id, statement_id)
    if data.num_rows == 0:
        return []
    rows, _ = conform_rows(data, row_schema)
    fs, root = afs.resolve(table_dir, filesystem)
    d = afs.join(root, format_delta(write_id, write_id, statement_id))
    ensure_acid_dir(d, fs)
    path = afs.join(d, format_bucket_file(bucket_id, attempt))
    return [write_insert_file(path, rows, write_id, encode_bucket(bucket_id, statement_id),
                              options=options, filesystem=fs)]


def write_base(table_dir: str, write_id: int, bucket_id: int, data, *, statement_id: int = 0,
               row_schema=None, visibility_txn_id: int = 0,
               options: Optional[WriterOptions] = None, filesystem=None) -> List[str]:
    """INSERT OVERWRITE: ``base_W/bucket_NNNNN`` holding ``data`` as insert events of W.

    An empty overwrite still creates the (empty) base directory with its
    ``_orc_acid_version`` so that it hides all older data."""
    data = as_table(data)
    _check_ids(write_id, bucket_id, statement_id)
    rows, _ = conform_rows(data, row_schema)
    fs, root = afs.resolve(table_dir, filesystem)
    d = afs.join(root, format_base(write_id, visibility_txn_id))
    ensure_acid_dir(d, fs)
    if data.num_rows == 0:
        return []
    path = afs.join(d, format_bucket_file(bucket_id))
    return [write_insert_file(path, rows, write_id, encode_bucket(bucket_id, statement_id),
                              options=options, filesystem=fs)]


_ROWID_ALIASES = {
    "originaltransaction": "originalTransaction", "writeid": "originalTransaction",
    "bucket": "bucket", "bucketid": "bucket",
    "rowid": "rowId",
}


def _row_id_columns(row_ids) -> tuple:
    """-> (originalTransaction int64, bucket int32, rowId int64) arrays from many shapes."""
    if isinstance(row_ids, (pa.StructArray, pa.ChunkedArray)) and pa.types.is_struct(row_ids.type):
        t = pa.Table.from_arrays([row_ids], names=["ROW__ID"])
        row_ids = t
    t = as_table(row_ids)
    if t.num_columns == 1 and pa.types.is_struct(t.schema.types[0]):
        col = t.column(0).combine_chunks() if t.num_rows else pa.array([], t.schema.types[0])
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        t = pa.Table.from_arrays(col.flatten(), names=[f.name for f in col.type])
    found = {}
    for name in t.column_names:
        key = _ROWID_ALIASES.get(name.lower())
        if key and key not in found:
            found[key] = t.column(name)
    missing = {"originalTransaction", "bucket", "rowId"} - set(found)
    if missing:
        raise ValueError(f"row ids need columns originalTransaction/writeid, bucket/bucketid, "
                         f"rowId/rowid; missing {sorted(missing)} in {t.column_names}")
    return (found["originalTransaction"].cast(pa.int64()), found["bucket"].cast(pa.int32()),
            found["rowId"].cast(pa.int64()))


def write_delete_delta(table_dir: str, write_id: int, statement_id: int, row_ids, *,
                       row_schema, options: Optional[WriterOptions] = None,
                       filesystem=None) -> List[str]:
    """DELETE: ``delete_delta_W_W_SSSS/bucket_N`` files of delete events.

    ``row_ids``: the ROW__IDs of the deleted rows -- a table with columns
    (originalTransaction|writeid, bucket|bucketid, rowId|rowid), or a single ``ROW__ID``
    struct column. Events are grouped by the *decoded* writer id of each row's bucket
    property (file ``bucket_N``), sorted by (originalTransaction, bucket, rowId), with
    currentTransaction = W and a null ``row`` typed as the table struct (``row_schema``)."""
    _check_ids(write_id, 0, statement_id)
    otid, bucket, rowid = _row_id_columns(row_ids)
    n = len(otid)
    if n == 0:
        return []
    keys = pa.table({"o": otid, "b": bucket, "r": rowid})
    keys = keys.take(pc.sort_indices(keys, sort_keys=[("o", "ascending"), ("b", "ascending"),
                                                       ("r", "ascending")]))
    b_np = keys.column("b").to_numpy()
    version = (b_np.astype(np.int64) & 0xFFFFFFFF) >> 29
    writer_ids = np.where(version == 0, b_np, (b_np & 0x0FFF0000) >> 16)
    if np.any(version > 1):
        raise ValueError("bucket property with an unknown BucketCodec version")
    rs = as_row_schema(row_schema)
    fs, root = afs.resolve(table_dir, filesystem)
    d = afs.join(root, format_delete_delta(write_id, write_id, statement_id))
    ensure_acid_dir(d, fs)
    paths = []
    for wid in np.unique(writer_ids):
        sel = np.nonzero(writer_ids == wid)[0]
        part = keys.take(pa.array(sel))
        m = part.num_rows
        events = pa.Table.from_arrays([
            pa.array(np.full(m, OP_DELETE, dtype=np.int32)),
            part.column("o"), part.column("b"), part.column("r"),
            pa.array(np.full(m, write_id, dtype=np.int64)),
            pa.nulls(m, type=pa.struct(list(rs))),
        ], schema=acid_schema(rs))
        path = afs.join(d, format_bucket_file(int(wid)))
        paths.append(write_acid_file(path, events, deletes=m, options=options, filesystem=fs))
    return paths


def write_update(table_dir: str, write_id: int, statement_id: int, bucket_id: int, row_ids,
                 new_rows, *, row_schema=None, options: Optional[WriterOptions] = None,
                 filesystem=None) -> List[str]:
    """UPDATE as Hive 4 writes it: delete events in ``delete_delta_W_W_S`` and the new row
    versions (fresh ROW__IDs) as inserts in ``delta_W_W_(S+1)``."""
    new_rows = as_table(new_rows)
    rs = as_row_schema(row_schema) if row_schema is not None else new_rows.schema.remove_metadata()
    paths = write_delete_delta(table_dir, write_id, statement_id, row_ids, row_schema=rs,
                               options=options, filesystem=filesystem)
    paths += write_delta(table_dir, write_id, statement_id + 1, bucket_id, new_rows,
                         row_schema=rs, options=options, filesystem=filesystem)
    return paths


def write_insert_only(table_dir: str, write_id: int, data, *, statement_id: int = 0,
                      file_name: str = "000000_0", file_format: str = "orc",
                      overwrite: bool = False, options: Optional[WriterOptions] = None,
                      filesystem=None) -> List[str]:
    """Insert-only (``transactional_properties=insert_only``) tables: a plain ORC or Parquet
    file in ``delta_W_W_SSSS`` (or ``base_W`` for ``overwrite=True``); no ACID columns."""
    data = as_table(data)
    opts = options or DEFAULT_OPTIONS
    name = format_base(write_id) if overwrite else format_delta(write_id, write_id, statement_id)
    fs, root = afs.resolve(table_dir, filesystem)
    d = afs.join(root, name)
    afs.makedirs(fs, d)
    if data.num_rows == 0:
        if overwrite and fs is not None:
            fs.create_dir(d)    # an empty base hides older data: on object stores a marker
        return []
    sink = pa.BufferOutputStream()
    if file_format == "orc":
        orc.write_table(data, sink, compression=opts.compression,
                        stripe_size=opts.stripe_size,
                        compression_block_size=opts.compression_block_size)
    elif file_format == "parquet":
        import pyarrow.parquet as pq
        pq.write_table(data, sink)
    else:
        raise ValueError(f"file_format must be 'orc' or 'parquet', not {file_format!r}")
    final = afs.join(d, file_name)
    publish_bytes(fs, final, sink.getvalue())
    return [final]
