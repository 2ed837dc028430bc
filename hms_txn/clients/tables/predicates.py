"""Conditions and expressions of ``hms_txn.tables``: Spark SQL text -> pyarrow expressions.

The filter language is a SQL predicate string, parsed by sqlglot in Spark's dialect: the
same text a caller gives ``spark.hive_acid`` (``delete(spark, t, "id < 10")``), Hive
(``DELETE ... WHERE``) or ``hms-txn cat --where``, so a condition moves between them
unchanged, and the command line needs text anyway. It compiles to a
``pyarrow.compute.Expression`` that Arrow evaluates vectorized; a caller may also pass
such an expression directly (it is then a row filter only: an opaque expression cannot
prune partitions).

What compiles: columns (case-insensitive; ``t.col`` / ``s.col`` in MERGE), literals
(numbers, strings in single or double quotes, TRUE/FALSE, NULL, ``DATE '...'``,
``TIMESTAMP '...'``), comparisons (``= <> != < <= > >= <=>``), ``AND OR NOT``, ``IN``,
``BETWEEN``, ``IS [NOT] NULL``, ``[I]LIKE``, ``+ - * / % DIV``, ``CASE``, ``IF``,
``CAST``, and ``lower upper length trim abs round coalesce concat``. Anything else
is refused with a ``HiveAcidError`` naming it. A literal compared with a column takes the
column's type (``day = '2024-01-01'`` on a DATE column compares dates); ``/`` divides as
doubles, as Spark does.

Partition pruning (:func:`split_conjuncts`, :func:`metastore_filter`): the top-level
``AND`` terms that use partition columns only are rendered, where the metastore's filter
grammar can say them exactly enough, as a ``get_partitions_by_filter`` filter; the
partitions it returns are then checked with the same terms locally (the metastore compares
non-integral keys as strings), and every row with the whole condition.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from orc_acid.hive_types import UnsupportedHiveType, arrow_type as hive_arrow_type

from hms_txn.clients.acid.errors import HiveAcidError

DIALECT = "spark"

# (qualifier or None, column name) -> (expression of the column, its Arrow type)
Resolver = Callable[[Optional[str], str], Tuple[pc.Expression, pa.DataType]]


def parse(text: str, what: str = "condition") -> exp.Expression:
    """``text`` as one SQL expression (``HiveAcidError`` naming ``what`` otherwise)."""
    if not isinstance(text, str) or not text.strip():
        raise HiveAcidError(f"{what}: give a SQL expression, got {text!r}")
    try:
        node = sqlglot.parse_one(text, read=DIALECT)
    except sqlglot.errors.ParseError as e:
        raise HiveAcidError(f"{what} {text!r} is not a SQL expression: "
                            f"{str(e).splitlines()[0]}") from None
    if not isinstance(node, exp.Condition) and not isinstance(node, (exp.Column, exp.Literal)):
        raise HiveAcidError(f"{what} {text!r} is a {node.key.upper()} statement, not an "
                            f"expression")
    return node


def columns_of(node: exp.Expression) -> Set[Tuple[Optional[str], str]]:
    """(qualifier, lower-case name) of every column the expression uses."""
    return {((c.table or None) and c.table.lower(), c.name.lower())
            for c in node.find_all(exp.Column)}


def split_conjuncts(node: exp.Expression) -> List[exp.Expression]:
    """The terms of a top-level AND (the expression itself when it is not one)."""
    node = node.unnest()
    if isinstance(node, exp.And):
        return split_conjuncts(node.this) + split_conjuncts(node.expression)
    return [node]


def and_all(nodes: Sequence[exp.Expression]) -> Optional[exp.Expression]:
    return exp.and_(*nodes) if nodes else None


# -- to Arrow ---------------------------------------------------------------------------------

class _Lit:
    """A literal not yet typed: it takes the type of the column it meets."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


_COMPARE = {exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.GT: pc.greater,
            exp.GTE: pc.greater_equal, exp.LT: pc.less, exp.LTE: pc.less_equal}
_ARITH = {exp.Add: pc.add, exp.Sub: pc.subtract, exp.Mul: pc.multiply, exp.Mod: pc.modulo,
          exp.IntDiv: pc.divide}
_UNARY = {exp.Lower: pc.utf8_lower, exp.Upper: pc.utf8_upper, exp.Length: pc.utf8_length,
          exp.Trim: pc.utf8_trim_whitespace, exp.Abs: pc.abs}


