"""ORC footer parts the streaming writer re-encodes: column statistics and the pieces of an
in-memory ORC file.

:class:`ColumnStats` is one ColumnStatistics message parsed as far as merging needs:
row counts, hasNull, bytes on disk, and min/max/sum for integer, floating point, string
(exact or as lower/upper bounds), boolean, date, binary, decimal, timestamp and collection
columns. Merging gives what an ORC writer computes for the same rows written at once; a
sum that overflows is left out (ORC writers drop it too), and a kind this module does not
know is dropped on merging (statistics are optional).

:class:`EncodedPiece` is a complete ORC file pyarrow wrote in memory, split into what the
streaming writer reuses: its stripes (relocatable bytes), their statistics, the type tree
and the footer/postscript fields it copies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import List, Optional, Tuple

from ._orc_tail import (OrcTailError, StripeInfo, decompress, encode_varint, parse_fields,
                        pb_bytes, pb_double, pb_sint, pb_varint, read_postscript,
                        read_varint, zigzag_decode)

ORC_HEADER = b"ORC"
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# The kinds whose statistics are plain sub-fields: kind -> (field number in
# ColumnStatistics, how the sub-fields are encoded, (sub-field number, attribute) pairs).
_PLAIN_KINDS = {
    "int": (2, "sint", ((1, "lo"), (2, "hi"), (3, "total"))),
    "double": (3, "double", ((1, "lo"), (2, "hi"), (3, "total"))),
    "decimal": (6, "decimal", ((1, "lo"), (2, "hi"), (3, "total"))),
    "date": (7, "sint", ((1, "lo"), (2, "hi"))),
    "binary": (8, "sint", ((1, "total"),)),           # the sum of the values' lengths
    "collection": (12, "varint", ((1, "lo"), (2, "hi"), (3, "total"))),  # child counts
}
_KIND_OF_FIELD = {num: kind for kind, (num, _, _) in _PLAIN_KINDS.items()}
# TimestampStatistics sub-fields of each bound: (local millis, utc millis, nanos); the
# bound is kept as (utc millis, nanos field, local millis or None)
_TIMESTAMP_FIELDS = (("lo", (1, 3, 5)), ("hi", (2, 4, 6)))
_SUMMED = ("int", "double", "string", "binary", "decimal", "collection")


def _decode(codec: str, wire_type: int, value) -> object:
    """A plain sub-field's value, or None when its wire type is not the expected one."""
    if codec == "double":
        return struct.unpack("<d", value)[0] if wire_type == 1 else None
    if codec == "decimal":
        return Decimal(bytes(value).decode("ascii"))
    return zigzag_decode(value) if codec == "sint" else value


def _encode(codec: str, num: int, value) -> bytes:
    if codec == "double":
        return pb_double(num, value)
    if codec == "decimal":
        return pb_bytes(num, format(value, "f").encode("ascii"))
    return pb_sint(num, value) if codec == "sint" else pb_varint(num, value)


