"""Minimal ORC file-tail handling: read stripe row counts, append footer user metadata.

Why this exists: pyarrow's ORC writer (ORC C++) is fast and columnar but cannot set footer
user metadata, which Hive needs (``hive.acid.key.index`` etc.). The alternatives were the
``pyorc`` package (it can set user metadata, but it takes rows as Python objects: per-row
Python, orders of magnitude slower on large files) or the Java writer (needs a JVM). So the
writer produces the file with pyarrow and then rewrites only the tail:

    ... stripes ... | stripe statistics | Footer | PostScript | 1 byte PostScript length

The Footer is a protobuf message (``metadata`` = repeated field 5 of UserMetadataItem
{1: name, 2: value}), stored as a compressed stream of chunks, each with a 3-byte header
``length << 1 | isOriginal``. Protobuf merges a message serialized in several pieces, and a
compressed ORC stream is the concatenation of its chunks, so appending one *uncompressed*
("original") chunk holding the new field-5 entries to the footer is a valid footer with the
metadata added -- no need to decompress or re-encode what pyarrow wrote. The PostScript is
then rewritten with the new footer length (every other field copied verbatim). Stripe data
is never touched.

Reading the stripe row counts (for the one-key-per-stripe ``hive.acid.key.index``) needs
the footer decompressed: NONE, ZLIB, SNAPPY, LZ4 and ZSTD are supported, which covers what
our writer produces (SNAPPY/LZ4/ZSTD through pyarrow's codecs, given the chunk's
uncompressed length: Snappy's varint preamble, a walk over the LZ4 block's sequences, the
Zstandard frame header).

The protobuf and chunk helpers here are also what the streaming writer
(``orc_acid.streaming_writer``, ``orc_acid._orc_footer``) encodes its own tails with.
"""

from __future__ import annotations

import os
import zlib
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

_COMPRESSION = {0: "NONE", 1: "ZLIB", 2: "SNAPPY", 3: "LZO", 4: "LZ4", 5: "ZSTD"}


class OrcTailError(ValueError):
    pass


# -- protobuf wire format ----------------------------------------------------------------

