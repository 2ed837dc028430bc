"""Names of the directories and files of a Hive ACID table, and the bucket property codec.

Directory names (padding is a minimum width; bigger numbers simply get more digits):

* ``base_N`` / ``base_N_vT``                       (write ids ``%07d``, visibility txn ``%07d``)
* ``delta_MIN_MAX`` / ``delta_MIN_MAX_SSSS``       (statement id ``%04d``; none = streaming or
  minor compaction), optionally ``_vT``
* ``delete_delta_...`` with the same forms

File names:

* ``bucket_NNNNN`` with an optional ``_K`` attempt suffix (Hive 4 direct insert)
* ``bucket_NNNNN_flush_length``: streaming side file (not data)
* original (pre-ACID) files ``000000_0``, ``000000_0_copy_1``; bucket id = number before ``_``
* ``_orc_acid_version`` (content ``2``) and ``_metadata_acid`` (JSON, Hive 3 compacted base)
* anything else starting with ``_`` or ``.`` is hidden

Partition names and directories: ``k1=v1/k2=v2``, keys and values escaped as Hive's
``FileUtils.escapePathName`` does (``escape_path_name``), an empty or null value named
``__HIVE_DEFAULT_PARTITION__``; ``partition_dir_name`` makes one and
``parse_partition_name`` reads it back. This module is the project's one place for both (the
metastore, the streaming ingest client and ``spark`` use it).

Locations: ``location_path`` maps a metastore location (``file:/w/t/p=a%2Fb``) to the
directory on disk, or None when it is not on the local file system; every local-path
conversion in the project goes through it (``require_local_path`` for writers, which have
nowhere else to write).

No pyarrow import here (the metastore uses this module).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

__all__ = [
    "ACID_FORMAT_FILE", "METADATA_FILE", "SIDE_FILE_SUFFIX", "ORC_ACID_VERSION",
    "BASE_PREFIX", "DELTA_PREFIX", "DELETE_DELTA_PREFIX", "BUCKET_PREFIX",
    "MAX_BUCKET_ID", "MAX_STATEMENT_ID",
    "ParsedBaseName", "ParsedDeltaName", "ParsedBucketName", "ParsedOriginalName",
    "parse_base", "parse_delta", "parse_bucket_file", "parse_original_file",
    "format_base", "format_delta", "format_delete_delta", "format_bucket_file",
    "format_original_file", "is_hidden", "is_side_file", "side_file_for",
    "encode_bucket", "decode_bucket", "decode_writer_id", "decode_statement_id",
    "bucket_codec_version", "bucket_id_of_file", "location_path", "require_local_path",
    "LayoutError", "DEFAULT_PARTITION_NAME", "escape_path_name", "unescape_path_name",
    "partition_dir_name", "parse_partition_name",
]

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
BUCKET_PREFIX = "bucket_"
VISIBILITY_PREFIX = "_v"
SIDE_FILE_SUFFIX = "_flush_length"
ACID_FORMAT_FILE = "_orc_acid_version"
METADATA_FILE = "_metadata_acid"
ORC_ACID_VERSION = 2

MAX_BUCKET_ID = 4095
MAX_STATEMENT_ID = 4095


class LayoutError(ValueError):
    """A name or value that is not a valid ACID layout form."""


_BASE_RE = re.compile(r"base_([0-9]+)(?:_v([0-9]+))?\Z")
_DELTA_RE = re.compile(r"(delete_delta|delta)_([0-9]+)_([0-9]+)(?:_([0-9]+))?(?:_v([0-9]+))?\Z")
_BUCKET_RE = re.compile(r"bucket_([0-9]+)(?:_([0-9]+))?\Z")
_ORIGINAL_RE = re.compile(r"([0-9]+)_([0-9]+)(?:_copy_([0-9]+))?\Z")


@dataclass(frozen=True)
class ParsedBaseName:
    write_id: int
    visibility_txn_id: int = 0  # 0: no _v suffix (always visible)

    @property
    def name(self) -> str:
        return format_base(self.write_id, self.visibility_txn_id)


@dataclass(frozen=True)
class ParsedDeltaName:
    min_write_id: int
    max_write_id: int
    statement_id: Optional[int] = None  # None: no statement id (streaming / minor compacted)
    visibility_txn_id: int = 0
    is_delete: bool = False

    @property
    def name(self) -> str:
        f = format_delete_delta if self.is_delete else format_delta
        return f(self.min_write_id, self.max_write_id, self.statement_id, self.visibility_txn_id)

    @property
    def sort_statement_id(self) -> int:
        """Hive orders 'no statement id' as -1 (before statement 0)."""
        return -1 if self.statement_id is None else self.statement_id


@dataclass(frozen=True)
class ParsedBucketName:
    bucket_id: int
    attempt: Optional[int] = None

    @property
    def name(self) -> str:
        return format_bucket_file(self.bucket_id, self.attempt)


@dataclass(frozen=True)
class ParsedOriginalName:
    bucket_id: int
    task_attempt: int
    copy: Optional[int] = None

    @property
    def name(self) -> str:
        return format_original_file(self.bucket_id, self.task_attempt, self.copy)


def _last(name: str) -> str:
    name = name.rstrip("/")
    return name.rsplit("/", 1)[-1]


def parse_base(name: str) -> Optional[ParsedBaseName]:
    """``base_N[_vT]`` -> ParsedBaseName, anything else -> None. Accepts a path."""
    m = _BASE_RE.match(_last(name))
    if not m:
        return None
    return ParsedBaseName(int(m.group(1)), int(m.group(2)) if m.group(2) else 0)


def parse_delta(name: str) -> Optional[ParsedDeltaName]:
    """``[delete_]delta_MIN_MAX[_STMT][_vT]`` -> ParsedDeltaName, anything else -> None."""
    m = _DELTA_RE.match(_last(name))
    if not m:
        return None
    return ParsedDeltaName(
        min_write_id=int(m.group(2)),
        max_write_id=int(m.group(3)),
        statement_id=int(m.group(4)) if m.group(4) is not None else None,
        visibility_txn_id=int(m.group(5)) if m.group(5) else 0,
        is_delete=m.group(1) == "delete_delta",
    )


def parse_bucket_file(name: str) -> Optional[ParsedBucketName]:
    """``bucket_N[_K]`` -> ParsedBucketName; side files and other names -> None."""
    m = _BUCKET_RE.match(_last(name))
    if not m:
        return None
    return ParsedBucketName(int(m.group(1)), int(m.group(2)) if m.group(2) else None)


def parse_original_file(name: str) -> Optional[ParsedOriginalName]:
    """``000000_0`` / ``000000_0_copy_1`` -> ParsedOriginalName, anything else -> None."""
    m = _ORIGINAL_RE.match(_last(name))
    if not m:
        return None
    return ParsedOriginalName(int(m.group(1)), int(m.group(2)),
                              int(m.group(3)) if m.group(3) else None)


def bucket_id_of_file(name: str) -> int:
    """Bucket (writer) id a data file belongs to, from its name.

    ``bucket_N[_K]`` -> N; original ``N_K[_copy_C]`` -> N; any other name -> 0 (Hive gives
    such unbucketed, oddly named original files bucket id -1 internally and encodes them as
    bucket 0 in the synthetic ROW__ID; we use 0 directly)."""
    b = parse_bucket_file(name)
    if b is not None:
        return b.bucket_id
    o = parse_original_file(name)
    if o is not None:
        return o.bucket_id
    return 0


def _check_nonneg(v: int, what: str) -> int:
    v = int(v)
    if v < 0:
        raise LayoutError(f"{what} must be >= 0, got {v}")
    return v


def format_base(write_id: int, visibility_txn_id: int = 0) -> str:
    s = f"base_{_check_nonneg(write_id, 'write id'):07d}"
    if visibility_txn_id:
        s += f"_v{_check_nonneg(visibility_txn_id, 'visibility txn id'):07d}"
    return s


def _delta(prefix: str, lo: int, hi: int, stmt: Optional[int], vis: int) -> str:
    lo = _check_nonneg(lo, "min write id")
    hi = _check_nonneg(hi, "max write id")
    if hi < lo:
        raise LayoutError(f"max write id {hi} < min write id {lo}")
    s = f"{prefix}{lo:07d}_{hi:07d}"
    if stmt is not None and stmt >= 0:
        s += f"_{int(stmt):04d}"
    if vis:
        s += f"_v{_check_nonneg(vis, 'visibility txn id'):07d}"
    return s


def format_delta(min_write_id: int, max_write_id: int, statement_id: Optional[int] = None,
                 visibility_txn_id: int = 0) -> str:
    """``delta_%07d_%07d[_%04d][_v%07d]``; statement None (or -1) writes no statement id."""
    return _delta(DELTA_PREFIX, min_write_id, max_write_id, statement_id, visibility_txn_id)


def format_delete_delta(min_write_id: int, max_write_id: int,
                        statement_id: Optional[int] = None, visibility_txn_id: int = 0) -> str:
    return _delta(DELETE_DELTA_PREFIX, min_write_id, max_write_id, statement_id,
                  visibility_txn_id)


def format_bucket_file(bucket_id: int, attempt: Optional[int] = None) -> str:
    s = f"bucket_{_check_nonneg(bucket_id, 'bucket id'):05d}"
    if attempt is not None:
        s += f"_{_check_nonneg(attempt, 'attempt'):d}"
    return s


def format_original_file(bucket_id: int, task_attempt: int = 0, copy: Optional[int] = None) -> str:
    s = f"{_check_nonneg(bucket_id, 'bucket id'):06d}_{_check_nonneg(task_attempt, 'attempt')}"
    if copy is not None:
        s += f"_copy_{_check_nonneg(copy, 'copy number')}"
    return s


def is_side_file(name: str) -> bool:
    return _last(name).endswith(SIDE_FILE_SUFFIX)


def side_file_for(data_file_name: str) -> str:
    return data_file_name + SIDE_FILE_SUFFIX


def is_hidden(name: str) -> bool:
    """Hidden per Hive's filter: leading ``_`` or ``.`` (the two ACID marker files included;
    callers that care about them test for them by name first)."""
    n = _last(name)
    return n.startswith("_") or n.startswith(".")


# -- BucketCodec ---------------------------------------------------------------------------

def bucket_codec_version(value: int) -> int:
    return (int(value) & 0xFFFFFFFF) >> 29


def encode_bucket(bucket_id: int, statement_id: int = 0, version: int = 1) -> int:
    """Bucket property of a ROW__ID. V1: ``1<<29 | bucket<<16 | statement``; V0: bucket."""
    bucket_id = int(bucket_id)
    statement_id = int(statement_id)
    if version == 0:
        if bucket_id < 0:
            raise LayoutError(f"bucket id must be >= 0, got {bucket_id}")
        return bucket_id
    if version != 1:
        raise LayoutError(f"unknown BucketCodec version {version}")
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise LayoutError(f"bucket id {bucket_id} outside 0..{MAX_BUCKET_ID}")
    if not 0 <= statement_id <= MAX_STATEMENT_ID:
        raise LayoutError(f"statement id {statement_id} outside 0..{MAX_STATEMENT_ID}")
    return (1 << 29) | (bucket_id << 16) | statement_id


def decode_bucket(value: int):
    """-> (version, bucket_id, statement_id)."""
    value = int(value)
    version = bucket_codec_version(value)
    if version == 0:
        return 0, value, 0
    if version == 1:
        return 1, (value & 0x0FFF0000) >> 16, value & 0x0FFF
    raise LayoutError(f"bucket property {value} has unknown BucketCodec version {version}")


def decode_writer_id(value: int) -> int:
    return decode_bucket(value)[1]


def decode_statement_id(value: int) -> int:
    return decode_bucket(value)[2]


DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

# Characters Hive escapes in partition path components (FileUtils.escapePathName, on other
# systems than Windows): control characters and "#%'*/:=?\\{[]^ and DEL. Everything else,
# non-ASCII letters included, stays as it is.
_ESCAPED = frozenset(chr(c) for c in range(0x01, 0x20)) | frozenset('"#%\'*/:=?\\\x7f{[]^')
_NEEDS_ESCAPE = re.compile("[" + re.escape("".join(sorted(_ESCAPED))) + "]")


def escape_path_name(value: Optional[str]) -> str:
    """A partition key or value as it appears in a partition's name and directory."""
    if not value:
        return DEFAULT_PARTITION_NAME
    if not _NEEDS_ESCAPE.search(value):  # the common case, on hot paths
        return value
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def unescape_path_name(text: str) -> str:
    """The inverse of ``escape_path_name`` (a ``%`` not followed by two hex digits stays)."""
    if "%" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and i + 2 < len(text):
            try:
                out.append(chr(int(text[i + 1:i + 3], 16)))
                i += 3
                continue
            except ValueError:
                pass
        out.append(ch)
        i += 1
    return "".join(out)


