"""``GET /metrics``: off without its token, 401 without the right one, Prometheus text
that prometheus-client's parser reads, and values that move as requests are served;
never a session id, user id or key in it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings

parser = pytest.importorskip("prometheus_client.parser")

TOKEN = "metrics-token-0123456789"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def served(tmp_path: Path):  # type: ignore[no-untyped-def]
    manager = SessionManager.from_url(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(manager, Settings(url="sqlite://", metrics_token=TOKEN), keys=keys)
    with TestClient(app) as client:
        yield client, {"Authorization": f"Bearer {token}"}
    manager.close()


def test_metrics_are_off_without_a_token(tmp_path: Path) -> None:
    with SessionManager.from_url("memory://") as manager:
        app = create_app(manager, Settings(url="memory://"), keys=MemoryKeyStore())
        assert TestClient(app).get("/metrics").status_code == 404


def test_metrics_need_their_token(served) -> None:  # type: ignore[no-untyped-def]
    client, alice = served
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=alice).status_code == 401
    ok = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/plain")


def test_metrics_parse_and_move_with_requests(served) -> None:  # type: ignore[no-untyped-def]
    client, alice = served
    scrape = {"Authorization": f"Bearer {TOKEN}"}
    before = _samples(client.get("/metrics", headers=scrape).text)
    sid = client.post("/v1/sessions", json={"agent": "support"}, headers=alice).json()["session_id"]
    for _ in range(3):
        r = client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "secret words"}]},
            headers=alice,
        )
        assert r.status_code == 201, r.text
    client.get("/v1/sessions", headers={"Authorization": "Bearer key_nope.x"})
    text = client.get("/metrics", headers=scrape).text
    after = _samples(text)
    route = "/v1/sessions/{session_id}/messages"
    key = ("agentsession_http_requests_total", {"method": "POST", "route": route, "status": "201"})
    assert _value(after, key[0], **key[1]) - _value(before, key[0], **key[1]) == 3
    count = "agentsession_http_request_seconds_count"
    assert _value(after, count, method="POST", route=route) == 3
    assert _value(after, "agentsession_store_call_seconds_count", operation="append_messages") == 3
    assert _value(after, "agentsession_group_commit_batch_size_count") >= 4
    assert _value(after, "agentsession_auth_failures_total", outcome="unauthenticated") == 1
    assert _value(after, "agentsession_sessions", status="ACTIVE") == 1
    assert _value(after, "agentsession_sessions", status="CLOSED") == 0
    assert sid not in text and "alice" not in text and "secret" not in text
