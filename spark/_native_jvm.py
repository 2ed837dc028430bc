"""A table partition of a native plan (``_native``) as a scan of hive_acid's JVM reader
(``jvm/AcidOrcSource.java``, loaded by ``_jvm``).

The driver hands the reader what it decided (the reader decides nothing about the
snapshot): the data files with their sizes, the write ids their rows were inserted by, the
write ids to drop (when a file's directory spans invalid ones) and the delete files of each
file's split (bucket) with theirs; the tasks read those delete events themselves and keep,
per file, the ones that can hit it (originalTransaction in its write id range): a file none
can hit is read without any ACID column. The reader cuts and packs the files into Spark
input partitions as Spark packs a plain ORC scan. The plan is one JSON option: a scan costs
the driver three py4j calls.
"""

from __future__ import annotations

import json
from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as S

PLAN = "hive_acid.plan"           # the options of AcidOrcSource
BATCH_ROWS = "hive_acid.batchRows"


def _validity(entry: dict, validity) -> dict:
    if validity is not None:
        entry["h"], entry["x"] = int(validity[0]), [int(x) for x in validity[1]]
    return entry


def plan_json(table: str, columns: S.StructType, part, lease: Optional[str] = None) -> str:
    """A partition of a native plan (``_native.PartPlan``) -> the reader's plan (see
    AcidOrcSource.java)."""
    files = []
    for f in part.files:
        e = _validity({"p": f.uri, "n": int(f.size), "lo": int(f.lo), "hi": int(f.hi)},
                      f.validity)
        if f.split is not None:
            e["s"] = f.split
        files.append(e)
    plan = {"table": table, "schema": columns.jsonValue(), "files": files,
            "splits": [[_validity({"p": uri}, v) for uri, v in refs]
                       for refs, _ in part.splits]}
    if lease is not None:
        plan["lease"] = lease
    return json.dumps(plan, separators=(",", ":"))


def scan(session: SparkSession, reader: str, table: str, columns: S.StructType, part,
         lease: Optional[str] = None, batch_rows: Optional[int] = None) -> DataFrame:
    """The rows of one table partition (``_native.PartPlan``) read by the JVM reader class
    ``reader``: ``columns`` = the table's data columns in the files' order [+ ROW__ID];
    ``lease``: the id under which the reader keeps its tables for ``_leases``."""
    r = session.read.format(reader).option(PLAN, plan_json(table, columns, part, lease))
    if batch_rows:
        r = r.option(BATCH_ROWS, str(batch_rows))
    return r.load()
