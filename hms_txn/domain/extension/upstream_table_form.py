"""The form a Hive 3/4 ACID table takes in a Hive 2.x upstream metastore (extension mode).

Hive 2.x's metastore takes a table with ``transactional=true`` only when it is bucketed and
stored as ORC (its TransactionalValidationListener: "The table must be bucketed and stored
using an ACID compliant format (such as ORC)"), and ``transactional_properties`` only as
``default`` or ``legacy`` ("Invalid transactional properties specified for the table with
the error unknown value insert_only for transactional_properties"). Hive 3/4 ACID tables
are neither: full-ACID ORC tables need no buckets, insert-only tables are any format.

Such a table is stored upstream in its *upstream form* (``to_upstream``):

* ``transactional`` and ``transactional_properties`` (and a ``storage_handler`` the client
  set itself) are taken out of the parameters and kept, as JSON, in the parameter
  ``hms_txn.hive3.parameters``;
* ``storage_handler`` names a class no Hive 2.x client has (``GUARD_HANDLER``). Hive 2.x's
  ``Table.getStorageHandler`` loads that class whenever a client looks at the table (Spark's
  Hive 2.3 client on every lookup, Hive for reads, writes and DDL), so such clients refuse
  the table instead of reading its ACID files as plain files or writing plain files into
  its directories; a raw Thrift client sees the marker and no ``transactional``.

The storage descriptor, columns, partition keys and every other parameter are stored as
the client sent them. ``from_upstream`` gives the table back exactly as it was sent, from
the upstream form alone (nothing about it is kept in our database). Tables Hive 2.x takes
as they are (bucketed full-ACID ORC, non-transactional tables) are stored unchanged.
"""

from __future__ import annotations

import json
import os
from typing import Any

from orc_acid.layout import location_path, parse_base, parse_delta

TRANSACTIONAL = "transactional"
TRANSACTIONAL_PROPERTIES = "transactional_properties"
STORAGE_HANDLER = "storage_handler"
FORM_KEY = "hms_txn.hive3.parameters"
GUARD_HANDLER = "hms_txn.Hive3AcidTableServedOnlyThroughHmsTxn"
# Hive 2.x's HiveAlterHandler recomputes numFiles/totalSize on every alter of an
# unpartitioned table unless the environment context says not to (MetaStoreUtils
# .requireCalStats); Hive 3/4 do not for ACID tables, and neither do we.
DO_NOT_UPDATE_STATS = "DO_NOT_UPDATE_STATS"

_MOVED = frozenset({TRANSACTIONAL, TRANSACTIONAL_PROPERTIES, STORAGE_HANDLER})
# The only AcidInputFormat/AcidOutputFormat Hive 2.x ships.
_ORC_FORMATS = ("org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
                "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat")

Params = dict[str, str]


def _get(params: Params, key: str) -> str | None:
    """A parameter by name ignoring case, as Hive's listener reads ``transactional``."""
    for k, v in params.items():
        if k.lower() == key:
            return v
    return None


def needs_upstream_form(params: Params | None, sd: dict[str, Any] | None,
                        table_type: str | None) -> bool:
    """Whether a Hive 2.x metastore would refuse this table as it is while Hive 3/4 take
    it: a managed ``transactional=true`` table that is insert-only, or full-ACID but not
    bucketed ORC. External and unknown-``transactional_properties`` tables are left to
    the upstream's own answer."""
    params = params or {}
    if FORM_KEY in params:
        return True
    if not declares_transactional(params):
        return False
    if table_type == "EXTERNAL_TABLE" or str(_get(params, "EXTERNAL") or "").upper() == "TRUE":
        return False
    kind = str(_get(params, TRANSACTIONAL_PROPERTIES) or "default").strip().lower()
    if kind == "insert_only":
        return True
    if kind != "default":
        return False
    sd = sd or {}
    return not (sd.get("bucketCols") and
                (sd.get("inputFormat"), sd.get("outputFormat")) == _ORC_FORMATS)


def to_upstream(params: Params | None) -> Params:
    """The upstream form's parameters of a table ``needs_upstream_form`` chose (idempotent:
    the form of a form is itself)."""
    params = dict(params or {})
    if FORM_KEY in params:
        return params
    moved = {k: v for k, v in params.items() if k.lower() in _MOVED}
    out = {k: v for k, v in params.items() if k.lower() not in _MOVED}
    out[STORAGE_HANDLER] = GUARD_HANDLER
    out[FORM_KEY] = json.dumps(moved, sort_keys=True)
    return out


def is_upstream_form(params: Params | None) -> bool:
    return bool(params) and FORM_KEY in params


def from_upstream(params: Params | None) -> Params | None:
    """The parameters as the Hive 3/4 client sent them, from an upstream form's; anything
    else unchanged (the same object)."""
    if not params or FORM_KEY not in params:
        return params
    try:
        moved = json.loads(params[FORM_KEY])
    except ValueError:
        return params        # not ours (edited by hand): shown as the upstream has it
    if not isinstance(moved, dict):
        return params
    out = {k: v for k, v in params.items() if k not in (FORM_KEY, STORAGE_HANDLER)}
    out.update({str(k): str(v) for k, v in moved.items()})
    return out


def table_from_upstream(doc: dict[str, Any]) -> dict[str, Any]:
    """A table document with ``from_upstream`` applied to its parameters."""
    params = doc.get("parameters")
    restored = from_upstream(params)
    if restored is params:
        return doc
    return {**doc, "parameters": restored}


def declares_transactional(params: Params | None) -> bool:
    """``transactional=true`` (any case), as sent or in the upstream form."""
    params = params or {}
    return FORM_KEY in params or str(_get(params, TRANSACTIONAL) or "").strip().lower() == "true"


def acid_write_state(locations) -> tuple[int, int]:
    """(highest write id, highest visibility transaction id) named by the ACID directories
    (``base_N[_vT]``, ``[delete_]delta_M_N[_S][_vT]``) directly under these local
    directories (None and missing ones skipped): what the write-id state of a table must at
    least be for its files to be valid and visible."""
    write_id = txn_id = 0
    for location in locations:
        path = location_path(location) if location else None
        if not path or not os.path.isdir(path):
            continue
        for name in os.listdir(path):
            base, delta = parse_base(name), parse_delta(name)
            if base is not None:
                write_id = max(write_id, base.write_id)
                txn_id = max(txn_id, base.visibility_txn_id)
            elif delta is not None:
                write_id = max(write_id, delta.max_write_id)
                txn_id = max(txn_id, delta.visibility_txn_id)
    return write_id, txn_id
