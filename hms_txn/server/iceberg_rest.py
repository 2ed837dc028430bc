"""The Iceberg REST catalog of one server process: its services over the process's
``Metastore`` and its HTTP listener (``hms_txn.rest``), when ``metastore.catalog.servlet.port``
turns it on.

Its packages are an extra (``pip install 'hms-txn[rest]'``): ``check`` stops start-up with
the command to run when they are missing, and the REST modules are imported only when the
catalog is on, so a server without it never loads them.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from hms_txn.common.config import Config, ConfigError

if TYPE_CHECKING:   # the extra's modules: imported by open_listener, when the catalog is on
    from hms_txn.rest.listener import RestListener
    from hms_txn.server.metastore import Metastore
    from hms_txn.wire.tls import TlsServer

PACKAGES = {"fastapi": "fastapi", "uvicorn": "uvicorn", "pyiceberg": "pyiceberg"}


def enabled(config: Config) -> bool:
    return config["metastore.catalog.servlet.port"] >= 0


def check(config: Config, *, extension_mode: bool) -> None:
    """Stop start-up (ConfigError) when the catalog is on but cannot run here."""
    if not enabled(config):
        return
    port = config["metastore.catalog.servlet.port"]
    if extension_mode:
        raise ConfigError(f"{config.source}: metastore.catalog.servlet.port={port}: the Iceberg "
                          f"REST catalog serves this metastore's own tables, not an upstream's "
                          f"(extension mode, hms_txn.upstream.uris)")
    wanted = dict(PACKAGES)
    if config["metastore.catalog.servlet.auth"] == "jwt":
        wanted["jwt"] = "PyJWT"
    missing = [dist for module, dist in wanted.items()
               if importlib.util.find_spec(module) is None]
    if missing:
        raise ConfigError(f"{config.source}: metastore.catalog.servlet.port={port} turns on the "
                          f"Iceberg REST catalog, whose packages are not installed "
                          f"({', '.join(missing)}): pip install 'hms-txn[rest]'")
    path = config["metastore.iceberg.catalog.servlet.path"].strip("/")
    if not path or any(c in path for c in "{}?#% "):
        raise ConfigError(f"{config.source}: metastore.iceberg.catalog.servlet.path: a URL "
                          f"path such as iceberg, got {path!r}")
    from hms_txn.rest.auth import authenticator
    authenticator(config)       # a jwt setting without its key set stops start-up here


def open_listener(ms: "Metastore", host: str, tls: "TlsServer | None") -> "RestListener":
    """The catalog's services and application on a bound (not yet serving) listener."""
    from hms_txn.rest.app import CatalogServices, build_app
    from hms_txn.rest.auth import authenticator
    from hms_txn.rest.listener import RestListener
    from hms_txn.service.iceberg.iceberg_catalog import IcebergNamespaces, IcebergTables
    from hms_txn.service.iceberg.iceberg_commits import IcebergCommits
    from hms_txn.service.iceberg.iceberg_metadata import MetadataFiles

    config = ms.config
    files = MetadataFiles(config.filesystem_options())
    commits = IcebergCommits(ms.units, ms.tables, ms.warehouse, files,
                             lock_timeout=config["hms_txn.iceberg.lock.timeout"])
    services = CatalogServices(
        namespaces=IcebergNamespaces(ms.units, ms.databases, ms.warehouse),
        tables=IcebergTables(ms.units, ms.cache, ms.tables, files, commits),
        commits=commits)
    path = config["metastore.iceberg.catalog.servlet.path"].strip("/")
    app = build_app(services, authenticator(config), path)
    return RestListener(app, host, config["metastore.catalog.servlet.port"],
                        tls.context if tls is not None else None)
