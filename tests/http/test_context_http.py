"""Context assembly and compaction over HTTP: ``GET .../context``, ``POST`` and ``GET
.../summaries``, the 422 of a budget too small, the OpenAPI document, and the clients'
methods of the manager's names and signatures."""

from __future__ import annotations

import asyncio
import inspect

import httpx
import pytest
from http_support import Api, assert_problem

from agentsession import (
    AsyncSessionManager,
    ContextBudgetTooSmall,
    SessionManager,
    SessionNotFound,
    ValidationError,
)
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.ids import new_id
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

pytestmark = pytest.mark.store_independent

METHODS = ("build_context", "add_summary", "list_summaries")


def _history(api: Api) -> str:
    sid: str = api.create()["session_id"]
    msgs = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
    ]
    r = api.http.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs}, headers=api.alice)
    assert r.status_code == 201, r.text
    return sid


def test_summaries_and_context_over_http(api: Api) -> None:
    sid = _history(api)
    body = {"text": "asked q1", "from_seq": 1, "to_seq": 2, "model": "m"}
    r = api.http.post(f"/v1/sessions/{sid}/summaries", headers=api.alice, json=body)
    assert r.status_code == 201, r.text
    got = r.json()
    assert (got["number"], got["author"], got["tokenizer"]) == (1, "alice", "bytes/4")
    assert r.headers["etag"]
    listed = api.http.get(f"/v1/sessions/{sid}/summaries", headers=api.alice).json()["items"]
    assert [s["text"] for s in listed] == ["asked q1"]
    ctx = api.http.get(f"/v1/sessions/{sid}/context?budget_tokens=500", headers=api.alice)
    assert ctx.status_code == 200, ctx.text
    body = ctx.json()
    assert body["summary"]["number"] == 1 and [m["seq"] for m in body["messages"]] == [3, 4]
    small = api.http.get(f"/v1/sessions/{sid}/context?budget_tokens=3", headers=api.alice)
    problem = assert_problem(small, 422, "context-budget-too-small")
    assert problem["needed_tokens"] > 3
    bad = api.http.post(
        f"/v1/sessions/{sid}/summaries",
        headers=api.alice,
        json={"text": "x", "from_seq": 1, "to_seq": 9},
    )
    assert_problem(bad, 400, "validation-error")
    other = api.http.get(f"/v1/sessions/{sid}/summaries", headers=api.bob)
    assert_problem(other, 404)


def test_context_explained_over_http(api: Api) -> None:
    """``explain=true`` answers the provenance; without it ``explanation`` is null."""
    sid = _history(api)
    url = f"/v1/sessions/{sid}/context?budget_tokens=500"
    assert api.http.get(url, headers=api.alice).json()["explanation"] is None
    r = api.http.get(url + "&explain=true", headers=api.alice)
    assert r.status_code == 200, r.text
    body = r.json()
    items = body["explanation"]
    assert [(i["kind"], i["seq"], i["decision"]) for i in items] == [
        ("system", None, "kept"),
        ("message", 1, "kept"),
        ("message", 2, "kept"),
        ("message", 3, "kept"),
        ("message", 4, "kept"),
    ]
    assert sum(i["tokens"] for i in items) == body["total_tokens"]
    bad = api.http.get(url + "&explain=maybe", headers=api.alice)
    assert_problem(bad, 422, "request-validation")


def test_openapi_documents_the_routes(api: Api) -> None:
    paths = api.http.get("/openapi.json").json()["paths"]
    assert "get" in paths["/v1/sessions/{session_id}/context"]
    assert {"get", "post"} <= set(paths["/v1/sessions/{session_id}/summaries"])


def test_clients_mirror_the_manager() -> None:
    """Same names and parameters as the manager; the async client answers as the
    manager does, and its errors are the manager's."""
    for name in METHODS:
        want = list(inspect.signature(getattr(SessionManager, name)).parameters)
        assert list(inspect.signature(getattr(SessionClient, name)).parameters) == want
        assert list(inspect.signature(getattr(AsyncSessionClient, name)).parameters) == want
        assert list(inspect.signature(getattr(AsyncSessionManager, name)).parameters) == want
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore())
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]

    async def main() -> None:
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            sid = (await c.create_session()).session_id
            await c.append_messages(
                session_id=sid,
                messages=[
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "yo"},
                ],
            )
            added = await c.add_summary(session_id=sid, text="greeting", from_seq=1, to_seq=1)
            assert added.session_version is not None
            assert await c.list_summaries(session_id=sid) == manager.list_summaries(
                session_id=sid, user_id="alice"
            )
            ctx = await c.build_context(session_id=sid, budget_tokens=200)
            assert ctx == manager.build_context(session_id=sid, user_id="alice", budget_tokens=200)
            why = await c.build_context(session_id=sid, budget_tokens=200, explain=True)
            assert why == manager.build_context(
                session_id=sid, user_id="alice", budget_tokens=200, explain=True
            )
            assert why.explanation is not None and len(why.explanation) == 3
            with pytest.raises(ContextBudgetTooSmall) as err:
                await c.build_context(session_id=sid, budget_tokens=2)
            assert err.value.needed_tokens > 2
            with pytest.raises(SessionNotFound):
                await c.list_summaries(session_id=new_id("ses"))

            class Other:
                name = "other"

                def count(self, text: str) -> int:
                    return 1

            with pytest.raises(ValidationError):
                await c.build_context(session_id=sid, budget_tokens=9, tokenizer=Other())

    asyncio.run(main())
