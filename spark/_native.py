"""The JVM scan path (``hive_acid.read``, ``hive_acid.sql`` queries, ``snapshot()``): the
files of one snapshot read in Spark's JVM, the snapshot applied there, no Python worker.

The driver takes the snapshot (ValidTxnList + the table's ValidWriteIdList) and lets
``orc_acid`` select the files per table partition (``get_acid_state`` +
``plan_splits_for_snapshot``: exactly what the Python data source reads), checks that every
file is an ACID file with exactly the table's columns in ``row`` (:func:`plan`), and reads,
per table partition, the valid delete events of each split (bucket) with ``orc_acid``.
:func:`build` then reads each partition with

* hive_acid's JVM reader (``_native_jvm``, ``jvm/AcidOrcSource.java``): the table columns as
  flat columns (no ``row`` struct), the ACID columns decoded only for files that delete
  events can hit or that hold invalid write ids, those rows dropped inside the reader from
  the file's own delete events; or, where that reader cannot run (see ``_jvm``) or a
  partition has more delete events than the driver reads (``MAX_DELETES``),
* Spark's own ORC reader (``_native_stock``): the ACID event struct, the snapshot applied by
  Spark filters, a delete bitmap literal or an anti join with the delete events,

then selects the table's columns plus the partition values as typed literals, and unions
the partitions: a filter on a partition column folds to false in the other partitions'
branches, which the optimizer drops (no scan).

:func:`plan` raises :class:`Fallback` (with the reason) for anything the JVM path does not
read exactly like ``orc_acid``; the caller then uses the Python data source.

Tables on object stores and HDFS: the driver lists and reads footers through ``orc_acid.fs``
(the table's pyarrow file system) and gives Spark the files as location URIs
(``s3a://bucket/...``), which Spark opens with Hadoop's file system for that scheme. Spark's
own distribution has none for ``s3a``/``abfs``/``gs``: without the connector on the class
path (``hadoop-aws`` + the AWS SDK bundle, ``hadoop-azure``, the GCS connector) this path
falls back to the Python data source (pyarrow on the executors), saying so.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as S

import orc_acid
from orc_acid import fs as afs
from orc_acid.layout import DEFAULT_PARTITION_NAME, parse_delta
from orc_acid.valid_ids import ValidWriteIdList

from . import _jvm
from hms_txn.clients.acid import metastore as M
from . import _native_jvm as J
from . import _native_stock as K
from . import _types as TY
from ._errors import HiveAcidError

log = logging.getLogger("spark.hive_acid")

_ACID_ARROW = (pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64())
# The JVM reader's tasks hold the delete events of their split in memory (16 bytes each at
# most): a partition with a split of more (from the footers' row counts) is read by Spark's
# ORC reader, whose anti join spills.
TASK_MAX_DELETES = 16_000_000
# Spark's ORC reader: the delete events of one partition up to this many are read on the
# driver and applied as a bitmap; more are anti joined
MAX_DELETES = 4_000_000
# the session setting that turns hive_acid's JVM reader off (Spark's ORC reader is used)
JVM_READER_CONF = "spark.hive_acid.jvmReader"


class Fallback(Exception):
    """The native path cannot read this snapshot exactly; the message says why."""


Validity = Optional[Tuple[int, Tuple[int, ...]]]


@dataclass(frozen=True)
class DataFile:
    """A selected data file of a partition."""
    uri: str                      # as Spark opens it
    size: int
    lo: int                       # the write ids its rows were inserted by
    hi: int
    # (high watermark, invalid write ids of its directory's range): its rows' write ids
    # must be checked; None: all valid
    validity: Validity
    split: Optional[int] = None   # index of its split's delete files in PartPlan.splits


@dataclass(frozen=True)
class PartPlan:
    values: Tuple[Optional[str], ...]     # partition values (raw strings), () if unpartitioned
    location: str
    files: Tuple[DataFile, ...]
    # per split with deletes: its delete files (uri, validity) and their event count
    splits: Tuple[Tuple[Tuple[Tuple[str, Validity], ...], int], ...]
    data: Tuple[K.Group, ...]             # the data files for Spark's ORC reader
    deletes: Tuple[K.Group, ...]          # the delete files for Spark's ORC reader
    delete_rows: int
    delete_entries: tuple = ()            # orc_acid DeleteFiles (the driver reads them)


@dataclass(frozen=True)
class NativePlan:
    info: M.TableInfo
    write_ids: str
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


# (path, size, mtime_ns) -> (top-level names, their Arrow types, row count, size): files never
# change in place, and a footer read costs a file open; bounded by a simple size check
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
        hit = (tuple(schema.names), tuple(fl.type for fl in schema), f.nrows, key[1])
    except (pa.ArrowException, OSError, ValueError) as e:
        raise Fallback(f"{path}: not readable as ORC here ({e})") from None
    with _footers_mu:
        if len(_footers) >= _FOOTER_CACHE_MAX:
            _footers.clear()
        _footers[key] = hit
    return hit


def _check_acid_file(fs, path: str, row_type: Optional[pa.StructType]) -> Tuple[int, int]:
    """The file has exactly the ACID event schema (names as Hive writes them) and, for data
    files, the table's columns in ``row`` (same names, order and types); -> (rows, bytes)."""
    names, types, nrows, size = _footer(fs, path)
    if names != K.ACID_NAMES:
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
    return nrows, size