def partition_dir_name(keys, values) -> str:
    """``k1=v1/k2=v2``: a partition's name, and its directory under the table's."""
    return "/".join(f"{escape_path_name(k)}={escape_path_name(v)}"
                    for k, v in zip(keys, values))


def parse_partition_name(name: str) -> List[Tuple[str, str]]:
    """The inverse of ``partition_dir_name``: ``[(key, value), ...]``, unescaped (the
    default partition's name stays as it is). LayoutError for a component without ``=``."""
    pairs = []
    for component in name.split("/"):
        key, eq, value = component.partition("=")
        if not eq:
            raise LayoutError(f"invalid partition name {name!r}: expected key=value components")
        pairs.append((unescape_path_name(key), unescape_path_name(value)))
    return pairs


_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def location_path(location: Optional[str]) -> Optional[str]:
    """The local directory a table or partition location names, or None when it is not on
    the local file system (another scheme such as ``hdfs:``, or ``file://otherhost/``).

    A location is what Hadoop's ``Path.toString`` gives, not an encoded URI: the text after
    ``file:`` is the path on disk. So the escapes in a partition name (``p=a%2Fb`` for the
    value ``a/b``) are part of the directory's name and stay; decoding them would name a
    different directory (``p=a/b``)."""
    if not location:
        return None
    path = location
    if location.startswith("file:"):
        path = location[len("file:"):]
        if path.startswith("//"):               # file://authority/path
            authority, _, rest = path[2:].partition("/")
            if authority not in ("", "localhost"):
                return None
            path = "/" + rest
    elif _URI_SCHEME.match(location):
        return None
    return path or None


def require_local_path(location: str) -> str:
    """``location_path`` for code that must write there: LayoutError when ``location`` is
    not on the local file system."""
    path = location_path(location)
    if path is None:
        raise LayoutError(f"{location!r} is not a location on the local file system")
    return path
