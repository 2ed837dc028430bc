"""/metrics and /health."""

from __future__ import annotations

import json
import urllib.request

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.servers import client_for


@pytest.fixture
def monitored(hms_factory):
    return hms_factory({"hms_txn.metrics.enabled": "true", "hms_txn.metrics.port": "0"})


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_metrics_count_calls_latency_and_errors(monitored):
    with client_for(monitored.port) as c:
        c.get_all_databases()
        c.get_all_databases()
        with pytest.raises(t.NoSuchObjectException):
            c.get_database("missing")
    status, body = _get(monitored.server.metrics.port, "/metrics")
    text = body.decode()
    assert status == 200
    assert 'hms_calls_total{method="get_all_databases"} 2.0' in text
    assert 'hms_call_errors_total{exception="NoSuchObjectException",method="get_database"} 1.0' in text
    assert 'hms_call_seconds_count{method="get_all_databases"} 2.0' in text


def test_health(monitored):
    status, body = _get(monitored.server.metrics.port, "/health")
    assert status == 200
    health = json.loads(body)
    assert health["status"] == "ok" and health["database"] in ("sqlite", "postgresql")
    assert _get(monitored.server.metrics.port, "/nope")[0] == 404
