"""Catalogs: the ``hive`` catalog, which holds every database, and the ones made with
``create_catalog``.

Hive 4 keeps databases per catalog; hms-txn keeps them in ``hive`` only (see
``service.catalog.catalog_names``), so another catalog is a record (name, description, location,
create time) holding no databases: Hive's calls on catalogs behave as Hive's do, and a
catalog with nothing in it can always be dropped. Hive writes no notification event for a
catalog change (``event_messages``), and neither does this module. Texts and rules are
those of Hive's HMSHandler and ObjectStore (create_catalog, alter_catalog, drop_catalog).
"""

from __future__ import annotations

import json

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import (AlreadyExists, InvalidObject, InvalidOperation,
                                   NoSuchObject, Refused)
from hms_txn.domain.model.catalog import Doc, dumps, now_s
from hms_txn.domain.model.names import check_name, lower
from hms_txn.domain.model.qualified_names import DEFAULT_CATALOG
from hms_txn.domain.model.warehouse import FileChanges
from hms_txn.store.schema import catalogs

# Warehouse.DEFAULT_CATALOG_COMMENT
DEFAULT_CATALOG_COMMENT = "Default catalog, for Hive"


def ensure_default(conn: Connection, location: str) -> None:
    """The ``hive`` catalog at the warehouse root, as Hive's first start makes it."""
    if not exists(conn, DEFAULT_CATALOG):
        doc = {"name": DEFAULT_CATALOG, "description": DEFAULT_CATALOG_COMMENT,
               "locationUri": location, "createTime": now_s()}
        conn.execute(insert(catalogs).values(name=DEFAULT_CATALOG, doc=dumps(doc)))


def exists(conn: Connection, name: str | None) -> bool:
    return conn.execute(select(catalogs.c.name)
                        .where(catalogs.c.name == lower(name))).first() is not None


def get(conn: Connection, name: str | None) -> Doc:
    row = conn.execute(select(catalogs.c.doc).where(catalogs.c.name == lower(name))).first()
    if row is None:
        raise NoSuchObject(f"No catalog {name}")
    return json.loads(row.doc)


def names(conn: Connection) -> list[str]:
    return list(conn.execute(select(catalogs.c.name).order_by(catalogs.c.name)).scalars())


def create(conn: Connection, catalog: Doc) -> FileChanges:
    """Hive's create_catalog: a valid name, a location (its directory is made), a create
    time. Hive also makes a ``default`` database in it, which hms-txn does not keep."""
    raw = catalog.get("name")
    try:
        name = check_name("catalog", raw)
    except InvalidObject:
        raise InvalidObject(f"{raw} is not a valid catalog name") from None
    if not catalog.get("locationUri"):
        raise InvalidObject("You must specify a path for the catalog")
    if exists(conn, name):
        raise AlreadyExists(f"Catalog {name} already exists")
    doc = {"name": name, "description": catalog.get("description"),
           "locationUri": catalog["locationUri"], "createTime": now_s()}
    conn.execute(insert(catalogs).values(name=name, doc=dumps(doc)))
    return FileChanges(create=[doc["locationUri"]])


def alter(conn: Connection, name: str | None, new: Doc) -> None:
    """Hive's alter_catalog: the name cannot change; a non-blank location or description
    replaces the stored one."""
    old = get(conn, name)
    if lower(new.get("name")) != old["name"]:
        raise InvalidOperation(f"You cannot change a catalog's name ({old['name']})")
    doc = dict(old)
    for key in ("locationUri", "description"):
        if (new.get(key) or "").strip():
            doc[key] = new[key]
    conn.execute(update(catalogs).where(catalogs.c.name == old["name"]).values(doc=dumps(doc)))


def drop(conn: Connection, name: str | None) -> FileChanges:
    """Hive's drop_catalog: never ``hive``; another catalog holds no databases here, so it
    can always go. Hive deletes the catalog's directory; hms-txn removes it only when it is
    empty (it never put anything there, and a location given by a user may hold files)."""
    if lower(name) == DEFAULT_CATALOG:
        raise Refused("Can not drop hive catalog")
    doc = get(conn, name)
    conn.execute(delete(catalogs).where(catalogs.c.name == doc["name"]))
    return FileChanges(remove_if_empty=[doc["locationUri"]])
