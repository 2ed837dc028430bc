"""Servers with the Iceberg REST catalog on, and the clients the tests point at it."""

from __future__ import annotations

import os

from tests.support.servers import InProcessServer

REST_ON = {"metastore.catalog.servlet.port": "0", "metastore.catalog.servlet.auth": "none"}


def rest_server(directory: str, extra: dict[str, str] | None = None) -> InProcessServer:
    """An in-process server on SQLite with the REST catalog on a free port (auth none
    unless ``extra`` says otherwise)."""
    os.makedirs(directory, exist_ok=True)
    overrides = {"javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{directory}/metastore.sqlite",
                 "hive.metastore.warehouse.dir": os.path.join(directory, "warehouse"),
                 **REST_ON, **(extra or {})}
    return InProcessServer(os.path.join(directory, "data"), overrides)


def rest_catalog(server: InProcessServer, name: str = "rest", **properties: str):
    """pyiceberg's RestCatalog on the server's REST catalog."""
    from pyiceberg.catalog.rest import RestCatalog
    return RestCatalog(name, uri=server.server.rest_address, **properties)


def hive_catalog(server: InProcessServer, name: str = "hive", **properties: str):
    """pyiceberg's HiveCatalog on the same server's Thrift port."""
    from pyiceberg.catalog.hive import HiveCatalog
    return HiveCatalog(name, uri=server.uri, **properties)


def duckdb_with_iceberg():
    """A DuckDB connection with the iceberg, httpfs and avro extensions loaded from their
    PyPI wheels (nothing downloaded: automatic installs are off)."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_httpfs
    import duckdb_extension_iceberg

    con = duckdb.connect(config={"autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    for module in (duckdb_extension_httpfs, duckdb_extension_avro, duckdb_extension_iceberg):
        root = os.path.dirname(module.__file__)
        found = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files
                 if f.endswith(".duckdb_extension")]
        assert len(found) == 1, (module.__name__, found)
        con.execute(f"LOAD '{found[0]}'")
    return con
