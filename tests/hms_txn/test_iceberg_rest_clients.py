"""Other clients on the Iceberg REST catalog, and one table through both doors (issue 43).

* DuckDB's iceberg extension (PyPI ``duckdb==1.5.5`` with ``duckdb-extension-iceberg``,
  ``-httpfs`` and ``-avro`` of the same version, loaded from their wheels: nothing is
  downloaded) attaches the catalog and reads a table. It sends ``?warehouse=`` to
  ``/v1/config`` and ``X-Iceberg-Access-Delegation: vended-credentials`` with its loads; both
  are accepted and ignored (the server's debug log says so).
* A table created through REST is loaded through pyiceberg's Thrift ``HiveCatalog`` and
  listed by Spark with Hive support (its built-in Hive 2.3 client); a table created through
  the ``HiveCatalog`` is loaded, appended to and listed through REST.
"""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.spark.iceberg_listing_job import DATABASE
from tests.support.iceberg_rest import duckdb_with_iceberg, hive_catalog, rest_catalog, rest_server
from tests.support.requirements import require_module
from tests.support.spark import run_scenario

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False),
                NestedField(2, "name", StringType(), required=False))
LISTING_JOB = os.path.join(os.path.dirname(os.path.dirname(__file__)), "spark",
                           "iceberg_listing_job.py")
ARROW = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(*ids: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": f"n{i}"} for i in ids], schema=ARROW)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = rest_server(str(tmp_path_factory.mktemp("iceberg-rest-clients")))
    yield srv
    srv.stop()


def test_duckdb_reads_through_the_rest_catalog(server, caplog):
    require_module("duckdb_extension_iceberg")
    catalog = rest_catalog(server)
    catalog.create_namespace("duck")
    table = catalog.create_table("duck.sales", schema=SCHEMA)
    table.append(rows(1, 2))
    catalog.load_table("duck.sales").append(rows(3))
    con = duckdb_with_iceberg()
    with caplog.at_level(logging.DEBUG, logger="hms_txn.rest"):
        con.execute(f"ATTACH 'lakehouse' AS lake (TYPE iceberg, ENDPOINT "
                    f"'{server.server.rest_address}', AUTHORIZATION_TYPE 'none')")
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() "
                             "WHERE database_name = 'lake'").fetchall()
        found = con.execute("SELECT id, name FROM lake.duck.sales ORDER BY id").fetchall()
    assert ("duck", "sales") in tables
    assert found == [(1, "n1"), (2, "n2"), (3, "n3")]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "warehouse 'lakehouse' accepted and ignored" in said
    assert "X-Iceberg-Access-Delegation 'vended-credentials' accepted and ignored" in said
    con.close()


def test_created_through_rest_is_loaded_by_hive_catalog_and_listed_by_spark(server, tmp_path):
    rest = rest_catalog(server)
    rest.create_namespace(DATABASE)
    rest.create_table(f"{DATABASE}.from_rest", schema=SCHEMA).append(rows(1, 2))
    # The reverse: made through Thrift's HiveCatalog, served by REST.
    hive = hive_catalog(server)
    hive.create_table(f"{DATABASE}.from_thrift", schema=SCHEMA).append(rows(10))

    loaded = hive.load_table(f"{DATABASE}.from_rest")
    assert sorted(r["id"] for r in loaded.scan().to_arrow().to_pylist()) == [1, 2]
    loaded.append(rows(3))                       # a Thrift commit to a REST-made table
    assert sorted(r["id"] for r in rest.load_table(f"{DATABASE}.from_rest").scan()
                  .to_arrow().to_pylist()) == [1, 2, 3]

    assert sorted(rest.list_tables(DATABASE)) == [(DATABASE, "from_rest"),
                                                  (DATABASE, "from_thrift")]
    back = rest.load_table(f"{DATABASE}.from_thrift")
    back.append(rows(11))                        # a REST commit to a Thrift-made table
    assert sorted(r["id"] for r in hive.load_table(f"{DATABASE}.from_thrift").scan()
                  .to_arrow().to_pylist()) == [10, 11]

    require_module("pyspark")
    results = run_scenario(server.uri, str(tmp_path / "spark"), script=LISTING_JOB)
    listed = {row[1] for row in results[0]["rows"]}
    assert {"from_rest", "from_thrift"} <= listed
