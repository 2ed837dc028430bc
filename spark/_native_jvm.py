"""A table partition of a native plan (``_native``) as a scan of hive_acid's JVM reader
(``jvm/AcidOrcSource.java``, loaded by ``_jvm``).

The driver hands the reader what it decided (the reader decides nothing about the
snapshot): the data files, each with the write ids its rows were inserted by, the write ids
to drop (when its directory spans invalid ones) and the delete files of its split (bucket)
with theirs; the tasks read those delete events themselves and keep, per file, the ones
that can hit it (originalTransaction in its write id range): a file none can hit is read
without any ACID column. Files are cut and packed into Spark input partitions the
way Spark packs the files of a plain ORC scan (``spark.sql.files.maxPartitionBytes``,
``openCostInBytes``, ``minPartitionNum``): large files become stripe ranges, small ones
share a task, and a scan has at least as many tasks as cores when it has that many bytes.
"""

from __future__ import annotations

import json
from typing import List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as S

PLAN = "hive_acid.plan"           # the options of AcidOrcSource
TABLE = "hive_acid.table"
BATCH_ROWS = "hive_acid.batchRows"


def file_conf(session: SparkSession) -> Tuple[int, int, int]:
    """(maxPartitionBytes, openCostInBytes, minimum number of partitions) of the session."""
    conf = session._jsparkSession.sessionState().conf()
    min_parts = conf.filesMinPartitionNum()
    n = int(min_parts.get()) if min_parts.isDefined() else \
        int(session.sparkContext.defaultParallelism)
    return int(conf.filesMaxPartitionBytes()), int(conf.filesOpenCostInBytes()), max(1, n)


def pack(files: Sequence[Tuple[int, int]], max_bytes: int, open_cost: int, min_parts: int
         ) -> List[List[Tuple[int, int, int]]]:
    """``files``: (index, size) -> input partitions of (index, offset, length) pieces, as
    Spark's ``FilePartition.getFilePartitions`` packs a file scan (length -1: to the end)."""
    total = sum(size + open_cost for _, size in files)
    split = min(max_bytes, max(open_cost, total // min_parts))
    pieces = []
    for i, size in files:
        if size <= split:
            pieces.append((i, 0, -1, size))
            continue
        for off in range(0, size, split):
            pieces.append((i, off, min(split, size - off), min(split, size - off)))
    pieces.sort(key=lambda p: -p[3])
    parts: List[List[Tuple[int, int, int]]] = []
    current: List[Tuple[int, int, int]] = []
    used = 0
    for i, off, length, size in pieces:
        if current and used + size > split:
            parts.append(current)
            current, used = [], 0
        current.append((i, off, length))
        used += size + open_cost
    if current:
        parts.append(current)
    return parts


def _validity(entry: dict, validity) -> dict:
    if validity is not None:
        entry["h"], entry["x"] = int(validity[0]), [int(x) for x in validity[1]]
    return entry


def plan_json(part, file_conf: Tuple[int, int, int]) -> str:
    """A partition of a native plan (``_native.PartPlan``) -> the reader's plan (see
    AcidOrcSource.java)."""
    splits = [[_validity({"p": uri}, v) for uri, v in files] for files, _ in part.splits]
    entries = []
    for f in part.files:
        e = _validity({"p": f.uri, "lo": int(f.lo), "hi": int(f.hi)}, f.validity)
        if f.split is not None:
            e["s"] = f.split
        entries.append(e)
    parts = []
    for packed in pack([(i, f.size) for i, f in enumerate(part.files)], *file_conf):
        pieces = []
        for i, off, length in packed:
            p = dict(entries[i])
            if length >= 0:
                p["o"], p["l"] = off, length
            pieces.append(p)
        parts.append(pieces)
    return json.dumps({"splits": splits, "partitions": parts}, separators=(",", ":"))


def scan(session: SparkSession, reader: str, table: str, columns: S.StructType, part,
         file_conf: Tuple[int, int, int], batch_rows: Optional[int] = None) -> DataFrame:
    """The rows of one table partition (``_native.PartPlan``) read by the JVM reader class
    ``reader``: ``columns`` = the table's data columns in the files' order [+ ROW__ID]."""
    r = (session.read.format(reader).schema(columns)
         .option(PLAN, plan_json(part, file_conf)).option(TABLE, table))
    if batch_rows:
        r = r.option(BATCH_ROWS, str(batch_rows))
    return r.load()
