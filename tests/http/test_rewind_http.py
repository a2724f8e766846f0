"""Rewind over HTTP: ``POST /v1/sessions/{id}/rewind``, ``GET .../rewinds`` and
``GET .../rewinds/{number}/messages``, and the clients' methods of the same names."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem

from agentsession import AsyncSessionManager, RewindNotFound, SessionManager, VersionConflict
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent

METHODS = ("rewind_session", "list_rewinds", "get_rewound_messages")


def _session_with(api: Api, n: int) -> str:
    sid: str = api.create(working_memory={"goal": "start"})["session_id"]
    batch = [{"role": "user", "content": f"m{i}"} for i in range(1, n + 1)]
    r = api.http.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": batch, "working_memory_patch": {"goal": "later"}},
        headers=api.alice,
    )
    assert r.status_code == 201, r.text
    return sid


def test_rewind_answers_the_result_and_the_new_etag(api: Api) -> None:
    """200 with the result, the ETag the new version; a replay is flagged; hidden
    messages are listed by number; the memory is back as of the point."""
    sid = _session_with(api, 4)
    version = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()["version"]
    headers = {**api.alice, "Idempotency-Key": "back-1"}
    r = api.http.post(f"/v1/sessions/{sid}/rewind", json={"to_seq": 1}, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "number": 1,
        "to_seq": 1,
        "count": 3,
        "mode": "hide",
        "memory_version": version + 1,
        "session_version": version + 1,
    }
    assert r.headers["etag"] == f'"{sid}@{version + 1}"'
    again = api.http.post(f"/v1/sessions/{sid}/rewind", json={"to_seq": 1}, headers=headers)
    assert again.json() == r.json() and again.headers["idempotent-replayed"] == "true"
    memory = api.http.get(f"/v1/sessions/{sid}/memory", headers=api.alice).json()
    assert memory["data"] == {"goal": "start"}
    rewinds = api.http.get(f"/v1/sessions/{sid}/rewinds", headers=api.alice).json()
    assert [(x["number"], x["count"]) for x in rewinds["items"]] == [(1, 3)]
    hidden = api.http.get(f"/v1/sessions/{sid}/rewinds/1/messages", headers=api.alice).json()
    assert [m["content"] for m in hidden["items"]] == ["m2", "m3", "m4"]
    gone = api.http.get(f"/v1/sessions/{sid}/rewinds/2/messages", headers=api.alice)
    assert assert_problem(gone, 404, "not-found")["number"] == 2


def test_if_match_and_bad_bodies(api: Api) -> None:
    """A stale If-Match is 412; a bad body 422; to_seq past the end 400; a closed
    session 409."""
    sid = _session_with(api, 2)
    stale = {**api.alice, "If-Match": f'"{sid}@1"'}
    r = api.http.post(f"/v1/sessions/{sid}/rewind", json={"to_seq": 0}, headers=stale)
    assert_problem(r, 412, "version-conflict")
    for body in ({}, {"to_seq": -1}, {"to_seq": 0, "remove": "yes"}, {"to_seq": 0, "x": 1}):
        r = api.http.post(f"/v1/sessions/{sid}/rewind", json=body, headers=api.alice)
        assert_problem(r, 422)
    r = api.http.post(f"/v1/sessions/{sid}/rewind", json={"to_seq": 3}, headers=api.alice)
    assert_problem(r, 400, "validation-error")
    api.http.post(f"/v1/sessions/{sid}/close", json={}, headers=api.alice)
    r = api.http.post(f"/v1/sessions/{sid}/rewind", json={"to_seq": 0}, headers=api.alice)
    assert_problem(r, 409, "session-not-active")


def test_openapi_lists_the_routes(api: Api) -> None:
    paths = api.http.get("/openapi.json").json()["paths"]
    assert "post" in paths["/v1/sessions/{session_id}/rewind"]
    assert "get" in paths["/v1/sessions/{session_id}/rewinds"]
    assert "get" in paths["/v1/sessions/{session_id}/rewinds/{number}/messages"]


def test_clients_mirror_the_manager() -> None:
    """Same keywords as the manager's; the sync and async clients rewind, list and
    read hidden messages; errors come back typed."""
    for name in METHODS:
        want = list(inspect.signature(getattr(SessionManager, name)).parameters)
        assert list(inspect.signature(getattr(AsyncSessionManager, name)).parameters) == want
        assert set(inspect.signature(getattr(SessionClient, name)).parameters) == set(want)
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys)

    async def main() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            s = await c.create_session(agent="a")
            await c.append_messages(
                session_id=s.session_id, messages=[{"role": "user", "content": "x"}] * 3
            )
            with pytest.raises(VersionConflict):
                await c.rewind_session(session_id=s.session_id, to_seq=1, expected_version=1)
            done = await c.rewind_session(session_id=s.session_id, to_seq=1, remove=True)
            listed = await c.list_rewinds(session_id=s.session_id)
            hidden = await c.get_rewound_messages(session_id=s.session_id, number=1)
            with pytest.raises(RewindNotFound):
                await c.get_rewound_messages(session_id=s.session_id, number=5)
            return done, listed, hidden

    done, listed, hidden = asyncio.run(main())
    assert (done.number, done.count, done.mode) == (1, 2, "remove")
    assert [r.number for r in listed.items] == [1] and hidden.items == []
    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))
        s = client.create_session(agent="a")
        client.append_messages(session_id=s.session_id, messages=[{"role": "user"}] * 2)
        assert client.rewind_session(session_id=s.session_id, to_seq=0).count == 2
        page = client.get_rewound_messages(session_id=s.session_id, number=1)
        assert [m.seq for m in page.items] == [1, 2]
        client.close()
