"""Column statistics arithmetic, as Hive 4's metastore does it.

* ``merge_into`` is ``ColumnStatsMerger``: two statistics of one column become one (low
  values by minimum, high values by maximum, null/true/false counts summed, lengths by
  maximum, distinct values by maximum). Hive merges the distinct-value sketches
  (``bitVectors``) when both sides carry one; a metastore with its default
  ``metastore.stats.fetch.bitvector=false`` never reads its stored sketches back, so the
  stored side never has one and the maximum is what Hive answers too. Only two sketches
  in one request (two statistics for one partition in ``set_aggr_stats_for``) would be
  merged by Hive; here they too take the maximum, and the first sketch is kept.
* ``aggregate`` is ``get_aggr_stats_for``'s aggregation of a column over partitions
  (``MetaStoreDirectSql.aggrColStatsForPartitions`` with its defaults: no density
  function, ``ndv.tuner`` 0). Statistics are read as the rows of Hive's PART_COL_STATS
  (``flatten``): columns found in every partition, or in fewer than two, are aggregated
  like its SQL (``min``/``max``/``sum``); the others are extrapolated linearly from the
  partitions at the borders of the requested list (``LinearExtrapolatePartStatus``), sums
  scaled by ``sum // count * partitions``. Distinct values are the largest partition's,
  capped for integer-like columns by ``high - low + 1``. The result is built per column
  type (``StatObjectConverter.fillColumnStatisticsData``). Decimals are compared exactly,
  as PostgreSQL's ``cast(... as decimal)`` does (Derby and MySQL round them to integers).
"""

from __future__ import annotations

import base64
import decimal
from decimal import Decimal
from typing import Any, Iterable, Sequence

Doc = dict[str, Any]
Row = dict[str, Any]

KINDS = ("booleanStats", "longStats", "doubleStats", "stringStats", "binaryStats",
         "decimalStats", "dateStats", "timestampStats")
_LONG_KINDS = {"longStats": None, "dateStats": "daysSinceEpoch",
               "timestampStats": "secondsSinceEpoch"}
# Hive's PART_COL_STATS value columns.
_FIELDS = ("long_low", "long_high", "double_low", "double_high", "dec_low", "dec_high",
           "nulls", "ndv", "avglen", "maxlen", "trues", "falses")
_MIN, _MAX = "min", "max"
# The extrapolated columns: how Hive aggregates them and the arithmetic of the column.
_BORDERS = (("long_low", _MIN, int), ("long_high", _MAX, int),
            ("double_low", _MIN, float), ("double_high", _MAX, float),
            ("dec_low", _MIN, Decimal), ("dec_high", _MAX, Decimal),
            ("ndv", _MAX, int), ("avglen", _MAX, float), ("maxlen", _MAX, int))
_SUMS = ("nulls", "trues", "falses")


def kind_of(data: Doc | None) -> str | None:
    """The member of a ColumnStatisticsData document that is set."""
    for kind in KINDS:
        if (data or {}).get(kind) is not None:
            return kind
    return None


# ------------------------------------------------------------------------------ values

def decimal_value(doc: Doc | None) -> Decimal | None:
    """A Thrift ``Decimal`` document (two's-complement ``unscaled``, ``scale``) as a number."""
    if doc is None:
        return None
    raw = doc.get("unscaled") or ""
    data = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
    unscaled = int.from_bytes(data, "big", signed=True) if data else 0
    sign, digits, _ = Decimal(unscaled).as_tuple()
    return Decimal((sign, digits, -int(doc.get("scale") or 0)))


def decimal_doc(value: Decimal) -> Doc:
    """The Thrift ``Decimal`` of a number, its ``unscaled`` in ``BigInteger.toByteArray``
    form (the shortest two's complement)."""
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    data = unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
    return {"scale": -int(exponent), "unscaled": base64.b64encode(data).decode("ascii")}


def java_double_text(value: float) -> str:
    """``Double.toString``: the shortest digits, plain between 10^-3 and 10^7, else
    ``d.dddE±n``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits)) or "0"
    lead = "-" if sign else ""
    if value == 0:
        return lead + "0.0"
    point = len(text) + exponent          # digits before the decimal point
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{lead}0.{'0' * -point}{text}"
        whole, frac = (text + "0" * max(0, point - len(text)))[:point], text[point:]
        return f"{lead}{whole}.{frac or '0'}"
    return f"{lead}{text[0]}.{text[1:] or '0'}E{point - 1}"


def _jdiv(a: int, b: int) -> int:
    """Java's long division (truncating towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# ------------------------------------------------------------------------------ rows

