"""The JVM scan path of ``hive_acid.snapshot()``: Spark's own (vectorized) ORC reader over
the files a snapshot selects, with the snapshot applied by Spark expressions.

The driver takes the snapshot (ValidTxnList + the table's ValidWriteIdList), lets
``orc_acid`` select the directories per table partition (``get_acid_state`` +
``plan_splits_for_snapshot``, exactly what the Python data source reads) and builds, per
partition::

    spark.read.schema(<ACID event struct>).orc(<data dirs/files>)
        .where(<the six ACID columns not null; row: either>)   -- see _all_columns_read
        [.where(currentTransaction valid)]         -- only dirs whose write id range has
                                                      invalid (aborted/open) ids
        .where(<not in the partition's delete bitmap>)   -- with deletes: see DeleteBitmap
        .select(row.<col>..., <partition values as literals>)

(or, for delete sets too large for a bitmap, an anti join with the delete events on
``originalTransaction, bucket, rowId``) and the union of the partitions.

Spark prunes the ``row`` fields nobody uses (nested schema pruning) and whole partitions
when a filter on a partition column folds to false.

:func:`plan` raises :class:`Fallback` (with the reason) for anything this path does not
read exactly like ``orc_acid``; the caller then uses the Python data source.

Tables on object stores and HDFS: the driver lists and reads footers through ``orc_acid.fs``
(the table's pyarrow file system) and gives Spark the files as location URIs
(``s3a://bucket/...``), which Spark opens with Hadoop's file system for that scheme. Spark's
own distribution has none for ``s3a``/``abfs``/``gs``: without the connector on the class
path (``hadoop-aws`` + the AWS SDK bundle, ``hadoop-azure``, the GCS connector) this path
falls back to the Python data source (pyarrow on the executors), saying so.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as S

from hms_txn.clients.acid import metastore as M
from orc_acid import fs as afs
from orc_acid.layout import DEFAULT_PARTITION_NAME, parse_delta
from orc_acid.valid_ids import ValidWriteIdList
import orc_acid

from . import _types as TY
from ._errors import HiveAcidError


ACID_NAMES = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
_ACID_ARROW = (pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64())
KEY = ["originalTransaction", "bucket", "rowId"]
# The anti join with the delete events: rowId is the only equi-join key, the other two are a
# condition Spark does not turn into keys (``x - y = 0``: no overflow, the ids are >= 0), so
# the broadcast relation is Spark's compact single-long-key map (densely packed rowIds), not
# the generic three-column hash map (5% deletes of 2M rows: ~36 MiB to build and broadcast).
ANTI_JOIN_ON = ("rowId = __dr AND originalTransaction - __do = 0 AND bucket - __db = 0")
# delete events up to this many (all selected delete files of one partition, from their ORC
# footers) are broadcast to the anti join; more are sort-merge joined (spills, never OOMs)
BROADCAST_MAX_DELETES = 2_000_000


# Deletes as a bitmap instead of a join. A broadcast hash anti join probes a hash table with
# every data row; at 5% deletes of 8M rows the 400k-entry table no longer fits the CPU
# caches and every probe misses (the join took twice as long as the scan). The valid delete
# events are read on the driver instead (3 columns of the delete deltas) and turned into one
# bit per deleted rowId, per (originalTransaction, bucket) pair; a data row's check is then a
# CASE on its pair and one bit test, and since rowIds ascend within a file the bitmap is read
# sequentially. The bitmap is a literal of the plan: Spark ships it once per stage with the
# task binary. Bounds, per partition: delete events read on the driver (from the footers'
# row counts), pairs (one CASE branch each) and bitmap words (8 bytes each, one per 64
# rowIds spanned); and the words of all the partitions of one query (partitions past it
# use the join).
BITMAP_MAX_DELETES = 4_000_000
BITMAP_MAX_PAIRS = 64
BITMAP_MAX_WORDS = 1 << 20
BITMAP_MAX_WORDS_PER_QUERY = 1 << 22


class Fallback(Exception):
    """The native path cannot read this snapshot exactly; the message says why."""


@dataclass(frozen=True)
class Group:
    """Files read by one ``spark.read.orc``: directories (all their files) and files."""
    paths: Tuple[str, ...]
    # exceptions of the ValidWriteIdList to drop (None: every row of these files is valid)
    invalid: Optional[Tuple[int, ...]] = None
    hwm: int = 0


@dataclass(frozen=True)
class DeleteBitmap:
    """A partition's deleted rows: ``words`` (big-endian int64s) holds one bit per rowId;
    the rows of pair ``(ot, bucket, lo, hi, shift)`` with ``lo <= rowId <= hi`` are at bit
    ``rowId & 63`` of word ``(rowId >> 6) + shift`` (0-based). The last word is zero."""
    pairs: Tuple[Tuple[int, int, int, int, int], ...]
    words: bytes


@dataclass(frozen=True)
class PartPlan:
    values: Tuple[Optional[str], ...]     # partition values (raw strings), () if unpartitioned
    data: Tuple[Group, ...]
    deletes: Tuple[Group, ...]            # for the anti join (when there is no bitmap)
    delete_rows: int
    bitmap: Optional[DeleteBitmap] = None


@dataclass(frozen=True)
class NativePlan:
    info: M.TableInfo
    parts: Tuple[PartPlan, ...]


# -- planning ---------------------------------------------------------------------------------

def _unsupported_type(dt: S.DataType) -> Optional[str]:
    if isinstance(dt, (S.TimestampType, S.TimestampNTZType)):
        return "timestamp"      # ORC timestamp semantics differ between the two readers
    if isinstance(dt, S.ArrayType):
        return _unsupported_type(dt.elementType)
    if isinstance(dt, S.MapType):
        return _unsupported_type(dt.keyType) or _unsupported_type(dt.valueType)
    if isinstance(dt, S.StructType):
        for f in dt.fields:
            r = _unsupported_type(f.dataType)
            if r:
                return r
    return None


# (path, size, mtime_ns) -> (top-level names, their Arrow types, row count): files never change
# in place, and a footer read costs a file open; bounded by a simple size check
_footers: Dict[tuple, tuple] = {}
_footers_mu = threading.Lock()
_FOOTER_CACHE_MAX = 100_000


def _footer(fs, path: str) -> tuple:
    if fs is None:
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
    else:
        st = fs.get_file_info(path)
        key = (path, st.size, st.mtime_ns)
    with _footers_mu:
        hit = _footers.get(key)
    if hit is not None:
        return hit
    import pyarrow.orc as po
    try:
        f = po.ORCFile(path if fs is None else fs.open_input_file(path))
        schema = f.schema
        hit = (tuple(schema.names), tuple(fl.type for fl in schema), f.nrows)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise Fallback(f"{path}: not readable as ORC here ({e})") from None
    with _footers_mu:
        if len(_footers) >= _FOOTER_CACHE_MAX:
            _footers.clear()
        _footers[key] = hit
    return hit


def _check_acid_file(fs, path: str, row_type: Optional[pa.StructType]) -> int:
    """The file has exactly the ACID event schema (names as Hive writes them) and, for data
    files, the table's columns in ``row`` (same names, order and types); -> its row count."""
    names, types, nrows = _footer(fs, path)
    if names != ACID_NAMES:
        raise Fallback(f"{path}: top-level columns {list(names)} are not the ACID event "
                       f"schema as written by Hive")
    if tuple(types[:5]) != _ACID_ARROW:
        raise Fallback(f"{path}: ACID columns have types {list(map(str, types[:5]))}")
    if row_type is not None:
        got = types[5]
        if not pa.types.is_struct(got) or \
                [(f.name, f.type) for f in got] != [(f.name, f.type) for f in row_type]:
            raise Fallback(f"{path}: row struct {got} differs from the table's columns "
                           f"{row_type} (renamed, added or retyped columns)")
    return nrows


