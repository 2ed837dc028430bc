"""orc_acid.hive_types: Hive column type strings as the Arrow types ORC files hold."""

from __future__ import annotations

import pyarrow as pa
import pytest

from orc_acid.hive_types import UnsupportedHiveType, arrow_type


@pytest.mark.parametrize("text, expected", [
    ("int", pa.int32()), (" BIGINT ", pa.int64()), ("tinyint", pa.int8()),
    ("double precision", pa.float64()), ("string", pa.string()),
    ("varchar(20)", pa.string()), ("char(3)", pa.string()), ("date", pa.date32()),
    ("timestamp", pa.timestamp("ns")), ("decimal", pa.decimal128(10, 0)),
    ("decimal(12, 3)", pa.decimal128(12, 3)), ("numeric(5)", pa.decimal128(5, 0)),
    ("array<map<string,decimal(4,1)>>", pa.list_(pa.map_(pa.string(), pa.decimal128(4, 1)))),
    ("struct<`a`:int,b:struct<c:string>>",
     pa.struct([pa.field("a", pa.int32()),
                pa.field("b", pa.struct([pa.field("c", pa.string())]))])),
])
def test_hive_type_strings(text, expected):
    assert arrow_type(text) == expected


@pytest.mark.parametrize("text", ["uniontype<int,string>", "void", "map<int>",
                                  "struct<a>", "interval_day_time"])
def test_unsupported_types_raise(text):
    with pytest.raises(UnsupportedHiveType):
        arrow_type(text)
