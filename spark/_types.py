"""Hive column types <-> Spark types <-> Arrow types.

A Hive type string is read once, by ``orc_acid.hive_types`` (the Arrow type the ORC files
hold); its Spark type is Spark's own reading of that Arrow type (``timestamp``:
TIMESTAMP_NTZ; ``char``/``varchar``: STRING).
"""

from __future__ import annotations

from typing import List, Tuple

import pyarrow as pa
from pyspark.sql import types as S
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema, to_arrow_type

from orc_acid.hive_types import UnsupportedHiveType
from orc_acid.hive_types import arrow_type as hive_arrow_type

from ._errors import HiveAcidError

ROW_ID_SPARK = S.StructType([S.StructField("writeid", S.LongType()),
                             S.StructField("bucketid", S.IntegerType()),
                             S.StructField("rowid", S.LongType())])


def hive_to_spark(t: str) -> S.DataType:
    try:
        return from_arrow_type(hive_arrow_type(t))
    except UnsupportedHiveType:
        raise HiveAcidError(f"unsupported Hive type {t!r}") from None


def spark_to_hive(dt: S.DataType) -> str:
    simple = {S.ByteType: "tinyint", S.ShortType: "smallint", S.IntegerType: "int",
              S.LongType: "bigint", S.BooleanType: "boolean", S.FloatType: "float",
              S.DoubleType: "double", S.StringType: "string", S.BinaryType: "binary",
              S.DateType: "date", S.TimestampNTZType: "timestamp",
              S.TimestampType: "timestamp", S.CharType: "string", S.VarcharType: "string"}
    for cls, name in simple.items():
        if isinstance(dt, cls):
            return name
    if isinstance(dt, S.DecimalType):
        return f"decimal({dt.precision},{dt.scale})"
    if isinstance(dt, S.ArrayType):
        return f"array<{spark_to_hive(dt.elementType)}>"
    if isinstance(dt, S.MapType):
        return f"map<{spark_to_hive(dt.keyType)},{spark_to_hive(dt.valueType)}>"
    if isinstance(dt, S.StructType):
        return "struct<" + ",".join(f"{f.name}:{spark_to_hive(f.dataType)}"
                                    for f in dt.fields) + ">"
    raise HiveAcidError(f"Spark type {dt.simpleString()} has no Hive equivalent here")


def table_struct(columns: List[Tuple[str, str]], partition_keys: List[Tuple[str, str]],
                 with_row_id: bool = False) -> S.StructType:
    fields = [S.StructField(n, hive_to_spark(t)) for n, t in columns + partition_keys]
    if with_row_id:
        fields.insert(0, S.StructField("ROW__ID", ROW_ID_SPARK))
    return S.StructType(fields)


def arrow_schema(struct: S.StructType) -> pa.Schema:
    return to_arrow_schema(struct, timezone="UTC")


def arrow_type(dt: S.DataType) -> pa.DataType:
    return to_arrow_type(dt, timezone="UTC")
