"""Opening the files of a table directory: ORC (whole, or a streaming file's flushed prefix)
and Parquet, on the local file system or any ``pyarrow.fs``; and what their schemas say.

* A data file with a ``_flush_length`` side file (a streaming file still being written) is
  read up to the last length recorded there: that prefix is a complete ORC file. A side
  file deleted since the listing means the writer closed the file: it is read whole.
* An ORC file "has the ACID event schema" when its six top-level columns are, case
  insensitively, ``operation, originalTransaction, bucket, rowId, currentTransaction, row``
  with ``row`` a struct (some writers produce lower-case names).
* Table columns found in files named ``_col0, _col1, ...`` (Hive's positional names) count
  only when no file has the real names.
"""

from __future__ import annotations

import io
from typing import List, Optional, Sequence

import pyarrow as pa
import pyarrow.orc as orc

from .layout import SIDE_FILE_SUFFIX, parse_base, parse_delta
from .fs import can_rename, file_size, read_bytes
from .snapshot import list_table_dir, resolve_filesystem

__all__ = ["OrcAcidError", "AcidSchemaError", "TableFiles", "flush_lengths", "cast_column",
           "acid_column_names", "row_fields", "looks_positional", "infer_row_schema",
           "schema_from_any_file"]

# ORC files up to this size are read from an object store in one request
WHOLE_OBJECT_READ_MAX = 128 * 1024 * 1024

_ACID_LOWER = ("operation", "originaltransaction", "bucket", "rowid", "currenttransaction",
               "row")


class OrcAcidError(Exception):
    """A file or directory that cannot be read as the ACID table it should be."""


class AcidSchemaError(OrcAcidError):
    """An ACID directory holds a file without the ACID event schema (or vice versa)."""


class TableFiles:
    """The files under one table (or partition) directory, by path relative to it."""

    def __init__(self, location: str, filesystem=None):
        self.fs, root = resolve_filesystem(location, filesystem)
        self.root = root.rstrip("/") if root != "/" else root

    def full(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def read_bytes(self, rel: str) -> bytes:
        return read_bytes(self.fs, self.full(rel))

    def size(self, rel: str) -> int:
        return file_size(self.fs, self.full(rel))

    def read_prefix(self, rel: str, length: int) -> bytes:
        p = self.full(rel)
        if self.fs is None:
            with open(p, "rb") as fh:
                return fh.read(length)
        with self.fs.open_input_file(p) as fh:
            return fh.read(length)

    def flushed_length(self, rel: str, side_file: Optional[str]) -> Optional[int]:
        """How much of a data file to read: -1 all of it (no side file, or one deleted since
        the listing: the writer closed the file), 0 nothing (nothing flushed yet: length 0
        or an empty side file), else the last length its side file records."""
        if side_file is None:
            return -1
        try:
            lengths = flush_lengths(self.read_bytes(side_file))
        except FileNotFoundError:
            return -1
        return lengths[-1] if lengths else 0

    def open_input(self, rel: str, side_file: Optional[str] = None,
                   whole_object_max: int = 0) -> Optional[pa.NativeFile]:
        """The data file as a random-access file read in ranges as a reader goes (bounded
        memory, unlike :meth:`open_orc` on object stores); a streaming file's flushed prefix
        as a file of that length; on object stores a file of at most ``whole_object_max``
        bytes is read in one request. None when nothing was flushed yet."""
        p = self.full(rel)
        length = self.flushed_length(rel, side_file)
        if length == 0:
            return None
        try:
            f = pa.OSFile(p) if self.fs is None else self.fs.open_input_file(p)
            size = f.size()
            if 0 < length < size:
                return pa.PythonFile(_Prefix(f, length), mode="r")
            if self.fs is not None and not can_rename(self.fs) and size <= whole_object_max:
                data = f.read()
                f.close()
                return pa.BufferReader(data)
            return f
        except FileNotFoundError:
            raise
        except (pa.ArrowException, OSError, ValueError) as e:
            raise OrcAcidError(f"{p}: not a readable file ({e})") from e

    def orc_footer(self, rel: str, side_file: Optional[str] = None) -> Optional[orc.ORCFile]:
        """The ORC file's footer only (schema, row count, statistics: read in ranges, the
        file closed again; no data can be read from it); None when nothing was flushed."""
        src = self.open_input(rel, side_file)
        if src is None:
            return None
        try:
            return orc.ORCFile(src)
        except FileNotFoundError:
            raise
        except (pa.ArrowException, OSError, ValueError) as e:
            raise OrcAcidError(f"{self.full(rel)}: not a readable ORC file ({e})") from e
        finally:
            src.close()

    def open_orc(self, rel: str, side_file: Optional[str] = None) -> Optional[orc.ORCFile]:
        """The ORC file, or for a streaming file with a side file its flushed prefix; None
        when nothing was flushed yet (length 0, or an empty side file)."""
        p = self.full(rel)
        try:
            if side_file is not None:
                length = self.flushed_length(rel, side_file)
                if length == 0:
                    return None
                if 0 < length < self.size(rel):
                    return orc.ORCFile(pa.BufferReader(self.read_prefix(rel, length)))
            if self.fs is None:
                return orc.ORCFile(p)
            if not can_rename(self.fs):
                # object stores: one GET for a whole file instead of one per ORC stream
                # read (each a round trip); big files are read in ranges as they go
                f = self.fs.open_input_file(p)
                if f.size() <= WHOLE_OBJECT_READ_MAX:
                    return orc.ORCFile(pa.BufferReader(f.read()))
                return orc.ORCFile(f)
            return orc.ORCFile(self.fs.open_input_file(p))
        except FileNotFoundError:
            raise
        except (pa.ArrowException, OSError, ValueError) as e:
            raise OrcAcidError(f"{p}: not a readable ORC file ({e})") from e

    def is_parquet(self, rel: str) -> bool:
        p = self.full(rel)
        if self.fs is None:
            with open(p, "rb") as fh:
                return fh.read(4) == b"PAR1"
        with self.fs.open_input_file(p) as fh:
            return fh.read(4) == b"PAR1"

    def parquet_schema(self, rel: str) -> pa.Schema:
        import pyarrow.parquet as pq     # only insert-only tables have Parquet files
        return pq.read_schema(self.full(rel), filesystem=self.fs).remove_metadata()


class _Prefix(io.RawIOBase):
    """The first ``length`` bytes of a random-access file, as a file of that size."""

    def __init__(self, f: pa.NativeFile, length: int):
        self.f = f
        self.length = length
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.length}[whence]
        self.pos = max(0, min(self.length, base + offset))
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, b) -> int:
        n = max(0, min(len(b), self.length - self.pos))
        data = self.f.read_at(n, self.pos) if n else b""
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)

    def close(self) -> None:
        self.f.close()
        super().close()


