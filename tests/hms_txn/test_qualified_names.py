"""Catalog-qualified database names (``hms_txn.domain.model.qualified_names``): Hive's
``MetaStoreUtils.parseDbName`` / ``prependCatalogToDbName`` rules."""

from __future__ import annotations

import pytest

from hms_txn.domain.model.qualified_names import (
    CatalogAndDatabase,
    MalformedCatalogName,
    default_catalog,
    has_catalog_name,
    parse_db_name,
    prepend_catalog,
)
from hms_txn.service.errors import translate
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


@pytest.mark.parametrize("sent, parsed", [
    (None, (None, None)),
    ("sales", ("hive", "sales")),
    ("", ("hive", "")),
    ("Sales", ("hive", "Sales")),               # case is left to the caller
    ("@hive#sales", ("hive", "sales")),
    ("@spark#db", ("spark", "db")),
    ("@hive#", ("hive", None)),                  # no database: every one, for get_databases
    ("@hive#!", ("hive", "")),                   # the empty database name
    ("@hive#db#x", ("hive", "db#x")),            # split at the first separator only
    ("@#", ("", None)),
    ("@#db", ("", "db")),
    ("@#!", ("", "")),
    # Hive's quirk: any marked name ending in "!" is the empty form, minus two characters
    ("@hive!", ("hiv", "")),
    ("@a!", ("", "")),
    ("@hive#db!", ("hive#d", "")),
    ("@hive#!#", ("hive#!", None)),              # "#" at the end wins
    ("hive#db", ("hive", "hive#db")),            # no marker: a plain (odd) name
    ("!", ("hive", "!")),
])
def test_parse_db_name(sent, parsed):
    assert parse_db_name(sent) == parsed
    assert isinstance(parse_db_name(sent), CatalogAndDatabase)


def test_parse_db_name_with_another_default_catalog():
    assert parse_db_name("sales", default="spark") == ("spark", "sales")
    assert parse_db_name("@hive#sales", default="spark") == ("hive", "sales")
    assert parse_db_name(None, default="spark") == (None, None)


@pytest.mark.parametrize("sent", ["@hive", "@", "@hivedb"])
def test_marker_without_separator_is_refused_like_hive(sent):
    with pytest.raises(MalformedCatalogName, match=(
            f"^{sent} is prepended with the catalog marker but does not appear to have a "
            "catalog name in it$")):
        parse_db_name(sent)


def test_too_short_empty_form_is_refused():
    # Hive fails with a StringIndexOutOfBoundsException here
    with pytest.raises(MalformedCatalogName):
        parse_db_name("@!")


def test_malformed_name_is_answered_as_meta_exception():
    err = MalformedCatalogName("x")
    declared = (t.InvalidObjectException, t.AlreadyExistsException, t.MetaException)
    assert isinstance(translate(err, declared), t.MetaException)
    assert isinstance(translate(err, (t.MetaException, t.NoSuchObjectException)),
                      t.MetaException)


@pytest.mark.parametrize("catalog, database, sent", [
    ("hive", "sales", "@hive#sales"),
    ("hive", None, "@hive#"),
    ("hive", "", "@hive#!"),
    (None, "sales", "@hive#sales"),
    (None, None, "@hive#"),
    ("spark", "db", "@spark#db"),
])
def test_prepend_catalog(catalog, database, sent):
    assert prepend_catalog(catalog, database) == sent


def test_prepend_then_parse_round_trips():
    for catalog in ("hive", "spark", "c_1"):
        for database in ("sales", "", None, "a#b"):
            assert parse_db_name(prepend_catalog(catalog, database)) == (catalog, database)
    assert prepend_catalog(None, "db", default="spark") == "@spark#db"


def test_has_catalog_name_and_default():
    assert has_catalog_name("@hive#db") and has_catalog_name("@")
    assert not has_catalog_name("db") and not has_catalog_name("") \
        and not has_catalog_name(None)
    assert default_catalog() == "hive" == default_catalog("") == default_catalog(None)
    assert default_catalog("spark") == "spark"
