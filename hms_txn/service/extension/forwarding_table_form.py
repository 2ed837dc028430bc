"""Extension mode: Hive 3/4 ACID tables on a Hive 2.x upstream, on the Thrift side.

``domain.extension.upstream_table_form`` defines the upstream form (what the upstream stores for a
table it would refuse as sent); here it is applied to the ``Table`` structs the forwarding
services send (creates, alters) and receive (table lists the upstream answers). Single
table reads go through ``UpstreamTables.get_table``, which restores the documents itself.
``WriteIdRecovery`` rebuilds such a table's write-id state after our database was lost.
"""

from __future__ import annotations

import copy
import logging
from typing import Callable

from hms_txn.common.errors import NoSuchObject
from hms_txn.domain.catalog import plain_form
from hms_txn.domain.model import names
from hms_txn.domain.extension import upstream_table_form as form
from hms_txn.domain.extension import upstream_write_ids as write_ids
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

log = logging.getLogger(__name__)

UNSET_MESSAGE = "TBLPROPERTIES with 'transactional'='true' cannot be unset"


def _sd_facts(sd) -> dict:
    if sd is None:
        return {}
    return {"bucketCols": list(sd.bucketCols or []), "inputFormat": sd.inputFormat,
            "outputFormat": sd.outputFormat}


def _needs_form(tbl) -> bool:
    return tbl is not None and form.needs_upstream_form(tbl.parameters, _sd_facts(tbl.sd),
                                                        tbl.tableType)


def upstream_table(tbl):
    """``tbl`` as the upstream stores it: a copy in the upstream form when a Hive 2.x
    upstream would refuse it as sent, otherwise ``tbl`` itself."""
    if not _needs_form(tbl):
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
        if not form.declares_transactional(new_tbl.parameters):
            raise t.MetaException(message=UNSET_MESSAGE)
        tbl = copy.copy(new_tbl)
        tbl.parameters = form.to_upstream(new_tbl.parameters)
        return tbl, True
    tbl = upstream_table(new_tbl)
    return tbl, tbl is not new_tbl


def alter_without_stats(method: str, rest: tuple) -> tuple[str, tuple]:
    """An ``alter_table*`` call (method, arguments after the new table) as
    ``alter_table_with_environment_context`` with a context asking Hive 2.x not to
    recompute the table's fast statistics (Hive 3/4 keep ACID tables' statistics
    themselves); ``alter_table_with_cascade`` becomes CASCADE in the context, as Hive maps
    it."""
    env = rest[0] if method == "alter_table_with_environment_context" else None
    props = dict((env.properties or {}) if env is not None else {})
    props.setdefault(form.DO_NOT_UPDATE_STATS, "true")
    if method == "alter_table_with_cascade" and rest[0]:
        props["CASCADE"] = "true"
    return "alter_table_with_environment_context", (t.EnvironmentContext(properties=props),)


def sent_table(tbl, before: dict | None):
    """A table a client sent (a new table: ``before`` None; an alter's new definition of
    ``before``), without the plain form it may have been handed (``domain.catalog.plain_form``)."""
    if tbl is None or tbl.sd is None or not plain_form.in_plain_form(to_doc(tbl.sd)):
        return tbl
    return from_doc(t.Table, plain_form.stored_table(to_doc(tbl), before))


def sent_partitions(parts: list, table_of: Callable[[], dict | None]) -> list:
    """Partitions a client sent, with their table's own storage (``table_of()``, asked
    only then) where they carry the plain form's
    (``domain.catalog.plain_form.stored_partition``)."""
    if not any(p is not None and p.sd is not None and plain_form.in_plain_form(to_doc(p.sd))
               for p in parts):
        return parts
    table = table_of()
    if table is None:
        return parts
    return [from_doc(t.Partition, plain_form.stored_partition(to_doc(p), table)) for p in parts]


def client_table(tbl):
    """A table the upstream answered, as the Hive 3/4 client created it (in place)."""
    if tbl is not None and form.is_upstream_form(tbl.parameters):
        tbl.parameters = form.from_upstream(tbl.parameters)
    return tbl


def client_tables(tables):
    for tbl in tables or []:
        client_table(tbl)
    return tables


class WriteIdRecovery:
    """Extension mode: before a write-id call on a table our database has no write-id state
    for, a table in the upstream form gets the state its directories name
    (``domain.extension.upstream_write_ids``): after our database was lost, its files stay valid and
    new writes never reuse their write ids. Checked once per table and process when the
    state is there or needs none. Only a table with no state here is asked about upstream
    (once it has state, never again); an upstream that cannot be asked is asked again at
    the table's next write-id call, and the call goes on meanwhile."""

    def __init__(self, units, tables):
        self.units = units
        self.tables = tables        # clients.upstream.UpstreamTables
        self._checked: set[tuple[str, str]] = set()

    def on_start(self) -> None:
        """On a database that never handed out a transaction (new, or replacing one that
        was lost): every upstream table is checked before clients take snapshots, so the
        transaction counter is past every ``_vT`` on disk before any reader's ValidTxnList
        is made."""
        if self.units.read(write_ids.handed_out_transactions):
            return
        try:
            for db in self.tables.list_databases():
                self.ensure((db, name) for name in self.tables.list_tables(db))
        except Exception:  # noqa: BLE001 - upstream down: tables are checked as they are used
            log.warning("extension mode: could not check the upstream's tables for write-id "
                        "state at start-up", exc_info=True)

    def ensure(self, tables) -> None:
        for db, name in tables:
            key = (names.lower(db or ""), names.lower(name or ""))
            if key in self._checked or not all(key):
                continue
            try:
                if self._settled(*key):
                    self._checked.add(key)
            except Exception:  # noqa: BLE001 - the upstream or our database: next call
                log.warning("extension mode: could not check the write-id state of %s.%s",
                            *key, exc_info=True)

    def _settled(self, db: str, name: str) -> bool:
        if self.units.read(lambda conn: write_ids.has_write_id_state(conn, db, name)):
            return True
        try:
            table = self.tables.get_table(db, name, stored=True)
        except NoSuchObject:
            return False
        if not form.is_upstream_form(table.get("parameters")):
            return True
        locations = [(table.get("sd") or {}).get("location")]
        if table.get("partitionKeys"):
            locations += [(p.get("sd") or {}).get("location")
                          for p in self.tables.get_partitions(db, name, -1)]
        write_id, txn_id = form.acid_write_state(locations)
        if write_id == 0:
            return True
        log.warning("extension mode: %s.%s has no write-id state here; seeded from its "
                    "directories: write ids up to %d, transactions up to %d", db, name,
                    write_id, txn_id)
        self.units.write(lambda conn: write_ids.seed_write_id_state(conn, db, name, write_id,
                                                                    txn_id))
        return False        # settled once a later call reads the state back
