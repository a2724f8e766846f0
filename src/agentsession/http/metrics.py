"""``GET /metrics``: the service's metrics in the Prometheus text format.

Off unless ``AGENTSESSION_METRICS_TOKEN`` is set; then ``/metrics`` answers only a
request with ``Authorization: Bearer <that token>`` (401 otherwise; not an API key: a
scraper needs no user). With ``serve --workers N`` each worker writes its values to
``PROMETHEUS_MULTIPROC_DIR`` (``serve`` makes one) and a scrape of any worker sums
them (prometheus-client's multiprocess mode).

What is measured (names, numbers, route templates and operation names only: never a
session id, user id, key, message or any other content):

* ``agentsession_http_requests_total{method,route,status}`` and
  ``agentsession_http_request_seconds{method,route}``: every request by route template;
* ``agentsession_store_call_seconds{operation}``: each manager call of a request;
* ``agentsession_group_commit_batch_size``: writes per SQLite COMMIT;
* ``agentsession_busy_retries_total{kind}``: writes and reads run again after busy;
* ``agentsession_auth_failures_total{outcome}``: ``unauthenticated`` (401) or
  ``refused`` (429);
* ``agentsession_change_feed_subscribers``: open Server-Sent Events streams;
* ``agentsession_sessions{status}``: sessions by status, counted at the scrape (one
  indexed count per status).
"""

from __future__ import annotations

import hmac
import os
import time
from typing import Any

from fastapi import FastAPI
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import observe
from ..models import SessionStatus
from ..protocol import Unauthenticated
from ..settings import Settings

__all__ = ["MULTIPROC_ENV", "Metrics", "install_metrics"]

#: The directory of prometheus-client's multiprocess mode.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics:
    """The service's metrics, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "agentsession_http_requests",
            "HTTP requests by route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "agentsession_http_request_seconds",
            "HTTP request latency, from the first byte read to the last byte sent.",
            ["method", "route"],
            registry=r,
        )
        self.store_calls = Histogram(
            "agentsession_store_call_seconds",
            "Duration of each manager call of a request.",
            ["operation"],
            registry=r,
        )
        self.batches = Histogram(
            "agentsession_group_commit_batch_size",
            "Writes one SQLite COMMIT carried.",
            buckets=_BATCHES,
            registry=r,
        )
        self.retries = Counter(
            "agentsession_busy_retries",
            "Transactions run again after the store was busy.",
            ["kind"],
            registry=r,
        )
        self.auth_failures = Counter(
            "agentsession_auth_failures",
            "Failed authentications: unauthenticated (401) or refused (429).",
            ["outcome"],
            registry=r,
        )
        self.subscribers = Gauge(
            "agentsession_change_feed_subscribers",
            "Open change-feed event streams.",
            registry=r,
            multiprocess_mode="livesum",
        )

    def on_note(self, name: str, value: float, label: str) -> None:
        """The :mod:`agentsession.observe` listener."""
        if name == "store_call_seconds":
            self.store_calls.labels(label).observe(value)
        elif name == "group_commit_batch":
            self.batches.observe(value)
        elif name == "busy_retry":
            self.retries.labels(label).inc()
        elif name == "auth_failure":
            self.auth_failures.labels(label).inc()
        elif name == "feed_subscribers":
            self.subscribers.inc(value)


class _Measured:
    """ASGI middleware: count and time every HTTP request by its route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            self.metrics.requests.labels(method, route, str(status[0])).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)


def install_metrics(app: FastAPI, settings: Settings) -> Metrics:
    """Add ``GET /metrics`` and the request middleware (``settings.metrics_token`` is
    set). Call before the edge middleware is added."""
    assert settings.metrics_token is not None
    metrics = Metrics()
    expected = settings.metrics_token.get_secret_value().encode()
    observe.listen(metrics.on_note)

    async def scrape(request: Request) -> Response:
        sent = request.headers.get("authorization", "").removeprefix("Bearer ").encode()
        if not hmac.compare_digest(sent, expected):
            raise Unauthenticated("/metrics needs `Authorization: Bearer <metrics token>`")
        return Response(await _exposition(request, metrics), media_type=CONTENT_TYPE_LATEST)

    # A plain route: no operation of the API (not in the table, not in OpenAPI).
    app.router.routes.append(Route("/metrics", scrape, methods=["GET"]))

    app.add_middleware(_Measured, metrics=metrics)
    return metrics


async def _exposition(request: Request, metrics: Metrics) -> bytes:
    """Every metric as Prometheus text: this process's, or with multiprocess mode every
    worker's summed; then the sessions by status, counted now."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = metrics.registry
    # Written as text, not as a Gauge: in multiprocess mode a gauge made here would
    # leave a file of this process behind for every later scrape to sum.
    lines = [
        "# HELP agentsession_sessions Sessions by status.",
        "# TYPE agentsession_sessions gauge",
    ]
    manager: Any = request.app.state.services.manager
    for status in SessionStatus:
        count = await manager.count_sessions(
            user_id="metrics", admin=True, all_users=True, status=status
        )
        lines.append(f'agentsession_sessions{{status="{status.value}"}} {count}')
    return generate_latest(registry) + ("\n".join(lines) + "\n").encode()
