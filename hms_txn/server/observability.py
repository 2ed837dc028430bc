"""Metrics and health: a Prometheus ``/metrics`` endpoint and ``/health``.

Per-method call counts, errors and latency are recorded by the handler's error proxy.
State gauges (open transactions, locks, compaction queue, cache, notification lag) are
computed when scraped, from providers the domain objects register with the metastore,
so nothing is counted twice or drifts from the database.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger(__name__)

StatsProvider = Callable[[], dict[str, float]]


class CallMetrics:
    """What the handler proxy records for every call."""

    def __init__(self, registry: CollectorRegistry):
        self.calls = Counter("hms_calls", "Thrift calls served", ["method"], registry=registry)
        self.errors = Counter("hms_call_errors", "Thrift calls that raised", ["method", "exception"],
                              registry=registry)
        self.latency = Histogram("hms_call_seconds", "Thrift call latency", ["method"], registry=registry,
                                 buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10))
        # method -> (its calls counter, its latency histogram): labels() costs more than the
        # inc/observe it precedes, and this runs for every call.
        self._children: dict[str, tuple] = {}

    def record(self, method: str, seconds: float, error: str | None = None) -> None:
        children = self._children.get(method)
        if children is None:
            children = self._children.setdefault(
                method, (self.calls.labels(method), self.latency.labels(method)))
        children[0].inc()
        children[1].observe(seconds)
        if error:
            self.errors.labels(method, error).inc()


class _StateCollector:
    def __init__(self, providers: list[StatsProvider]):
        self.providers = providers

    def collect(self) -> Iterable[GaugeMetricFamily]:
        for provider in list(self.providers):
            try:
                values = provider()
            except Exception:  # a failing provider must not break the scrape
                log.exception("metrics provider failed")
                continue
            for name, value in values.items():
                gauge = GaugeMetricFamily(f"hms_{name}", name.replace("_", " "))
                gauge.add_metric([], float(value))
                yield gauge


class Observability:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = CallMetrics(self.registry)
        self.providers: list[StatsProvider] = []
        self.registry.register(_StateCollector(self.providers))

    def add_provider(self, provider: StatsProvider) -> None:
        self.providers.append(provider)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer:
    """``/metrics`` (Prometheus text format) and ``/health`` (JSON) over HTTP."""

    def __init__(self, observability: Observability, health: Callable[[], dict], host: str, port: int):
        obs = observability

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                if self.path.split("?")[0] == "/metrics":
                    body, ctype, code = obs.render(), "text/plain; version=0.0.4", 200
                elif self.path.split("?")[0] == "/health":
                    status = health()
                    code = 200 if status.get("status") == "ok" else 503
                    body, ctype = json.dumps(status).encode(), "application/json"
                else:
                    body, ctype, code = b"not found: try /metrics or /health\n", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):
                log.debug("metrics http: " + fmt, *args)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="hms-metrics", daemon=True)

    def start(self) -> "MetricsServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
