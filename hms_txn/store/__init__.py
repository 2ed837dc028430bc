"""Persistence: schema, engine and migrations."""

from hms_txn.store.engine import Store
from hms_txn.store.migrations import SchemaError, ensure_schema

__all__ = ["Store", "SchemaError", "ensure_schema"]
