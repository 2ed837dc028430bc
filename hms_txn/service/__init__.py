"""The Thrift handler: maps wire structs to domain calls and domain errors to the
exceptions each method declares. It holds no state and writes no SQL."""

from __future__ import annotations

from typing import Any

from hms_txn.service.catalog import CatalogCalls
from hms_txn.service.errors import DeclaredErrors
from hms_txn.service.forwarding import ForwardingCalls
from hms_txn.service.notifications import NotificationCalls
from hms_txn.service.fb303 import ServiceCalls
from hms_txn.service.tokens import TokenCalls
from hms_txn.service.txn import TxnCalls


class MetastoreHandler(ServiceCalls, CatalogCalls, TxnCalls, NotificationCalls, TokenCalls):
    def __init__(self, ms: Any):
        self.ms = ms


class ExtensionHandler(ServiceCalls, ForwardingCalls, TxnCalls, NotificationCalls, TokenCalls):
    """Extension mode: our transactions, notifications and cache; the catalog upstream.
    Delegation tokens are ours too: they authenticate clients to this server."""

    def __init__(self, ms: Any):
        self.ms = ms


def make_processor(ms: Any):
    from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
    metrics = getattr(getattr(ms, "observability", None), "calls", None)
    # Extension mode: catalog calls go to the upstream metastore (docs/extension-mode.md).
    extension = getattr(ms, "upstream", None) is not None
    handler = ExtensionHandler(ms) if extension else MetastoreHandler(ms)
    processor = ThriftHiveMetastore.Processor(DeclaredErrors(handler, metrics))
    from hms_txn.service.txn import install_wire_compat
    install_wire_compat(processor, ms)
    return processor
