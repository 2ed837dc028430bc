"""Snapshot id lists in the string forms of Hive's storage-api.

Three immutable value classes, each with ``parse(str)`` and ``__str__`` that reproduce the
Java classes' ``readFromString`` / ``writeToString`` byte for byte:

* :class:`ValidTxnList` -- ``<hwm>:<minOpenTxn>:<open csv>:<aborted csv>``
  (``hive.txn.valid.txns``, Java ``ValidReadTxnList``)
* :class:`ValidWriteIdList` -- ``<db.table>:<hwm>:<minOpenWriteId>:<open csv>:<aborted csv>``
  (``hive.txn.valid.writeids``, Java ``ValidReaderWriteIdList``)
* :class:`ValidTxnWriteIdList` -- ``<txnId>$<ValidWriteIdList>$<ValidWriteIdList>...``
  (``hive.txn.tables.valid.writeids``, Java ``ValidTxnWriteIdList``)

Rules mirrored from the Java code (and checked against it in the tests):

* Fields are split on ``:`` with Java ``String.split`` semantics (trailing empty fields are
  dropped), so ``10:9223372036854775807::`` and ``10:9223372036854775807`` parse alike; both
  separators after the min-open field are always written back.
* "No min open id" is stored and written as ``9223372036854775807`` (Java Long.MAX_VALUE).
  Building a list without exceptions always writes that value; a parsed string keeps what it
  said (so a list round trips unchanged).
* An empty string parses to "everything valid": hwm = Long.MAX_VALUE, no exceptions, and (for
  write id lists) no table name, written back as ``null``.
* A table name spelled ``null`` (any case) means no table name.
* Open and aborted ids are merged into one sorted exception array; an id is valid when it is
  <= hwm and not an exception. Range answers follow Java's counting exactly, including the
  ids above the high watermark.

This module has no dependencies and no pyarrow import: the metastore imports it too.
"""

from __future__ import annotations

import enum
import re
from bisect import bisect_left, bisect_right
from typing import Iterable, Mapping, Optional, Sequence, Tuple

__all__ = [
    "LONG_MAX",
    "RangeResponse",
    "ValidIdListError",
    "ValidTxnList",
    "ValidWriteIdList",
    "ValidTxnWriteIdList",
    "as_valid_write_ids",
    "as_valid_txns",
]

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808

_LONG_RE = re.compile(r"[+-]?[0-9]+\Z")


class ValidIdListError(ValueError):
    """A snapshot string that Hive could not parse either."""


class RangeResponse(enum.Enum):
    """Answer to "are the ids in [lo, hi] valid (or aborted)?" (Hive's RangeResponse)."""

    NONE = "NONE"
    SOME = "SOME"
    ALL = "ALL"


def _java_split(s: str, sep: str) -> list:
    """``String.split`` with a literal one-character separator: trailing empties dropped."""
    parts = s.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _parse_long(token: str, src: str, what: str) -> int:
    if not _LONG_RE.match(token):
        raise ValidIdListError(f"bad {what} {token!r} in {src!r}")
    value = int(token)
    if not LONG_MIN <= value <= LONG_MAX:
        raise ValidIdListError(f"{what} {token!r} out of range in {src!r}")
    return value


def _parse_csv(field: str, src: str, what: str) -> list:
    if field == "":
        return []
    return [_parse_long(tok, src, what) for tok in field.split(",")]