def cast_column(col, to: pa.DataType, what: str):
    """A file's column (array or chunked) as the table's type; AcidSchemaError naming
    ``what`` (the file and the column) when it cannot be cast."""
    if col.type == to:
        return col
    try:
        return col.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise AcidSchemaError(f"{what} has type {col.type}, table says {to}: {e}") from e


def flush_lengths(side: bytes) -> List[int]:
    """The lengths recorded in a side file's bytes (8-byte big-endian each; a torn last
    entry, from a writer that crashed while appending it, is ignored)."""
    return [int.from_bytes(side[i:i + 8], "big", signed=True)
            for i in range(0, len(side) - len(side) % 8, 8)]


def acid_column_names(schema: pa.Schema) -> Optional[dict]:
    """lower-case ACID column name -> the file's column name; None when ``schema`` is not
    the ACID event schema."""
    names = schema.names
    if len(names) != 6 or tuple(n.lower() for n in names) != _ACID_LOWER:
        return None
    if not pa.types.is_struct(schema.field(5).type):
        return None
    return {n.lower(): n for n in names}


def row_fields(f: orc.ORCFile, acid: bool) -> List[pa.Field]:
    """The table columns a file holds: the fields of ``row`` in an ACID file, else its
    top-level columns."""
    if acid:
        return list(f.schema.field(5).type)
    return list(f.schema)


def looks_positional(fields: Sequence[pa.Field]) -> bool:
    """Hive's positional names ``_col0, _col1, ...`` instead of the table's."""
    return bool(fields) and all(
        fl.name.startswith("_col") and fl.name[4:].isdigit() for fl in fields)


def infer_row_schema(location: str, splits, filesystem=None) -> Optional[pa.Schema]:
    """Table columns as stored in the files of ``splits`` (``orc_acid.Split``s): the first
    file whose fields are not ``_colN``, else the first file's."""
    files = TableFiles(location, filesystem)
    first = None
    for sp in splits:
        for df in sp.data_files:
            if df.kind == "insert_only" and files.is_parquet(df.path):
                fields = list(files.parquet_schema(df.path))
            else:
                f = files.open_orc(df.path, df.side_file)
                if f is None:  # streaming file with nothing flushed yet
                    continue
                acid = acid_column_names(f.schema) is not None and df.kind in ("base", "delta")
                fields = row_fields(f, acid)
            if first is None:
                first = fields
            if not looks_positional(fields):
                return pa.schema(fields)
    return None if first is None else pa.schema(first)


def schema_from_any_file(location: str, filesystem, insert_only: bool) -> Optional[pa.Schema]:
    """When a snapshot selects no file, the table columns of the newest data file in any
    base/delta directory (obsolete, aborted or invisible ones included): reading an empty
    snapshot still yields the table's columns."""
    candidates = []
    for rel in list_table_dir(location, filesystem):
        if rel.endswith("/") or rel.count("/") != 1:
            continue
        d, name = rel.split("/")
        pd = parse_delta(d)
        pb = parse_base(d)
        if (pd is None or pd.is_delete) and pb is None:
            continue
        if name.startswith(("_", ".")) or name.endswith(SIDE_FILE_SUFFIX):
            continue
        top = pb.write_id if pb is not None else pd.max_write_id
        candidates.append((top, rel))
    files = TableFiles(location, filesystem)
    for _, rel in sorted(candidates, reverse=True):
        try:
            if insert_only and files.is_parquet(rel):
                return files.parquet_schema(rel)
            f = files.open_orc(rel)
        except (OrcAcidError, OSError):
            continue
        acid = acid_column_names(f.schema) is not None and not insert_only
        fields = row_fields(f, acid)
        if fields and not looks_positional(fields):
            return pa.schema(fields)
    return None