def read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
    """-> (value, position after it)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise OrcTailError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise OrcTailError("bad varint")


def encode_varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def parse_fields(buf: bytes) -> List[Tuple[int, int, object, bytes]]:
    """-> list of (field number, wire type, value, raw bytes of the whole field)."""
    out = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = read_varint(buf, pos)
        elif wt == 1:
            val = buf[pos:pos + 8]
            pos += 8
        elif wt == 2:
            ln, pos = read_varint(buf, pos)
            val = buf[pos:pos + ln]
            pos += ln
        elif wt == 5:
            val = buf[pos:pos + 4]
            pos += 4
        else:
            raise OrcTailError(f"unsupported protobuf wire type {wt}")
        if pos > len(buf):
            raise OrcTailError("truncated protobuf message")
        out.append((num, wt, val, buf[start:pos]))
    return out


def _key(num: int, wire_type: int) -> bytes:
    return encode_varint((num << 3) | wire_type)


def pb_varint(num: int, v: int) -> bytes:
    return _key(num, 0) + encode_varint(v)


def pb_bytes(num: int, b: bytes) -> bytes:
    return _key(num, 2) + encode_varint(len(b)) + b


def zigzag_encode(v: int) -> int:
    return (v << 1) if v >= 0 else ((-v) << 1) - 1


def zigzag_decode(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def pb_sint(num: int, v: int) -> bytes:
    return pb_varint(num, zigzag_encode(v))


def pb_double(num: int, v: float) -> bytes:
    return _key(num, 1) + struct.pack("<d", v)


# -- compression chunks ------------------------------------------------------------------

def original_chunks(payload: bytes, compression: int, block_size: int) -> bytes:
    """``payload`` as a stream of the file's compression made of uncompressed ("original")
    chunks, which every ORC reader accepts for any codec (the payload itself when the file
    is not compressed)."""
    if compression == 0:
        return bytes(payload)
    out = bytearray()
    step = max(1, min(block_size, (1 << 23) - 1))
    for i in range(0, len(payload), step):
        chunk = payload[i:i + step]
        h = (len(chunk) << 1) | 1
        out += bytes((h & 0xFF, (h >> 8) & 0xFF, (h >> 16) & 0xFF)) + chunk
    return bytes(out)


def _snappy_length(chunk: bytes) -> int:
    """Uncompressed length of a raw Snappy block (its varint preamble)."""
    return read_varint(chunk, 0)[0]


def _lz4_length(chunk: bytes) -> int:
    """Uncompressed length of a raw LZ4 block (ORC's LZ4 has no frame), by walking its
    sequences: token, literal length, literals, 2-byte offset, match length."""
    pos, out, end = 0, 0, len(chunk)
    while pos < end:
        token = chunk[pos]
        pos += 1
        lit, pos = _lz4_count(chunk, pos, end, token >> 4)
        pos += lit
        out += lit
        if pos >= end:          # the last sequence has literals only
            break
        pos += 2
        match, pos = _lz4_count(chunk, pos, end, token & 15)
        out += match + 4
    return out


def _lz4_count(chunk: bytes, pos: int, end: int, count: int) -> tuple:
    """A token's 4-bit count and, when it is 15, the extension bytes after it (each added,
    until one below 255) -> (count, position after them)."""
    if count != 15:
        return count, pos
    while True:
        if pos >= end:
            raise OrcTailError("truncated LZ4 block")
        b = chunk[pos]
        pos += 1
        count += b
        if b != 255:
            return count, pos


def _zstd_length(chunk: bytes) -> int:
    """Frame content size from a Zstandard frame header (ORC's writer records it)."""
    if len(chunk) < 6 or chunk[:4] != b"\x28\xb5\x2f\xfd":
        raise OrcTailError("not a Zstandard frame")
    fhd = chunk[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if size == 0:
        raise OrcTailError("Zstandard frame without its content size")
    v = int.from_bytes(chunk[pos:pos + size], "little")
    return v + 256 if size == 2 else v


def _decompress_chunk(chunk: bytes, kind: int) -> bytes:
    if kind == 1:
        return zlib.decompress(chunk, -15)
    import pyarrow as pa
    if kind == 2:
        return pa.decompress(chunk, _snappy_length(chunk), codec="snappy", asbytes=True)
    if kind == 4:
        return pa.decompress(chunk, _lz4_length(chunk), codec="lz4_raw", asbytes=True)
    if kind == 5:
        try:
            import zstandard
        except ImportError:
            return pa.decompress(chunk, _zstd_length(chunk), codec="zstd", asbytes=True)
        return zstandard.ZstdDecompressor().decompressobj().decompress(chunk)
    raise OrcTailError(f"cannot decompress {_COMPRESSION.get(kind, kind)} footer")


def decompress(data: bytes, kind: int) -> bytes:
    """A compressed ORC stream (chunks with 3-byte headers) decompressed."""
    if kind == 0:
        return data
    out = bytearray()
    pos = 0
    while pos < len(data):
        if pos + 3 > len(data):
            raise OrcTailError("truncated compression chunk header")
        h = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        pos += 3
        ln = h >> 1
        chunk = data[pos:pos + ln]
        pos += ln
        if h & 1:
            out += chunk
        else:
            try:
                out += _decompress_chunk(chunk, kind)
            except OrcTailError:
                raise
            except Exception as e:   # a codec error (corrupt chunk, codec not built in)
                raise OrcTailError(f"{_COMPRESSION.get(kind, kind)} footer chunk: {e}") from e
    return bytes(out)


def read_postscript(data: bytes, what: str) -> Tuple[list, dict, int]:
    """(fields, {field number: value}, length) of the PostScript ending ``data`` (an ORC
    file or its tail); OrcTailError naming ``what`` when it has no ORC magic."""
    ps_len = data[-1]
    fields = parse_fields(data[-1 - ps_len:-1])
    values = {n: v for n, _, v, _ in fields}
    if values.get(8000) != b"ORC":
        raise OrcTailError(f"{what}: not an ORC file (no ORC magic in the postscript)")
    return fields, values, ps_len


def postscript_with(ps_fields: list, replaced: Dict[int, Optional[int]], what: str) -> bytes:
    """A PostScript with the varint fields ``replaced`` (number -> value; added when absent,
    a value of None drops the field) and every other field copied verbatim; a field 1
    (footer length) goes first, as ORC writers put it."""
    out = bytearray()
    for num, _, _, raw in ps_fields:
        if num not in replaced:
            out += raw
        elif replaced[num] is not None:
            out += pb_varint(num, replaced[num])
    present = {num for num, *_ in ps_fields}
    for num, value in replaced.items():
        if num not in present and value is not None:
            out = bytearray(pb_varint(num, value)) + out if num == 1 else \
                out + pb_varint(num, value)
    if len(out) > 255:
        raise OrcTailError(f"{what}: postscript would exceed 255 bytes")
    return bytes(out)


@dataclass
class StripeInfo:
    """One footer StripeInformation: where a stripe is and how many rows it holds."""
    offset: int
    index_length: int
    data_length: int
    footer_length: int
    rows: int

    @classmethod
    def parse(cls, msg: bytes) -> "StripeInfo":
        v = {n: x for n, _, x, _ in parse_fields(msg)}
        return cls(v.get(1, 0), v.get(2, 0), v.get(3, 0), v.get(4, 0), v.get(5, 0))

    @property
    def length(self) -> int:
        return self.index_length + self.data_length + self.footer_length

    def encode(self, shift: int) -> bytes:
        """The message with the stripe moved ``shift`` bytes further into the file."""
        return (pb_varint(1, self.offset + shift) + pb_varint(2, self.index_length)
                + pb_varint(3, self.data_length) + pb_varint(4, self.footer_length)
                + pb_varint(5, self.rows))


class OrcTail:
    """The parsed tail of an ORC file (on disk: ``OrcTail(path)``; in memory:
    ``OrcTail.of_bytes(data)``)."""

    def __init__(self, path: str, data: Optional[bytes] = None):
        self.path = path
        self.data = data
        size = len(data) if data is not None else os.path.getsize(path)
        if size < 4:
            raise OrcTailError(f"{path}: too short to be an ORC file")
        read = min(size, 64 * 1024)    # usually all of the footer; else read again

        def last(n: int) -> bytes:
            if data is not None:
                return bytes(data[size - n:])
            with open(path, "rb") as fh:
                fh.seek(size - n)
                return fh.read(n)

        tail = last(read)
        self.ps_fields, vals, ps_len = read_postscript(tail, path)
        if vals.get(1, 0) + ps_len + 1 > read and read < size:
            tail = last(min(size, vals.get(1, 0) + ps_len + 1))
        self.footer_length = vals.get(1, 0)
        self.compression = vals.get(2, 0)
        self.block_size = vals.get(3, 256 * 1024)
        self.size = size
        self.footer_end = size - 1 - ps_len
        self.footer_start = self.footer_end - self.footer_length
        off = len(tail) - 1 - ps_len - self.footer_length
        if off < 0:
            raise OrcTailError(f"{path}: footer larger than expected")
        self.footer_raw = tail[off:off + self.footer_length]

    @classmethod
    def of_bytes(cls, data: bytes, what: str = "<memory>") -> "OrcTail":
        return cls(what, data)

    def footer_fields(self):
        return parse_fields(decompress(self.footer_raw, self.compression))

    def stripe_row_counts(self) -> List[int]:
        return [StripeInfo.parse(val).rows for num, wt, val, _ in self.footer_fields()
                if num == 3 and wt == 2]

    def user_metadata(self) -> Dict[str, bytes]:
        md = {}
        for num, wt, val, _ in self.footer_fields():
            if num == 5 and wt == 2:
                name = value = b""
                for n2, _, v2, _ in parse_fields(val):
                    if n2 == 1:
                        name = v2
                    elif n2 == 2:
                        value = v2
                md[name.decode("utf-8")] = value
        return md

    def _new_tail(self, items: Sequence[Tuple[str, bytes]]) -> bytes:
        payload = b"".join(pb_bytes(5, user_metadata_item(name, value))
                           for name, value in items)
        extra = original_chunks(payload, self.compression, self.block_size)
        ps = postscript_with(self.ps_fields, {1: self.footer_length + len(extra)}, self.path)
        return extra + ps + bytes((len(ps),))

    def tail_with_user_metadata(self, items: Sequence[Tuple[str, bytes]]) -> bytes:
        """What replaces the file's bytes from ``footer_end`` on to add ``items`` to the
        footer metadata (a file on disk is rewritten in place: truncate, append)."""
        return self._new_tail(items)

    def with_user_metadata(self, items: Sequence[Tuple[str, bytes]]) -> bytes:
        """The in-memory file (``of_bytes``) with ``items`` added to the footer metadata."""
        return bytes(self.data[:self.footer_end]) + self._new_tail(items)


def user_metadata_item(name: str, value: bytes) -> bytes:
    """A footer UserMetadataItem {1: name, 2: value}."""
    return pb_bytes(1, name.encode("utf-8")) + pb_bytes(2, value)
