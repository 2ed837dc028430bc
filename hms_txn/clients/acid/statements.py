"""What an UPDATE or MERGE may say, checked the same way by every client
(``spark.hive_acid`` and ``hms_txn.tables``): the assignments' columns, the partition and
bucketing columns no statement may change, and MERGE's clauses in the order they apply."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Union

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError


def assignments(info: M.TableInfo, assign: Dict[str, object], what: str) -> Dict[str, object]:
    """``{column: expression}`` with the columns named as the table names them."""
    lower = {c.lower(): c for c in info.data_names + info.part_names}
    out = {}
    for k, v in assign.items():
        if k.lower() not in lower:
            raise HiveAcidError(f"{what}: no column {k}")
        out[lower[k.lower()]] = v
    return out


def partition_check(info: M.TableInfo, cols: Sequence[str], what: str) -> None:
    """Partition and bucketing columns cannot be updated (a row would change directory or
    bucket file)."""
    bad = [c for c in cols if c.lower() in {p.lower() for p in info.part_names}]
    bad += [c for c in cols if c.lower() in {b.lower() for b in info.bucket_cols}
            and info.num_buckets > 0]
    if bad:
        raise HiveAcidError(f"{what}: cannot update partitioning/bucketing columns {bad}")


def merge_clauses(when_matched_update: Optional[Dict[str, object]] = None,
                  when_matched_update_condition: Optional[str] = None,
                  when_matched_delete: Union[bool, str, None] = None,
                  when_not_matched_insert: Optional[Dict[str, object]] = None,
                  when_not_matched_insert_condition: Optional[str] = None,
                  clauses: Optional[List[tuple]] = None) -> List[tuple]:
    """MERGE's WHEN clauses in the order they are tried: ``("update", cond, {col: expr})``,
    ``("delete", cond)``, ``("insert", cond, {col: expr})``; the first whose condition holds
    applies. ``clauses`` as given (SQL order); with the keyword form a conditional matched
    clause is tried before an unconditional one."""
    if clauses is None:
        clauses = []
        matched = []
        if when_matched_update is not None:
            matched.append(("update", when_matched_update_condition, when_matched_update))
        if when_matched_delete:
            cond = None if when_matched_delete is True else when_matched_delete
            matched.append(("delete", cond))
        matched.sort(key=lambda c: c[1] is None)
        clauses += matched
        if when_not_matched_insert is not None:
            clauses.append(("insert", when_not_matched_insert_condition,
                            when_not_matched_insert))
    if not clauses:
        raise HiveAcidError("MERGE needs at least one WHEN clause")
    for c in clauses:
        if not isinstance(c, tuple) or c[0] not in ("update", "delete", "insert") or \
                len(c) != (2 if c[0] == "delete" else 3):
            raise HiveAcidError(f"MERGE clause {c!r}: expected ('update', condition, "
                                f"{{col: expr}}), ('delete', condition) or ('insert', "
                                f"condition, {{col: expr}})")
    return list(clauses)


def checked_clauses(info: M.TableInfo, clauses: List[tuple], what: str) -> List[tuple]:
    """The clauses with their assignments' columns named as the table names them; updates
    of partition or bucketing columns refused."""
    out = [(c[0], c[1], assignments(info, c[2], what)) if c[0] in ("update", "insert") else c
           for c in clauses]
    for c in out:
        if c[0] == "update":
            partition_check(info, list(c[2]), what)
    return out