class Compiler:
    """Compiles sqlglot expressions against the columns ``resolve`` knows."""

    def __init__(self, resolve: Resolver, text: str = ""):
        self.resolve = resolve
        self.text = text

    def compile(self, node: exp.Expression, want: Optional[pa.DataType] = pa.bool_()
                ) -> pc.Expression:
        """``node`` as an Arrow expression (a bare literal typed ``want``)."""
        v, _ = self._node(node)
        return self._lit_scalar(v.value, want) if isinstance(v, _Lit) else v

    # values are (expression or _Lit, Arrow type or None)
    def _node(self, node: exp.Expression):
        if isinstance(node, exp.Paren):
            return self._node(node.this)
        if isinstance(node, exp.Column):
            return self.resolve((node.table or None) and node.table.lower(), node.name)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return _Lit(node.this), None
            text = node.this
            return _Lit(float(text) if any(c in text for c in ".eE") else int(text)), None
        if isinstance(node, exp.Boolean):
            return _Lit(bool(node.this)), None
        if isinstance(node, exp.Null):
            return _Lit(None), None
        if isinstance(node, exp.Neg):
            v, t = self._typed(self._node(node.this))
            return pc.negate(v), t
        if isinstance(node, (exp.And, exp.Or)):
            fn = pc.and_kleene if isinstance(node, exp.And) else pc.or_kleene
            return fn(self.compile(node.this), self.compile(node.expression)), pa.bool_()
        if isinstance(node, exp.Not):
            return pc.invert(self.compile(node.this)), pa.bool_()
        if type(node) in _COMPARE:
            a, b = self._pair(node.this, node.expression)
            return _COMPARE[type(node)](a, b), pa.bool_()
        if isinstance(node, exp.NullSafeEQ):
            a, b = self._pair(node.this, node.expression)
            both_null = pc.and_kleene(pc.is_null(a), pc.is_null(b))
            return pc.if_else(pc.or_kleene(pc.is_null(a), pc.is_null(b)), both_null,
                              pc.equal(a, b)), pa.bool_()
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                self._refuse(node)
            v, _ = self._typed(self._node(node.this))
            return pc.is_null(v), pa.bool_()
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                self._refuse(node)
            col, t = self._node(node.this)
            values = [self._node(e)[0] for e in node.expressions]
            if isinstance(col, _Lit) or not all(isinstance(v, _Lit) for v in values):
                self._refuse(node, "IN takes a column and a list of literals")
            arr = pa.array([v.value for v in values])
            if t is not None and arr.type != t:
                arr = self._cast_values(arr, t, node)
            return pc.is_in(col, value_set=arr), pa.bool_()
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this, expression=node.args["low"])
            high = exp.LTE(this=node.this, expression=node.args["high"])
            return pc.and_kleene(self.compile(low), self.compile(high)), pa.bool_()
        if isinstance(node, (exp.Like, exp.ILike)):
            v, _ = self._typed(self._node(node.this))
            pat = self._node(node.expression)[0]
            if not isinstance(pat, _Lit) or not isinstance(pat.value, str):
                self._refuse(node, "LIKE takes a string pattern")
            return pc.match_like(v, pattern=pat.value,
                                 ignore_case=isinstance(node, exp.ILike)), pa.bool_()
        if isinstance(node, exp.Div):
            a, b = self._pair(node.this, node.expression)
            return pc.divide(_cast(a, pa.float64()), _cast(b, pa.float64())), pa.float64()
        if type(node) in _ARITH:
            a, b = self._pair(node.this, node.expression)
            return _ARITH[type(node)](a, b), None
        if type(node) in _UNARY:
            v, t = self._typed(self._node(node.this))
            return _UNARY[type(node)](v), (t if isinstance(node, (exp.Abs, exp.Lower,
                                                                   exp.Upper, exp.Trim))
                                           else None)
        if isinstance(node, exp.Round):
            v, t = self._typed(self._node(node.this))
            nd = node.args.get("decimals")
            digits = self._node(nd)[0].value if nd is not None else 0
            # Spark rounds halves away from zero
            return pc.round(v, ndigits=int(digits), round_mode="half_towards_infinity"), t
        if isinstance(node, exp.Coalesce):
            args = [node.this] + list(node.expressions)
            vals = self._unify([self._node(a) for a in args])
            return pc.coalesce(*[v for v, _ in vals]), vals[0][1]
        if isinstance(node, exp.Concat):
            vals = [_cast(self._typed(self._node(a))[0], pa.string())
                    for a in node.expressions]
            return pc.binary_join_element_wise(*vals, ""), pa.string()
        if isinstance(node, exp.If):
            return self._case([(node.this, node.args["true"])], node.args.get("false"))
        if isinstance(node, exp.Case):
            if node.this is not None:            # CASE x WHEN v THEN ...
                ifs = [(exp.EQ(this=node.this, expression=i.this), i.args["true"])
                       for i in node.args["ifs"]]
            else:
                ifs = [(i.this, i.args["true"]) for i in node.args["ifs"]]
            return self._case(ifs, node.args.get("default"))
        if isinstance(node, (exp.Cast, exp.TryCast)):
            t = self._arrow_type(node.to, node)
            v, vt = self._node(node.this)
            if isinstance(v, _Lit):
                return pc.scalar(self._cast_literal(v.value, t, node)), t
            return _cast(v, t, safe=not isinstance(node, exp.TryCast)), t
        self._refuse(node)

    def _case(self, ifs, default):
        branches = [(self.compile(cond), self._node(val)) for cond, val in ifs]
        vals = self._unify([v for _, v in branches] +
                           ([self._node(default)] if default is not None else []))
        out = vals[-1][0] if default is not None else \
            pc.scalar(pa.scalar(None, type=vals[0][1] or pa.null()))
        for (cond, _), (val, _) in reversed(list(zip(branches, vals))):
            out = pc.if_else(pc.coalesce(cond, pc.scalar(False)), val, out)
        return out, vals[0][1]

    def _unify(self, vals):
        """Typed values; literals take the type of the first typed one."""
        t = next((vt for v, vt in vals if vt is not None and not isinstance(v, _Lit)), None)
        out = []
        for v, vt in vals:
            if isinstance(v, _Lit):
                out.append((self._lit_scalar(v.value, t), t))
            else:
                out.append((v, vt))
        return out

    def _pair(self, a_node, b_node):
        return tuple(v for v, _ in self._unify([self._node(a_node), self._node(b_node)]))

    def _typed(self, val):
        v, t = val
        if isinstance(v, _Lit):
            return self._lit_scalar(v.value, None), t
        return v, t

    def _lit_scalar(self, value, t: Optional[pa.DataType]) -> pc.Expression:
        if value is None:
            return pc.scalar(pa.scalar(None, type=t or pa.null()))
        if t is None:
            return pc.scalar(pa.scalar(value))
        return pc.scalar(self._cast_literal(value, t, None))

    def _cast_literal(self, value, t: pa.DataType, node):
        try:
            s = pa.scalar(value)
            if s.type == t:
                return s
            if pa.types.is_string(s.type) or not _numeric(t) or not _numeric(s.type):
                return s.cast(t)
            if pa.types.is_decimal(t) or pa.types.is_floating(t) or \
                    pa.types.is_integer(s.type):
                return s.cast(t) if _fits(value, t) else s
            return s              # a fraction against an integer column: compare as is
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError) as e:
            raise HiveAcidError(f"{self.text!r}: the literal {value!r} is not a {t} ({e})") \
                from None

    def _cast_values(self, arr: pa.Array, t: pa.DataType, node) -> pa.Array:
        try:
            return arr.cast(t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise HiveAcidError(f"{self.text!r}: {node.sql(DIALECT)}: the values are not of "
                                f"type {t} ({e})") from None

    def _arrow_type(self, dt: exp.DataType, node) -> pa.DataType:
        try:
            return hive_arrow_type(dt.sql("hive").lower())
        except UnsupportedHiveType:
            self._refuse(node, f"no Arrow type for {dt.sql('hive')}")

    def _refuse(self, node, why: str = ""):
        raise HiveAcidError(f"{self.text!r}: {node.sql(DIALECT)} is not supported here"
                            + (f" ({why})" if why else "") + "; see hms_txn.tables for the "
                            "SQL it takes, or pass a pyarrow.compute expression")


def _cast(v, t: pa.DataType, safe: bool = True):
    """An expression or a scalar cast to ``t`` (both have ``cast``; ``pc.cast`` takes
    neither)."""
    return v.cast(t, safe=safe)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _fits(value, t: pa.DataType) -> bool:
    if pa.types.is_integer(t):
        return isinstance(value, int)
    return True


def schema_resolver(schema: pa.Schema, qualifiers: Sequence[str] = ()) -> Resolver:
    """Columns of one table (``schema``), named bare or with one of ``qualifiers``."""
    by_lower = {f.name.lower(): f for f in schema}
    quals = {q.lower() for q in qualifiers}

    def resolve(qualifier: Optional[str], name: str):
        f = by_lower.get(name.lower())
        if f is None or (qualifier is not None and qualifier not in quals):
            shown = f"{qualifier}.{name}" if qualifier else name
            raise HiveAcidError(f"no column {shown}: the columns are {schema.names}")
        return pc.field(f.name), f.type
    return resolve


def compile_condition(condition, schema: pa.Schema, qualifiers: Sequence[str] = (),
                      what: str = "condition") -> Optional[pc.Expression]:
    """``condition`` (SQL text, a ``pyarrow.compute.Expression`` or None) over ``schema``."""
    if condition is None:
        return None
    if isinstance(condition, pc.Expression):
        return condition
    node = parse(condition, what)
    return Compiler(schema_resolver(schema, qualifiers), condition).compile(node)


def value_expression(value, target: pa.DataType, resolve: Resolver,
                     what: str = "value") -> pc.Expression:
    """A new column value: SQL expression text over the columns ``resolve`` knows, a
    pyarrow expression, or a plain Python value (a string is SQL: ``"'text'"`` is a string
    literal, as in ``spark.hive_acid``), cast to ``target``."""
    if isinstance(value, pc.Expression):
        return _cast(value, target)
    if not isinstance(value, str):
        try:
            return pc.scalar(pa.scalar(value).cast(target) if value is not None
                             else pa.scalar(None, target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError) as e:
            raise HiveAcidError(f"{what}: {value!r} is not a {target} ({e})") from None
    c = Compiler(resolve, value)
    v, _ = c._node(parse(value, what))
    if isinstance(v, _Lit):
        return c._lit_scalar(v.value, target)
    return _cast(v, target)


def compile_value(value, schema: pa.Schema, target: pa.DataType,
                  qualifiers: Sequence[str] = (), what: str = "value") -> pc.Expression:
    """:func:`value_expression` over the columns of ``schema``."""
    return value_expression(value, target, schema_resolver(schema, qualifiers), what)


# -- partition pruning through the metastore --------------------------------------------------

_INTEGRAL = {"tinyint", "smallint", "int", "integer", "bigint"}
_MS_OPS = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
           exp.LTE: "<="}


def metastore_filter(node: exp.Expression, key_types: Dict[str, str]) -> Optional[str]:
    """``node`` (on partition columns only) in the metastore's partition filter grammar, or
    None when it cannot say it exactly enough. The metastore may answer more partitions
    than the condition keeps (they are checked again locally), never fewer."""
    node = node.unnest()
    if isinstance(node, (exp.And, exp.Or)):
        a = metastore_filter(node.this, key_types)
        b = metastore_filter(node.expression, key_types)
        if isinstance(node, exp.And):
            return f"({a}) and ({b})" if a and b else (a or b)
        return f"({a}) or ({b})" if a and b else None
    if isinstance(node, exp.In) and not node.args.get("query"):
        parts = [metastore_filter(exp.EQ(this=node.this, expression=e), key_types)
                 for e in node.expressions]
        return " or ".join(f"({p})" for p in parts) if parts and all(parts) else None
    if isinstance(node, exp.Between):
        return metastore_filter(exp.And(
            this=exp.GTE(this=node.this, expression=node.args["low"]),
            expression=exp.LTE(this=node.this, expression=node.args["high"])), key_types)
    if type(node) not in _MS_OPS:
        return None
    col, lit, op = node.this, node.expression, _MS_OPS[type(node)]
    if isinstance(col, exp.Literal) and isinstance(lit, exp.Column):
        col, lit = lit, col
        op = {">": "<", "<": ">", ">=": "<=", "<=": ">="}.get(op, op)
    if isinstance(lit, exp.Cast) and isinstance(lit.this, exp.Literal):
        lit = lit.this
    if not isinstance(col, exp.Column) or not isinstance(lit, exp.Literal):
        return None
    key = next((k for k in key_types if k.lower() == col.name.lower()), None)
    if key is None:
        return None
    ktype = key_types[key].lower()
    if ktype in _INTEGRAL:
        if lit.is_string or not lit.this.lstrip("-").isdigit():
            return None
        return f"{key} {op} {int(lit.this)}"
    # strings, varchar/char and dates (yyyy-MM-dd) order as text; other types are left to
    # the local check
    if not lit.is_string or not (ktype in ("string", "date") or
                                 ktype.startswith(("varchar", "char"))):
        return None
    return f"{key} {op} \"{_escape(lit.this)}\""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
