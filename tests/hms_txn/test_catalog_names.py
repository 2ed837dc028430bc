"""Catalog-qualified names (``@cat#db``, ``@cat#``, ``@cat#!``) and the catalog calls.

Hive 3/4 clients put the catalog into the database-name argument of the old-style calls
(HiveMetaStoreClient: ``prependCatalogToDbName`` in get_databases, get_all_tables,
get_tables_by_type, get_table_meta, drop_table_with_environment_context, drop_database,
the get_partitions*/get_partition_names* family, GetPartitionsByNamesRequest.db_name,
TruncateTableRequest.dbName; see /work/notes/clients/hs2.md, "Conventions" 2) and Hive's
handler reads it with ``MetaStoreUtils.parseDbName``. ``service.catalog.catalog_names`` decides
it once for every method: the first test checks its table against the IDL for every method
it names, the others replay the calls over Thrift. Catalogs: Hive 4's HMSHandler
create_catalog/get_catalog(s)/alter_catalog/drop_catalog and Apache Hive's TestCatalogs.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest
from thrift.Thrift import TType

from hms_txn.service.catalog.catalog_names import ARGUMENTS, PARSE_UNLESS_CATALOG, CatalogNames
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table


@contextmanager
def answers(exc_type, message: str):
    """The call raises ``exc_type`` carrying exactly ``message``."""
    with pytest.raises(exc_type) as info:
        yield
    assert info.value.message == message


# ----------------------------------------------------------------- the table, per method


def _args_of(method: str) -> list:
    """Arguments for ``method`` with every struct argument an empty struct."""
    spec = getattr(ThriftHiveMetastore, f"{method}_args").thrift_spec
    out = []
    for field in spec:
        if field is None:
            continue
        out.append(field[3][0]() if field[1] == TType.STRUCT else None)
    return out


def _holder(method: str, args: list, arg):
    value = args[arg.index]
    return value.table if method in ("create_table_req", "translate_table_dryrun") else value


def _put(method: str, args: list, arg, name: str | None, catalog: str | None) -> None:
    if arg.field is None:
        args[arg.index] = name
        if isinstance(arg.catalog, int):
            args[arg.catalog] = catalog
        return
    if method in ("create_table_req", "translate_table_dryrun"):
        args[arg.index].table = t.Table()
    holder = _holder(method, args, arg)
    setattr(holder, arg.field, name)
    if arg.catalog:
        setattr(holder, arg.catalog, catalog)


def _seen(method: str, args: tuple, arg):
    if arg.field is None:
        return args[arg.index]
    return getattr(_holder(method, list(args), arg), arg.field)


@pytest.mark.parametrize("method", sorted(ARGUMENTS))
def test_every_method_in_the_table_sees_plain_hive_names(method):
    """For each method: its database argument exists in the IDL; a name Hive parses
    reaches the service plain; a name or catalog field of another catalog never reaches
    it (``on_foreign`` answers)."""
    foreign_calls = []
    names = CatalogNames(lambda m, cat, db, args: foreign_calls.append((m, cat, db)) or "foreign")
    received = []
    wrapped = names.wrap(method, lambda *args: received.append(args) or "served")
    for arg in ARGUMENTS[method]:
        spec = getattr(ThriftHiveMetastore, f"{method}_args").thrift_spec
        assert arg.index < len([f for f in spec if f]), method
        args = _args_of(method)
        if arg.field is not None:
            holder = _holder(method, args, arg) if method not in (
                "create_table_req", "translate_table_dryrun") else t.Table()
            assert hasattr(holder, arg.field) and (not arg.catalog or hasattr(holder, arg.catalog))
        parsed = arg.parse is True or arg.parse == PARSE_UNLESS_CATALOG
        # the plain name and the hive catalog pass unchanged
        _put(method, args, arg, "sales", "hive" if arg.catalog else None)
        assert wrapped(*args) == "served" and _seen(method, received[-1], arg) == "sales"
        if parsed:
            for sent, plain in (("@hive#sales", "sales"), ("@HIVE#sales", "sales"),
                                ("@hive#", None), ("@hive#!", "")):
                args = _args_of(method)
                _put(method, args, arg, sent, None)
                assert wrapped(*args) == "served", (method, sent)
                assert _seen(method, received[-1], arg) == plain, (method, sent)
            args = _args_of(method)
            _put(method, args, arg, "@spark#sales", None)
            assert wrapped(*args) == "foreign" and foreign_calls[-1] == (method, "spark", "sales")
        if arg.catalog is not None:
            args = _args_of(method)
            _put(method, args, arg, "sales", "Spark")
            assert wrapped(*args) == "foreign" and foreign_calls[-1] == (method, "spark", "sales")


def test_hive_methods_that_parse_names_are_in_the_table():
    """Every old-style call HiveMetaStoreClient sends ``@cat#db`` to (hs2.md, convention
    2) is in the table, or parses the name itself: the function calls keep Hive's texts,
    which name the database argument as sent (domain/catalog/functions.py, tests/hms_txn/
    test_functions.py)."""
    sent_qualified = {
        "get_databases", "get_all_tables", "get_tables_by_type", "get_table_meta",
        "get_table_names_by_filter", "drop_database", "drop_table_with_environment_context",
        "get_partitions", "get_partitions_ps", "get_partitions_with_auth",
        "get_partitions_ps_with_auth", "get_partitions_by_filter", "get_part_specs_by_filter",
        "get_partition", "get_partition_with_auth", "get_partition_by_name",
        "get_partition_names", "get_partition_names_ps", "get_num_partitions_by_filter",
        "append_partition", "append_partition_by_name", "drop_partition",
        "drop_partition_by_name", "exchange_partition", "exchange_partitions",
        "alter_database", "get_fields", "get_schema_with_environment_context",
        "delete_table_column_statistics", "delete_partition_column_statistics",
        "get_function", "get_functions", "drop_function", "alter_function",
        "markPartitionForEvent", "truncate_table_req", "get_partitions_by_names_req"}
    parsed_by_the_call = {"get_function", "get_functions", "drop_function", "alter_function"}
    assert sent_qualified - parsed_by_the_call <= set(ARGUMENTS)
    assert not parsed_by_the_call & set(ARGUMENTS)


# ----------------------------------------------------------------- over Thrift


@pytest.fixture
def sales(client):
    client.create_database(t.Database(name="sales"))
    client.create_table(make_table("sales", "orders", keys=(("day", "string"),)))
    client.create_table(make_table("sales", "plain"))
    for day in ("d1", "d2"):
        client.append_partition("sales", "orders", [day])
    return client


def test_hive_client_calls_with_the_catalog_in_the_name(sales):
    c = sales
    assert c.get_databases("@hive#") == ["default", "sales"]
    assert c.get_databases("@hive#sal*") == ["sales"]
    assert c.get_all_tables("@hive#sales") == ["orders", "plain"]
    assert c.get_tables("@hive#sales", "o*") == ["orders"]
    assert c.get_tables_by_type("@hive#sales", "*", "MANAGED_TABLE") == ["orders", "plain"]
    assert [m.tableName for m in c.get_table_meta("@hive#sal*", "*", None)] == ["orders", "plain"]
    assert c.get_table("@hive#sales", "orders").tableName == "orders"
    assert c.get_partition_names("@hive#sales", "orders", -1) == ["day=d1", "day=d2"]
    assert [p.values for p in c.get_partitions("@hive#sales", "orders", -1)] == [["d1"], ["d2"]]
    assert c.get_partition("@hive#sales", "orders", ["d2"]).values == ["d2"]
    assert c.get_partition_by_name("@hive#sales", "orders", "day=d1").values == ["d1"]
    assert len(c.get_partitions_ps_with_auth("@hive#sales", "orders", ["d1"], -1, "u", [])) == 1
    by_names = c.get_partitions_by_names_req(t.GetPartitionsByNamesRequest(
        db_name="@hive#sales", tbl_name="orders", names=["day=d2"]))
    assert [p.values for p in by_names.partitions] == [["d2"]]
    assert [f.name for f in c.get_fields("@hive#sales", "orders")] == ["id", "name"]
    # the empty-name marker: database "", which does not exist
    assert c.get_all_tables("@hive#!") == []
    # HMSC.dropTable: a NoSuchObjectException here would be ignored and the table stay
    c.drop_table_with_environment_context("@hive#sales", "plain", True, None)
    assert c.get_all_tables("sales") == ["orders"]
    c.drop_partition("@hive#sales", "orders", ["d1"], True)
    c.truncate_table_req(t.TruncateTableRequest(dbName="@hive#sales", tableName="orders"))
    c.drop_table("@hive#sales", "orders", True)
    c.drop_database("@hive#sales", True, False)
    assert c.get_all_databases() == ["default"]


def test_request_catalog_fields(sales):
    c = sales
    assert c.get_table_req(t.GetTableRequest(dbName="sales", tblName="orders",
                                             catName="HIVE")).table.tableName == "orders"
    with answers(t.NoSuchObjectException, "No catalog spark"):
        c.get_table_req(t.GetTableRequest(dbName="sales", tblName="orders", catName="spark"))
    assert c.get_table_objects_by_name_req(t.GetTablesRequest(
        dbName="sales", catName="spark")).tables == []
    with answers(t.InvalidObjectException, "No such catalog spark"):
        c.create_database(t.Database(name="x", catalogName="spark"))


def test_names_in_another_catalog(sales, tmp_path):
    c = sales
    assert c.get_databases("@spark#") == [] and c.get_all_tables("@spark#sales") == []
    with answers(t.NoSuchObjectException, "No catalog spark"):
        c.get_table("@spark#sales", "orders")
    c.create_catalog(t.CreateCatalogRequest(t.Catalog(name="spark",
                                                      locationUri=str(tmp_path / "spark"))))
    with answers(t.NoSuchObjectException, "database spark.sales does not exist"):
        c.drop_table("@spark#sales", "orders", True)
    with pytest.raises(t.MetaException, match="keeps databases in the hive catalog only"):
        c.create_database(t.Database(name="x", catalogName="spark"))
    assert c.get_all_tables("sales") == ["orders", "plain"]   # nothing of hive was touched


def test_malformed_catalog_name_is_hives_meta_exception(client):
    with answers(t.MetaException, "@hive is prepended with the catalog marker but does not "
                                  "appear to have a catalog name in it"):
        client.get_all_tables("@hive")


# ----------------------------------------------------------------- the catalog calls


def test_catalogs_as_hive_answers(client, hms, tmp_path):
    assert client.get_catalogs().names == ["hive"]
    hive = client.get_catalog(t.GetCatalogRequest("hive")).catalog
    assert (hive.name, hive.description) == ("hive", "Default catalog, for Hive")
    assert hive.locationUri == client.get_database("default").locationUri
    location = str(tmp_path / "cat1")
    client.create_catalog(t.CreateCatalogRequest(
        t.Catalog(name="Cat1", description="a description", locationUri=location)))
    assert os.path.isdir(location)
    cat = client.get_catalog(t.GetCatalogRequest("CAT1")).catalog
    assert (cat.name, cat.description, cat.locationUri) == ("cat1", "a description", location)
    assert cat.createTime > 0
    assert client.get_catalogs().names == ["cat1", "hive"]
    with answers(t.AlreadyExistsException, "Catalog cat1 already exists"):
        client.create_catalog(t.CreateCatalogRequest(t.Catalog(name="cat1", locationUri=location)))
    with answers(t.InvalidObjectException, "bad-name is not a valid catalog name"):
        client.create_catalog(t.CreateCatalogRequest(t.Catalog(name="bad-name", locationUri=location)))
    with answers(t.InvalidObjectException, "You must specify a path for the catalog"):
        client.create_catalog(t.CreateCatalogRequest(t.Catalog(name="cat2")))
    # alter: location and description change, blank ones do not, the name cannot
    cat.locationUri = str(tmp_path / "elsewhere")
    cat.description = ""
    client.alter_catalog(t.AlterCatalogRequest("cat1", cat))
    cat = client.get_catalog(t.GetCatalogRequest("cat1")).catalog
    assert (cat.description, cat.locationUri) == ("a description", str(tmp_path / "elsewhere"))
    with pytest.raises(t.InvalidOperationException):
        client.alter_catalog(t.AlterCatalogRequest("cat1", t.Catalog(name="tim", locationUri="x")))
    with answers(t.NoSuchObjectException, "No catalog nope"):
        client.alter_catalog(t.AlterCatalogRequest("nope", t.Catalog(name="nope", locationUri="x")))
    with answers(t.NoSuchObjectException, "No catalog nope"):
        client.get_catalog(t.GetCatalogRequest("nope"))
    # drop: never hive; another goes, with its directory when empty
    with answers(t.MetaException, "Can not drop hive catalog"):
        client.drop_catalog(t.DropCatalogRequest("HIVE"))
    with answers(t.NoSuchObjectException, "No catalog nope"):
        client.drop_catalog(t.DropCatalogRequest("nope"))
    client.drop_catalog(t.DropCatalogRequest("cat1"))
    assert client.get_catalogs().names == ["hive"]
    assert os.path.isdir(location)        # no longer the catalog's location
    # Hive deletes the catalog's directory; hms-txn only when it is empty
    for name in ("empty", "full"):
        client.create_catalog(t.CreateCatalogRequest(
            t.Catalog(name=name, locationUri=str(tmp_path / name))))
    (tmp_path / "full" / "keep.txt").write_text("x")
    client.drop_catalog(t.DropCatalogRequest("empty"))
    client.drop_catalog(t.DropCatalogRequest("full"))
    assert not (tmp_path / "empty").exists() and (tmp_path / "full" / "keep.txt").exists()