def _groups(info: M.TableInfo, location: str, entries, wids, row_type
            ) -> Tuple[Tuple[Group, ...], int]:
    """DataFile/DeleteFile entries of orc_acid's plan -> read groups (one for the files whose
    rows are all valid, one for those whose currentTransaction must be checked) and the
    total row count."""
    by_dir: Dict[str, List] = {}
    for e in entries:
        by_dir.setdefault(e.path.split("/", 1)[0], []).append(e)
    plain: List[str] = []
    filtered: List[str] = []
    invalid: set = set()
    rows = 0
    for d, files in sorted(by_dir.items()):
        for e in files:
            if getattr(e, "side_file", None):
                raise Fallback(f"{location}/{e.path}: a streaming file still being written "
                               f"(_flush_length side file)")
            rows += _check_acid_file(info.fs, os.path.join(location, e.path), row_type)
        # a directory holding exactly these files (hidden ones aside: Spark skips them too) is
        # passed as the directory (fewer paths for Spark to check); else the files themselves
        dpath = os.path.join(location, d)
        names = sorted(e.path.split("/", 1)[1] for e in files if "/" in e.path)
        if len(names) == len(files) and names == sorted(
                n for n, _, _ in afs.list_names(info.fs, dpath)
                if not n.startswith(("_", "."))):
            paths = [info.uri_of(dpath)]
        else:
            paths = [info.uri_of(os.path.join(location, e.path)) for e in files]
        if any(e.filter_current_txn for e in files):
            filtered.extend(paths)
            pd = parse_delta(d)
            lo, hi = (pd.min_write_id, pd.max_write_id) if pd is not None else \
                (0, wids.high_watermark)
            invalid.update(x for x in wids.exceptions if lo <= x <= hi)
        else:
            plain.extend(paths)
    out = []
    if plain:
        out.append(Group(tuple(plain)))
    if filtered:
        out.append(Group(tuple(filtered), tuple(sorted(invalid)), wids.high_watermark))
    return tuple(out), rows