class _IdSnapshot:
    """Common logic of the transaction and write id lists (sorted exceptions + aborted flags)."""

    __slots__ = ("_hwm", "_min_open", "_exceptions", "_aborted_flags", "_aborted_ids")

    def _init(self, hwm: int, min_open: int, exceptions: Sequence[int],
              aborted_flags: Sequence[bool]) -> None:
        object.__setattr__(self, "_hwm", int(hwm))
        object.__setattr__(self, "_min_open", int(min_open))
        object.__setattr__(self, "_exceptions", tuple(int(x) for x in exceptions))
        object.__setattr__(self, "_aborted_flags", tuple(bool(b) for b in aborted_flags))
        object.__setattr__(
            self, "_aborted_ids",
            tuple(x for x, a in zip(self._exceptions, self._aborted_flags) if a))

    def _init_from_ids(self, hwm: int, open_ids: Iterable[int], aborted_ids: Iterable[int],
                       min_open: Optional[int]) -> None:
        """From id lists. Without ``min_open``: the lowest open id; with no exception at all
        always Long.MAX_VALUE (Java ignores minOpen then)."""
        exceptions, flags = self._from_ids(open_ids, aborted_ids)
        if not exceptions:
            mo = LONG_MAX
        elif min_open is None:
            opens = [x for x, a in zip(exceptions, flags) if not a]
            mo = opens[0] if opens else LONG_MAX
        else:
            mo = int(min_open)
        self._init(hwm, mo, exceptions, flags)

    # The string form, as subclasses declare it: the fields before the high watermark
    # (``_HEAD``), all the required ones (``_FORM``, for messages), and the names of the ids
    # in parse errors.
    _HEAD = 0
    _FORM = "hwm:minOpen"
    _MIN_OPEN_WHAT = "min open id"
    _ID_WHAT = "id"

    @classmethod
    def parse(cls, src: str):
        """The list a string form says (None or "": everything valid, no table name)."""
        self = cls.__new__(cls)
        if src is None or src == "":
            self._init_head(None)
            self._init(LONG_MAX, LONG_MAX, (), ())
            return self
        if not isinstance(src, str):
            raise ValidIdListError(f"{cls.__name__} must be a str, got {type(src).__name__}")
        values = _java_split(src, ":")
        if len(values) < cls._HEAD + 2:
            raise ValidIdListError(f"not a {cls.__name__} (need {cls._FORM}): {src!r}")
        self._init_head(values[:cls._HEAD])
        values = values[cls._HEAD:]
        # a parsed min open id is kept as the string said (so a list round trips unchanged)
        hwm = _parse_long(values[0], src, "high watermark")
        min_open = _parse_long(values[1], src, cls._MIN_OPEN_WHAT)
        opens = _parse_csv(values[2], src, f"open {cls._ID_WHAT}") if len(values) > 2 else []
        aborts = _parse_csv(values[3], src, f"aborted {cls._ID_WHAT}") if len(values) > 3 \
            else []
        exceptions, flags = self._from_ids(opens, aborts)
        self._init(hwm, min_open, exceptions, flags)
        return self

    def _init_head(self, head: Optional[Sequence[str]]) -> None:
        """Take the fields before the high watermark (None: the empty string form)."""

    @staticmethod
    def _from_ids(open_ids: Iterable[int], aborted_ids: Iterable[int]):
        open_l = [int(x) for x in open_ids]
        abort_l = [int(x) for x in aborted_ids]
        exceptions = sorted(open_l + abort_l)
        flags = [False] * len(exceptions)
        for a in abort_l:
            # Java: Arrays.binarySearch then BitSet.set(index)
            flags[bisect_left(exceptions, a)] = True
        return exceptions, flags

    def __setattr__(self, name, value):  # immutability
        raise AttributeError(f"{type(self).__name__} is immutable")

    # -- accessors -------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self._hwm

    @property
    def min_open(self) -> Optional[int]:
        """The lowest open id, or None when the string says Long.MAX_VALUE."""
        return None if self._min_open == LONG_MAX else self._min_open

    @property
    def exceptions(self) -> Tuple[int, ...]:
        """All invalid ids (open and aborted) at or below the high watermark, ascending."""
        return self._exceptions

    @property
    def open_ids(self) -> Tuple[int, ...]:
        return tuple(x for x, a in zip(self._exceptions, self._aborted_flags) if not a)

    @property
    def aborted_ids(self) -> Tuple[int, ...]:
        return self._aborted_ids

    # -- queries ---------------------------------------------------------------------------
    def is_valid(self, id_: int) -> bool:
        if id_ > self._hwm:
            return False
        exc = self._exceptions
        i = bisect_left(exc, id_)
        return not (i < len(exc) and exc[i] == id_)

    def is_aborted(self, id_: int) -> bool:
        exc = self._exceptions
        i = bisect_left(exc, id_)
        return i < len(exc) and exc[i] == id_ and self._aborted_flags[i]

    def is_open(self, id_: int) -> bool:
        exc = self._exceptions
        i = bisect_left(exc, id_)
        return i < len(exc) and exc[i] == id_ and not self._aborted_flags[i]

    def range_validity(self, lo: int, hi: int) -> RangeResponse:
        """ALL / SOME / NONE of the ids in [lo, hi] are valid (Java isTxnRangeValid)."""
        if lo > self._hwm:
            return RangeResponse.NONE
        exc = self._exceptions
        if exc and exc[0] > hi:
            return RangeResponse.ALL
        count = max(0, hi - self._hwm) + (bisect_right(exc, hi) - bisect_left(exc, lo))
        if count == 0:
            return RangeResponse.ALL
        if count == hi - lo + 1:
            return RangeResponse.NONE
        return RangeResponse.SOME

    def range_aborted(self, lo: int, hi: int) -> RangeResponse:
        """ALL / SOME / NONE of the ids in [lo, hi] are aborted (Java isTxnRangeAborted)."""
        if self._hwm < lo:
            return RangeResponse.NONE
        ab = self._aborted_ids
        count = bisect_right(ab, hi) - bisect_left(ab, lo)
        if count == 0:
            return RangeResponse.NONE
        if count == hi - lo + 1:
            return RangeResponse.ALL
        return RangeResponse.SOME

    # -- formatting ------------------------------------------------------------------------
    def _tail(self) -> str:
        if not self._exceptions:
            return f"{self._hwm}:{self._min_open}::"
        open_s = ",".join(str(x) for x, a in zip(self._exceptions, self._aborted_flags) if not a)
        abort_s = ",".join(str(x) for x in self._aborted_ids)
        return f"{self._hwm}:{self._min_open}:{open_s}:{abort_s}"

    def _key(self):
        return (self._hwm, self._min_open, self._exceptions, self._aborted_flags)