def flatten(data: Doc) -> Row:
    """A ColumnStatisticsData document as a PART_COL_STATS row (Hive's columns)."""
    row: Row = dict.fromkeys(_FIELDS)
    kind = kind_of(data)
    if kind is None:
        return row
    s = data[kind]
    row["nulls"] = s.get("numNulls")
    if kind in _LONG_KINDS:
        key = _LONG_KINDS[kind]
        for end in ("low", "high"):
            v = s.get(f"{end}Value")
            row[f"long_{end}"] = v if key is None or v is None else v.get(key)
        row["ndv"] = s.get("numDVs")
    elif kind == "doubleStats":
        row["double_low"], row["double_high"] = s.get("lowValue"), s.get("highValue")
        row["ndv"] = s.get("numDVs")
    elif kind == "decimalStats":
        row["dec_low"], row["dec_high"] = (decimal_value(s.get("lowValue")),
                                           decimal_value(s.get("highValue")))
        row["ndv"] = s.get("numDVs")
    elif kind in ("stringStats", "binaryStats"):
        row["avglen"], row["maxlen"] = s.get("avgColLen"), s.get("maxColLen")
        if kind == "stringStats":
            row["ndv"] = s.get("numDVs")
    else:
        row["trues"], row["falses"] = s.get("numTrues"), s.get("numFalses")
    return row


def kind_for_type(col_type: str, fallback: str | None) -> str | None:
    """The statistics Hive builds for a column type (its own ``fillColumnStatisticsData``
    dispatch); ``fallback`` for a type it has none for."""
    t = (col_type or "").lower()
    if t == "boolean":
        return "booleanStats"
    if t == "string" or t.startswith("varchar") or t.startswith("char"):
        return "stringStats"
    if t == "binary":
        return "binaryStats"
    if t in ("bigint", "int", "smallint", "tinyint"):
        return "longStats"
    if t in ("date", "timestamp"):
        return f"{t}Stats"
    if t in ("double", "float"):
        return "doubleStats"
    if t.startswith("decimal"):
        return "decimalStats"
    return fallback


def _num(value: Any) -> int:
    return int(value or 0)


def build(kind: str, row: Row) -> Doc:
    """An aggregated row back as a ColumnStatisticsData document of ``kind``."""
    s: Doc = {"numNulls": _num(row["nulls"])}
    if kind == "booleanStats":
        s.update(numTrues=_num(row["trues"]), numFalses=_num(row["falses"]))
    elif kind in ("stringStats", "binaryStats"):
        s.update(maxColLen=_num(row["maxlen"]), avgColLen=float(row["avglen"] or 0.0))
        if kind == "stringStats":
            s["numDVs"] = _num(row["ndv"])
    elif kind in _LONG_KINDS:
        key = _LONG_KINDS[kind]
        low, high = row["long_low"], row["long_high"]
        for end, value in (("lowValue", low), ("highValue", high)):
            if value is not None:
                s[end] = int(value) if key is None else {key: int(value)}
        ndv = _num(row["ndv"])
        if low is not None and high is not None:
            ndv = min(ndv, int(high) - int(low) + 1)
        s["numDVs"] = ndv
    elif kind == "doubleStats":
        for end, value in (("lowValue", row["double_low"]), ("highValue", row["double_high"])):
            if value is not None:
                s[end] = float(value)
        s["numDVs"] = _num(row["ndv"])
    elif kind == "decimalStats":
        for end, value in (("lowValue", row["dec_low"]), ("highValue", row["dec_high"])):
            if value is not None:
                s[end] = decimal_doc(Decimal(value) if isinstance(value, str) else value)
        s["numDVs"] = _num(row["ndv"])
    return {kind: s}


# ------------------------------------------------------------------------------ merging

def _pick(a: Any, b: Any, fn) -> Any:
    if a is None or b is None:
        return a if b is None else b
    return fn(a, b)


def _low_high(stats: Doc, other: Doc, kind: str) -> None:
    if kind == "decimalStats":
        def key(v):
            return decimal_value(v)
    elif _LONG_KINDS.get(kind):
        field = _LONG_KINDS[kind]

        def key(v):
            return v[field]
    else:
        def key(v):
            return v
    for end, fn in (("lowValue", min), ("highValue", max)):
        value = _pick(stats.get(end), other.get(end), lambda a, b: fn(a, b, key=key))
        if value is not None:
            stats[end] = value


