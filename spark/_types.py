"""Hive column types <-> Spark types <-> Arrow types."""

from __future__ import annotations

import re
from typing import List, Tuple

import pyarrow as pa
from pyspark.sql import types as S
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from ._metastore import HiveAcidError, _split_top

ROW_ID_SPARK = S.StructType([S.StructField("writeid", S.LongType()),
                             S.StructField("bucketid", S.IntegerType()),
                             S.StructField("rowid", S.LongType())])

_PRIM = {
    "tinyint": S.ByteType(), "smallint": S.ShortType(), "int": S.IntegerType(),
    "integer": S.IntegerType(), "bigint": S.LongType(), "boolean": S.BooleanType(),
    "float": S.FloatType(), "double": S.DoubleType(), "double precision": S.DoubleType(),
    "string": S.StringType(), "binary": S.BinaryType(), "date": S.DateType(),
    "timestamp": S.TimestampNTZType(),
}


def hive_to_spark(t: str) -> S.DataType:
    s = t.strip()
    low = s.lower()
    if low in _PRIM:
        return _PRIM[low]
    if low.startswith(("varchar", "char")):
        return S.StringType()
    if low.startswith("decimal"):
        m = re.match(r"decimal\s*(?:\((\d+)\s*(?:,\s*(\d+))?\))?", low)
        return S.DecimalType(int(m.group(1) or 10), int(m.group(2) or 0))
    if low.startswith("array<"):
        return S.ArrayType(hive_to_spark(s[6:-1]))
    if low.startswith("map<"):
        k, v = _split_top(s[4:-1])
        return S.MapType(hive_to_spark(k), hive_to_spark(v))
    if low.startswith("struct<"):
        fields = []
        for f in _split_top(s[7:-1]):
            name, typ = f.split(":", 1)
            fields.append(S.StructField(name.strip().strip("`"), hive_to_spark(typ)))
        return S.StructType(fields)
    raise HiveAcidError(f"unsupported Hive type {t!r}")


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


def partition_matches(filters, partition_keys: List[Tuple[str, str]], values) -> bool:
    """Can a partition with these (string) values satisfy all pushed-down ``filters``
    (pyspark.sql.datasource filters on partition columns)? True when unsure."""
    from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In,
                                        IsNotNull, IsNull, LessThan, LessThanOrEqual)
    cmp = {EqualTo: lambda a, b: a == b, GreaterThan: lambda a, b: a > b,
           GreaterThanOrEqual: lambda a, b: a >= b, LessThan: lambda a, b: a < b,
           LessThanOrEqual: lambda a, b: a <= b}
    keys = [k.lower() for k, _ in partition_keys]
    types = {k.lower(): t for k, t in partition_keys}
    vals = dict(zip(keys, values))
    for f in filters or ():
        col = f.attribute[0].lower() if len(f.attribute) == 1 else None
        if col not in vals:
            continue
        raw = vals[col]
        if raw == "__HIVE_DEFAULT_PARTITION__":
            v = None
        else:
            try:
                v = pa.array([raw]).cast(arrow_type(hive_to_spark(types[col])))[0].as_py()
            except Exception:
                continue
        try:
            if isinstance(f, IsNull):
                ok = v is None
            elif isinstance(f, IsNotNull):
                ok = v is not None
            elif v is None:
                ok = False
            elif isinstance(f, In):
                ok = v in f.value
            elif type(f) in cmp:
                ok = cmp[type(f)](v, f.value)
            else:
                ok = True
        except TypeError:
            ok = True
        if not ok:
            return False
    return True