def _validity(e, wids: ValidWriteIdList) -> Validity:
    """(high watermark, the exceptions in the range of ``e``'s directory) when the write ids
    of its events must be checked (``filter_current_txn``: the range holds invalid ones)."""
    if not e.filter_current_txn:
        return None
    d = parse_delta(e.path.split("/", 1)[0])
    lo, hi = (d.min_write_id, d.max_write_id) if d is not None else (0, wids.high_watermark)
    return wids.high_watermark, tuple(sorted(x for x in wids.exceptions if lo <= x <= hi))


def _groups(info: M.TableInfo, location: str, entries, wids: ValidWriteIdList, row_type
            ) -> Tuple[Tuple[K.Group, ...], List[Tuple[object, str, int]], int]:
    """DataFile/DeleteFile entries of orc_acid's plan -> (read groups of Spark's ORC reader:
    one for the files whose rows are all valid, one for those whose currentTransaction must
    be checked; [(entry, uri, bytes (data files: ``row_type`` given) or rows)]; total row
    count)."""
    by_dir: Dict[str, List] = {}
    for e in entries:
        by_dir.setdefault(e.path.split("/", 1)[0], []).append(e)
    plain: List[str] = []
    filtered: List[str] = []
    invalid: set = set()
    files = []
    rows = 0
    for d, dir_files in sorted(by_dir.items()):
        for e in dir_files:
            if getattr(e, "side_file", None):
                raise Fallback(f"{location}/{e.path}: a streaming file still being written "
                               f"(_flush_length side file)")
            path = os.path.join(location, e.path)
            n, size = _check_acid_file(info.fs, path, row_type)
            rows += n
            files.append((e, info.uri_of(path) if info.fs is not None else "file:" + path,
                          size if row_type is not None else n))
        # a directory holding exactly these files (hidden ones aside: Spark skips them too) is
        # passed as the directory (fewer paths for Spark to check); else the files themselves
        dpath = os.path.join(location, d)
        names = sorted(e.path.split("/", 1)[1] for e in dir_files if "/" in e.path)
        if len(names) == len(dir_files) and names == sorted(
                n for n, _, _ in afs.list_names(info.fs, dpath)
                if not n.startswith(("_", "."))):
            paths = [info.uri_of(dpath)]
        else:
            paths = [info.uri_of(os.path.join(location, e.path)) for e in dir_files]
        checks = [_validity(e, wids) for e in dir_files]
        if any(checks):
            filtered.extend(paths)
            for c in checks:
                invalid.update(c[1] if c else ())
        else:
            plain.extend(paths)
    out = []
    if plain:
        out.append(K.Group(tuple(plain)))
    if filtered:
        out.append(K.Group(tuple(filtered), tuple(sorted(invalid)), wids.high_watermark))
    return tuple(out), files, rows


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
        dgroups, dfiles, _ = _groups(info, loc, data, w, row_type)
        dels = list({f.path: f for sp in splits for f in sp.delete_files}.values())
        xgroups, xfiles, xrows = _groups(info, loc, dels, w, None) if dels else ((), [], 0)
        deleted = {e.path: (uri, _validity(e, w), n) for e, uri, n in xfiles}
        split_of: Dict[int, int] = {}
        split_files = []
        for sp in splits:
            if sp.delete_files:
                split_of[sp.bucket_id] = len(split_files)
                refs = [deleted[e.path] for e in sp.delete_files]
                split_files.append((tuple((u, v) for u, v, _ in refs),
                                    sum(n for _, _, n in refs)))
        files = tuple(DataFile(uri, size, e.min_write_id, e.max_write_id, _validity(e, w),
                               split_of.get(e.bucket_id))
                      for e, uri, size in dfiles)
        parts.append(PartPlan(tuple(values), loc, files, tuple(split_files), dgroups, xgroups,
                              xrows, tuple(dels)))
    return NativePlan(info, wids, tuple(parts))


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


