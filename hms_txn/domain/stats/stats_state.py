"""``COLUMN_STATS_ACCURATE`` and Hive's rules for the statistics of transactional tables.

A table's or partition's ``COLUMN_STATS_ACCURATE`` parameter says which of its statistics
are up to date: the basic ones (``numRows``, ``totalSize``, ...) and, column by column,
the column statistics. Hive 4 keeps it in the JSON form of ``StatsSetupConst``'s
``ColumnStatsAccurate``, written by Jackson: ``{"BASIC_STATS":"true","COLUMN_STATS":
{"a":"true","b":"true"}}`` with ``BASIC_STATS`` left out when false, ``COLUMN_STATS`` left
out when empty and the columns in sorted order; a value that does not parse (Hive 2's plain
``TRUE``) means "basic statistics accurate" when it is ``true`` in any case, else nothing.

Transactional tables (Hive 4, ``hive.txn.stats.enabled`` on, its default): statistics carry
the write id of the transaction that wrote them (the table's or partition's ``writeId``).

* ``current_stats_valid`` is ``ObjectStore.isCurrentStatsValidForTheQuery``: stats written
  by no transaction (write id < 1) are always valid; otherwise a reader needs accurate
  basic stats and a snapshot in which that write id is valid, and a complete stats writer
  may also replace stats of an aborted write id.
* ``verify_change`` is ``ObjectStore.verifyStatsChangeCtx``: without a write id and a
  ValidWriteIdList, a change that leaves the basic stats accurate and changes the stats
  state (or writes column stats) is refused with Hive's message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, MutableMapping

from orc_acid.valid_ids import ValidIdListError, ValidWriteIdList

from hms_txn.common.errors import InvalidInput
from hms_txn.domain.model.catalog import is_transactional

ACCURATE = "COLUMN_STATS_ACCURATE"
_BASIC = "BASIC_STATS"
_COLUMNS = "COLUMN_STATS"

Params = MutableMapping[str, str]


@dataclass
class Accuracy:
    """The parsed ``COLUMN_STATS_ACCURATE``."""
    basic: bool = False
    columns: dict[str, bool] = field(default_factory=dict)

    def text(self) -> str:
        """Jackson's output for ``ColumnStatsAccurate`` (see the module docstring)."""
        out: dict[str, Any] = {}
        if self.basic:
            out[_BASIC] = "true"
        if self.columns:
            out[_COLUMNS] = {k: "true" if v else "false" for k, v in sorted(self.columns.items())}
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def _true(value: Any) -> bool:
    """``Boolean.valueOf(parser.getValueAsString())``."""
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.lower() == "true"


def parse(text: str | None) -> Accuracy:
    """``StatsSetupConst.parseStatsAcc``: anything Jackson cannot read as the JSON form
    (including unknown keys) counts as basic stats accurate iff it is ``true``."""
    if text is None:
        return Accuracy()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and set(value) <= {_BASIC, _COLUMNS}:
        columns = value.get(_COLUMNS)
        if columns is None or isinstance(columns, dict):
            return Accuracy(_true(value.get(_BASIC)),
                            {str(k): _true(v) for k, v in (columns or {}).items()})
    return Accuracy(basic=text.strip().lower() == "true")


def of(params: Mapping[str, str] | None) -> Accuracy:
    return parse((params or {}).get(ACCURATE))


def basic_up_to_date(params: Mapping[str, str] | None) -> bool:
    """``areBasicStatsUptoDate``."""
    return params is not None and of(params).basic


def columns_having_stats(params: Mapping[str, str] | None) -> list[str]:
    """``getColumnsHavingStats``: the columns marked accurate (sorted)."""
    return sorted(c for c, ok in of(params).columns.items() if ok)


def can_merge(params: Mapping[str, str] | None, column: str) -> bool:
    """``canColumnStatsMerge``: the column is listed, whatever its flag."""
    return column in of(params).columns


def set_columns(params: Params, columns: Iterable[str]) -> None:
    """``setColumnStatsState``: list the columns (as accurate unless already listed)."""
    acc = of(params)
    for column in columns:
        acc.columns.setdefault(column, True)
    params[ACCURATE] = acc.text()


def set_basic(params: Params, accurate: bool) -> None:
    """``setBasicStatsState``; false removes the whole parameter, column part included."""
    if not accurate:
        params.pop(ACCURATE, None)
        return
    acc = of(params)
    acc.basic = True
    params[ACCURATE] = acc.text()


