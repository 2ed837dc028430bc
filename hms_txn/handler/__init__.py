"""The Thrift handler: maps wire structs to domain calls and domain errors to the
exceptions each method declares. It holds no state and writes no SQL."""

from __future__ import annotations

from typing import Any

from .catalog_calls import CatalogCalls
from .errors import DeclaredErrors
from .service_calls import ServiceCalls


class MetastoreHandler(ServiceCalls, CatalogCalls):
    def __init__(self, ms: Any):
        self.ms = ms


def make_processor(ms: Any):
    from ..thrift_gen.hive_metastore import ThriftHiveMetastore
    return ThriftHiveMetastore.Processor(DeclaredErrors(MetastoreHandler(ms)))