def jvm_reader(session: SparkSession) -> Tuple[Optional[str], Optional[str]]:
    """(the JVM reader's class, None) or (None, why Spark's ORC reader is used instead)."""
    try:
        if str(session.conf.get(JVM_READER_CONF, "true")).strip().lower() == "false":
            return None, f"{JVM_READER_CONF}=false"
        return _jvm.reader_class(session), None
    except _jvm.Unavailable as e:
        return None, str(e)


_warned: set = set()


def build(session: SparkSession, p: NativePlan, columns: Optional[Sequence[str]] = None,
          with_row_id: bool = False, lease: Optional[str] = None
          ) -> Tuple[DataFrame, str, Optional[str]]:
    """The DataFrame of a plan -> (DataFrame, "jvm" or "orc": the reader of its partitions,
    "orc" if any is read by Spark's; the JVM reader's class when it reads them all and keeps
    its tables under ``lease``, else None)."""
    info = p.info
    out = output_struct(info, columns, with_row_id)
    pkeys = {k.lower(): i for i, k in enumerate(info.part_names)}
    data_cols = [f.name for f in out.fields
                 if f.name != "ROW__ID" and f.name.lower() not in pkeys]
    reader, why = jvm_reader(session) if p.parts else (None, None)
    if why and why not in _warned:
        _warned.add(why)
        log.warning("hive_acid: the JVM reader is not available (%s); reading with Spark's "
                    "ORC reader (slower: see docs/spark.md)", why)
    wids = p.write_ids
    table_cols = TY.table_struct(info.columns, [], with_row_id=with_row_id)
    schema = acid_schema(info)
    pieces, used = [], "jvm"
    words_left = K.BITMAP_MAX_WORDS_PER_QUERY     # of the bitmaps of Spark's ORC reader
    for part in p.parts:
        if reader and all(n <= TASK_MAX_DELETES for _, n in part.splits):
            rows = J.scan(session, reader, info.full_name, table_cols, part, lease)
            field = {c: _q(c) for c in data_cols}
            row_id = "ROW__ID"
        else:
            used = "orc"
            bitmap = None
            if part.deletes and part.delete_rows <= MAX_DELETES:
                keys = orc_acid.delete_key_groups(part.location, wids, part.delete_entries,
                                                  filesystem=info.fs)
                bitmap = K.delete_bitmap(keys, words_left) if keys else None
                if bitmap is not None:
                    words_left -= len(bitmap.words) // 8
                elif not keys:          # every delete event is of an aborted/open write
                    part = dataclasses.replace(part, deletes=())
            rows, field = K.events(session, schema, part.data, part.deletes, part.delete_rows,
                                   bitmap, data_cols)
            row_id = ("named_struct('writeid', originalTransaction, 'bucketid', bucket,"
                      " 'rowid', rowId)")
        exprs = []
        for f in out.fields:
            if f.name == "ROW__ID":
                exprs.append(f"{row_id} AS ROW__ID")
            elif f.name.lower() in pkeys:
                v = part.values[pkeys[f.name.lower()]]
                lit = "NULL" if v is None or v == DEFAULT_PARTITION_NAME else _sql_str(v)
                exprs.append(f"CAST(CAST({lit} AS STRING) AS {f.dataType.simpleString()}) "
                             f"AS {_q(f.name)}")
            else:
                exprs.append(f"{field[f.name]} AS {_q(f.name)}")
        if used == "jvm" and not info.partition_keys and \
                [f.name for f in out.fields] == [f.name for f in table_cols.fields]:
            pieces.append(rows)         # the reader's columns are the output: no projection
        else:
            pieces.append(rows.selectExpr(*exprs))
    if not pieces:
        return session.createDataFrame([], out), used, None
    return functools.reduce(DataFrame.union, pieces), used, reader if used == "jvm" else None
