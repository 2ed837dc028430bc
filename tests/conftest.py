"""Suite-wide fixtures: the database backends and running metastore servers.

Every server-level test runs against both backends: the embedded SQLite default and a
real PostgreSQL server that this suite starts itself (see ``support/postgres.py``).
"""

from __future__ import annotations

import os

import pytest

from tests.support.postgres import PostgresServer
from tests.support.servers import InProcessServer

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def postgres():
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def db_overrides(request, backend, tmp_path) -> dict[str, str]:
    """hive-site values selecting a fresh database of the test's backend."""
    if backend == "postgres":
        pg = request.getfixturevalue("postgres")
        return {"javax.jdo.option.ConnectionURL": pg.create_database()}
    return {"javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp_path}/metastore.sqlite"}


@pytest.fixture
def hms_factory(tmp_path, db_overrides):
    """Start in-process servers on the test's backend: ``hms_factory({"hive.txn.timeout": "2s"})``."""
    started: list[InProcessServer] = []

    def start(conf: dict[str, str] | None = None) -> InProcessServer:
        overrides = dict(db_overrides)
        overrides.setdefault("hive.metastore.warehouse.dir", str(tmp_path / "warehouse"))
        overrides.update({k: str(v) for k, v in (conf or {}).items()})
        server = InProcessServer(str(tmp_path / f"data{len(started)}"), overrides)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def hms(hms_factory) -> InProcessServer:
    return hms_factory()


@pytest.fixture
def client(hms):
    c = hms.client()
    yield c
    c.close()


def pytest_report_header(config):
    return [f"hms-txn tests; CI={os.environ.get('CI', '')}"]


@pytest.fixture(scope="session")
def java_metastore(tmp_path_factory):
    """The reference Java metastore 2.3 (PySpark's jars, ``hms_bench.javahms``), started
    once for the session: the differential tests share it, each in databases of its own."""
    import importlib.util
    import shutil

    from hms_bench.javahms import start_java_metastore
    from tests.support.postgres import free_port
    from tests.support.requirements import require
    require(shutil.which("java") is not None, "java is not installed")
    require(importlib.util.find_spec("pyspark") is not None, "pyspark (its jars) is not installed")
    server = start_java_metastore(free_port(), str(tmp_path_factory.mktemp("javahms")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kdc():
    """One throw-away MIT Kerberos realm on loopback for the whole suite
    (tests/support/kerberos.py): the Kerberos tests share it."""
    from tests.support.kerberos import start_realm
    from tests.support.requirements import require, require_module
    require(os.path.exists("/usr/sbin/krb5kdc"), "the MIT KDC is not installed (krb5-kdc)")
    require_module("k5test")
    require_module("gssapi")
    realm = start_realm()
    yield realm
    realm.stop()


# -- object stores the suite starts itself (hms_bench.object_store) ---------------------------

@pytest.fixture(scope="session")
def moto_s3():
    """moto's standalone S3 server (from PyPI, the test extra) on a free port."""
    from hms_bench.object_store import MotoS3
    server = MotoS3().start()
    yield server
    server.stop()


@pytest.fixture
def s3_bucket(moto_s3, request) -> str:
    """A fresh bucket for the test; its locations are ``s3a://<bucket>/...``."""
    import re
    import uuid
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{name}-{uuid.uuid4().hex[:8]}"
    moto_s3.create_bucket(name)
    return name


@pytest.fixture(scope="session")
def azurite():
    """Azurite's blob service (from npm: ``npm install azurite``)."""
    from hms_bench.object_store import Azurite, azurite_command
    from tests.support.requirements import require
    require(azurite_command() is not None,
            "Azurite not installed (npm install azurite in ~/.cache/hms-txn-azurite)")
    server = Azurite().start()
    yield server
    server.stop()