def merge_into(new: Doc, old: Doc) -> None:
    """``ColumnStatsMerger.merge(new, old)``: fold the ColumnStatisticsObj ``old`` into
    ``new`` (see the module docstring). Statistics of two kinds are left as ``new``."""
    kind = kind_of(new.get("statsData"))
    if kind is None or kind != kind_of(old.get("statsData")):
        return
    a, b = new["statsData"][kind], old["statsData"][kind]
    a["numNulls"] = _num(a.get("numNulls")) + _num(b.get("numNulls"))
    if kind == "booleanStats":
        a["numTrues"] = _num(a.get("numTrues")) + _num(b.get("numTrues"))
        a["numFalses"] = _num(a.get("numFalses")) + _num(b.get("numFalses"))
        return
    if kind in ("stringStats", "binaryStats"):
        a["maxColLen"] = max(_num(a.get("maxColLen")), _num(b.get("maxColLen")))
        a["avgColLen"] = max(float(a.get("avgColLen") or 0.0), float(b.get("avgColLen") or 0.0))
    else:
        _low_high(a, b, kind)
    if kind != "binaryStats":
        a["numDVs"] = max(_num(a.get("numDVs")), _num(b.get("numDVs")))


# ------------------------------------------------------------------------------ aggregating

def _plain(rows: Sequence[Row]) -> Row:
    """The SQL aggregate of the rows (NULLs ignored, as SQL does)."""
    def values(name):
        return [r[name] for r in rows if r[name] is not None]

    out: Row = {}
    for name, how, _ in _BORDERS:
        vs = values(name)
        out[name] = (min(vs) if how == _MIN else max(vs)) if vs else None
    for name in _SUMS:
        vs = values(name)
        out[name] = sum(vs) if vs else None
    return out


def _extrapolate(low_val, low_at: int, high_val, high_at: int, how: str, typ, right: int):
    """``LinearExtrapolatePartStatus.extrapolate`` from the partitions holding the
    smallest and the largest value (their positions in the requested list)."""
    if low_at == high_at:
        return low_val
    if typ is Decimal:
        mn, mx = float(low_val), float(high_val)
    else:
        mn, mx = low_val, high_val
    if how == _MAX:
        num, den = (right - low_at, high_at - low_at) if low_at < high_at else (low_at, low_at - high_at)
        if typ is int:
            return mn + _jdiv((mx - mn) * num, den)
        value = mn + (mx - mn) * num / den
    else:
        num, den = (high_at, high_at - low_at) if low_at < high_at else (right - high_at, low_at - high_at)
        if typ is int:
            return mx - _jdiv((mx - mn) * num, den)
        value = mx - (mx - mn) * num / den
    return java_double_text(value) if typ is Decimal else value


def _extrapolated(found: Sequence[tuple[int, Row]], requested: int, right: int) -> Row:
    """Hive's extrapolation for a column some partitions have no statistics for."""
    count = len(found)
    out: Row = {}
    for name in _SUMS:
        vs = [r[name] for _, r in found if r[name] is not None]
        out[name] = None if not vs else sum(vs) // count * requested
    for name, how, typ in _BORDERS:
        ordered = sorted(found, key=lambda item: (item[1][name] is None,
                                                  item[1][name] if item[1][name] is not None else 0,
                                                  item[0]))
        (low_at, low), (high_at, high) = ordered[0], ordered[-1]
        if low[name] is None or high[name] is None:
            out[name] = None
        else:
            out[name] = _extrapolate(low[name], low_at, high[name], high_at, how, typ, right)
    return out


def aggregate(part_names: Sequence[str], col_names: Sequence[str],
              stats: Iterable[tuple[str, Doc]]) -> tuple[list[Doc], int]:
    """(aggregated ColumnStatisticsObj documents, partsFound) of ``stats``, the
    (partition name, ColumnStatisticsObj) pairs stored for the requested partitions and
    columns, in the order of ``col_names``."""
    if not part_names or not col_names:
        return [], 0
    position = {name: i for i, name in enumerate(part_names)}
    per_part: dict[str, int] = {}
    groups: dict[tuple[str, str], list[tuple[int, Row, str | None]]] = {}
    for part, obj in stats:
        per_part[part] = per_part.get(part, 0) + 1
        data = obj.get("statsData")
        groups.setdefault((obj["colName"], obj.get("colType") or ""), []).append(
            (position.get(part, 0), flatten(data), kind_of(data)))
    parts_found = sum(1 for n in per_part.values() if n == len(col_names))
    all_found = parts_found == len(part_names)
    order = {c: i for i, c in reversed(list(enumerate(col_names)))}
    out = []
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        for (col, col_type), found in sorted(groups.items(), key=lambda g: order.get(g[0][0], 0)):
            rows = [(at, row) for at, row, _ in found]
            if all_found or len(rows) == len(part_names) or len(rows) < 2:
                row = _plain([r for _, r in rows])
            else:
                row = _extrapolated(rows, len(part_names), len(position) - 1)
            kind = kind_for_type(col_type, found[0][2])
            if kind is not None:
                out.append({"colName": col, "colType": col_type, "statsData": build(kind, row)})
    return out, parts_found
