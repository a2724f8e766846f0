"""Removing messages over HTTP: ``DELETE /v1/sessions/{id}/messages?after_seq=N``,
``POST /v1/sessions/{id}/messages/pop`` and ``PUT /v1/sessions/{id}/messages?after_seq=N``
(replace), and the clients' methods of the same names."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from http_support import Api, assert_problem
from test_client_flows import FlakyASGI

from agentsession import Message, SessionManager, TruncateResult, VersionConflict
from agentsession.client import AsyncSessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

pytestmark = pytest.mark.store_independent


def _session_with(api: Api, n: int) -> str:
    sid: str = api.create()["session_id"]
    batch = [{"role": "user", "content": f"m{i}"} for i in range(1, n + 1)]
    r = api.http.post(f"/v1/sessions/{sid}/messages", json={"messages": batch}, headers=api.alice)
    assert r.status_code == 201, r.text
    return sid


def _contents(api: Api, sid: str) -> list[Any]:
    r = api.http.get(f"/v1/sessions/{sid}/messages", headers=api.alice)
    return [m["content"] for m in r.json()["items"]]


def test_truncate_answers_counts_and_the_new_etag(api: Api) -> None:
    sid = _session_with(api, 5)
    version = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()["version"]
    headers = {**api.alice, "Idempotency-Key": "cut-1"}
    r = api.http.delete(f"/v1/sessions/{sid}/messages?after_seq=2", headers=headers)
    assert r.status_code == 200, r.text
    assert r.json() == {"removed": 3, "session_version": version + 1}
    assert r.headers["etag"] == f'"{sid}@{version + 1}"'
    again = api.http.delete(f"/v1/sessions/{sid}/messages?after_seq=2", headers=headers)
    assert again.json() == r.json() and again.headers["idempotent-replayed"] == "true"
    assert _contents(api, sid) == ["m1", "m2"]
    nothing = api.http.delete(f"/v1/sessions/{sid}/messages?after_seq=9", headers=api.alice)
    assert nothing.json() == {"removed": 0, "session_version": version + 1}


@pytest.mark.parametrize("query", ["", "?after_seq=-1", "?after_seq=x", "?after_seq=1.5"])
def test_truncate_without_a_valid_after_seq_is_refused(api: Api, query: str) -> None:
    sid = _session_with(api, 2)
    r = api.http.delete(f"/v1/sessions/{sid}/messages{query}", headers=api.alice)
    assert_problem(r, 422)
    assert _contents(api, sid) == ["m1", "m2"]


def test_replace_answers_the_new_messages_and_etag(api: Api) -> None:
    """``PUT`` replaces the messages above ``after_seq`` in one version step; a retry
    with the same key is replayed; an empty batch is refused and changes nothing."""
    sid = _session_with(api, 5)
    version = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()["version"]
    headers = {**api.alice, "Idempotency-Key": "compact-1"}
    body = {"messages": [{"role": "assistant", "content": "summary"}]}
    url = f"/v1/sessions/{sid}/messages?after_seq=1"
    r = api.http.put(url, json=body, headers=headers)
    assert r.status_code == 200, r.text
    [stored] = r.json()["items"]
    assert (stored["seq"], stored["session_version"]) == (2, version + 1)
    assert r.headers["etag"] == f'"{sid}@{version + 1}"'
    again = api.http.put(url, json=body, headers=headers)
    assert again.json() == r.json() and again.headers["idempotent-replayed"] == "true"
    assert _contents(api, sid) == ["m1", "summary"]
    assert_problem(api.http.put(url, json={"messages": []}, headers=api.alice), 400)
    assert_problem(api.http.put(f"/v1/sessions/{sid}/messages", json=body, headers=api.alice), 422)
    assert _contents(api, sid) == ["m1", "summary"]


def test_an_after_seq_past_the_end_removes_nothing_and_says_so(api: Api) -> None:
    """``PUT ...?after_seq=N`` with N at or past ``message_count`` removes nothing and
    appends, as ``DELETE`` with it removes 0; the OpenAPI operations say so."""
    sid = _session_with(api, 2)
    body = {"messages": [{"role": "assistant", "content": "new"}]}
    for n in (2, 7):
        r = api.http.put(f"/v1/sessions/{sid}/messages?after_seq={n}", json=body, headers=api.alice)
        assert r.status_code == 200, r.text
    assert _contents(api, sid) == ["m1", "m2", "new", "new"]
    r = api.http.delete(f"/v1/sessions/{sid}/messages?after_seq=9", headers=api.alice)
    assert r.status_code == 200 and r.json()["removed"] == 0, r.text
    operations = api.http.get("/openapi.json").json()["paths"]["/v1/sessions/{session_id}/messages"]
    assert "removes nothing and only appends" in operations["put"]["description"]
    assert "removes 0" in operations["delete"]["description"]


def test_pop_returns_the_newest_message_then_null(api: Api) -> None:
    sid = _session_with(api, 1)
    r = api.http.post(f"/v1/sessions/{sid}/messages/pop", headers=api.alice)
    assert r.status_code == 200, r.text
    popped = r.json()["message"]
    assert (popped["seq"], popped["content"]) == (1, "m1")
    assert "name" not in popped and "tool_calls" not in popped  # absent stays absent
    assert r.headers["etag"] == f'"{sid}@{popped["session_version"]}"'
    empty = api.http.post(f"/v1/sessions/{sid}/messages/pop", headers=api.alice)
    assert empty.status_code == 200 and empty.json() == {"message": None}
    assert empty.headers["etag"] == r.headers["etag"]  # nothing changed: the current one


def test_pop_answer_has_its_own_schema(api: Api) -> None:
    spec = api.http.get("/openapi.json").json()
    answer = spec["paths"]["/v1/sessions/{session_id}/messages/pop"]["post"]["responses"]
    ref = answer["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/PopResult"
    message = spec["components"]["schemas"]["PopResult"]["properties"]["message"]
    assert {"$ref": "#/components/schemas/Message"} in message["anyOf"]


def test_pop_with_a_stale_if_match_is_412_and_removes_nothing(api: Api) -> None:
    sid = _session_with(api, 2)
    headers = {**api.alice, "If-Match": f'"{sid}@1"'}
    r = api.http.post(f"/v1/sessions/{sid}/messages/pop", headers=headers)
    assert_problem(r, 412, "version-conflict")
    assert _contents(api, sid) == ["m1", "m2"]


def test_removal_from_a_closed_session_is_409(api: Api) -> None:
    sid = _session_with(api, 2)
    etag = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).headers["etag"]
    closed = api.http.post(f"/v1/sessions/{sid}/close", headers={**api.alice, "If-Match": etag})
    assert closed.status_code == 200, closed.text
    for r in (
        api.http.post(f"/v1/sessions/{sid}/messages/pop", headers=api.alice),
        api.http.delete(f"/v1/sessions/{sid}/messages?after_seq=0", headers=api.alice),
    ):
        assert_problem(r, 409, "session-not-active")


def test_stale_cursor_is_a_400_that_says_so(api: Api) -> None:
    sid = _session_with(api, 6)
    page = api.http.get(f"/v1/sessions/{sid}/messages?limit=2", headers=api.alice).json()
    api.http.delete(f"/v1/sessions/{sid}/messages?after_seq=3", headers=api.alice)
    r = api.http.get(
        f"/v1/sessions/{sid}/messages", params={"cursor": page["next_cursor"]}, headers=api.alice
    )
    body = assert_problem(r, 400, "validation-error")
    assert body["field"] == "cursor" and body["stale"] is True


def test_async_client_pop_retried_after_a_lost_answer_removes_one_message() -> None:
    """The client sends one Idempotency-Key on every retry of a pop or a truncate (a
    DELETE): one removal each."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys)

    async def main() -> None:
        flaky = FlakyASGI(httpx.ASGITransport(app=app))
        async with AsyncSessionClient("http://t", token, transport=flaky, backoff=0.001) as c:
            sid = (await c.create_session()).session_id
            await c.append_messages(
                session_id=sid, messages=[{"role": "user", "content": f"m{i}"} for i in range(4)]
            )
            flaky.drops = 1
            popped = await c.pop_message(session_id=sid)
            assert isinstance(popped, Message) and popped.content == "m3"
            flaky.drops = 1  # a DELETE too: the retry replays the first result
            cut = await c.truncate_messages(session_id=sid, after_seq=1)
            assert cut == TruncateResult(removed=2, session_version=cut.session_version)
            with pytest.raises(VersionConflict):
                await c.pop_message(session_id=sid, expected_version=1)
            assert [m.content for m in (await c.get_messages(session_id=sid)).items] == ["m0"]
            assert await c.pop_message(session_id=sid) is not None
            assert await c.pop_message(session_id=sid) is None

    asyncio.run(main())
