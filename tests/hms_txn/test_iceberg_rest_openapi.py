"""The Iceberg REST catalog against its OpenAPI document, with schemathesis (issue 43).

The server publishes the document of the routes it serves (``<path>/v1/openapi.json``: the
spec's operations, ids, parameters, bodies and status codes, written from the spec's
``rest-catalog-open-api.yaml``). schemathesis generates requests from it, well-formed ones
(positive) and malformed ones (negative), and checks every answer: never a server error
(5xx), a status code and body the document declares for the operation, malformed requests
refused. The run is bounded (a few examples per operation and mode) so that it stays fast.
"""

from __future__ import annotations

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from tests.support.iceberg_rest import rest_catalog, rest_server

EXAMPLES = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = rest_server(str(tmp_path_factory.mktemp("iceberg-rest-openapi")))
    catalog = rest_catalog(srv)        # something to find: a namespace and a table
    catalog.create_namespace("api")
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField
    catalog.create_table("api.t", schema=Schema(NestedField(1, "id", LongType())))
    yield srv
    srv.stop()


CHECKS = [openapi_checks.status_code_conformance, openapi_checks.content_type_conformance,
          openapi_checks.response_schema_conformance, openapi_checks.negative_data_rejection]


def exercise(operation, mode: GenerationMode, problems: list[str]) -> None:
    """Up to EXAMPLES generated requests of one operation in one mode, each answer checked."""

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
              derandomize=True, database=None)
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case):
        response = case.call(timeout=30)
        if response.status_code >= 500:
            problems.append(f"{mode.value} {case.method} {case.formatted_path}: "
                            f"{response.status_code} {response.text[:300]}")
            return
        try:
            case.validate_response(response, checks=CHECKS)
        except Exception as err:       # schemathesis' check failures (a failure group)
            problems.append(f"{mode.value} {case.method} {case.formatted_path} "
                            f"-> {response.status_code}: {str(err)[:600]}")

    check()


def test_generated_requests_get_the_documented_answers(server):
    loaded = schemathesis.openapi.from_url(f"{server.server.rest_address}/v1/openapi.json")
    loaded.config.update(base_url=server.server.rest_address.rsplit("/", 1)[0])
    problems: list[str] = []
    operations = [result.ok() for result in loaded.get_all_operations()]
    assert len(operations) == 17
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            exercise(operation, mode, problems)
    assert problems == []


def test_the_document_names_the_spec_operations(server):
    document = requests.get(f"{server.server.rest_address}/v1/openapi.json").json()
    ids = {op["operationId"] for path in document["paths"].values() for op in path.values()}
    assert ids == {"getConfig", "listNamespaces", "createNamespace", "loadNamespaceMetadata",
                   "namespaceExists", "dropNamespace", "updateProperties", "listTables",
                   "createTable", "registerTable", "loadTable", "tableExists", "updateTable",
                   "dropTable", "renameTable", "reportMetrics", "commitTransaction"}
    assert "/iceberg/v1/{prefix}/namespaces/{namespace}/tables/{table}" in document["paths"]