class ValidTxnList(_IdSnapshot):
    """A reader's view of transactions: valid means committed (``ValidReadTxnList``)."""

    __slots__ = ()
    _MIN_OPEN_WHAT = "min open txn"
    _ID_WHAT = "txn id"

    def __init__(self, high_watermark: int = LONG_MAX, open_ids: Iterable[int] = (),
                 aborted_ids: Iterable[int] = (), min_open: Optional[int] = None):
        self._init_from_ids(high_watermark, open_ids, aborted_ids, min_open)

    def is_txn_valid(self, txn_id: int) -> bool:
        return self.is_valid(txn_id)

    def __str__(self) -> str:
        return self._tail()

    def __repr__(self) -> str:
        return f"ValidTxnList.parse({str(self)!r})"

    def __eq__(self, other) -> bool:
        return type(other) is ValidTxnList and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(("ValidTxnList",) + self._key())


class ValidWriteIdList(_IdSnapshot):
    """A reader's view of one table's write ids (``ValidReaderWriteIdList``)."""

    __slots__ = ("_table",)
    _HEAD = 1
    _FORM = "table:hwm:minOpenWriteId"
    _MIN_OPEN_WHAT = "min open write id"
    _ID_WHAT = "write id"

    def __init__(self, table_name: Optional[str], high_watermark: int = LONG_MAX,
                 open_ids: Iterable[int] = (), aborted_ids: Iterable[int] = (),
                 min_open: Optional[int] = None):
        object.__setattr__(self, "_table", table_name)
        self._init_from_ids(high_watermark, open_ids, aborted_ids, min_open)

    def _init_head(self, head: Optional[Sequence[str]]) -> None:
        table = head[0] if head else None
        object.__setattr__(self, "_table", None if table is None or table.lower() == "null"
                           else table)

    @classmethod
    def all_valid(cls, table_name: Optional[str] = None) -> "ValidWriteIdList":
        return cls(table_name)

    @property
    def table_name(self) -> Optional[str]:
        return self._table

    def is_write_id_valid(self, write_id: int) -> bool:
        return self.is_valid(write_id)

    def is_valid_base(self, write_id: int) -> bool:
        """Java isValidBase: a compacted base_N is usable when N < minOpen and N <= hwm."""
        return write_id < self._min_open and write_id <= self._hwm

    def __str__(self) -> str:
        name = "null" if self._table is None else self._table
        return f"{name}:{self._tail()}"

    def __repr__(self) -> str:
        return f"ValidWriteIdList.parse({str(self)!r})"

    def __eq__(self, other) -> bool:
        return (type(other) is ValidWriteIdList and self._table == other._table
                and self._key() == other._key())

    def __hash__(self) -> int:
        return hash(("ValidWriteIdList", self._table) + self._key())


