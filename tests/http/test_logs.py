"""The app's own log lines carry no request content: the access line names the route's
template (no path as sent, no query string), failures are logged by type and code
location, never by message. The whole server log of a real ``agentsession serve`` is
checked in tests/test_server_limits.py."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient
from http_support import call_asgi

from agentsession import SessionManager
from agentsession.errors import StoreError
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

pytestmark = pytest.mark.store_independent

CANARY = "CANARY-7f3a9c"


@pytest.fixture
def served() -> tuple[TestClient, SessionManager, dict[str, str]]:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore())
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    return (
        TestClient(app, raise_server_exceptions=False),
        manager,
        {"Authorization": f"Bearer {token}"},
    )


def _failing(exc: Exception) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return fail


def test_access_line_has_the_route_template_not_the_path_or_query(
    served: tuple[TestClient, SessionManager, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """One line per request on agentsession.access: method, route template, status,
    request id; the session id, the query string and unknown paths are not in it."""
    http, _, auth = served
    sid = http.post("/v1/sessions", json={"agent": "a"}, headers=auth).json()["session_id"]
    with caplog.at_level(logging.INFO, logger="agentsession.access"):
        http.get(f"/v1/sessions/{sid}/messages", params={"cursor": CANARY}, headers=auth)
        http.get(f"/v1/{CANARY}/x", headers={**auth, "x-request-id": "req-1"})
        http.request(CANARY.replace("-", ""), "/healthz")
    lines = [r.getMessage() for r in caplog.records if r.name == "agentsession.access"]
    assert len(lines) == 3, lines
    assert '"GET /v1/sessions/{session_id}/messages" 400' in lines[0]
    assert lines[1].startswith('testclient - "GET -" 404') and lines[1].endswith(" req-1")
    assert '"OTHER /healthz" 405' in lines[2]
    assert CANARY not in caplog.text and sid not in caplog.text
    assert CANARY.replace("-", "") not in caplog.text


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ValueError(f"bad value {CANARY}"), "builtins.ValueError"),
        (StoreError(f"Key (title)=({CANARY}) already exists"), "agentsession.errors.StoreError"),
    ],
)
def test_failure_is_logged_by_type_and_frames_not_message(
    served: tuple[TestClient, SessionManager, dict[str, str]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    exc: Exception,
    kind: str,
) -> None:
    """An unexpected error (500) and a store error (500) whose messages quote content:
    the log names the type and where it was raised, never the message."""
    http, manager, auth = served
    monkeypatch.setattr(manager, "list_sessions", _failing(exc))
    with caplog.at_level(logging.INFO, logger="agentsession"):
        response = http.get("/v1/sessions", headers=auth)
    assert response.status_code == 500
    assert kind in caplog.text
    assert "in fail" in caplog.text  # the frame that raised it
    assert CANARY not in caplog.text


def test_chained_causes_are_logged_by_type(
    served: tuple[TestClient, SessionManager, dict[str, str]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A StoreError raised from a driver error: both types are named, neither message."""
    http, manager, auth = served

    def fail(*args: Any, **kwargs: Any) -> Any:
        try:
            raise KeyError(CANARY)
        except KeyError as cause:
            raise StoreError(f"insert failed: {CANARY}") from cause

    monkeypatch.setattr(manager, "list_sessions", fail)
    with caplog.at_level(logging.INFO, logger="agentsession"):
        assert http.get("/v1/sessions", headers=auth).status_code == 500
    assert "agentsession.errors.StoreError" in caplog.text
    assert "caused by builtins.KeyError" in caplog.text
    assert CANARY not in caplog.text


def test_client_hanging_up_mid_body_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    """``Content-Length: 100``, ``{``, then the client closes: nothing is sent, no ERROR
    line (it was ``unhandled error ... ClientDisconnect`` with a stack), and the access
    line says 499, not 500."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys)
    incoming = [
        {"type": "http.request", "body": b"{", "more_body": True},
        {"type": "http.disconnect"},
    ]
    headers = [
        (b"host", b"test"),
        (b"content-type", b"application/json"),
        (b"content-length", b"100"),
        (b"authorization", f"Bearer {token}".encode()),
    ]
    with caplog.at_level(logging.INFO):
        sent = call_asgi(app, incoming, headers)
    assert sent == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    lines = [r.getMessage() for r in caplog.records if r.name == "agentsession.access"]
    assert len(lines) == 1 and '"POST /v1/sessions" 499 ' in lines[0], lines
