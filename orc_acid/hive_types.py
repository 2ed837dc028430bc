"""Hive column type strings as the Arrow types the table's ORC files hold.

The project's one reader of Hive type strings (``FieldSchema.type`` as the metastore stores
it: ``int``, ``decimal(10,2)``, ``array<struct<a:int,b:string>>``, ``map<string,bigint>``):
the streaming ingest client builds its row schema with it, and ``spark.hive_acid`` derives
its Spark types from these Arrow types.

Invariants:

* case and blanks around names do not matter; struct field names lose their backquotes;
* ``timestamp`` is an Arrow timestamp in nanoseconds without time zone (Hive's TIMESTAMP is
  a local date-time; Spark reads it as TIMESTAMP_NTZ);
* ``char(n)`` and ``varchar(n)`` are strings (the length is not enforced here);
* ``decimal``/``numeric`` without a precision is ``decimal(10,0)``, as in Hive;
* every other type (``uniontype``, intervals, ``void``, a malformed string) raises
  :class:`UnsupportedHiveType`: callers turn it into their own error.
"""

from __future__ import annotations

import re
from typing import List

import pyarrow as pa

__all__ = ["UnsupportedHiveType", "arrow_type", "hive_type"]

_PRIMITIVES = {
    "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "integer": pa.int32(),
    "bigint": pa.int64(), "boolean": pa.bool_(), "float": pa.float32(),
    "double": pa.float64(), "double precision": pa.float64(), "string": pa.string(),
    "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("ns"),
}
_DECIMAL = re.compile(r"(?:decimal|numeric)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\Z")


class UnsupportedHiveType(ValueError):
    """A Hive type string this project cannot map to an Arrow type."""


def arrow_type(text: str) -> pa.DataType:
    """The Arrow type of a Hive column type string (see the module docstring)."""
    t = text.strip()
    low = t.lower()
    if low in _PRIMITIVES:
        return _PRIMITIVES[low]
    if low.startswith(("varchar", "char")):
        return pa.string()
    decimal = _DECIMAL.match(low)
    if decimal:
        return pa.decimal128(int(decimal.group(1) or 10), int(decimal.group(2) or 0))
    if low.startswith("array<") and low.endswith(">"):
        return pa.list_(arrow_type(t[len("array<"):-1]))
    if low.startswith("map<") and low.endswith(">"):
        parts = _split_top_level(t[len("map<"):-1])
        if len(parts) != 2:
            raise UnsupportedHiveType(f"unsupported Hive type {text!r}")
        return pa.map_(arrow_type(parts[0]), arrow_type(parts[1]))
    if low.startswith("struct<") and low.endswith(">"):
        fields = []
        for item in _split_top_level(t[len("struct<"):-1]):
            name, _, typ = item.partition(":")
            if not typ.strip():
                raise UnsupportedHiveType(f"unsupported Hive type {text!r}")
            fields.append(pa.field(name.strip().strip("`"), arrow_type(typ)))
        return pa.struct(fields)
    raise UnsupportedHiveType(f"unsupported Hive type {text!r}")


def _split_top_level(text: str) -> List[str]:
    """``a:int,b:map<int,string>`` -> ``["a:int", "b:map<int,string>"]``: commas inside
    ``<>`` or ``()`` belong to a nested type."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    if last:
        out.append(last)
    return out


_HIVE_OF = [(pa.types.is_int8, "tinyint"), (pa.types.is_int16, "smallint"),
            (pa.types.is_int32, "int"), (pa.types.is_int64, "bigint"),
            (pa.types.is_uint8, "smallint"), (pa.types.is_uint16, "int"),
            (pa.types.is_uint32, "bigint"), (pa.types.is_boolean, "boolean"),
            (pa.types.is_float16, "float"), (pa.types.is_float32, "float"),
            (pa.types.is_float64, "double"), (pa.types.is_string, "string"),
            (pa.types.is_large_string, "string"), (pa.types.is_string_view, "string"),
            (pa.types.is_binary, "binary"), (pa.types.is_large_binary, "binary"),
            (pa.types.is_date, "date"), (pa.types.is_timestamp, "timestamp")]


def hive_type(t: pa.DataType) -> str:
    """The Hive column type string of an Arrow type (the inverse of :func:`arrow_type`,
    widened where Hive has no exact type: unsigned integers to the next signed one,
    dictionaries to their values); UnsupportedHiveType when Hive has none."""
    if pa.types.is_dictionary(t):
        return hive_type(t.value_type)
    for test, name in _HIVE_OF:
        if test(t):
            return name
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{hive_type(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{hive_type(t.key_type)},{hive_type(t.item_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{hive_type(f.type)}" for f in t) + ">"
    raise UnsupportedHiveType(f"Arrow type {t} has no Hive column type")
