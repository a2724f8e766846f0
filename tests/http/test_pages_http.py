"""Listings over HTTP are pages that say when they leave items out; restore answers
bounded windows with cursors; every write answer carries the session's new ETag."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from http_support import Api, assert_problem

from agentsession.client import AsyncSessionClient


def _page(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"items", "next_cursor", "has_more"}
    assert body["has_more"] == (body["next_cursor"] is not None)
    return body


def test_101_messages_plain_get_says_more_and_the_cursor_gives_the_rest(api: Api) -> None:
    """No silent cap: 100 items and has_more; the cursor gives the 101st (the oldest)."""
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}/messages"
    batch = [{"role": "user", "content": str(i)} for i in range(101)]
    api.http.post(base, json={"messages": batch}, headers=api.alice).raise_for_status()
    first = _page(api.http.get(base, headers=api.alice))
    assert [m["seq"] for m in first["items"]] == list(range(2, 102)) and first["has_more"]
    rest = _page(api.http.get(base, params={"cursor": first["next_cursor"]}, headers=api.alice))
    assert [m["seq"] for m in rest["items"]] == [1] and not rest["has_more"]


def test_every_listing_route_pages_with_a_cursor(api: Api) -> None:
    """Sessions, messages, tool calls, runs and audit: pages of 2 followed by their
    cursors list everything once."""
    sid = api.create()["session_id"]
    api.create()
    base = f"/v1/sessions/{sid}"
    for _ in range(3):
        api.http.post(f"{base}/tool-calls", json={"tool": "t"}, headers=api.alice)
        run = api.http.post(f"{base}/runs", json={}, headers=api.alice).json()
        api.http.post(
            f"{base}/runs/{run['run_id']}/finish", json={"status": "SUCCEEDED"}, headers=api.alice
        )
        api.http.post(
            f"{base}/messages",
            json={"message": {"role": "user", "content": "x"}},
            headers=api.alice,
        )
    expected = {
        "/v1/sessions": 2,
        f"{base}/messages": 3,
        f"{base}/tool-calls": 3,
        f"{base}/runs": 3,
        f"{base}/audit": 13,
    }
    for path, count in expected.items():
        seen: list[Any] = []
        page = _page(api.http.get(path, params={"limit": 2}, headers=api.alice))
        while True:
            seen += [x.get("seq", x.get("session_id")) for x in page["items"]]
            if not page["has_more"]:
                break
            params = {"limit": 2, "cursor": page["next_cursor"]}
            page = _page(api.http.get(path, params=params, headers=api.alice))
            assert page["items"]
        assert len(seen) == len(set(seen)) == count, path


def test_bad_cursors_are_problems(api: Api) -> None:
    """A foreign or malformed cursor is a validation error; an overlong one fails the
    request schema."""
    sid = api.create()["session_id"]
    other = api.create()["session_id"]
    for s in (sid, other):
        api.http.post(
            f"/v1/sessions/{s}/messages",
            json={"messages": [{"role": "user", "content": "x"}] * 3},
            headers=api.alice,
        )
    cursor = _page(api.http.get(f"/v1/sessions/{sid}/messages?limit=1", headers=api.alice))[
        "next_cursor"
    ]
    for path, params in (
        (f"/v1/sessions/{other}/messages", {"cursor": cursor}),
        (f"/v1/sessions/{sid}/tool-calls", {"cursor": cursor}),
        (f"/v1/sessions/{sid}/messages", {"cursor": cursor, "after": 1}),
        (f"/v1/sessions/{sid}/audit", {"cursor": "nope"}),
    ):
        body = assert_problem(
            api.http.get(path, params=params, headers=api.alice), 400, "validation-error"
        )
        assert body["field"] == "cursor"
    assert_problem(
        api.http.get(f"/v1/sessions/{sid}/runs", params={"cursor": "x" * 201}, headers=api.alice),
        422,
        "request-validation",
    )


def test_restore_answers_bounded_windows_with_cursors(api: Api) -> None:
    """The restore answer carries each window's cursor; it pages on over HTTP."""
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}"
    batch = [{"role": "user", "content": str(i)} for i in range(60)]
    api.http.post(f"{base}/messages", json={"messages": batch}, headers=api.alice)
    for _ in range(55):
        api.http.post(f"{base}/tool-calls", json={"tool": "t"}, headers=api.alice)
    restored = api.http.post(f"{base}/restore", json={"message_limit": 20}, headers=api.alice)
    assert restored.status_code == 200, restored.text
    body = restored.json()
    assert [m["seq"] for m in body["messages"]] == list(range(41, 61))
    assert [c["seq"] for c in body["tool_calls"]] == list(range(6, 56))
    assert body["runs"] == [] and body["runs_next_cursor"] is None
    older = _page(
        api.http.get(
            f"{base}/messages", params={"cursor": body["messages_next_cursor"]}, headers=api.alice
        )
    )
    assert [m["seq"] for m in older["items"]] == list(range(1, 41))
    calls = _page(
        api.http.get(
            f"{base}/tool-calls",
            params={"cursor": body["tool_calls_next_cursor"]},
            headers=api.alice,
        )
    )
    assert [c["seq"] for c in calls["items"]] == [1, 2, 3, 4, 5] and not calls["has_more"]
    too_many = api.http.post(f"{base}/restore", json={"message_limit": 1001}, headers=api.alice)
    assert_problem(too_many, 422, "request-validation")


