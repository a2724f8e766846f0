"""CASES.md cases over HTTP (C12 NUL, C13 non-JSON values, C14 huge payloads, C34
listing by status past a TTL): the same policy as the Python API, as status codes and
problem bodies."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem, headers_of

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.base import SessionStore
from frozen_clock import FrozenClock

# The HTTP layer maps requests onto the manager; the stores' contract is tested in
# tests/contract, so these run on memory and SQLite only.
pytestmark = pytest.mark.store_independent

KiB, MiB = 1024, 1024 * 1024


def _state(api: Api, sid: str) -> tuple[Any, ...]:
    """What a rejected write must leave unchanged."""
    h = api.alice
    return (
        api.http.get(f"/v1/sessions/{sid}", headers=h).json()["version"],
        api.http.get(f"/v1/sessions/{sid}/messages", headers=h).json()["items"],
        api.http.get(f"/v1/sessions/{sid}/memory", headers=h).json()["data"],
        api.http.get(f"/v1/sessions/{sid}/tool-calls", headers=h).json()["items"],
    )


def test_c12_nul_round_trips_over_http(api: Api) -> None:
    """C12: NUL (``\\u0000``) in content, nested tool-result keys/values and memory round-trips."""
    sid = api.create()["session_id"]
    nul = "before\x00after"
    result = {"outer": {"k\x00ey": ["v\x00al", {"\x00": "\x00"}]}}
    r = api.http.post(
        f"/v1/sessions/{sid}/messages",
        json={"message": {"role": "user", "content": nul}},
        headers=api.alice,
    )
    assert r.status_code == 201 and r.json()["content"] == nul
    r = api.http.post(
        f"/v1/sessions/{sid}/tool-calls", json={"tool": "t", "result": result}, headers=api.alice
    )
    assert r.status_code == 201, r.text
    api.http.put(f"/v1/sessions/{sid}/memory", json={"goal": nul}, headers=api.alice)
    _, messages, memory, calls = _state(api, sid)
    assert messages[0]["content"] == nul
    assert calls[0]["result"] == result
    assert memory["goal"] == nul


def test_c12_lone_surrogate_is_422_naming_the_field(api: Api) -> None:
    """Text that cannot be UTF-8 (a lone surrogate escape) -> 422 naming the field, no write."""
    sid = api.create()["session_id"]
    before = _state(api, sid)
    raw = b'{"message": {"role": "user", "content": "a\\ud800b"}}'
    r = api.http.post(
        f"/v1/sessions/{sid}/messages",
        content=raw,
        headers={**api.alice, "Content-Type": "application/json"},
    )
    body = assert_problem(r, 422, "unsupported-value")
    assert "content" in body["field"]
    assert _state(api, sid) == before


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_c13_non_json_numbers_are_422_naming_the_path(api: Api, literal: str) -> None:
    """C13: NaN/Infinity (accepted by lenient JSON parsers) -> 422 naming the path, no write."""
    sid = api.create()["session_id"]
    before = _state(api, sid)
    attempts = [
        ("POST", "messages", '{"message": {"role": "user", "content": "x", "extra": {"v": %s}}}'),
        ("PUT", "memory", '{"facts": {"v": [%s]}}'),
        ("POST", "tool-calls", '{"tool": "t", "result": {"r": %s}}'),
    ]
    for method, sub, template in attempts:
        r = api.http.request(
            method,
            f"/v1/sessions/{sid}/{sub}",
            content=(template % literal).encode(),
            headers={**api.alice, "Content-Type": "application/json"},
        )
        assert r.status_code == 422, (sub, r.status_code, r.text)
        body = assert_problem(r, 422)
        named = str(body.get("field") or body.get("errors") or body["detail"])
        assert any(k in named for k in ("extra", "facts", "result", "body")), body
    assert _state(api, sid) == before


@pytest.mark.parametrize("size", [60 * KiB, 64 * KiB + 1, MiB])
@pytest.mark.parametrize("char", ["x", "中"])
def test_c14_large_tool_results_intact_over_http(api: Api, size: int, char: str) -> None:
    """C14: 60 KB, 64 KB+1 and 1 MB results (ASCII and multi-byte) come back byte for byte."""
    sid = api.create()["session_id"]
    text = char * (size // len(char.encode())) + "y" * (size % len(char.encode()))
    result = {"stdout": text, "tail": "END"}
    r = api.http.post(
        f"/v1/sessions/{sid}/tool-calls", json={"tool": "run", "result": result}, headers=api.alice
    )
    assert r.status_code == 201, r.text[:300]
    [back] = api.http.get(f"/v1/sessions/{sid}/tool-calls", headers=api.alice).json()["items"]
    assert back["result"] == result and len(back["result"]["stdout"].encode()) == size


def test_c14_over_the_limits_is_413_naming_the_limit(api: Api) -> None:
    """C14: over max_tool_call_bytes (4 MiB) -> 413 naming it; 20 MB -> 413 by the body
    limit (11 MB: a max-size record in base64) before reading; nothing written, never truncated."""
    sid = api.create()["session_id"]
    before = _state(api, sid)
    limits = api.manager.limits
    r = api.http.post(
        f"/v1/sessions/{sid}/tool-calls",
        json={"tool": "run", "result": "中" * (5 * MiB // 3)},
        headers=api.alice,
    )
    body = assert_problem(r, 413, "payload-too-large")
    assert body["limit_bytes"] == limits.max_tool_call_bytes
    assert str(limits.max_tool_call_bytes) in body["detail"]
    r = api.http.post(
        f"/v1/sessions/{sid}/tool-calls",
        json={"tool": "run", "result": "x" * (20 * MiB)},
        headers=api.alice,
    )
    body = assert_problem(r, 413, "payload-too-large")
    assert body["limit_bytes"] == Settings().max_body_bytes and body["field"] == "body"
    assert _state(api, sid) == before


def test_c34_status_page_over_http_applies_ttl_at_read_time(store: SessionStore) -> None:
    """C34 over HTTP: one active session and one past its TTL (the newer);
    ``?status=ACTIVE&limit=1`` is the active one with no cursor, never an empty page
    with a cursor; ``?status=EXPIRED`` lists the other every time, whatever the order."""
    clock = FrozenClock()
    keys = MemoryKeyStore()
    alice = headers_of(keys.create(user_id="alice")[1])
    app = create_app(SessionManager(store, clock=clock), Settings(url="memory://"), keys=keys)
    with TestClient(app) as http:
        live = http.post("/v1/sessions", json={}, headers=alice).json()["session_id"]
        clock.advance(1)
        due = http.post("/v1/sessions", json={"ttl_seconds": 60}, headers=alice).json()
        clock.advance(120)

        def page(status: str) -> dict[str, Any]:
            r = http.get("/v1/sessions", params={"status": status, "limit": 1}, headers=alice)
            assert r.status_code == 200, r.text
            return r.json()  # type: ignore[no-any-return]

        for status in ["EXPIRED", "ACTIVE", "EXPIRED", "ACTIVE"]:
            got = page(status)
            assert got["next_cursor"] is None
            [item] = got["items"]
            if status == "ACTIVE":
                assert item["session_id"] == live
            else:
                assert (item["session_id"], item["status"], item["status_reason"]) == (
                    due["session_id"],
                    "EXPIRED",
                    "ttl",
                )
                assert item["version"] == due["version"]
