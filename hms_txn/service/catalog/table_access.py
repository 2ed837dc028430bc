"""The tables a client is given, by what it declared (``domain.catalog.capabilities``,
``domain.catalog.plain_form``).

``TableAccess`` is the hook of the table reads of both catalogs (``CatalogService`` and
extension mode's ``ForwardingService``): the plain form of an ACID table for a client that
has not declared it understands it, on ``get_table``, ``get_table_req`` and
``get_table_objects_by_name(_req)`` (while ``hive.metastore.client.capability.check`` is
on), Hive 4's translation for ``get_table_req`` callers that send processor capabilities,
and ``get_tables_ext``'s answer. A table the client gets as stored is the caller's own
(cached) struct: ``table`` returns None for it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from hms_txn.domain.catalog import capabilities as caps
from hms_txn.domain.catalog import plain_form
from hms_txn.domain.catalog.capabilities import UNDECLARED, Declared
from hms_txn.wire.codec import from_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

__all__ = ["TableAccess", "UNDECLARED", "declared_by"]


def declared_by(request: Any) -> Declared:
    """What a GetTableRequest / GetTablesRequest declares."""
    capabilities = getattr(request, "capabilities", None)
    return caps.declared(None if capabilities is None else capabilities.values or (),
                         getattr(request, "processorCapabilities", None))


class TableAccess:
    """``check``: whether ``hive.metastore.client.capability.check`` is on."""

    def __init__(self, check: bool = True):
        self.check = check

    def _plain(self, doc: dict, client: Declared) -> bool:
        return self.check and plain_form.needs_plain_form(doc, client)

    def table(self, doc: dict, client: Declared) -> t.Table | None:
        """The table for this client when it differs from the stored one (the plain form,
        Hive 4's translation), None when the stored one is its answer."""
        if self._plain(doc, client):
            return from_doc(t.Table, plain_form.plain_form(doc))
        if caps.translates(client.processor):
            return from_doc(t.Table, caps.transform([doc], client.processor)[0])
        return None

    def listed(self, docs: Sequence[dict], client: Declared,
               stored: Callable[[dict], t.Table]) -> list[t.Table]:
        """The answer of get_table_objects_by_name(_req) (never translated by Hive 4): each
        table as ``stored`` gives it, an ACID table the client does not understand in the
        plain form."""
        return [from_doc(t.Table, plain_form.plain_form(d)) if self._plain(d, client)
                else stored(d) for d in docs]

    def tables_ext(self, docs: Sequence[dict], request: Any) -> list[t.ExtendedTableInfo]:
        """``get_tables_ext``'s answer for ``docs`` (the tables its pattern matched)."""
        processor = request.processorCapabilities
        if not docs or not caps.translates(processor):
            return []
        return [from_doc(t.ExtendedTableInfo, caps.extended_info(d, request.requestedFields or 0))
                for d in caps.transform(docs, processor)]
