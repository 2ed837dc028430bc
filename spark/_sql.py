"""``hive_acid.sql``: SQL statements on ACID tables, parsed with sqlglot (Spark dialect).

INSERT INTO/OVERWRITE ... VALUES/SELECT, UPDATE ... SET ... WHERE, DELETE FROM ... WHERE and
MERGE INTO ... USING ... ON ... WHEN [NOT] MATCHED ... whose target is a transactional table
of the metastore run as ``hive_acid.insert/update/delete/merge`` (``_dml``); every other
statement goes to
``session.sql``. In queries, in the source of an INSERT into a table that is not ACID and in
CREATE TABLE ... AS SELECT, ACID tables read in FROM/USING clauses are replaced by temporary
views over hive_acid reads: Spark's own Hive client gets ACID tables from the metastore in a
form it cannot read (client capability check), and would see raw ACID events if it could.
Expressions are handed to Spark as Spark SQL text (sqlglot's Spark generator).
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Optional

import sqlglot
from pyspark.sql import functions as F
from sqlglot import exp

from hms_txn.clients.acid import metastore as M

from ._dml import delete, insert, merge, update
from ._errors import HiveAcidError
from ._reads import read
from ._session import registered_driver


DIALECT = "spark"
_view_ids = itertools.count(1)


def _table_name(t: exp.Table) -> str:
    db = t.args.get("db")
    name = t.name
    return f"{db.name}.{name}" if db is not None else name


class _Ctx:
    def __init__(self, session):
        self.session = session
        self.d = registered_driver(session)
        self._infos: Dict[str, Optional[M.TableInfo]] = {}
        self.views: List[str] = []  # temporary views replacing ACID table references

    def acid_info(self, name: str) -> Optional[M.TableInfo]:
        key = name.lower()
        if key not in self._infos:
            try:
                info = M.table_info(self.d.ms, name)
                self._infos[key] = info if info.transactional else None
            except HiveAcidError:
                self._infos[key] = None
        return self._infos[key]

    def rewrite_reads(self, node: exp.Expression) -> exp.Expression:
        """Replace ACID table references with temp views over hive_acid reads."""
        ctes = {c.alias_or_name.lower() for c in node.find_all(exp.CTE)}

        def fn(n):
            if isinstance(n, exp.Table) and not isinstance(n.parent, (exp.Schema,)):
                name = _table_name(n)
                if not n.args.get("db") and name.lower() in ctes:
                    return n
                info = self.acid_info(name)
                if info is None:
                    return n
                view = f"__hive_acid_{info.db}_{info.name}_{next(_view_ids)}"
                read(self.session, info.full_name).createOrReplaceTempView(view)
                self.views.append(view)
                alias = n.alias or info.name
                return exp.Table(this=exp.to_identifier(view),
                                 alias=exp.TableAlias(this=exp.to_identifier(alias)))
            return n
        return node.transform(fn)


def _strip_qualifiers(e: exp.Expression, names) -> exp.Expression:
    names = {n.lower() for n in names if n}

    def fn(n):
        if isinstance(n, exp.Column) and n.table and n.table.lower() in names:
            return exp.column(n.name, quoted=True)
        return n
    return e.transform(fn)


def _requalify(e: exp.Expression, mapping: Dict[str, str]) -> exp.Expression:
    def fn(n):
        if isinstance(n, exp.Column) and n.table and n.table.lower() in mapping:
            return exp.column(n.name, table=mapping[n.table.lower()], quoted=True)
        return n
    return e.transform(fn)


def _sql(e: exp.Expression) -> str:
    return e.sql(dialect=DIALECT)


def sql(session, statement: str):
    """Run one SQL statement: INSERT/UPDATE/DELETE/MERGE on ACID tables through hive_acid,
    anything else through ``session.sql`` (see the module docstring).

    An ACID table a query reads is read by ``hive_acid.read`` (one snapshot per table
    reference, taken now) behind a temporary view that is dropped when the statement is
    done: a returned DataFrame holds its analyzed plan (Spark analyzes eagerly), and its
    read locks last as long as it is used (``_leases``). A CREATE VIEW keeps them (its
    definition refers to them)."""
    tree = sqlglot.parse_one(statement, read=DIALECT)
    ctx = _Ctx(session)
    try:
        return _run(ctx, tree, statement)
    finally:
        # a view created by the statement may refer to them by name: kept (with their locks)
        if not (isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper()
                == "VIEW"):
            for view in ctx.views:
                session.catalog.dropTempView(view)


def _run(ctx: "_Ctx", tree: exp.Expression, statement: str):
    session = ctx.session
    dml = next((fn for kind, fn in _DML.items() if isinstance(tree, kind)), None)
    if dml is not None:
        info, table, cols = _target(ctx, tree.this)
        if info is None:            # not an ACID table of ours: Spark's own statement
            return _spark_statement(ctx, tree, statement)
        dml(ctx, tree, info, table, cols)
        return None
    if isinstance(tree, (exp.Select, exp.Union, exp.Subquery, exp.Query)):
        return session.sql(_sql(ctx.rewrite_reads(tree)))
    if isinstance(tree, exp.Create):
        return _spark_statement(ctx, tree, statement)
    return session.sql(statement)


def _spark_statement(ctx: _Ctx, tree: exp.Expression, statement: str):
    """A statement Spark runs itself (a write into a table that is not ACID, CREATE TABLE
    AS SELECT) with the ACID tables its query reads replaced; as written when it reads
    none."""
    query = tree.args.get("expression")
    if query is None or isinstance(query, exp.Values):
        return ctx.session.sql(statement)
    tree.set("expression", ctx.rewrite_reads(query))
    return ctx.session.sql(_sql(tree) if ctx.views else statement)


def _target(ctx: _Ctx, t: exp.Expression):
    cols = None
    if isinstance(t, exp.Schema):
        cols = [c.name for c in t.expressions]
        t = t.this
    if not isinstance(t, exp.Table):
        return None, None, None
    return ctx.acid_info(_table_name(t)), t, cols


def _insert(ctx: _Ctx, tree: exp.Insert, info: M.TableInfo, table: exp.Table,
            cols: Optional[List[str]]) -> None:
    static: Dict[str, exp.Expression] = {}
    part = table.args.get("partition")
    if part is not None:
        for e in part.expressions:
            if isinstance(e, exp.EQ):
                static[e.this.name.lower()] = e.expression
    src = tree.expression
    if isinstance(src, exp.Values):
        query = f"SELECT * FROM {_sql(src)}"
    else:
        query = _sql(ctx.rewrite_reads(src))
    df = ctx.session.sql(query)
    table_cols = info.data_names + info.part_names
    if cols is None:
        cols = [c for c in table_cols if c.lower() not in static]
    if len(cols) != len(df.columns):
        raise HiveAcidError(f"INSERT into {info.full_name}: {len(df.columns)} values for "
                            f"{len(cols)} columns {cols}")
    lower = {c.lower(): c for c in table_cols}
    given = {}
    for src_name, dst in zip(df.columns, cols):
        if dst.lower() not in lower:
            raise HiveAcidError(f"INSERT into {info.full_name}: no column {dst}")
        given[lower[dst.lower()]] = F.col(f"`{src_name}`")
    for k, v in static.items():
        given[lower[k]] = F.expr(_sql(v))
    df = df.select(*[(given.get(c, F.lit(None))).alias(c) for c in table_cols])
    insert(ctx.session, info.full_name, df, overwrite=bool(tree.args.get("overwrite")),
           dynamic_partition_overwrite=True)


def _condition(ctx: _Ctx, tree, table: exp.Table) -> Optional[str]:
    """The WHERE of an UPDATE/DELETE as Spark SQL on the target's columns (qualifiers by
    the table's name or alias dropped)."""
    w = tree.args.get("where")
    if w is None:
        return None
    return _sql(_strip_qualifiers(ctx.rewrite_reads(w.this), _own_names(table)))