@dataclass
class ColumnStats:
    """One ORC ColumnStatistics message, parsed as far as merging needs."""
    n: int = 0
    has_null: bool = False
    bytes_on_disk: Optional[int] = None
    kind: Optional[str] = None          # a _PLAIN_KINDS key, string, bucket, timestamp, other
    lo: object = None                   # min (exact) or lower bound
    hi: object = None
    lo_exact: bool = True
    hi_exact: bool = True
    total: Optional[object] = None      # sum
    counts: Optional[List[int]] = None  # bucket (boolean) true counts
    other: Optional[Tuple[int, bytes]] = None   # an unmerged sub-message, kept verbatim

    @classmethod
    def parse(cls, msg: bytes) -> "ColumnStats":
        s = cls()
        for num, wt, val, raw in parse_fields(msg):
            if num == 1 and wt == 0:
                s.n = val
            elif num == 10 and wt == 0:
                s.has_null = bool(val)
            elif num == 11 and wt == 0:
                s.bytes_on_disk = val
            elif wt != 2:
                continue
            elif num in _KIND_OF_FIELD:
                s.kind = _KIND_OF_FIELD[num]
                _, codec, attrs = _PLAIN_KINDS[s.kind]
                by_number = dict(attrs)
                for n2, w2, v2, _ in parse_fields(val):
                    if n2 in by_number:
                        value = _decode(codec, w2, v2)
                        if value is not None:
                            setattr(s, by_number[n2], value)
            elif num == 4:
                s.kind = "string"
                for n2, w2, v2, _ in parse_fields(val):
                    if n2 == 1:
                        s.lo, s.lo_exact = bytes(v2), True
                    elif n2 == 2:
                        s.hi, s.hi_exact = bytes(v2), True
                    elif n2 == 3:
                        s.total = zigzag_decode(v2)
                    elif n2 == 4 and s.lo is None:
                        s.lo, s.lo_exact = bytes(v2), False
                    elif n2 == 5 and s.hi is None:
                        s.hi, s.hi_exact = bytes(v2), False
            elif num == 5:
                s.kind = "bucket"
                counts: List[int] = []
                for n2, w2, v2, _ in parse_fields(val):
                    if n2 == 1 and w2 == 0:
                        counts.append(v2)
                    elif n2 == 1 and w2 == 2:     # packed
                        pos = 0
                        while pos < len(v2):
                            c, pos = read_varint(v2, pos)
                            counts.append(c)
                s.counts = counts
            elif num == 9:
                s.kind = "timestamp"
                v = {n2: v2 for n2, w2, v2, _ in parse_fields(val)}
                # nanos fields hold nanos+1, 0 = none
                for attr, (local, utc, nanos) in _TIMESTAMP_FIELDS:
                    if utc in v:
                        setattr(s, attr, (zigzag_decode(v[utc]), v.get(nanos, 0),
                                          zigzag_decode(v[local]) if local in v else None))
            else:
                s.kind = "other"
                s.other = (num, bytes(val))
        return s

    def merge(self, o: "ColumnStats") -> "ColumnStats":
        r = ColumnStats(n=self.n + o.n, has_null=self.has_null or o.has_null)
        if self.bytes_on_disk is not None and o.bytes_on_disk is not None:
            r.bytes_on_disk = self.bytes_on_disk + o.bytes_on_disk
        kinds = {k for k in (self.kind, o.kind) if k is not None}
        if len(kinds) != 1:
            return r                     # no type-specific part (or mismatched): counts only
        r.kind = kinds.pop()
        a, b = self, o
        if r.kind == "other":
            return r                     # not merged: dropped (statistics are optional)
        if r.kind == "bucket":
            ca, cb = a.counts or [], b.counts or []
            ln = max(len(ca), len(cb))
            r.counts = [(ca[i] if i < len(ca) else 0) + (cb[i] if i < len(cb) else 0)
                        for i in range(ln)]
            return r
        # min / max (absent in a part without values)
        los = [(p.lo, p.lo_exact) for p in (a, b) if p.lo is not None]
        his = [(p.hi, p.hi_exact) for p in (a, b) if p.hi is not None]
        if los:
            v = min(x for x, _ in los)
            r.lo, r.lo_exact = v, all(e for x, e in los if x == v)
        if his:
            v = max(x for x, _ in his)
            r.hi, r.hi_exact = v, all(e for x, e in his if x == v)
        if r.kind in _SUMMED:
            parts = []
            ok = True
            for p in (a, b):
                if p.total is not None:
                    parts.append(p.total)
                elif p.n > 0:
                    ok = False
            if ok:
                t = sum(parts) if parts else 0
                if r.kind in ("int", "string", "binary") and not _INT64_MIN <= t <= _INT64_MAX:
                    t = None             # overflow: ORC writers drop the sum too
                if r.kind == "decimal" and len(t.as_tuple().digits) > 38:
                    t = None
                r.total = t
        return r

    def encode(self) -> bytes:
        out = bytearray(pb_varint(1, self.n))
        if self.kind in _PLAIN_KINDS:
            num, codec, attrs = _PLAIN_KINDS[self.kind]
            out += pb_bytes(num, b"".join(_encode(codec, n2, getattr(self, attr))
                                          for n2, attr in attrs
                                          if getattr(self, attr) is not None))
        elif self.kind == "string":
            sub = bytearray()
            if self.lo is not None:
                sub += pb_bytes(1 if self.lo_exact else 4, self.lo)
            if self.hi is not None:
                sub += pb_bytes(2 if self.hi_exact else 5, self.hi)
            if self.total is not None:
                sub += pb_sint(3, self.total)
            out += pb_bytes(4, bytes(sub))
        elif self.kind == "bucket":
            packed = b"".join(encode_varint(c) for c in (self.counts or []))
            out += pb_bytes(5, pb_bytes(1, packed) if packed else b"")
        elif self.kind == "timestamp":
            sub = bytearray()
            for attr, (local_num, utc_num, nanos_num) in _TIMESTAMP_FIELDS:
                bound = getattr(self, attr)
                if bound is None:
                    continue
                utc, nanos, local = bound
                if local is not None:
                    sub += pb_sint(local_num, local)
                sub += pb_sint(utc_num, utc)
                if nanos:
                    sub += pb_varint(nanos_num, nanos)
            out += pb_bytes(9, bytes(sub))
        elif self.kind == "other" and self.other is not None:
            out += pb_bytes(*self.other)
        out += pb_varint(10, int(self.has_null))
        if self.bytes_on_disk is not None:
            out += pb_varint(11, self.bytes_on_disk)
        return bytes(out)


@dataclass
class EncodedPiece:
    """The parts of a complete in-memory ORC file the appending writer reuses."""
    data: bytes
    stripes: List[StripeInfo]
    types_raw: bytes                       # footer field-4 entries, verbatim
    stats: List[ColumnStats]
    stripe_stats_raw: List[bytes]          # Metadata field-1 entries, verbatim
    footer_extra_raw: bytes                # rowIndexStride, writer, calendar, softwareVersion
    ps_fields: list
    compression: int
    block_size: int

    @classmethod
    def parse(cls, data: bytes) -> "EncodedPiece":
        if len(data) < 4 or data[:3] != ORC_HEADER:
            raise OrcTailError("not an ORC file")
        ps_fields, vals, ps_len = read_postscript(data, "encoded stripes")
        footer_len = vals.get(1, 0)
        meta_len = vals.get(5, 0)
        compression = vals.get(2, 0)
        block_size = vals.get(3, 256 * 1024)
        footer_end = len(data) - 1 - ps_len
        footer = decompress(data[footer_end - footer_len:footer_end], compression)
        meta_start = footer_end - footer_len - meta_len
        meta = decompress(data[meta_start:meta_start + meta_len], compression)
        stripes, types, stats, extra = [], bytearray(), [], bytearray()
        for num, wt, val, raw in parse_fields(footer):
            if num == 3:
                stripes.append(StripeInfo.parse(val))
            elif num == 4:
                types += raw
            elif num == 7:
                stats.append(ColumnStats.parse(val))
            elif num in (8, 9, 11, 12):
                extra += raw
            elif num == 10:
                raise OrcTailError("encrypted ORC files are not supported")
        stripe_stats = [raw for num, _, _, raw in parse_fields(meta) if num == 1]
        return cls(data, stripes, bytes(types), stats, stripe_stats, bytes(extra), ps_fields,
                   compression, block_size)
