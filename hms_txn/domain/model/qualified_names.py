"""Catalog-qualified database names, the way Hive's metastore reads and writes them.

Hive 3 and 4 clients send the catalog inside the database-name argument of the calls
that have no catalog field of their own (``get_databases``, ``get_table``,
``drop_table``, the partition calls, ...): ``"@hive#sales"`` is database ``sales`` of
catalog ``hive``. The rules are those of Hive's ``MetaStoreUtils.parseDbName`` and
``prependCatalogToDbName``, quirks included:

=================  ==========================  =====================================
sent               parsed (catalog, database)  meaning
=================  ==========================  =====================================
``None``           ``(None, None)``            nothing given
``"sales"``        ``(default, "sales")``      no marker: the default catalog
``"@hive#sales"``  ``("hive", "sales")``       split at the first ``#``
``"@hive#"``       ``("hive", None)``          no database: e.g. every database of
                                               ``hive`` for ``get_databases``
``"@hive#!"``      ``("hive", "")``            the empty database name
``"@hive"``        error                       marker without a separator
=================  ==========================  =====================================

A name starting with ``@`` and ending with ``!`` is always the empty-name form, and Hive
drops its last two characters to get the catalog, whatever they are (``"@ab!"`` is
catalog ``"a"``). A name ending with ``#`` wins over one ending with ``!``. The
database part is taken as sent: Hive lower-cases names later, per call.

Pure functions; not yet used by the service layer.
"""

from __future__ import annotations

from typing import NamedTuple

from hms_txn.common.errors import MetastoreError

CATALOG_MARKER = "@"         # Hive's CATALOG_DB_THRIFT_NAME_MARKER
CATALOG_DB_SEPARATOR = "#"
DB_EMPTY_MARKER = "!"
DEFAULT_CATALOG = "hive"


class MalformedCatalogName(MetastoreError):
    """A name with the catalog marker that Hive cannot split. Not one of the domain errors
    with a preferred Thrift exception, so a call answers it with its MetaException, as
    Hive does."""


class CatalogAndDatabase(NamedTuple):
    catalog: str | None
    database: str | None


def default_catalog(configured: str | None = None) -> str:
    """``metastore.catalog.default`` (``hive.metastore.catalog.default``), or ``hive`` when
    it is unset or empty: Hive's ``getDefaultCatalog``."""
    return configured or DEFAULT_CATALOG


def has_catalog_name(name: str | None) -> bool:
    """Whether ``name`` carries a catalog (starts with the ``@`` marker)."""
    return bool(name) and name[0] == CATALOG_MARKER


def parse_db_name(name: str | None, default: str = DEFAULT_CATALOG) -> CatalogAndDatabase:
    """Split a database-name argument into catalog and database (see the module
    docstring); ``default`` is the catalog of a name without the marker."""
    if name is None:
        return CatalogAndDatabase(None, None)
    if not has_catalog_name(name):
        return CatalogAndDatabase(default, name)
    if name.endswith(CATALOG_DB_SEPARATOR):
        return CatalogAndDatabase(name[1:-1], None)
    if name.endswith(DB_EMPTY_MARKER):
        end = len(name) - len(DB_EMPTY_MARKER) - 1
        if end < 1:  # "@!": Hive fails with an index error, answered as MetaException
            raise MalformedCatalogName(f"{name} is not a valid catalog-qualified database name")
        return CatalogAndDatabase(name[1:end], "")
    catalog, sep, database = name[1:].partition(CATALOG_DB_SEPARATOR)
    if not sep:
        raise MalformedCatalogName(
            f"{name} is prepended with the catalog marker but does not appear to have a "
            "catalog name in it")
    return CatalogAndDatabase(catalog, database)


def prepend_catalog(catalog: str | None, database: str | None,
                    default: str = DEFAULT_CATALOG) -> str:
    """The argument a Hive client sends for ``database`` of ``catalog`` (None: ``default``):
    ``@cat#db``, ``@cat#`` for no database, ``@cat#!`` for the empty name."""
    prefix = f"{CATALOG_MARKER}{catalog if catalog is not None else default}{CATALOG_DB_SEPARATOR}"
    if database is None:
        return prefix
    return prefix + (database or DB_EMPTY_MARKER)