def as_valid_write_ids(value) -> ValidWriteIdList:
    """A ValidWriteIdList given as itself or as its string form (None or "": all valid)."""
    return value if isinstance(value, ValidWriteIdList) else ValidWriteIdList.parse(value)


def as_valid_txns(value) -> Optional[ValidTxnList]:
    """A ValidTxnList given as itself or as its string form; None stays None (no list)."""
    return value if value is None or isinstance(value, ValidTxnList) else ValidTxnList.parse(value)


def _java_string_hash(s: Optional[str]) -> int:
    if s is None:
        return 0
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_hashmap_order(keys: Sequence[Optional[str]]) -> list:
    """Iteration order of a java.util.HashMap filled with ``keys`` in this order.

    Java's ValidTxnWriteIdList writes its tables in HashMap order; reproducing it keeps
    our output byte-identical. Buckets: (h ^ h>>>16) & (capacity-1); capacity starts at 16
    and doubles whenever size exceeds 0.75 * capacity; a bucket keeps insertion order.
    (Tree bins, used only for 8+ colliding keys, are not modelled.)
    """
    cap = 16
    while len(keys) > cap * 3 // 4:
        cap *= 2

    def bucket(k):
        h = _java_string_hash(k)
        return (h ^ (h >> 16)) & (cap - 1)

    indexed = list(enumerate(keys))
    indexed.sort(key=lambda p: (bucket(p[1]), p[0]))
    return [k for _, k in indexed]


class ValidTxnWriteIdList:
    """The current transaction id plus one ValidWriteIdList per table it reads."""

    __slots__ = ("_txn_id", "_tables")

    def __init__(self, txn_id: int, tables: Iterable[ValidWriteIdList] | Mapping = ()):
        if isinstance(tables, Mapping):
            tables = tables.values()
        d: dict = {}
        for wl in tables:
            if isinstance(wl, str):
                wl = ValidWriteIdList.parse(wl)
            d[wl.table_name] = wl  # same name: replaced in place, like HashMap.put
        object.__setattr__(self, "_txn_id", None if txn_id is None else int(txn_id))
        object.__setattr__(self, "_tables", d)

    def __setattr__(self, name, value):
        raise AttributeError("ValidTxnWriteIdList is immutable")

    @classmethod
    def parse(cls, src: str) -> "ValidTxnWriteIdList":
        if src is None or src == "":
            return cls(None)
        parts = _java_split(src, "$")
        if not parts:
            raise ValidIdListError(f"not a ValidTxnWriteIdList: {src!r}")
        txn = _parse_long(parts[0], src, "txn id")
        return cls(txn, [ValidWriteIdList.parse(p) for p in parts[1:]])

    @property
    def txn_id(self) -> Optional[int]:
        return self._txn_id

    @property
    def tables(self) -> Tuple[ValidWriteIdList, ...]:
        return tuple(self._tables.values())

    def table(self, full_name: str) -> Optional[ValidWriteIdList]:
        return self._tables.get(full_name)

    get_table_valid_write_id_list = table

    def is_empty(self) -> bool:
        return not self._tables

    def __str__(self) -> str:
        if self._txn_id is None:
            raise ValidIdListError("ValidTxnWriteIdList without a txn id cannot be written")
        out = [str(self._txn_id)]
        for k in _java_hashmap_order(list(self._tables.keys())):
            out.append(str(self._tables[k]))
        return "$".join(out)

    def __repr__(self) -> str:
        return f"ValidTxnWriteIdList({self._txn_id!r}, {list(self._tables.values())!r})"

    def __eq__(self, other) -> bool:
        return (type(other) is ValidTxnWriteIdList and self._txn_id == other._txn_id
                and self._tables == other._tables)

    def __hash__(self) -> int:
        return hash((self._txn_id, tuple(sorted((str(v) for v in self._tables.values())))))