def delete_bitmap(groups: Dict[Tuple[int, int], np.ndarray],
                  max_words: int = BITMAP_MAX_WORDS) -> Optional[DeleteBitmap]:
    """(originalTransaction, bucket) -> sorted deleted rowIds  ->  their bitmap, or None when
    it would exceed the bounds above (or ``max_words``)."""
    if not groups or len(groups) > BITMAP_MAX_PAIRS or \
            any(len(r) == 0 or int(r[0]) < 0 for r in groups.values()):
        return None
    spans = {k: (int(r[0]) >> 6, int(r[-1]) >> 6) for k, r in groups.items()}
    if sum(hi - lo + 1 for lo, hi in spans.values()) > min(max_words, BITMAP_MAX_WORDS):
        return None
    chunks, pairs, offset = [], [], 0
    for (ot, bucket), r in sorted(groups.items()):
        lo, hi = spans[(ot, bucket)]
        words = np.zeros(hi - lo + 1, dtype=np.uint64)
        idx = (r >> 6) - lo
        bits = np.left_shift(np.uint64(1), (r & 63).astype(np.uint64))
        starts = np.flatnonzero(np.diff(idx, prepend=-1))    # r is sorted: runs of one word
        words[idx[starts]] = np.bitwise_or.reduceat(bits, starts)
        chunks.append(words)
        pairs.append((int(ot), int(bucket), lo << 6, int(r[-1]), offset - lo))
        offset += len(words)
    chunks.append(np.zeros(1, dtype=np.uint64))      # the word of rows with no deletes
    return DeleteBitmap(tuple(pairs), np.concatenate(chunks).astype(">u8").tobytes())


def hadoop_connector_missing(session: SparkSession, info: M.TableInfo) -> Optional[str]:
    """Why Spark cannot open the table's files itself (no Hadoop file system for the
    location's scheme on its class path), or None."""
    if info.fs is None:
        return None
    scheme = afs.scheme_of(info.uri)
    try:
        jvm = session.sparkContext._jvm
        conf = session.sparkContext._jsc.hadoopConfiguration()
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
        return None
    except Exception:       # py4j's error: the class is not there
        need = {"s3a": "org.apache.hadoop:hadoop-aws (and the AWS SDK bundle it names)",
                "abfs": "org.apache.hadoop:hadoop-azure", "abfss": "org.apache.hadoop:hadoop-azure",
                "wasb": "org.apache.hadoop:hadoop-azure", "wasbs": "org.apache.hadoop:hadoop-azure",
                "gs": "com.google.cloud.bigdataoss:gcs-connector"}.get(scheme, "its connector")
        return (f"Spark has no Hadoop file system for {scheme}:// on its class path (add "
                f"{need}, e.g. with spark.jars.packages, matching Spark's Hadoop version)")