def test_write_answers_carry_the_etag_of_the_new_version(api: Api) -> None:
    """Every write answer's ETag equals the ETag of a GET of the session right after,
    and ``session_version`` in the body says the same; chained as If-Match, no write
    conflicts."""
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}"
    etag = api.http.get(base, headers=api.alice).headers["etag"]

    def write(method: str, path: str, body: Any) -> httpx.Response:
        nonlocal etag
        answer = api.http.request(
            method, base + path, json=body, headers={**api.alice, "If-Match": etag}
        )
        assert answer.status_code in (200, 201), answer.text
        assert answer.headers["etag"] == api.http.get(base, headers=api.alice).headers["etag"]
        assert answer.headers["etag"] != etag
        etag = answer.headers["etag"]
        return answer

    message = write("POST", "/messages", {"message": {"role": "user", "content": "a"}})
    assert message.headers["etag"] == f'"{sid}@{message.json()["session_version"]}"'
    batch = write("POST", "/messages", {"messages": [{"role": "user", "content": "b"}] * 2})
    assert {m["session_version"] for m in batch.json()["items"]} == {3}
    assert write("POST", "/tool-calls", {"tool": "t"}).json()["session_version"] == 4
    run = write("POST", "/runs", {}).json()
    write("POST", f"/runs/{run['run_id']}/steps", {"kind": "model"})
    write("POST", f"/runs/{run['run_id']}/finish", {"status": "SUCCEEDED"})
    write("PUT", "/memory", {"goal": "g"})
    write("PATCH", "", {"title": "t"})
    write("POST", "/close", {})
    write("POST", "/restore", {})
    read = api.http.get(f"{base}/messages", headers=api.alice).json()["items"]
    assert all("session_version" not in m for m in read)


@pytest.mark.parametrize("path", ["/messages", "/tool-calls", "/runs"])
def test_replayed_write_answers_carry_the_first_etag(api: Api, path: str) -> None:
    """A replay answers the first answer, ETag included, though the session moved on."""
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}"
    body = (
        {"message": {"role": "user", "content": "x"}}
        if path == "/messages"
        else ({"tool": "t"} if path == "/tool-calls" else {})
    )
    headers = {**api.alice, "Idempotency-Key": "once"}
    first = api.http.post(base + path, json=body, headers=headers)
    api.http.post(
        f"{base}/messages",
        json={"message": {"role": "user", "content": "later"}},
        headers=api.alice,
    )
    again = api.http.post(base + path, json=body, headers=headers)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["etag"] == first.headers["etag"] == f'"{sid}@2"'
    assert again.json() == first.json()


def test_client_returns_pages_and_restore_cursors(api: Api) -> None:
    """The Python client answers Pages like the manager, cursors and all."""
    token = api.alice["Authorization"].removeprefix("Bearer ")

    async def main() -> None:
        transport = httpx.ASGITransport(app=api.app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            sid = (await c.create_session()).session_id
            batch = [{"role": "user", "content": str(i)} for i in range(5)]
            await c.append_messages(session_id=sid, messages=batch)
            page = await c.get_messages(session_id=sid, limit=2)
            assert ([m.seq for m in page.items], page.has_more) == ([4, 5], True)
            older = await c.get_messages(session_id=sid, limit=2, cursor=page.next_cursor)
            assert [m.seq for m in older.items] == [2, 3]
            for _ in range(3):
                await c.record_tool_call(session_id=sid, tool="t")
            calls = await c.get_tool_history(session_id=sid, limit=2)
            rest = await c.get_tool_history(session_id=sid, cursor=calls.next_cursor)
            assert [x.seq for x in calls.items + rest.items] == [1, 2, 3] and not rest.has_more
            assert (await c.get_audit_log(session_id=sid, limit=1)).has_more
            assert (await c.list_runs(session_id=sid)).items == []
            restored = await c.restore_session(session_id=sid, message_limit=2)
            back = await c.get_messages(session_id=sid, cursor=restored.messages_next_cursor)
            assert [m.seq for m in back.items] == [1, 2, 3]

    asyncio.run(main())
