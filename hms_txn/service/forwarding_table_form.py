"""Extension mode: Hive 3/4 ACID tables on a Hive 2.x upstream, on the Thrift side.

``domain.upstream_table_form`` defines the upstream form (what the upstream stores for a
table it would refuse as sent); here it is applied to the ``Table`` structs the forwarding
services send (creates, alters) and receive (table lists the upstream answers). Single
table reads go through ``UpstreamTables.get_table``, which restores the documents itself.
"""

from __future__ import annotations

import copy

from hms_txn.domain import upstream_table_form as form
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

UNSET_MESSAGE = "TBLPROPERTIES with 'transactional'='true' cannot be unset"


def _sd_facts(sd) -> dict:
    if sd is None:
        return {}
    return {"bucketCols": list(sd.bucketCols or []), "inputFormat": sd.inputFormat,
            "outputFormat": sd.outputFormat}


def needs_form(tbl) -> bool:
    return tbl is not None and form.needs_upstream_form(tbl.parameters, _sd_facts(tbl.sd),
                                                        tbl.tableType)


def upstream_table(tbl):
    """``tbl`` as the upstream stores it: a copy in the upstream form when a Hive 2.x
    upstream would refuse it as sent, otherwise ``tbl`` itself."""
    if not needs_form(tbl):
        return tbl
    tbl = copy.copy(tbl)
    tbl.parameters = form.to_upstream(tbl.parameters)
    return tbl


def altered_table(before: dict | None, new_tbl):
    """The new definition of an altered table as the upstream stores it, and whether it is
    in the upstream form. A table once in the form stays in it (its files are Hive 3/4
    ACID files whatever its new buckets or format), and it cannot be made
    non-transactional (Hive's MetaException)."""
    old_in_form = before is not None and form.needs_upstream_form(
        before.get("parameters"), before.get("sd"), before.get("tableType"))
    if old_in_form:
        if form.unsets_transactional(form.to_upstream(before.get("parameters")),
                                     new_tbl.parameters):
            raise t.MetaException(message=UNSET_MESSAGE)
        tbl = copy.copy(new_tbl)
        tbl.parameters = form.to_upstream(new_tbl.parameters)
        return tbl, True
    tbl = upstream_table(new_tbl)
    return tbl, tbl is not new_tbl


def without_stats_update(env):
    """An environment context asking Hive 2.x not to recompute the table's fast
    statistics on this alter (Hive 3/4 keep ACID tables' statistics themselves)."""
    props = dict((env.properties or {}) if env is not None else {})
    props.setdefault(form.DO_NOT_UPDATE_STATS, "true")
    return t.EnvironmentContext(properties=props)


def client_table(tbl):
    """A table the upstream answered, as the Hive 3/4 client created it (in place)."""
    if tbl is not None and form.is_upstream_form(tbl.parameters):
        tbl.parameters = form.from_upstream(tbl.parameters)
    return tbl


def client_tables(tables):
    for tbl in tables or []:
        client_table(tbl)
    return tables