def plan(info: M.TableInfo, txns: str, wids: str,
         targets: Sequence[Tuple[str, Tuple[Optional[str], ...]]]) -> NativePlan:
    """``targets``: (partition location, partition values) to read. Raises Fallback."""
    if info.insert_only:
        raise Fallback("insert-only table (plain files, no ACID columns)")
    if info.file_format != "orc":
        raise Fallback(f"{info.file_format} table")
    for name, typ in info.columns + info.partition_keys:
        why = _unsupported_type(TY.hive_to_spark(typ))
        if why:
            raise Fallback(f"column {name} has a {why} type")
    row_type = pa.struct(list(TY.arrow_schema(TY.table_struct(info.columns, []))))
    w = ValidWriteIdList.parse(wids)
    parts = []
    words_left = BITMAP_MAX_WORDS_PER_QUERY
    for loc, values in targets:
        try:
            snap = orc_acid.get_acid_state(loc, w, txns, filesystem=info.fs)
        except FileNotFoundError:
            continue
        if snap.original_files:
            raise Fallback(f"{loc}: original (pre-ACID) files {list(snap.original_files[:3])}")
        splits = orc_acid.plan_splits_for_snapshot(loc, snap)
        data = [df for sp in splits for df in sp.data_files]
        if any(df.kind not in ("base", "delta") for df in data):
            raise Fallback(f"{loc}: non-ACID data files")
        if not data:
            continue
        dgroups, _ = _groups(info, loc, data, w, row_type)
        dels = list({f.path: f for sp in splits for f in sp.delete_files}.values())
        xgroups, xrows = _groups(info, loc, dels, w, row_type) if dels else ((), 0)
        bitmap = None
        if xgroups and xrows <= BITMAP_MAX_DELETES:
            keys = orc_acid.delete_key_groups(loc, w, dels, filesystem=info.fs)
            if not keys:                # every delete event is of an aborted/open write
                xgroups, xrows = (), 0
            bitmap = delete_bitmap(keys, words_left)
            if bitmap is not None:
                words_left -= len(bitmap.words) // 8
        parts.append(PartPlan(tuple(values), dgroups, xgroups, xrows, bitmap))
    return NativePlan(info, tuple(parts))


# -- the DataFrame ---------------------------------------------------------------------------

