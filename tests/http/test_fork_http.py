"""Forks over HTTP: ``POST /v1/sessions/{id}/fork`` (201, Location, ETag, the
Idempotency-Key replay, 404 for another user's session, a bad ``at_seq``), the
``parent_session_id`` filter of ``GET /v1/sessions``, the OpenAPI document, and the
clients' ``fork_session`` of the manager's name and signature."""

from __future__ import annotations

import asyncio
import inspect

import httpx
import pytest
from http_support import Api, assert_problem

from agentsession import AsyncSessionManager, SessionManager, SessionNotFound, ValidationError
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.ids import new_id
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

pytestmark = pytest.mark.store_independent


def _history(api: Api, **body: object) -> str:
    sid: str = api.create(**body)["session_id"]
    msgs = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    r = api.http.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs}, headers=api.alice)
    assert r.status_code == 201, r.text
    return sid


def test_fork_answers_201_with_location_and_etag(api: Api) -> None:
    sid = _history(api, ttl_seconds=60)
    parent = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()
    body = {"at_seq": 2, "title": "branch", "external_key": "b-1"}
    headers = {**api.alice, "Idempotency-Key": "fork-1"}
    r = api.http.post(f"/v1/sessions/{sid}/fork", json=body, headers=headers)
    assert r.status_code == 201, r.text
    fork = r.json()
    assert r.headers["location"] == f"/v1/sessions/{fork['session_id']}"
    assert r.headers["etag"] == f'"{fork["session_id"]}@{fork["version"]}"'
    assert (fork["parent_session_id"], fork["fork_seq"], fork["message_count"]) == (sid, 2, 2)
    assert (fork["version"], fork["title"], fork["ttl_seconds"]) == (
        parent["version"] + 1,
        "branch",
        60,
    )
    again = api.http.post(f"/v1/sessions/{sid}/fork", json=body, headers=headers)
    assert again.status_code == 201 and again.json() == fork
    messages = api.http.get(f"/v1/sessions/{fork['session_id']}/messages", headers=api.alice)
    assert [m["content"] for m in messages.json()["items"]] == ["q1", "a1"]
    no_ttl = api.http.post(
        f"/v1/sessions/{sid}/fork", json={"ttl_seconds": None}, headers=api.alice
    )
    assert no_ttl.status_code == 201 and no_ttl.json()["ttl_seconds"] is None
    whole = api.http.post(f"/v1/sessions/{sid}/fork", headers=api.alice)
    assert whole.status_code == 201 and whole.json()["fork_seq"] == 3
    taken = api.http.post(
        f"/v1/sessions/{sid}/fork", json={"external_key": "b-1"}, headers=api.alice
    )
    assert assert_problem(taken, 409, "session-exists")["session_id"] == fork["session_id"]


def test_fork_refuses_other_users_and_bad_seqs(api: Api) -> None:
    sid = _history(api)
    assert_problem(api.http.post(f"/v1/sessions/{sid}/fork", headers=api.bob), 404)
    for bad in (-1, 1.5, "1", True):
        r = api.http.post(f"/v1/sessions/{sid}/fork", json={"at_seq": bad}, headers=api.alice)
        assert_problem(r, 422)
    past = api.http.post(f"/v1/sessions/{sid}/fork", json={"at_seq": 4}, headers=api.alice)
    assert_problem(past, 400, "validation-error")
    assert api.http.get("/v1/sessions", headers=api.bob).json()["items"] == []


def test_list_sessions_by_parent(api: Api) -> None:
    sid = _history(api)
    other = _history(api)
    forks = [
        api.http.post(f"/v1/sessions/{sid}/fork", headers=api.alice).json()["session_id"]
        for _ in range(2)
    ]
    api.http.post(f"/v1/sessions/{other}/fork", headers=api.alice)
    r = api.http.get("/v1/sessions", params={"parent_session_id": sid}, headers=api.alice)
    assert r.status_code == 200, r.text
    assert sorted(s["session_id"] for s in r.json()["items"]) == sorted(forks)
    theirs = api.http.get("/v1/sessions", params={"parent_session_id": sid}, headers=api.bob)
    assert theirs.json()["items"] == []
    bad = api.http.get("/v1/sessions", params={"parent_session_id": "x"}, headers=api.alice)
    assert_problem(bad, 422)


def test_fork_with_a_stale_if_match_is_412_and_makes_no_fork(api: Api) -> None:
    sid = _history(api)
    etag = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).headers["etag"]
    fork = f"/v1/sessions/{sid}/fork"
    ok = api.http.post(fork, headers={**api.alice, "If-Match": etag})
    assert ok.status_code == 201, ok.text
    more = {"messages": [{"role": "user", "content": "q3"}]}
    api.http.post(f"/v1/sessions/{sid}/messages", json=more, headers=api.alice)
    stale = api.http.post(fork, headers={**api.alice, "If-Match": etag})
    assert_problem(stale, 412)
    r = api.http.get("/v1/sessions", params={"parent_session_id": sid}, headers=api.alice)
    assert len(r.json()["items"]) == 1


def test_openapi_documents_the_fork(api: Api) -> None:
    doc = api.http.get("/openapi.json").json()
    post = doc["paths"]["/v1/sessions/{session_id}/fork"]["post"]
    assert {"201", "404", "409"} <= set(post["responses"])
    assert {"412"} <= set(post["responses"])
    names = {p["name"].lower() for p in post["parameters"]}
    assert names == {"session_id", "idempotency-key", "if-match"}
    listing = doc["paths"]["/v1/sessions"]["get"]
    assert "parent_session_id" in {p["name"] for p in listing["parameters"]}
    session = doc["components"]["schemas"]["Session"]["properties"]
    assert {"parent_session_id", "fork_seq"} <= set(session)


def test_clients_fork_as_the_manager_does() -> None:
    """Same name and parameters as the manager; the async client forks, lists by parent
    and raises the manager's errors."""
    want = list(inspect.signature(SessionManager.fork_session).parameters)
    for cls in (SessionClient, AsyncSessionClient, AsyncSessionManager):
        assert list(inspect.signature(cls.fork_session).parameters) == want
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore())
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]

    async def main() -> None:
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            parent = await c.create_session(ttl_seconds=30)
            sid = parent.session_id
            await c.append_messages(session_id=sid, messages=[{"role": "user", "content": "hi"}])
            fork = await c.fork_session(session_id=sid, at_seq=1, title="t")
            assert fork == manager.get_session(session_id=fork.session_id, user_id="alice")
            assert fork.ttl_seconds == 30
            assert (await c.fork_session(session_id=sid, ttl_seconds=None)).ttl_seconds is None
            listed = await c.list_sessions(parent_session_id=sid)
            assert len(listed.items) == 2
            with pytest.raises(ValidationError):
                await c.fork_session(session_id=sid, at_seq=2)
            with pytest.raises(SessionNotFound):
                await c.fork_session(session_id=new_id("ses"))

    asyncio.run(main())