def _own_names(table: exp.Table) -> list:
    """What the target's columns may be qualified with: its name, alias, db.name."""
    return [table.name, table.alias, _table_name(table)]


def _update(ctx: _Ctx, tree: exp.Update, info: M.TableInfo, table: exp.Table, _) -> None:
    assignments = {}
    for e in tree.expressions:
        if not isinstance(e, exp.EQ):
            raise HiveAcidError(f"UPDATE: cannot read assignment {_sql(e)}")
        assignments[e.this.name] = _sql(_strip_qualifiers(e.expression, _own_names(table)))
    update(ctx.session, info.full_name, assignments, _condition(ctx, tree, table))


def _delete(ctx: _Ctx, tree: exp.Delete, info: M.TableInfo, table: exp.Table, _) -> None:
    delete(ctx.session, info.full_name, _condition(ctx, tree, table))


def _merge(ctx: _Ctx, tree: exp.Merge, info: M.TableInfo, table: exp.Table, _) -> None:
    tgt_alias = table.alias or table.name
    using = tree.args["using"]
    src_alias = using.alias or (using.name if isinstance(using, exp.Table) else "s")
    mapping = {tgt_alias.lower(): "t", src_alias.lower(): "s",
               _table_name(table).lower(): "t"}
    if isinstance(using, exp.Table):
        source_name = _table_name(using)
        mapping.setdefault(source_name.lower(), "s")
        src_info = ctx.acid_info(source_name)
        source = source_name if src_info is not None else ctx.session.table(source_name)
    else:
        inner = using.this if isinstance(using, exp.Subquery) else using
        source = ctx.session.sql(_sql(ctx.rewrite_reads(inner)))

    def q(e):
        return _sql(_requalify(e, mapping))

    table_cols = info.data_names + info.part_names
    clauses = []
    whens = tree.args.get("whens")
    for w in (whens.expressions if whens is not None else []):
        if w.args.get("source"):
            raise HiveAcidError("WHEN NOT MATCHED BY SOURCE is not supported")
        cond = w.args.get("condition")
        cond_s = q(cond) if cond is not None else None
        then = w.args.get("then")
        if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
            clauses.append(("delete", cond_s))
        elif isinstance(then, exp.Update):
            if any(isinstance(x, exp.Star) for x in then.expressions) or not then.expressions:
                assign = {c: f"s.`{c}`" for c in table_cols if c not in info.part_names}
            else:
                assign = {e.this.name: q(e.expression) for e in then.expressions}
            clauses.append(("update", cond_s, assign))
        elif isinstance(then, exp.Insert):
            target_cols = then.this
            values = then.expression
            if isinstance(target_cols, exp.Star) or target_cols is None and values is None:
                assign = {c: f"s.`{c}`" for c in table_cols}
            else:
                names = ([c.name for c in target_cols.expressions]
                         if target_cols is not None else table_cols)
                vals = values.expressions if isinstance(values, exp.Tuple) else [values]
                if len(names) != len(vals):
                    raise HiveAcidError("MERGE INSERT: columns and values differ in number")
                assign = {n: q(v) for n, v in zip(names, vals)}
            clauses.append(("insert", cond_s, assign))
        else:
            raise HiveAcidError(f"MERGE: unsupported clause {_sql(w)}")
    merge(ctx.session, info.full_name, source, q(tree.args["on"]), clauses=clauses)


_DML = {exp.Insert: _insert, exp.Update: _update, exp.Delete: _delete, exp.Merge: _merge}