def remove_columns(params: Params, columns: Iterable[str] | None) -> None:
    """Forget the column part (``clearColumnStatsState``) or some columns of it
    (``removeColumnStatsState``); a table or partition without the parameter keeps none."""
    if ACCURATE not in params:
        return
    acc = of(params)
    if columns is None:
        acc.columns.clear()
    else:
        for column in columns:
            acc.columns.pop(column, None)
    params[ACCURATE] = acc.text()


# ------------------------------------------------------------------------ transactional rules

def valid_write_id_list(text: str | None) -> ValidWriteIdList | None:
    """The ValidWriteIdList a call sent (None when it sent none)."""
    if text is None:
        return None
    try:
        return ValidWriteIdList.parse(text)
    except ValidIdListError as err:
        raise InvalidInput(f"invalid validWriteIdList {text!r}: {err}") from None


def current_stats_valid(params: Mapping[str, str] | None, stats_write_id: int | None,
                        valid_write_ids: str | None, complete_writer: bool) -> bool:
    """``isCurrentStatsValidForTheQuery`` (see the module docstring)."""
    if stats_write_id is None or stats_write_id < 1:
        return True
    if not complete_writer and not basic_up_to_date(params):
        return False
    snapshot = valid_write_id_list(valid_write_ids)
    if snapshot is None:
        return False
    if snapshot.is_write_id_valid(stats_write_id):
        return True
    return complete_writer and snapshot.is_aborted(stats_write_id)


def reader_compliant(table: Mapping[str, Any], params: Mapping[str, str] | None,
                     stats_write_id: int | None, valid_write_ids: str | None) -> bool | None:
    """Whether a reader with ``valid_write_ids`` may use the stats (Hive's
    ``isStatsCompliant``); None when the reader sent no ValidWriteIdList (Hive then leaves
    the flag unset and serves the stats)."""
    if valid_write_ids is None:
        return None
    if not is_transactional(table):
        return True
    return current_stats_valid(params, stats_write_id, valid_write_ids, False)


def verify_change(full_name: str, old: Mapping[str, str] | None, new: Mapping[str, str] | None,
                  write_id: int, valid_write_ids: str | None,
                  column_stats_change: bool) -> str | None:
    """``verifyStatsChangeCtx``: Hive's refusal message, or None when the change may go on."""
    if valid_write_ids is not None and write_id > 0:
        return None
    if not basic_up_to_date(new):
        return None     # an invalidating change (Impala's alter, for one) needs no write id
    old_value = (old or {}).get(ACCURATE)
    new_value = (new or {}).get(ACCURATE)
    same = (old_value is None and new_value is None) or (
        old_value is not None and new_value is not None and old_value.lower() == new_value.lower())
    if same and not column_stats_change:
        return None
    return (f"Cannot change stats state for a transactional table {full_name} without providing "
            f"the transactional write state for verification (new write ID {write_id}, valid "
            f"write IDs {_java(valid_write_ids)}; current state {_java(old_value)}; new state "
            f"{_java(new_value)}")


def _java(value: str | None) -> str:
    return "null" if value is None else value


def reader_view(table: Mapping[str, Any], valid_write_ids: str | None) -> Mapping[str, Any]:
    """The table as ``ObjectStore.getTable`` gives it to a reader with ``valid_write_ids``:
    for an unpartitioned transactional table ``isStatsCompliant`` set and, when false,
    ``COLUMN_STATS_ACCURATE`` dropped (from the copy only)."""
    compliant = table_compliance(table, valid_write_ids)
    if compliant is None:
        return table
    out = dict(table, isStatsCompliant=compliant)
    if not compliant:
        out["parameters"] = {k: v for k, v in (table.get("parameters") or {}).items()
                             if k != ACCURATE}
    return out


def table_compliance(table: Mapping[str, Any], valid_write_ids: str | None) -> bool | None:
    """``isStatsCompliant`` of a table read with ``valid_write_ids`` (None: left unset)."""
    if valid_write_ids is None or not is_transactional(table) or table.get("partitionKeys"):
        return None
    return current_stats_valid(table.get("parameters"), write_id_of(table), valid_write_ids,
                               False)


def write_id_of(doc: Mapping[str, Any]) -> int:
    """A table's or partition's write id (Hive's default: -1)."""
    value = doc.get("writeId")
    return -1 if value is None else int(value)
