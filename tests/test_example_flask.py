"""The Flask example (``examples/flask_app/app.py``) with Flask's test client."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentsession import SessionManager
from agentsession.stores.memory.store import MemoryStore

pytest.importorskip("flask")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flask_app" / "app.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flask_app_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def client() -> Any:
    """A test client of the example app over a memory store."""
    manager = SessionManager(MemoryStore())
    app = _example().create_app(manager)
    app.config["TESTING"] = True
    with app.test_client() as c:
        yield c
    manager.close()


ALICE = {"X-User": "alice"}


def test_chat_turn_appends_user_message_and_reply(client: Any) -> None:
    """create -> chat twice -> history has the four messages in order."""
    created = client.post("/sessions", json={"title": "t"}, headers=ALICE)
    assert created.status_code == 201
    sid = created.get_json()["session_id"]
    turn = client.post(f"/sessions/{sid}/chat", json={"content": "héllo 👋"}, headers=ALICE)
    assert turn.status_code == 201
    assert turn.get_json()["reply"] == "You said: héllo 👋"
    assert [m["seq"] for m in turn.get_json()["messages"]] == [1, 2]
    client.post(f"/sessions/{sid}/chat", json={"content": "again"}, headers=ALICE)
    history = client.get(f"/sessions/{sid}/messages", headers=ALICE).get_json()["items"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "héllo 👋"),
        ("assistant", "You said: héllo 👋"),
        ("user", "again"),
        ("assistant", "You said: again"),
    ]
    last = client.get(f"/sessions/{sid}/messages?limit=3", headers=ALICE).get_json()
    assert ([m["seq"] for m in last["items"]], last["has_more"]) == ([2, 3, 4], True)
    older = client.get(
        f"/sessions/{sid}/messages", query_string={"cursor": last["next_cursor"]}, headers=ALICE
    ).get_json()
    assert ([m["seq"] for m in older["items"]], older["has_more"]) == ([1], False)


def test_retried_chat_with_idempotency_key_is_stored_once(client: Any) -> None:
    """The same Idempotency-Key twice: one turn stored, the same answer."""
    sid = client.post("/sessions", json={}, headers=ALICE).get_json()["session_id"]
    headers = {**ALICE, "Idempotency-Key": "turn-1"}
    first = client.post(f"/sessions/{sid}/chat", json={"content": "x"}, headers=headers)
    again = client.post(f"/sessions/{sid}/chat", json={"content": "x"}, headers=headers)
    assert first.get_json() == again.get_json()
    assert len(client.get(f"/sessions/{sid}/messages", headers=ALICE).get_json()["items"]) == 2
    other = client.post(f"/sessions/{sid}/chat", json={"content": "y"}, headers=headers)
    assert other.status_code == 422
    assert other.get_json()["error"] == "idempotency-key-reused"


def test_errors_map_to_http_status(client: Any) -> None:
    """Not yours / missing -> 404 alike; closed -> 409; bad input -> 400; no user -> 401."""
    sid = client.post("/sessions", json={}, headers=ALICE).get_json()["session_id"]
    bob = client.get(f"/sessions/{sid}/messages", headers={"X-User": "bob"})
    missing = client.get("/sessions/ses_aaaaaaaaaaaaaaaaaaaaaaaaaa/messages", headers=ALICE)
    assert bob.status_code == missing.status_code == 404
    assert bob.get_json() == missing.get_json()
    assert bob.get_json()["error"] == "not-found"
    assert client.post("/sessions", json={}).status_code == 401
    assert client.post(f"/sessions/{sid}/chat", json={}, headers=ALICE).status_code == 400
    assert client.post(f"/sessions/{sid}/chat", data="x", headers=ALICE).status_code == 400
    bad_limit = client.get(f"/sessions/{sid}/messages?limit=-1", headers=ALICE)
    assert bad_limit.status_code == 400 and bad_limit.get_json()["field"] == "limit"

    example = _example()
    manager = SessionManager(MemoryStore())
    s = manager.create_session(user_id="alice")
    manager.close_session(session_id=s.session_id, user_id="alice")
    with example.create_app(manager).test_client() as other:
        closed = other.post(f"/sessions/{s.session_id}/chat", json={"content": "x"}, headers=ALICE)
        assert closed.status_code == 409
        assert closed.get_json()["error"] == "session-not-active"
