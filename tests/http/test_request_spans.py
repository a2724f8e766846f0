"""OpenTelemetry spans of the HTTP service: one per request with its route template,
status and request id, and a child span per store call; no ids or content."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from agentsession import observe  # noqa: E402
from agentsession.http.otel import install_tracing  # noqa: E402


def test_each_request_is_a_span_with_its_store_calls() -> None:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = list(observe._listeners)
    with SessionManager.from_url("memory://") as manager:
        keys = MemoryKeyStore()
        alice = {"Authorization": f"Bearer {keys.create(user_id='alice')[1]}"}
        app = create_app(manager, Settings(url="memory://"), keys=keys)
        install_tracing(app, provider)
        with TestClient(app) as client:
            made = client.post("/v1/sessions", json={"title": "secret title"}, headers=alice)
            sid = made.json()["session_id"]
            read = client.get(f"/v1/sessions/{sid}", headers=alice)
    observe._listeners[:] = before
    spans = exporter.get_finished_spans()
    requests = [s for s in spans if s.parent is None]
    assert [s.name for s in requests] == ["POST /v1/sessions", "GET /v1/sessions/{session_id}"]
    assert [s.attributes["http.response.status_code"] for s in requests] == [201, 200]
    assert [s.attributes["agentsession.request_id"] for s in requests] == [
        made.headers["x-request-id"],
        read.headers["x-request-id"],
    ]
    for request, operation in zip(requests, ["create_session", "get_session"], strict=True):
        children = [s for s in spans if s.parent and s.parent.span_id == request.context.span_id]
        assert [s.name for s in children] == [f"store {operation}"]
        assert request.start_time <= children[0].start_time <= children[0].end_time
    text = repr([dict(s.attributes) for s in spans])
    assert sid not in text and "alice" not in text and "secret" not in text
