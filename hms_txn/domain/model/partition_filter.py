"""Partition filters as sent to get_partitions_by_filter.

The grammar is the one clients actually send: comparisons of a partition key with a
literal (``=``, ``!=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``LIKE``), combined with
``AND``, ``OR``, ``NOT`` and parentheses; string literals in single or double quotes,
numbers bare. Keys of integral type compare numerically, others as strings, which is what
the Java metastore's direct-SQL path does.
"""

from __future__ import annotations

import re
from typing import Callable

from hms_txn.common.errors import InvalidInput

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<num>-?\d+(?:\.\d+)?)(?![\w])
    | (?P<op><>|!=|<=|>=|=|<|>)
    | (?P<lp>\()
    | (?P<rp>\))
    | (?P<word>`[^`]+`|[A-Za-z_][\w.]*)
    )""", re.VERBOSE)

_INTEGRAL = {"tinyint", "smallint", "int", "integer", "bigint"}

Predicate = Callable[[dict[str, str]], bool]


def _tokens(text: str) -> list[tuple[str, str]]:
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise InvalidInput(f"cannot parse partition filter {text!r} at position {pos}")
        kind = match.lastgroup
        value = match.group(kind)
        if kind == "word" and value.lower() in ("and", "or", "not", "like"):
            kind = value.lower()
        out.append((kind, value))
        pos = match.end()
    return out


def _unquote(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal[1:-1])


def _like(pattern: str) -> re.Pattern:
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.compile(f"^{regex}$", re.DOTALL)


def parse(text: str, key_types: dict[str, str]) -> Predicate:
    """Compile ``text`` into a predicate over ``{key: value}`` partition specs."""
    tokens = _tokens(text)
    if not tokens:
        return lambda spec: True
    pos = 0

    def peek() -> str | None:
        return tokens[pos][0] if pos < len(tokens) else None

    def take(kind: str) -> str:
        nonlocal pos
        if peek() != kind:
            found = tokens[pos][1] if pos < len(tokens) else "end of filter"
            raise InvalidInput(f"invalid partition filter {text!r}: expected {kind}, found {found!r}")
        pos += 1
        return tokens[pos - 1][1]

    def disjunction() -> Predicate:
        nonlocal pos
        parts = [conjunction()]
        while peek() == "or":
            pos += 1
            parts.append(conjunction())
        return parts[0] if len(parts) == 1 else (lambda s: any(p(s) for p in parts))

    def conjunction() -> Predicate:
        nonlocal pos
        parts = [negation()]
        while peek() == "and":
            pos += 1
            parts.append(negation())
        return parts[0] if len(parts) == 1 else (lambda s: all(p(s) for p in parts))

    def negation() -> Predicate:
        nonlocal pos
        if peek() == "not":
            pos += 1
            inner = negation()
            return lambda s: not inner(s)
        if peek() == "lp":
            pos += 1
            inner = disjunction()
            take("rp")
            return inner
        return comparison()

    def literal() -> tuple[str, str]:
        kind = peek()
        if kind == "str":
            return "str", _unquote(take("str"))
        if kind == "num":
            return "num", take("num")
        raise InvalidInput(f"invalid partition filter {text!r}: expected a literal")

    def comparison() -> Predicate:
        nonlocal pos
        left_kind = peek()
        if left_kind in ("str", "num"):
            # literal op key: flip it
            _, lit = literal()
            op = _flip(take("op"))
            key = _key(take("word"))
        else:
            key = _key(take("word"))
            if peek() == "like":
                pos += 1
                _, pattern = literal()
                regex = _like(pattern)
                _check_key(key)
                return lambda s: s[key] is not None and bool(regex.match(s[key]))
            op = take("op")
            _, lit = literal()
        _check_key(key)
        numeric = key_types[key].split("(")[0].strip().lower() in _INTEGRAL
        return _compare(key, op, lit, numeric)

    def _check_key(key: str) -> None:
        if key not in key_types:
            raise InvalidInput(
                f"invalid partition filter {text!r}: {key!r} is not a partition key "
                f"(keys: {', '.join(key_types) or 'none'})"
            )

    result = disjunction()
    if pos != len(tokens):
        raise InvalidInput(f"invalid partition filter {text!r}: unexpected {tokens[pos][1]!r}")
    return result


def _key(word: str) -> str:
    return word.strip("`").lower()


def _flip(op: str) -> str:
    return {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)


_OPS = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _compare(key: str, op: str, literal: str, numeric: bool) -> Predicate:
    fn = _OPS[op]
    if numeric:
        try:
            target = float(literal)
        except ValueError:
            raise InvalidInput(f"partition key {key} is numeric; {literal!r} is not a number") from None

        def numeric_pred(spec: dict[str, str]) -> bool:
            try:
                return fn(float(spec[key]), target)
            except (TypeError, ValueError):  # default partition or non-numeric value
                return False
        return numeric_pred
    return lambda spec: spec[key] is not None and fn(spec[key], literal)