def acid_schema(info: M.TableInfo) -> S.StructType:
    fields = [S.StructField("operation", S.IntegerType()),
              S.StructField("originalTransaction", S.LongType()),
              S.StructField("bucket", S.IntegerType()),
              S.StructField("rowId", S.LongType()),
              S.StructField("currentTransaction", S.LongType()),
              S.StructField("row", TY.table_struct(info.columns, []))]
    return S.StructType(fields)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sql_str(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _valid(g: Group) -> str:
    cond = f"currentTransaction <= {int(g.hwm)}"
    if g.invalid:
        cond += f" AND NOT currentTransaction IN ({', '.join(str(int(x)) for x in g.invalid)})"
    return cond


# A filter that is true for every event and references all six top-level columns.
#
# The ORC library treats a file with the ACID event schema specially: unless the schema Spark
# asks it to read is *also* the full ACID event schema (all six top-level fields), it wraps
# that schema into an event struct, and Spark's reader then fails on the mismatch. Spark asks
# only for the columns a query references, so this filter makes every query reference all
# six (``row`` through IS [NOT] NULL only, so nested schema pruning still narrows ``row`` to
# the fields used, or reads it whole when none is). Written as SQL: one call into the JVM.
ALL_COLUMNS_READ = ("(row IS NULL OR row IS NOT NULL) AND " +
                    " AND ".join(f"{n} IS NOT NULL" for n in ACID_NAMES[:5]))


def _read(session: SparkSession, schema: S.StructType, groups: Sequence[Group]) -> DataFrame:
    dfs = []
    for g in groups:
        cond = ALL_COLUMNS_READ
        if g.invalid is not None:
            cond += " AND " + _valid(g)
        dfs.append(session.read.schema(schema).orc(list(g.paths)).where(cond))
    return functools.reduce(DataFrame.union, dfs)


def _long_array(session: SparkSession, data: bytes):
    """A Column holding the big-endian int64s ``data`` as an ARRAY<BIGINT> literal, made in
    the JVM from the bytes (a handful of py4j calls, not one per element); None when the
    session has no py4j gateway (Spark Connect).

    The literal's value is an ``UnsafeArrayData`` (the longs in one byte array): the public
    ``functions.lit(long[])`` would box every element, and a plan holding a million boxed
    Longs costs more to serialize to the tasks than the anti join it replaces. Made through
    Catalyst classes (``Literal``, ``ExpressionColumnNode``); should those move in a later
    Spark, the boxed literal is used (correct, slower)."""
    sc = getattr(session, "sparkContext", None)
    jvm = getattr(sc, "_jvm", None) if sc is not None else None
    if jvm is None:
        return None
    from py4j.protocol import Py4JError
    from pyspark.sql.classic.column import Column
    arr = sc._gateway.new_array(jvm.long, len(data) // 8)
    jvm.java.nio.ByteBuffer.wrap(bytearray(data)).asLongBuffer().get(arr)
    try:
        cat = jvm.org.apache.spark.sql.catalyst.expressions
        types = jvm.org.apache.spark.sql.types.DataTypes
        lit = cat.Literal(cat.UnsafeArrayData.fromPrimitiveArray(arr),
                          types.createArrayType(types.LongType, False))
        node = jvm.org.apache.spark.sql.classic.ExpressionColumnNode.apply(lit)
        return Column(jvm.org.apache.spark.sql.Column(node))
    except Py4JError:
        return Column(jvm.org.apache.spark.sql.functions.lit(arr))


def _not_deleted(session: SparkSession, bm: DeleteBitmap):
    """The filter keeping the rows whose bit is clear (None: no literal in this session)."""
    words = _long_array(session, bm.words)
    if words is None:
        return None
    # 1-based index of the row's word; rows of no pair or outside its range get the last
    # word, which is always zero (an ELSE NULL here would be simpler, but Spark 4.3 raises
    # INVALID_INDEX_OF_ZERO for element_at with a NULL index). The subtraction is in BIGINT,
    # so the INT cast never sees a large rowId.
    index = "CASE " + " ".join(
        f"WHEN bucket = {b} AND originalTransaction = {ot} AND rowId BETWEEN {lo} AND {hi} "
        f"THEN CAST(shiftright(rowId, 6) + {shift + 1} AS INT)"
        for ot, b, lo, hi, shift in bm.pairs) + f" ELSE {len(bm.words) // 8} END"
    return F.element_at(words, F.expr(index)).bitwiseAND(
        F.expr("shiftleft(1L, CAST(rowId & 63 AS INT))")) == 0


def output_struct(info: M.TableInfo, columns: Optional[Sequence[str]], with_row_id: bool
                  ) -> S.StructType:
    full = TY.table_struct(info.columns, info.partition_keys, with_row_id=with_row_id)
    if not columns:
        return full
    info.check_columns(columns)
    by = {f.name.lower(): f for f in full.fields}
    out = [by["ROW__ID".lower()]] if with_row_id else []
    for c in columns:
        if c.lower() not in by or c.lower() == "row__id":
            raise HiveAcidError(f"column {c} is not in {info.full_name}")
        out.append(by[c.lower()])
    return S.StructType(out)


def build(session: SparkSession, p: NativePlan, columns: Optional[Sequence[str]] = None,
          with_row_id: bool = False) -> DataFrame:
    """The DataFrame of a plan (expressions as SQL strings: a handful of JVM calls per
    partition, not one per column)."""
    info = p.info
    out = output_struct(info, columns, with_row_id)
    pkeys = {k.lower(): i for i, k in enumerate(info.part_names)}
    data_cols = [f.name for f in out.fields
                 if f.name != "ROW__ID" and f.name.lower() not in pkeys]
    schema = acid_schema(info)
    pieces = []
    for part in p.parts:
        rows = _read(session, schema, part.data)
        keep = _not_deleted(session, part.bitmap) if part.bitmap is not None else None
        if keep is not None:
            rows = rows.where(keep)
        if part.deletes and keep is None:
            # the row fields as flat columns before the join: the join then carries only
            # what the query uses (no struct copy per row)
            # (named __cN: a table column may be called rowId or bucket)
            flat = {c: f"__c{i}" for i, c in enumerate(data_cols)}
            rows = rows.selectExpr(*KEY, *[f"row.{_q(c)} AS {flat[c]}" for c in data_cols])
            dels = _read(session, schema, part.deletes).selectExpr(
                "originalTransaction AS __do", "bucket AS __db", "rowId AS __dr")
            dels = F.broadcast(dels) if part.delete_rows <= BROADCAST_MAX_DELETES else \
                dels.hint("merge")
            rows = rows.join(dels, on=F.expr(ANTI_JOIN_ON), how="left_anti")

            def field(c, flat=flat):
                return flat[c]
        else:
            def field(c):
                return f"row.{_q(c)}"
        exprs = []
        for f in out.fields:
            if f.name == "ROW__ID":
                exprs.append("named_struct('writeid', originalTransaction, 'bucketid', bucket,"
                             " 'rowid', rowId) AS ROW__ID")
            elif f.name.lower() in pkeys:
                v = part.values[pkeys[f.name.lower()]]
                lit = "NULL" if v is None or v == DEFAULT_PARTITION_NAME else _sql_str(v)
                exprs.append(f"CAST(CAST({lit} AS STRING) AS {f.dataType.simpleString()}) "
                             f"AS {_q(f.name)}")
            else:
                exprs.append(f"{field(f.name)} AS {_q(f.name)}")
        pieces.append(rows.selectExpr(*exprs))
    if not pieces:
        return session.createDataFrame([], out)
    return functools.reduce(DataFrame.union, pieces)
