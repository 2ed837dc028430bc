"""``get_table_names_by_filter``: Hive's table filter over a database's tables.

The filter is the partition-filter grammar (``partition_filter``) over three kinds of
keys, as Hive's ``hive_metastoreConstants`` name them: ``hive_filter_field_owner__`` (the
owner), ``hive_filter_field_last_access__`` (the last access time, a number) and
``hive_filter_field_params__<key>`` (a table parameter; a table without it matches no
comparison). Trino sends ``hive_filter_field_params__<k> = "<v>"`` and ``LIKE`` to find the
tables with a parameter.
"""

from __future__ import annotations

import json
import re

from sqlalchemy import select
from sqlalchemy.engine import Connection

from hms_txn.domain.model import partition_filter
from hms_txn.domain.model.catalog import Doc
from hms_txn.domain.model.names import lower
from hms_txn.store.schema import tbls

OWNER = "hive_filter_field_owner__"
LAST_ACCESS = "hive_filter_field_last_access__"
PARAMS = "hive_filter_field_params__"

_PARAM_KEY = re.compile(re.escape(PARAMS) + r"[\w.]*", re.IGNORECASE)


def _fields(table: Doc, params: list[str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {
        OWNER: table.get("owner"), LAST_ACCESS: str(table.get("lastAccessTime") or 0)}
    parameters = table.get("parameters") or {}
    for key in params:
        values[key] = parameters.get(key[len(PARAMS):])
    return values


def table_names(conn: Connection, db: str, filter_text: str, max_tables: int | None) -> list[str]:
    """Names of the tables of ``db`` matching ``filter_text``, in name order, at most
    ``max_tables`` (all for -1)."""
    # partition_filter lower-cases keys; parameter names keep their case in the lookup.
    params = {m.group(0).lower(): m.group(0) for m in _PARAM_KEY.finditer(filter_text)}
    types = {OWNER: "string", LAST_ACCESS: "bigint", **{k: "string" for k in params}}
    predicate = partition_filter.parse(filter_text, types)
    rows = conn.execute(select(tbls.c.tbl_name, tbls.c.doc).where(tbls.c.db_name == lower(db))
                        .order_by(tbls.c.tbl_name)).all()
    out = []
    for row in rows:
        values = _fields(json.loads(row.doc), list(params.values()))
        if predicate({OWNER: values[OWNER], LAST_ACCESS: values[LAST_ACCESS],
                      **{k: values[v] for k, v in params.items()}}):
            out.append(row.tbl_name)
    return out if max_tables is None or max_tables < 0 else out[:max_tables]
