"""Names, patterns and partition-name encoding, following the Java metastore's rules."""

from __future__ import annotations

import re
from functools import lru_cache

# Hive's partition names, made and read by orc_acid.layout (shared with the Spark writer and
# the streaming ingest client)
from orc_acid.layout import LayoutError, parse_partition_name, partition_dir_name

from hms_txn.common.errors import InvalidObject

MAX_NAME_LENGTH = 128

_NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")


def check_name(kind: str, name: str | None) -> str:
    """Validate a database or table name and return it lower-cased."""
    if not name or not _NAME_RE.match(name):
        raise InvalidObject(f"{name!r} is not a valid {kind} name: use letters, digits and _")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidObject(f"{kind} name {name!r} is longer than {MAX_NAME_LENGTH} characters")
    return name.lower()


def lower(name: str | None) -> str:
    return (name or "").lower()


@lru_cache(maxsize=256)
def _pattern_regex(pattern: str) -> re.Pattern:
    # What the Java metastore 2.3 does (checked against it in test_extension_mode): the
    # pattern is trimmed and split at "|" (the alternatives are not trimmed); in each, "*"
    # and ".*" match any run of characters and "." any one character -- DataNucleus turns
    # the regex Hive builds into SQL LIKE -- and every other character only itself ("?",
    # "[", "_", "%" included), ignoring case.
    def alternative(text: str) -> str:
        out, i = [], 0
        while i < len(text):
            if text.startswith(".*", i):
                out.append(".*")
                i += 2
                continue
            ch = text[i]
            out.append(".*" if ch == "*" else "." if ch == "." else re.escape(ch))
            i += 1
        return "".join(out)
    body = "|".join(alternative(a) for a in pattern.strip().split("|"))
    return re.compile(f"^(?:{body})$", re.IGNORECASE | re.DOTALL)


def matches(pattern: str | None, name: str, *, empty_matches_all: bool = True) -> bool:
    """Hive's metastore name patterns: ``*`` matches anything, ``.`` any one character,
    ``|`` separates choices. An empty pattern matches every name for most calls, but none
    for ``get_tables`` and ``get_databases`` (``empty_matches_all=False``): the Java
    metastore 2.3 turns it into a regex matching only the empty string there."""
    if pattern == "":
        return empty_matches_all
    if pattern is None or pattern in ("*", ".*"):
        return True
    return bool(_pattern_regex(pattern).match(name))


def make_partition_name(keys: list[str], values: list[str]) -> str:
    """``k1=v1/k2=v2`` with Hive's escaping (keys lower-case)."""
    return partition_dir_name([k.lower() for k in keys], values)


def split_partition_name(name: str) -> list[tuple[str, str]]:
    """Inverse of ``make_partition_name``: ``[(key, value), ...]``."""
    try:
        return parse_partition_name(name)
    except LayoutError as err:
        raise InvalidObject(str(err)) from None


def partition_values_from_name(keys: list[str], name: str) -> list[str]:
    pairs = split_partition_name(name)
    if [k.lower() for k, _ in pairs] != [k.lower() for k in keys]:
        raise InvalidObject(
            f"partition name {name!r} does not match the partition keys {', '.join(keys)}"
        )
    return [v for _, v in pairs]


# -------------------------------------------------------------------------- column types

_PRIMITIVES = {
    "void", "boolean", "tinyint", "smallint", "int", "integer", "bigint", "float", "double",
    "double precision", "real", "string", "binary", "timestamp", "date", "decimal", "numeric",
    "char", "varchar", "interval_year_month", "interval_day_time",
    "timestamp with local time zone", "timestamplocaltz",
}
_PARAMETERIZED = {"decimal": 2, "numeric": 2, "char": 1, "varchar": 1}


class _TypeParser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self) -> None:
        raise ValueError(self.text)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            self.fail()
        self.pos += 1

    def word(self) -> str:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] == "_"):
            self.pos += 1
        if start == self.pos:
            self.fail()
        return self.text[start:self.pos].lower()

    def field_name(self) -> None:
        self.skip_ws()
        if self.peek() == "`":
            end = self.text.find("`", self.pos + 1)
            if end < 0:
                self.fail()
            self.pos = end + 1
            return
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ":<>,":
            self.pos += 1
        if not self.text[start:self.pos].strip():
            self.fail()

    def parse_type(self) -> None:
        name = self.word()
        if name in ("array",):
            self.expect("<"); self.parse_type(); self.expect(">")
        elif name == "map":
            self.expect("<"); self.parse_type(); self.expect(","); self.parse_type(); self.expect(">")
        elif name == "struct":
            self.expect("<")
            if self.peek() != ">":
                while True:
                    self.field_name(); self.expect(":"); self.parse_type()
                    if self.peek() == ",":
                        self.pos += 1
                        continue
                    break
            self.expect(">")
        elif name == "uniontype":
            self.expect("<")
            while True:
                self.parse_type()
                if self.peek() == ",":
                    self.pos += 1
                    continue
                break
            self.expect(">")
        else:
            # multi-word primitives
            rest = self.text[self.pos:].lower()
            for suffix in (" precision", " with local time zone"):
                if name + suffix in _PRIMITIVES and rest.lstrip().startswith(suffix.strip()):
                    self.skip_ws()
                    self.pos += len(suffix.strip())
                    name = name + suffix
            if name not in _PRIMITIVES:
                self.fail()
            if self.peek() == "(":
                if name not in _PARAMETERIZED:
                    self.fail()
                self.pos += 1
                for i in range(_PARAMETERIZED[name]):
                    self.skip_ws()
                    start = self.pos
                    while self.pos < len(self.text) and self.text[self.pos].isdigit():
                        self.pos += 1
                    if start == self.pos:
                        self.fail()
                    if self.peek() == "," and i + 1 < _PARAMETERIZED[name]:
                        self.pos += 1
                    else:
                        break
                self.expect(")")


def is_valid_type(text: str | None) -> bool:
    if not text or not text.strip():
        return False
    parser = _TypeParser(text)
    try:
        parser.parse_type()
        return parser.peek() == ""
    except ValueError:
        return False


def check_columns(kind: str, cols: list[dict] | None) -> None:
    seen: set[str] = set()
    for col in cols or []:
        name = (col.get("name") or "").strip()
        if not name:
            raise InvalidObject(f"{kind} has a column without a name")
        if name.lower() in seen:
            raise InvalidObject(f"{kind} has the column {name!r} twice")
        seen.add(name.lower())
        if not is_valid_type(col.get("type")):
            raise InvalidObject(f"invalid type {col.get('type')!r} for column {name!r} of {kind}")
