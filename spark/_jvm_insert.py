"""INSERT / INSERT OVERWRITE through hive_acid's JVM writer (``jvm/AcidOrcSink.java``).

The Python driver does what needs the metastore and the statement's bookkeeping (the
transaction, the write id, the lock, the directory with its ``_orc_acid_version`` marker,
and after the job the commit with the files written); Spark's executors turn the rows into
ACID insert files in their JVMs, the way Spark's own ORC writer does, without handing the
rows to Python workers as Arrow: an insert costs about what a plain ORC write costs.

Where the JVM writer does not apply, :func:`unsupported` says why and the caller writes
with ``orc_acid`` in Python tasks (``_dml``): tables that are bucketed (rows go to their
bucket's file: a shuffle), partitioned by a column that is not a string, integer or
boolean (partition values are directory names: Spark and Arrow render those alike),
insert-only (plain files), not ORC, with a timestamp column (see :func:`table_unsupported`);
a session without the JVM writer (Spark Connect, ``spark.hive_acid.jvmWriter=false``, a
driver whose class loader takes no jar) or without a Hadoop file system for the table's
location.

Task attempts: the JVM tasks do not report to the coordinator's attempt bookkeeping
(``_attempts``); Spark's output commit coordinator lets one attempt per task publish its file
(a hidden temporary renamed at commit) and no attempt after the job ended, so a failed job's
directory, removed by the statement's abort, gets no file afterwards but an orphaned hidden
temporary of a task killed while writing, which every reader skips.
"""

from __future__ import annotations

import json
import logging
import os
from typing import List, Optional, Tuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as S

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.txns import Statement
from orc_acid import table_io as _io
from orc_acid.writer import ensure_acid_dir

from . import _jvm
from . import _types as TY
from ._errors import HiveAcidError
from ._native import hadoop_connector_missing

log = logging.getLogger("spark.hive_acid")

JVM_WRITER_CONF = "spark.hive_acid.jvmWriter"
# what partition columns may be (the JVM writer renders their values as directory names)
_PARTITION_TYPES = (S.StringType, S.ByteType, S.ShortType, S.IntegerType, S.LongType,
                    S.BooleanType)
PLAN = "hive_acid.write"              # the option of AcidOrcSink


_warned: set = set()          # the reasons logged, once each


def table_unsupported(info: M.TableInfo) -> Optional[str]:
    """Why ``info``'s inserts cannot go through the JVM writer in any session, or None."""
    if info.num_buckets and info.num_buckets > 0:
        return "bucketed table"
    odd = [t for _, t in info.partition_keys
           if not isinstance(TY.hive_to_spark(t), _PARTITION_TYPES)]
    if odd:
        # partition values become directory names; these types are rendered alike by Spark
        # (the JVM writer) and Arrow (orc_acid's part_value_strings)
        return f"partition column of type {odd[0]}"
    if info.insert_only or info.file_format != "orc":
        return "not a full ACID ORC table"
    if any("timestamp" in t.lower() for _, t in info.columns):
        # Spark's ORC conversion writes TIMESTAMP_NTZ (what hive_acid reads a Hive timestamp
        # as) as a bigint, not as ORC's timestamp; as the JVM reader, leave them to orc_acid
        return "timestamp column"
    return None


def unsupported(session: SparkSession, info: M.TableInfo) -> Optional[str]:
    """Why ``info``'s inserts cannot go through the JVM writer in ``session``, or None."""
    if str(session.conf.get(JVM_WRITER_CONF, "true")).strip().lower() == "false":
        return f"{JVM_WRITER_CONF}=false"
    why = table_unsupported(info) or hadoop_connector_missing(session, info)
    if why:
        return why
    try:
        _jvm.sink_class(session)
    except _jvm.Unavailable as e:
        if str(e) not in _warned:
            _warned.add(str(e))
            log.warning("hive_acid: the JVM insert writer is not available (%s); inserting "
                        "with orc_acid in Python workers (slower: see docs/spark.md)", e)
        return str(e)
    return None


def insert(session: SparkSession, info: M.TableInfo, st: Statement, spec: _io.WriteSpec,
           rows: DataFrame) -> List[Tuple[str, str, int]]:
    """Write ``rows`` (the table's data columns, in order, of the table's types, then its
    partition columns) as the files of statement ``st`` (an insert or an overwrite) ->
    [(partition name, path relative to the table, rows)]."""
    d, = st.dir_names          # delta_W_W_S, or base_W for an overwrite
    if spec.mode == "overwrite" and not info.part_names:
        # an overwrite's base hides older data even without rows: it exists whatever happens
        # (a partitioned table's overwritten partitions without rows get theirs at the commit)
        ensure_acid_dir(os.path.join(spec.location, d), spec.filesystem)
    if info.part_names:
        # one file open per task: its rows grouped by partition, as Spark's writer does
        rows = rows.sortWithinPartitions(*[F.col(f"`{p}`") for p in info.part_names])
    nullable = S.StructType([S.StructField(f.name, f.dataType, True)
                             for f in rows.schema.fields])
    plan = {"token": st.token, "statementDir": d,
            "dir": info.uri_of(spec.location) if info.fs is not None
            else "file:" + spec.location,
            "writeId": spec.write_id, "statementId": spec.statement_id,
            "schema": json.loads(nullable.json()), "partitionKeys": list(info.part_names),
            "compression": str(spec.compression).upper()}
    sink = _jvm.sink_class(session)
    rows.write.format(sink).option(PLAN, json.dumps(plan, separators=(",", ":"))) \
        .mode("append").save()
    got = _jvm.jvm_class(session.sparkContext._jvm, sink).takeCommitted(st.token)
    if got is None:
        raise HiveAcidError(f"the insert job into {info.full_name} ended without committing")
    out = []
    for line in str(got).splitlines():
        part, name, n = line.split("\t")
        out.append((part, f"{part}/{d}/{name}" if part else f"{d}/{name}", int(n)))
    # a delta (or a partition's base) exists only with rows, as orc_acid writes it; the
    # files are invisible until the transaction commits, after this
    for part in sorted({p for p, _, _ in out}):
        if part or spec.mode != "overwrite":
            ensure_acid_dir(os.path.join(spec.location, part, d), spec.filesystem)
    return out
