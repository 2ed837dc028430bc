"""The JVM path through Spark's own ORC reader (``spark.read.orc``): what ``_native`` uses
for a table partition when hive_acid's JVM reader (``_jvm``) cannot run in the session, or
when the partition has more delete events than that reader takes.

Per partition::

    spark.read.schema(<ACID event struct>).orc(<data dirs/files>)
        .where(<the six ACID columns not null; row: either>)   -- see ALL_COLUMNS_READ
        [.where(currentTransaction valid)]         -- only dirs whose write id range has
                                                      invalid (aborted/open) ids
        .where(<not in the partition's delete bitmap>)   -- with deletes: see DeleteBitmap

(or, for delete sets too large for a bitmap, an anti join with the delete events on
``originalTransaction, bucket, rowId``); ``_native`` then selects ``row.<col>``.

What this costs over a scan of plain ORC (why ``_jvm`` exists): Spark reads ``row`` as a
struct (each field through a ColumnarRow, about 40% more CPU than flat columns), and the ORC
library makes every query decode the five ACID columns (see ALL_COLUMNS_READ).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as S

ACID_NAMES = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
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
# events are read on the driver instead and turned into one bit per deleted rowId, per
# (originalTransaction, bucket) pair; a data row's check is then a CASE on its pair and one
# bit test, and since rowIds ascend within a file the bitmap is read sequentially. The
# bitmap is a literal of the plan: Spark ships it once per stage with the task binary.
# Bounds, per partition: pairs (one CASE branch each) and bitmap words (8 bytes each, one
# per 64 rowIds spanned); and the words of all the partitions of one query (partitions
# past it use the join).
BITMAP_MAX_PAIRS = 64
BITMAP_MAX_WORDS = 1 << 20
BITMAP_MAX_WORDS_PER_QUERY = 1 << 22


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


def read_groups(session: SparkSession, schema: S.StructType, groups: Sequence[Group]
                ) -> Sequence[DataFrame]:
    """One DataFrame of ACID events per group (the valid ones: see Group)."""
    dfs = []
    for g in groups:
        cond = ALL_COLUMNS_READ
        if g.invalid is not None:
            cond += " AND " + _valid(g)
        dfs.append(session.read.schema(schema).orc(list(g.paths)).where(cond))
    return dfs


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


def not_deleted(session: SparkSession, bm: DeleteBitmap):
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


def events(session: SparkSession, schema: S.StructType, data: Sequence[Group],
           deletes: Sequence[Group], delete_rows: int, bitmap: Optional[DeleteBitmap],
           fields: Sequence[str]) -> Tuple[DataFrame, Dict[str, str]]:
    """The valid, not deleted events of one partition -> (DataFrame, {table column ->
    the expression reading it}), the ACID key columns kept for ROW__ID."""
    rows = functools.reduce(DataFrame.union, read_groups(session, schema, data))
    keep = not_deleted(session, bitmap) if bitmap is not None else None
    if keep is not None:
        rows = rows.where(keep)
    if not deletes or keep is not None:
        return rows, {c: f"row.`{c.replace('`', '``')}`" for c in fields}
    # the row fields as flat columns before the join: the join then carries only what the
    # query uses (no struct copy per row); named __cN: a table column may be called rowId
    flat = {c: f"__c{i}" for i, c in enumerate(fields)}
    rows = rows.selectExpr(*KEY, *[f"row.`{c.replace('`', '``')}` AS {flat[c]}"
                                   for c in fields])
    dels = functools.reduce(DataFrame.union, read_groups(session, schema, deletes)).selectExpr(
        "originalTransaction AS __do", "bucket AS __db", "rowId AS __dr")
    dels = F.broadcast(dels) if delete_rows <= BROADCAST_MAX_DELETES else dels.hint("merge")
    return rows.join(dels, on=F.expr(ANTI_JOIN_ON), how="left_anti"), flat
