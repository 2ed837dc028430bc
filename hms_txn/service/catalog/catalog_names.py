"""Catalog-qualified database names in the arguments of every call that may carry one.

Hive 3 and 4 clients put the catalog inside the database-name argument of the calls that
have no catalog field (``drop_table("@hive#sales", ...)``, ``get_databases("@hive#")``,
``GetPartitionsByNamesRequest.db_name``, ``TruncateTableRequest.dbName``: HiveMetaStoreClient
builds them with ``MetaStoreUtils.prependCatalogToDbName``), and a catalog field into the
request structs and objects of the newer calls (``GetTableRequest.catName``,
``Table.catName``, ``Database.catalogName``, ...). Hive's handler reads the first kind with
``parseDbName`` and the second as sent (an unset catalog is the default one).

``CatalogNames`` decides this once, for every method, from the table ``ARGUMENTS`` below:
it wraps a service method so that the method only ever sees the plain database name of the
``hive`` catalog (``@hive#sales`` becomes ``sales``, ``@hive#`` None, ``@hive#!`` ""). hms-txn
keeps databases in the ``hive`` catalog only (other catalogs exist as records,
``domain.catalog.catalogs``); a name in another catalog therefore names nothing here, and the
call is answered by ``on_foreign``: standalone, as Hive answers for a catalog that holds no such
database (``ForeignCatalog``); in extension mode, by the upstream metastore, which has its
own catalogs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from hms_txn.common.errors import InvalidObject, NoSuchObject, Unsupported
from hms_txn.domain.catalog import catalogs
from hms_txn.domain.model.qualified_names import DEFAULT_CATALOG, parse_db_name
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


@dataclass(frozen=True)
class DbArg:
    """Where a call carries a database name: argument ``index`` itself (``field`` None) or
    its struct field ``field``; ``catalog`` is the struct field (or, for a string, the
    argument index) holding the catalog; ``parse``: the name may carry ``@cat#`` (Hive
    parses it) -- a name next to a catalog field is taken as sent, unless ``parse`` is
    "when the catalog is unset" (``PARSE_UNLESS_CATALOG``)."""
    index: int
    field: str | None = None
    catalog: str | int | None = None
    parse: bool | str = True


PARSE_UNLESS_CATALOG = "unless catalog"
_NAME = (DbArg(0),)


def _req(field: str, catalog: str | None, parse: bool | str = False, index: int = 0):
    return (DbArg(index, field, catalog, parse),)


# Old-style calls: the first argument is a database name that may carry "@cat#" (Hive's
# handler parses it with parseDbName; HiveMetaStoreClient prepends the catalog to it).
_PARSED_FIRST = (
    "get_databases", "get_database", "drop_database", "alter_database",
    "get_tables", "get_tables_by_type", "get_all_tables", "get_table_meta", "get_table",
    "get_table_objects_by_name", "get_materialized_views_for_rewriting",
    "get_table_names_by_filter", "alter_table", "alter_table_with_environment_context",
    "alter_table_with_cascade", "drop_table", "drop_table_with_environment_context",
    "truncate_table", "get_fields", "get_fields_with_environment_context", "get_schema",
    "get_schema_with_environment_context", "append_partition",
    "append_partition_with_environment_context", "append_partition_by_name",
    "append_partition_by_name_with_environment_context", "drop_partition",
    "drop_partition_with_environment_context", "drop_partition_by_name",
    "drop_partition_by_name_with_environment_context", "get_partition",
    "get_partition_with_auth", "get_partition_by_name", "get_partitions",
    "get_partitions_with_auth", "get_partitions_pspec", "get_partition_names",
    "get_partitions_ps", "get_partitions_ps_with_auth", "get_partition_names_ps",
    "get_partitions_by_filter", "get_part_specs_by_filter", "get_num_partitions_by_filter",
    "get_partitions_by_names", "alter_partition", "alter_partition_with_environment_context",
    "alter_partitions", "alter_partitions_with_environment_context", "rename_partition",
    "markPartitionForEvent", "isPartitionMarkedForEvent", "get_table_column_statistics",
    "get_partition_column_statistics", "delete_table_column_statistics",
    "delete_partition_column_statistics",
)

ARGUMENTS: dict[str, tuple[DbArg, ...]] = {
    **{name: _NAME for name in _PARSED_FIRST},
    "exchange_partition": (DbArg(1), DbArg(3)),
    "exchange_partitions": (DbArg(1), DbArg(3)),
    "update_creation_metadata": (DbArg(1, catalog=0, parse=False),),
    # Request structs whose database name Hive parses (no catalog field of their own).
    "get_partitions_by_names_req": _req("db_name", None, True),
    "truncate_table_req": _req("dbName", None, True),
    "get_partitions_with_specs": _req("dbName", "catName", PARSE_UNLESS_CATALOG),
    # Request structs and objects with a catalog field: the name is taken as sent.
    **{name: _req("dbName", "catName") for name in (
        "get_table_req", "get_table_objects_by_name_req", "get_partition_req",
        "get_partitions_req", "get_partitions_ps_with_auth_req", "get_partition_names_ps_req",
        "get_partition_names_req", "get_partitions_by_expr", "get_partitions_spec_by_expr",
        "get_partition_values", "get_fields_req", "get_schema_req",
        "get_partitions_by_filter_req", "fetch_partition_names_req", "drop_partition_req",
        "drop_partitions_req", "add_partitions_req", "alter_partitions_req", "alter_table_req",
        "rename_partition_req", "get_table_statistics_req", "get_partitions_statistics_req",
        "get_aggr_stats_for", "get_all_table_constraints", "create_table",
        "create_table_with_environment_context", "create_table_with_constraints",
        "add_partition", "add_partition_with_environment_context")},
    # CreateTableRequest: the names are those of its table (_struct_of).
    "create_table_req": _req("dbName", "catName"),
    "translate_table_dryrun": _req("dbName", "catName"),
    "append_partition_req": _req("dbName", "catalogName"),
    "drop_table_req": _req("dbName", "catalogName"),
    "get_database_req": _req("name", "catalogName"),
    "drop_database_req": _req("name", "catalogName"),
    "create_database": _req("name", "catalogName"),
    "create_database_req": _req("databaseName", "catalogName"),
    "alter_database_req": _req("oldDbName", None, True),
    "get_tables_ext": _req("database", "catalog"),
    **{name: _req("db_name", "catName") for name in (
        "get_primary_keys", "get_unique_constraints", "get_not_null_constraints",
        "get_default_constraints", "get_check_constraints")},
    **{name: _req("dbName", "catName") for name in (
        "create_stored_procedure", "get_stored_procedure", "drop_stored_procedure",
        "get_all_stored_procedures", "add_package", "find_package", "get_all_packages",
        "drop_package")},
}

# What a call in a catalog that holds no databases answers when it is not an error: the
# listings are empty.
_EMPTY: dict[str, Callable[[], Any]] = {
    **{name: list for name in (
        "get_databases", "get_tables", "get_tables_by_type", "get_all_tables", "get_table_meta",
        "get_table_objects_by_name", "get_materialized_views_for_rewriting",
        "get_table_names_by_filter", "get_tables_ext")},
    "get_table_objects_by_name_req": lambda: t.GetTablesResult(tables=[]),
    "get_all_stored_procedures": list, "get_all_packages": list,
    # Hive's store deletes nothing and answers nothing.
    "drop_stored_procedure": lambda: None, "drop_package": lambda: None,
}

_CREATES_DATABASE = frozenset({"create_database", "create_database_req"})


def _struct_of(method: str, arg: Any) -> Any:
    """The struct holding the names: ``CreateTableRequest.table`` for the table calls."""
    if method in ("create_table_req", "translate_table_dryrun"):
        return getattr(arg, "table", None)
    return arg


class ForeignCatalog:
    """Standalone answers for a database named in a catalog other than ``hive``: as Hive
    answers for a catalog without that database (an empty listing, else
    NoSuchObjectException), and for ``create_database`` InvalidObjectException "No such
    catalog" or, when the catalog exists, MetaException (hms-txn keeps databases in
    ``hive`` only)."""

    def __init__(self, units: UnitOfWork):
        self.units = units

    def __call__(self, method: str, catalog: str, database: str | None, args: tuple) -> Any:
        empty = _EMPTY.get(method)
        if empty is not None:
            return empty()
        exists = self.units.read(lambda c: catalogs.exists(c, catalog))
        if method in _CREATES_DATABASE:
            if not exists:
                raise InvalidObject(f"No such catalog {catalog}")
            raise Unsupported(f"hms-txn keeps databases in the {DEFAULT_CATALOG} catalog only: "
                              f"database {database} cannot be created in catalog {catalog}")
        if not exists:
            raise NoSuchObject(f"No catalog {catalog}")
        raise NoSuchObject(f"database {catalog}.{database} does not exist")


Foreign = Callable[[str, str, "str | None", tuple], Any]


class CatalogNames:
    """Wraps service methods so they see plain ``hive`` database names (module docstring)."""

    def __init__(self, on_foreign: Foreign):
        self.on_foreign = on_foreign

    def wrap(self, method: str, target: Callable[..., Any]) -> Callable[..., Any]:
        specs = ARGUMENTS.get(method)
        if specs is None:
            return target
        on_foreign = self.on_foreign
        checks = [_plain_check(method, spec) for spec in specs]
        if len(checks) == 1:
            plain = checks[0]
        else:
            def plain(args: tuple) -> bool:
                return all(check(args) for check in checks)

        @functools.wraps(target)
        def call(*args: Any) -> Any:
            if plain(args):                  # the common case, kept cheap
                return target(*args)
            args_list = None
            for spec in specs:
                found = _resolve(method, spec, args)
                if found is None:
                    continue
                catalog, database, replace = found
                if catalog != DEFAULT_CATALOG:
                    return on_foreign(method, catalog, database, args)
                if replace is not None:
                    if args_list is None:
                        args_list = list(args)
                    replace(args_list, database)
            return target(*(args if args_list is None else args_list))

        return call


def _plain_check(method: str, spec: DbArg) -> Callable[[tuple], bool]:
    """A quick test that one argument needs nothing done: no ``@`` name to parse, no
    catalog but ``hive`` (the wrapper runs on every call, get_table's included)."""
    index, field, catalog = spec.index, spec.field, spec.catalog
    may_parse = spec.parse is not False
    hive = (None, DEFAULT_CATALOG)

    if field is None:
        def check_arg(args: tuple) -> bool:
            if index >= len(args):
                return True
            name = args[index]
            if may_parse and name and name[0] == "@":
                return False
            return not isinstance(catalog, int) or args[catalog] in hive
        return check_arg

    unwrap = method in ("create_table_req", "translate_table_dryrun")

    def check_field(args: tuple) -> bool:
        if index >= len(args):
            return True
        struct = args[index]
        if unwrap and struct is not None:
            struct = struct.table
        if struct is None:
            return True
        if may_parse:
            name = getattr(struct, field, None)
            if name and name[0] == "@":
                return False
        return catalog is None or getattr(struct, catalog, None) in hive
    return check_field


def _resolve(method: str, spec: DbArg, args: tuple):
    """(catalog, database, how to put the plain name back) for one argument, or None when
    it names the default catalog as sent (nothing to do)."""
    if spec.index >= len(args):
        return None
    value = args[spec.index]
    if spec.field is None:
        catalog = args[spec.catalog] if isinstance(spec.catalog, int) else None
        if spec.parse and isinstance(value, str) and value[:1] == "@":
            parsed = parse_db_name(value)

            def put(out: list, database, i=spec.index):
                out[i] = database
            return parsed.catalog.lower(), parsed.database, put
        if catalog and catalog.lower() != DEFAULT_CATALOG:
            return catalog.lower(), value, None
        return None
    struct = _struct_of(method, value)
    if struct is None:
        return None
    name = getattr(struct, spec.field, None)
    catalog = getattr(struct, spec.catalog, None) if spec.catalog else None
    parse = spec.parse is True or (spec.parse == PARSE_UNLESS_CATALOG and not catalog)
    if parse and isinstance(name, str) and name[:1] == "@":
        parsed = parse_db_name(name)

        def put_field(out: list, database, s=struct, f=spec.field):
            setattr(s, f, database)
        return parsed.catalog.lower(), parsed.database, put_field
    if catalog and catalog.lower() != DEFAULT_CATALOG:
        return catalog.lower(), name, None
    return None
