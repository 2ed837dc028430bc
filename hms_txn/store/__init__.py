"""Persistence: schema, engine and migrations."""

from .engine import Store
from .migrations import SchemaError, ensure_schema

__all__ = ["Store", "SchemaError", "ensure_schema"]
