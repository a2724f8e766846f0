"""The working memory as of a message seq over HTTP: ``GET .../memory?at_seq=N`` and the
clients' ``at_seq``."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem

from agentsession import AsyncSessionManager, SessionManager
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent


def test_at_seq_reads_the_memory_as_it_stood(api: Api) -> None:
    """200 with the old document and the version it was written at; the ETag stays
    the session's current version; out of range is a problem naming at_seq."""
    sid = api.create(working_memory={"step": 0})["session_id"]
    r = api.http.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "hi"}], "working_memory_patch": {"step": 1}},
        headers=api.alice,
    )
    assert r.status_code == 201, r.text
    old = api.http.get(f"/v1/sessions/{sid}/memory", params={"at_seq": 0}, headers=api.alice)
    assert old.status_code == 200, old.text
    assert (old.json()["data"], old.json()["version"]) == ({"step": 0}, 2)
    assert old.headers["etag"] == f'"{sid}@3"'
    now = api.http.get(f"/v1/sessions/{sid}/memory", params={"at_seq": 1}, headers=api.alice)
    assert now.json()["data"] == {"step": 1}
    # Below 0 breaks the query's schema (422); above message_count is the manager's
    # ValidationError, which this API answers as every other one (400).
    for bad, status in ((-1, 422), (2, 400)):
        r = api.http.get(f"/v1/sessions/{sid}/memory", params={"at_seq": bad}, headers=api.alice)
        assert "at_seq" in str(assert_problem(r, status))
    spec = api.http.get("/openapi.json").json()
    params = spec["paths"]["/v1/sessions/{session_id}/memory"]["get"]["parameters"]
    assert "at_seq" in [p["name"] for p in params]


def test_clients_pass_at_seq() -> None:
    """The sync and async clients take the manager's keywords and send at_seq."""
    want = list(inspect.signature(SessionManager.get_working_memory).parameters)
    assert list(inspect.signature(AsyncSessionManager.get_working_memory).parameters) == want
    assert set(inspect.signature(SessionClient.get_working_memory).parameters) == set(want)
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys)
    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))
        s = client.create_session(agent="a", working_memory={"g": 1})
        client.append_message(
            session_id=s.session_id, message={"role": "user"}, working_memory_patch={"g": 2}
        )
        assert client.get_working_memory(session_id=s.session_id, at_seq=0).data == {"g": 1}
        client.close()

    async def main() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            s = await c.create_session(agent="a", working_memory={"g": 1})
            await c.update_working_memory(session_id=s.session_id, data={"g": 3})
            return (await c.get_working_memory(session_id=s.session_id, at_seq=0)).data

    assert asyncio.run(main()) == {"g": 3}
