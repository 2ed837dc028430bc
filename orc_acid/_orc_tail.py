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
"""

from __future__ import annotations

import os
import zlib
from typing import Dict, List, Sequence, Tuple

_COMPRESSION = {0: "NONE", 1: "ZLIB", 2: "SNAPPY", 3: "LZO", 4: "LZ4", 5: "ZSTD"}


class OrcTailError(ValueError):
    pass


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
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


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf: bytes) -> List[Tuple[int, int, object, bytes]]:
    """-> list of (field number, wire type, value, raw bytes of the whole field)."""
    out = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = _varint(buf, pos)
        elif wt == 1:
            val = buf[pos:pos + 8]
            pos += 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
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


def _snappy_length(chunk: bytes) -> int:
    """Uncompressed length of a raw Snappy block (its varint preamble)."""
    return _varint(chunk, 0)[0]


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


def _decompress(data: bytes, kind: int) -> bytes:
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


class OrcTail:
    """The parsed tail of an ORC file."""

    def __init__(self, path: str):
        self.path = path
        size = os.path.getsize(path)
        if size < 4:
            raise OrcTailError(f"{path}: too short to be an ORC file")
        read = min(size, 16 * 1024 * 1024)
        with open(path, "rb") as fh:
            fh.seek(size - read)
            tail = fh.read(read)
        ps_len = tail[-1]
        ps = tail[-1 - ps_len:-1]
        self.ps_fields = _fields(ps)
        vals = {n: v for n, _, v, _ in self.ps_fields}
        if vals.get(8000) != b"ORC":
            raise OrcTailError(f"{path}: not an ORC file (no ORC magic in the postscript)")
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

    def footer_fields(self):
        return _fields(_decompress(self.footer_raw, self.compression))

    def stripe_row_counts(self) -> List[int]:
        counts = []
        for num, wt, val, _ in self.footer_fields():
            if num == 3 and wt == 2:
                rows = 0
                for n2, _, v2, _ in _fields(val):
                    if n2 == 5:
                        rows = v2
                counts.append(rows)
        return counts

    def user_metadata(self) -> Dict[str, bytes]:
        md = {}
        for num, wt, val, _ in self.footer_fields():
            if num == 5 and wt == 2:
                name = value = b""
                for n2, _, v2, _ in _fields(val):
                    if n2 == 1:
                        name = v2
                    elif n2 == 2:
                        value = v2
                md[name.decode("utf-8")] = value
        return md

    def append_user_metadata(self, items: Sequence[Tuple[str, bytes]]) -> None:
        """Rewrite the file tail in place with ``items`` added to the footer metadata."""
        payload = bytearray()
        for name, value in items:
            nb = name.encode("utf-8")
            item = b"\x0a" + _enc_varint(len(nb)) + nb + b"\x12" + _enc_varint(len(value)) + value
            payload += b"\x2a" + _enc_varint(len(item)) + item
        if self.compression == 0:
            extra = bytes(payload)
        else:
            extra = bytearray()
            step = max(1, min(self.block_size, (1 << 23) - 1))
            for i in range(0, len(payload), step):
                chunk = payload[i:i + step]
                h = (len(chunk) << 1) | 1
                extra += bytes((h & 0xFF, (h >> 8) & 0xFF, (h >> 16) & 0xFF)) + chunk
            extra = bytes(extra)
        new_footer_len = self.footer_length + len(extra)
        ps = bytearray()
        for num, wt, val, raw in self.ps_fields:
            if num == 1:
                ps += b"\x08" + _enc_varint(new_footer_len)
            else:
                ps += raw
        if not any(num == 1 for num, *_ in self.ps_fields):
            ps = bytearray(b"\x08" + _enc_varint(new_footer_len)) + ps
        if len(ps) > 255:
            raise OrcTailError(f"{self.path}: postscript would exceed 255 bytes")
        with open(self.path, "r+b") as fh:
            fh.seek(self.footer_end)
            fh.truncate()
            fh.write(extra)
            fh.write(bytes(ps))
            fh.write(bytes((len(ps),)))
