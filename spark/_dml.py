"""INSERT, UPDATE, DELETE and MERGE from Python: ``hive_acid.insert/update/delete/merge``.

Each runs as one statement of the calling thread's transaction (``_scope.txn_scope``). The
rows to write are computed by Spark and written by tasks: an INSERT into a table the JVM
writer takes (``_jvm_insert``) by Spark's JVM tasks, everything else by Python tasks
(``mapInArrow``), each a task attempt of the statement (``_attempts``); the driver records
the files they report.

UPDATE/DELETE/MERGE follow Hive's split update: the target is read at the transaction's
snapshot with its ROW__IDs; a row to delete or update becomes a delete event in
``delete_delta_W_W_S`` (in the file of its decoded bucket), an updated or inserted row an
insert in ``delta_W_W_(S+1)``. The rows carry ``_io.OP_COL`` ("D", "U", "I") and are
shuffled so that one task writes each (partition, bucket). They take a SHARED_WRITE lock and
commit with ``exclWriteEnabled=false``: the metastore's write-write conflict check applies,
and the loser gets ``WriteConflictError``. Partition and bucketing columns cannot be
updated.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Union

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as S

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.statements import assignments as statement_assignments
from hms_txn.clients.acid.statements import checked_clauses, merge_clauses, partition_check
from hms_txn.clients.acid.table_schema import write_spec
from hms_txn.clients.acid.txns import Statement, Txn
from orc_acid import table_io as _io

from . import _jvm_insert
from . import _types as TY
from ._attempts import refuse_speculation, run_as_attempt
from ._driver import Driver
from ._scope import acid_table, snapshot_df, source_df, txn_scope
from ._session import speculation_on


_RESULT_SCHEMA = "part string, path string, rows long"


def statement_spec(info: M.TableInfo, st: Statement, mode: str) -> _io.WriteSpec:
    return write_spec(info, st.write_id, st.statement_id, mode)


def _column_types(info: M.TableInfo) -> Dict[str, S.DataType]:
    return {f.name: f.dataType
            for f in TY.table_struct(info.columns, info.partition_keys).fields}


def _bucket_expr(info: M.TableInfo):
    cols = [F.col(c) for c in info.bucket_cols] or [F.col(info.data_names[0])]
    return F.pmod(F.hash(*cols), F.lit(info.num_buckets))


def _decoded_bucket(rid_col):
    return F.shiftright(F.col(rid_col + ".bucketid").bitwiseAND(0x0FFF0000), 16)


def _collect_files(df: DataFrame, fn, d: Driver, st: Statement) -> List[tuple]:
    """Run ``fn(rows, task id)`` (-> files written) on every partition of ``df`` as task
    attempts of ``st``. -> every file written."""
    refuse_speculation(speculation_on(df.sparkSession))
    statement = (d.address, d.authkey, st.token)

    def run(it):
        ctx = TaskContext.get()
        tid = ctx.partitionId() if ctx is not None else 0
        batches = list(it)
        res = run_as_attempt(statement, lambda: fn(batches, tid)) if batches else []
        yield pa.RecordBatch.from_pydict(
            {"part": [r[0] for r in res], "path": [r[1] for r in res],
             "rows": [int(r[2]) for r in res]},
            schema=pa.schema([("part", pa.string()), ("path", pa.string()),
                              ("rows", pa.int64())]))
    return [(r.part, r.path, r.rows) for r in df.mapInArrow(run, _RESULT_SCHEMA).collect()]


def _conform_df(info: M.TableInfo, df: DataFrame) -> DataFrame:
    mapping = info.column_mapping(df.columns)
    types = _column_types(info)
    return df.select(*[F.col(f"`{src}`").cast(types[dst]).alias(dst)
                       for src, dst in mapping.items()]).select(
        *[F.col(f"`{c}`") for c in info.data_names + info.part_names])


def insert(session: SparkSession, table: str, df: DataFrame, *, overwrite: bool = False,
           dynamic_partition_overwrite: bool = False) -> None:
    """INSERT INTO (or INSERT OVERWRITE) ``table`` the rows of ``df`` (columns by name, else by
    position; partition columns included)."""
    with txn_scope(session) as (d, txn):
        info = acid_table(d, table)
        st = d.begin_statement(txn, info, "overwrite" if overwrite else "insert",
                               dynamic_overwrite=dynamic_partition_overwrite)
        data = _conform_df(info, df)
        if info.num_buckets > 0:
            data = data.withColumn(_io.BUCKET_COL, _bucket_expr(info)).repartition(
                *[F.col(f"`{p}`") for p in info.part_names], F.col(_io.BUCKET_COL))
        elif data.rdd.getNumPartitions() > _io.MAX_WRITER_ID + 1:
            data = data.coalesce(_io.MAX_WRITER_ID + 1)
        spec = statement_spec(info, st, "overwrite" if overwrite else "append")
        if _jvm_insert.unsupported(session, info) is None:
            refuse_speculation(speculation_on(session))
            d.finish_statement(txn, st, _jvm_insert.insert(session, info, st, spec, data))
            return

        def task(batches, tid):
            return _io.write_inserts(spec, pa.Table.from_batches(batches), tid)
        files = _collect_files(data, task, d, st)
        d.finish_statement(txn, st, files)


def _run_dml(d: Driver, txn: Txn, info: M.TableInfo, st: Statement, rows: DataFrame) -> None:
    """rows: OP_COL, ROW__ID, data columns, partition columns."""
    if info.num_buckets > 0:
        bcols = info.bucket_cols or info.data_names[:1]
        bucket = _decoded_bucket("ROW__ID")
        if all(c in rows.columns for c in bcols):
            bucket = F.coalesce(bucket, _bucket_expr(info))
        rows = rows.withColumn(_io.BUCKET_COL, bucket)
        key = F.col(_io.BUCKET_COL)
    else:
        # Spark refuses to hash maps (alone or nested): the rows spread over the others
        types = {f.name: f.dataType.simpleString() for f in rows.schema.fields}
        present = [F.col(f"`{c}`") for c in info.data_names
                   if c in types and "map<" not in types[c]]
        spread = F.pmod(F.hash(*present), F.lit(1 << 16)) if present else F.lit(0)
        key = F.coalesce(_decoded_bucket("ROW__ID"), spread)
    rows = rows.repartition(*[F.col(f"`{p}`") for p in info.part_names], key)
    spec = statement_spec(info, st, "dml")
    files = _collect_files(rows, lambda batches, tid: _io.dml_task(spec, batches, tid), d, st)
    d.finish_statement(txn, st, files)


def delete(session: SparkSession, table: str, condition: Optional[str] = None) -> None:
    """DELETE FROM table [WHERE condition] (Spark SQL condition)."""
    with txn_scope(session) as (d, txn):
        info = acid_table(d, table, full_acid=True)
        st = d.begin_statement(txn, info, "delete")
        df = snapshot_df(session, d, txn, info, with_row_id=True)
        if condition:
            df = df.where(F.expr(condition))
        rows = df.select(F.lit("D").alias(_io.OP_COL), "ROW__ID",
                         *[F.col(f"`{c}`") for c in info.part_names])
        _run_dml(d, txn, info, st, rows)


def update(session: SparkSession, table: str, set: Dict[str, str],
           condition: Optional[str] = None) -> None:
    """UPDATE table SET col = expr, ... [WHERE condition] (Spark SQL expressions)."""
    with txn_scope(session) as (d, txn):
        info = acid_table(d, table, full_acid=True)
        what = f"UPDATE {info.full_name}"
        assignments = statement_assignments(info, set, what)
        partition_check(info, list(assignments), what)
        st = d.begin_statement(txn, info, "update")
        df = snapshot_df(session, d, txn, info, with_row_id=True)
        if condition:
            df = df.where(F.expr(condition))
        types = _column_types(info)
        cols = [(F.expr(assignments[c]).cast(types[c]) if c in assignments else
                 F.col(f"`{c}`")).alias(c) for c in info.data_names + info.part_names]
        rows = df.select(F.lit("U").alias(_io.OP_COL), "ROW__ID", *cols)
        _run_dml(d, txn, info, st, rows)


def merge(session: SparkSession, table: str, source: Union[DataFrame, str], on: str, *,
          when_matched_update: Optional[Dict[str, str]] = None,
          when_matched_update_condition: Optional[str] = None,
          when_matched_delete: Union[bool, str, None] = None,
          when_not_matched_insert: Optional[Dict[str, str]] = None,
          when_not_matched_insert_condition: Optional[str] = None,
          clauses: Optional[List[tuple]] = None) -> None:
    """MERGE INTO table t USING source s ON <on> WHEN MATCHED [AND c] THEN UPDATE SET ... /
    DELETE, WHEN NOT MATCHED [AND c] THEN INSERT ... (Spark SQL expressions over ``t``/``s``).

    ``clauses`` (ordered, as SQL): ``("update", cond, {col: expr})``, ``("delete", cond)``,
    ``("insert", cond, {col: expr})``; the first clause whose condition holds applies. With
    the keyword form, a conditional matched clause is tried before an unconditional one."""
    clauses = merge_clauses(when_matched_update, when_matched_update_condition,
                            when_matched_delete, when_not_matched_insert,
                            when_not_matched_insert_condition, clauses)
    with txn_scope(session) as (d, txn):
        info = acid_table(d, table, full_acid=True)
        clauses = checked_clauses(info, clauses, f"MERGE {info.full_name}")
        src = source_df(session, d, txn, source) if isinstance(source, str) else source
        st = d.begin_statement(txn, info, "update")
        tgt = snapshot_df(session, d, txn, info, with_row_id=True)
        rows = _merged_rows(info, tgt, src, on, clauses)
        _run_dml(d, txn, info, st, rows)


def _merged_rows(info: M.TableInfo, tgt: DataFrame, src: DataFrame, on: str,
                 clauses: List[tuple]) -> DataFrame:
    """The target joined with the source: per joined row the first clause that applies,
    its operation (OP_COL), the target's ROW__ID and the new column values."""
    src = src.withColumn("__hive_acid_src", F.lit(True))
    has_insert = any(c[0] == "insert" for c in clauses)
    joined = tgt.alias("t").join(src.alias("s"), F.expr(on),
                                 "right" if has_insert else "inner")
    is_matched = F.col("t.ROW__ID").isNotNull()
    clause_idx = None
    for i in reversed(range(len(clauses))):
        kind, cond = clauses[i][0], clauses[i][1]
        base = is_matched if kind in ("update", "delete") else ~is_matched
        test = base & F.expr(cond) if cond else base
        clause_idx = F.when(test, F.lit(i)).otherwise(
            clause_idx if clause_idx is not None else F.lit(None).cast("int"))
    joined = joined.withColumn("__hive_acid_clause", clause_idx).where(
        F.col("__hive_acid_clause").isNotNull())
    kinds = {"update": "U", "delete": "D", "insert": "I"}
    op = None
    for i, c in enumerate(clauses):
        op = (F.when(F.col("__hive_acid_clause") == i, F.lit(kinds[c[0]])) if op is None
              else op.when(F.col("__hive_acid_clause") == i, F.lit(kinds[c[0]])))
    types = _column_types(info)
    out_cols = []
    for col in info.data_names + info.part_names:
        e = None
        for i, c in enumerate(clauses):
            if c[0] == "delete":
                continue
            if c[0] == "update":
                v = F.expr(c[2][col]) if col in c[2] else F.col(f"t.`{col}`")
            else:
                v = F.expr(c[2][col]) if col in c[2] else F.lit(None)
            v = v.cast(types[col])
            e = F.when(F.col("__hive_acid_clause") == i, v) if e is None else \
                e.when(F.col("__hive_acid_clause") == i, v)
        e = F.col(f"t.`{col}`") if e is None else e.otherwise(F.col(f"t.`{col}`"))
        out_cols.append(e.alias(col))
    return joined.select(op.alias(_io.OP_COL), F.col("t.ROW__ID").alias("ROW__ID"), *out_cols)
