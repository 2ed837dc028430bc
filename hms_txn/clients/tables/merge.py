"""MERGE INTO a table USING an Arrow table (or pandas/Polars DataFrame) for ``hms_txn.tables``.

Hive's semantics, as ``spark.hive_acid.merge``: ``on`` and the clauses are SQL over the
target ``t`` and the source ``s``; per target/source pair that ``on`` matches, the first
WHEN MATCHED clause whose condition holds updates or deletes the target row; per source row
matching no target row, the first WHEN NOT MATCHED clause whose condition holds inserts a
row. A target row matched by two source rows is an error (Hive's cardinality check).

How: the target is read at the transaction's snapshot with its ROW__IDs; ``on``'s equalities
between a target and a source column are the keys of an Arrow hash join (at least one is
needed), its other terms filter the joined pairs. The rows to write (``OP_COL`` D / U / I,
ROW__ID, new values) go through the same ``orc_acid.table_io.dml_task`` as UPDATE's, in
one statement with two statement ids (deletes, new versions). The target's rows and the
source are held in memory.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from orc_acid.table_io import OP_COL, ROW_ID

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError
from hms_txn.clients.acid.statements import checked_clauses
from hms_txn.clients.acid.table_schema import write_spec
from hms_txn.clients.acid.txns import Transactions, Txn
from hms_txn.clients.tables import predicates as P
from hms_txn.clients.tables.reads import read_all
from hms_txn.clients.tables.writes import (as_arrow, project, refuse_bucketed_insert,
                                           target_plan, write_dml)

_T_ROW, _S_ROW, _CLAUSE = "__merge_t_row", "__merge_s_row", "__merge_clause"


def _prefixed(table: pa.Table, prefix: str) -> pa.Table:
    return table.rename_columns([f"{prefix}.{n}" for n in table.column_names])


def _resolver(target: Optional[pa.Schema], source: Optional[pa.Schema], target_names):
    """Columns as ``t.x`` / ``s.x`` (or the target table's name), bare when unambiguous;
    the resolver's ``name`` attribute answers the prefixed column name."""
    def name_of(qualifier, name) -> pa.Field:
        hits = []
        for prefix, schema, quals in (("t", target, target_names), ("s", source, ("s",))):
            if schema is None or (qualifier is not None and qualifier not in quals):
                continue
            f = next((f for f in schema if f.name.lower() == f"{prefix}.{name.lower()}"),
                     None)
            if f is not None:
                hits.append(f)
        shown = f"{qualifier}.{name}" if qualifier else name
        if not hits:
            raise HiveAcidError(f"MERGE: no column {shown} in the target t or the source s"
                                + ("" if source is not None and target is not None else
                                   " (a NOT MATCHED clause sees only the source)"))
        if len(hits) > 1:
            raise HiveAcidError(f"MERGE: column {shown} is ambiguous: name it t.{name} or "
                                f"s.{name}")
        return hits[0]

    def resolve(qualifier, name):
        f = name_of(qualifier, name)
        return pc.field(f.name), f.type
    resolve.field = name_of
    return resolve


def _keys(on: str, target: pa.Schema, source: pa.Schema, target_names
          ) -> Tuple[List[Tuple[str, str]], Optional[exp.Expression]]:
    """``on``'s equalities between a target and a source column (as prefixed names) and
    the rest of its terms."""
    keys, rest = [], []
    resolve_t = _resolver(target, None, target_names)
    resolve_s = _resolver(None, source, target_names)
    for term in P.split_conjuncts(P.parse(on, "MERGE ... ON")):
        pair = None
        if isinstance(term, exp.EQ) and isinstance(term.this, exp.Column) and \
                isinstance(term.expression, exp.Column):
            a, b = term.this, term.expression
            for x, y in ((a, b), (b, a)):
                try:
                    tx = resolve_t.field((x.table or None) and x.table.lower(), x.name)
                    sy = resolve_s.field((y.table or None) and y.table.lower(), y.name)
                except HiveAcidError:
                    continue
                pair = (tx.name, sy.name)
                break
        if pair:
            keys.append(pair)
        else:
            rest.append(term)
    if not keys:
        raise HiveAcidError(f"MERGE ... ON {on!r}: needs at least one equality between a "
                            f"target column and a source column (t.id = s.id)")
    return keys, P.and_all(rest)


def merge(core: Transactions, txn: Txn, info: M.TableInfo, source, on: str,
          clauses: List[tuple]) -> Dict[str, int]:
    """MERGE into the table as one statement of ``txn``; -> rows updated, deleted,
    inserted."""
    M.require_acid(info, full_acid=True)
    what = f"MERGE {info.full_name}"
    clauses = checked_clauses(info, clauses, what)
    if any(c[0] == "insert" for c in clauses):
        refuse_bucketed_insert(info, what)
    src = as_arrow(source, f"{what} USING")
    target_names = ("t", info.name, info.full_name)
    st = core.begin_statement(txn, info, "update")
    spec = write_spec(info, st.write_id, st.statement_id, "dml")
    tgt = read_all(target_plan(core, txn, info))
    cols = info.data_names + info.part_names
    types = {f.name: f.type for f in tgt.schema}
    t = _prefixed(tgt, "t").append_column(_T_ROW, pa.array(range(tgt.num_rows), pa.int64()))
    s = _prefixed(src, "s").append_column(_S_ROW, pa.array(range(src.num_rows), pa.int64()))
    keys, residual = _keys(on, t.schema, s.schema, target_names)
    # the join sees only the keys and the row numbers (Acero joins no nested columns); the
    # pairs' columns are taken from both sides after
    jt = pa.table({_T_ROW: t.column(_T_ROW)})
    js = pa.table({_S_ROW: s.column(_S_ROW)})
    for i, (tk, sk) in enumerate(keys):
        kt = t.column(tk)
        ks = s.column(sk)
        if ks.type != kt.type:
            try:
                ks = ks.cast(kt.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise HiveAcidError(f"{what}: ON {tk} = {sk}: types {kt.type} and "
                                    f"{ks.type} do not compare ({e})") from None
        jt = jt.append_column(f"__k{i}", kt)
        js = js.append_column(f"__k{i}", ks)
    key_names = [f"__k{i}" for i in range(len(keys))]
    for k in key_names:                       # NULL never equals anything
        jt = jt.filter(pc.is_valid(jt.column(k)))
        js = js.filter(pc.is_valid(js.column(k)))
    pairs = jt.join(js, keys=key_names, join_type="inner", use_threads=False) \
        .select([_T_ROW, _S_ROW]).sort_by([(_T_ROW, "ascending"), (_S_ROW, "ascending")])
    joined = _side_by_side(t.take(pairs.column(_T_ROW)), s.take(pairs.column(_S_ROW)))
    resolve = _resolver(t.schema, s.schema, target_names)
    if residual is not None:
        joined = joined.filter(P.Compiler(resolve, on).compile(residual))
    counts = pc.value_counts(joined.column(_T_ROW))
    if len(counts) and pc.max(counts.field("counts")).as_py() > 1:
        raise HiveAcidError(f"{what}: MERGE cardinality violation: a target row matches "
                            f"more than one source row")
    out = []
    done = {"updated": 0, "deleted": 0, "inserted": 0}
    matched = [c for c in clauses if c[0] in ("update", "delete")]
    if matched and joined.num_rows:
        rows = _first_clause(joined, matched, resolve, on)
        for i, c in enumerate(matched):
            sel = rows.filter(pc.equal(rows.column(_CLAUSE), i))
            if not sel.num_rows:
                continue
            exprs = {OP_COL: pc.scalar("U" if c[0] == "update" else "D"),
                     ROW_ID: pc.field(f"t.{ROW_ID}")}
            for col in cols:
                if c[0] == "update" and col in c[2]:
                    exprs[col] = P.value_expression(c[2][col], types[col], resolve,
                                                    f"{what} SET {col}")
                else:
                    exprs[col] = pc.field(f"t.{col}")
            out.append(_evaluate(sel, exprs, what))
            done["updated" if c[0] == "update" else "deleted"] += sel.num_rows
    inserts = [c for c in clauses if c[0] == "insert"]
    if inserts:
        hit = pc.is_in(s.column(_S_ROW), value_set=joined.column(_S_ROW).combine_chunks()) \
            if joined.num_rows else pa.repeat(pa.scalar(False), s.num_rows)
        unmatched = s.filter(pc.invert(hit))
        resolve_s = _resolver(None, s.schema, target_names)
        if unmatched.num_rows:
            rows = _first_clause(unmatched, inserts, resolve_s, on)
            for i, c in enumerate(inserts):
                sel = rows.filter(pc.equal(rows.column(_CLAUSE), i))
                if not sel.num_rows:
                    continue
                exprs = {OP_COL: pc.scalar("I"),
                         ROW_ID: pc.scalar(pa.scalar(None, type=types[ROW_ID]))}
                for col in cols:
                    exprs[col] = P.value_expression(c[2].get(col), types[col], resolve_s,
                                                    f"{what} INSERT {col}")
                out.append(_evaluate(sel, exprs, what))
                done["inserted"] += sel.num_rows
    files = write_dml(spec, pa.concat_tables(out), info.num_buckets > 0) if out else []
    core.finish_statement(txn, st, files)
    return done


def _side_by_side(a: pa.Table, b: pa.Table) -> pa.Table:
    return pa.Table.from_arrays(a.columns + b.columns, schema=pa.schema(list(a.schema) +
                                                                        list(b.schema)))


def _first_clause(rows: pa.Table, clauses: List[tuple], resolve, on: str) -> pa.Table:
    """``rows`` with the index of the first clause whose condition holds (rows that no
    clause takes are dropped)."""
    pick = pc.scalar(pa.scalar(None, pa.int32()))
    for i in reversed(range(len(clauses))):
        cond = clauses[i][1]
        test = pc.scalar(True) if not cond else pc.coalesce(
            P.Compiler(resolve, cond).compile(P.parse(cond, "WHEN ... AND")), pc.scalar(False))
        pick = pc.if_else(test, pc.scalar(pa.scalar(i, pa.int32())), pick)
    tagged = rows.append_column(_CLAUSE, _evaluate(rows, {_CLAUSE: pick}, "MERGE")
                                .column(_CLAUSE))
    return tagged.filter(pc.is_valid(tagged.column(_CLAUSE)))


def _evaluate(rows: pa.Table, exprs, what: str) -> pa.Table:
    try:
        return project(rows, exprs)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise HiveAcidError(f"{what}: {e}") from None
