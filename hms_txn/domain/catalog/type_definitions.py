"""The legacy type calls (``create_type``, ``get_type``, ``drop_type``, ``get_type_all``): named
records of two type names and a field list, kept and answered as Hive's ``HMSHandler`` and
``ObjectStore`` do. Names are case-sensitive; reads and drops trim the name; dropping a type
that does not exist answers true; ``get_type_all`` was never implemented in Hive.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from hms_txn.common.errors import AlreadyExists, InvalidObject, MetastoreError, NoSuchObject
from hms_txn.store.schema import type_definitions

_VALID_NAME = re.compile(r"[A-Za-z0-9_]+")      # Hive's MetaStoreUtils.validateName
_c = type_definitions.c


@dataclass(frozen=True)
class TypeDefinition:
    name: str
    type1: str | None
    type2: str | None
    fields: list[dict]          # FieldSchema documents: name, type, comment


def create(conn: Connection, t: TypeDefinition) -> None:
    if t.name is None:
        raise MetastoreError("Type name cannot be null.")
    if not _VALID_NAME.fullmatch(t.name):
        raise InvalidObject("Invalid type name")
    if conn.execute(select(_c.name).where(_c.name == t.name)).first() is not None:
        raise AlreadyExists(f"Type {t.name} already exists")
    conn.execute(insert(type_definitions).values(
        name=t.name, type1=t.type1, type2=t.type2, fields=json.dumps(t.fields)))


def get(conn: Connection, name: str | None) -> TypeDefinition:
    row = conn.execute(select(type_definitions)
                       .where(_c.name == (name or "").strip())).first()
    if row is None:
        raise NoSuchObject(f'Type "{name}" not found.')
    return TypeDefinition(row.name, row.type1, row.type2, json.loads(row.fields or "[]"))


def drop(conn: Connection, name: str | None) -> bool:
    conn.execute(delete(type_definitions).where(_c.name == (name or "").strip()))
    return True


def get_all(name: str | None) -> dict:
    raise MetastoreError("Not yet implemented")
