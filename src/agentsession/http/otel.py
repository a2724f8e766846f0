"""OpenTelemetry spans of the HTTP service (extra ``otel``): one per request, one per
store call inside it.

On with ``AGENTSESSION_OTEL_TRACES=1``: spans go to the global tracer provider, which
the operator configures (``opentelemetry-instrument``, or their own code at start, e.g.
an OTLP exporter from the standard ``OTEL_*`` variables); with none configured they
cost next to nothing and go nowhere. A request span is named ``<METHOD> <route
template>`` and carries ``http.request.method``, ``http.route``,
``http.response.status_code`` and ``agentsession.request_id`` (the ``X-Request-Id``
answered); each manager call it makes is a child span ``store <operation>`` with its
duration. No span carries a session id, user id, key or content.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import observe

__all__ = ["install_tracing"]


class _Traced:
    """ASGI middleware: a span around each HTTP request (see the module docstring)."""

    def __init__(self, app: ASGIApp, tracer: trace.Tracer) -> None:
        self.app = app
        self.tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        with self.tracer.start_as_current_span(method, kind=SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", method)
            try:
                await self.app(scope, receive, sending)
            finally:
                # The edge middleware put it in the scope's state (before or after us).
                request_id = scope.get("state", {}).get("request_id")
                if request_id is not None:
                    span.set_attribute("agentsession.request_id", request_id)
                route = getattr(scope.get("route"), "path", None)
                if route is not None:
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status[0])
                if status[0] >= 500:
                    span.set_status(Status(StatusCode.ERROR))


def install_tracing(app: FastAPI, tracer_provider: TracerProvider | None = None) -> None:
    """Add the request spans to ``app`` and the store-call spans of every manager call
    (default: the global tracer provider)."""
    tracer = trace.get_tracer("agentsession.http", tracer_provider=tracer_provider)

    def on_note(name: str, value: float, label: str) -> None:
        if name != "store_call_seconds":
            return
        # Noted when the call has ended, in the request's context: a child of its span.
        end = time.time_ns()
        span: Any = tracer.start_span(f"store {label}", start_time=end - int(value * 1e9))
        span.set_attribute("agentsession.operation", label)
        span.end(end_time=end)

    observe.listen(on_note)
    app.add_middleware(_Traced, tracer=tracer)
