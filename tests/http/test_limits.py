"""Limits on abusive clients where they live in the app, in-process (httpx's ASGI
transport): header section (431), body timeout (408), requests in flight (503),
failed authentications per address and per key id (429). The same limits in front of
the app, in uvicorn's protocol, are tested on a real server (tests/test_server_limits.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from http_support import assert_problem, call_asgi

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.protocol import TooManyRequests, error_from_problem
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

pytestmark = pytest.mark.store_independent


class App:
    """An app over a memory store with alice's key, its settings overridden."""

    def __init__(self, **settings: Any) -> None:
        keys = MemoryKeyStore()
        self.key, self.token = keys.create(user_id="alice")
        self.app = create_app(
            SessionManager(MemoryStore()), Settings(url="memory://", **settings), keys=keys
        )

    def client(self, address: str = "10.0.0.1") -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, client=(address, 40000))
        return httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30)

    def auth(self, token: str | None = None, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}", **extra}


JSON = {"content-type": "application/json"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- 431: the header section -------------------------------------------------------------


def test_more_header_fields_than_the_limit_431() -> None:
    """101 fields with max_header_count=100 -> 431 problem+json naming the limits and
    closing the connection; 90 fields pass."""
    app = App(max_header_count=100)

    async def go() -> tuple[httpx.Response, httpx.Response]:
        async with app.client() as c:
            many = {f"x-h{i}": "v" for i in range(101)}
            fewer = {f"x-h{i}": "v" for i in range(90)}
            return await c.get("/healthz", headers=many), await c.get("/healthz", headers=fewer)

    refused, passed = run(go())
    body = assert_problem(refused, 431, "header-fields-too-large")
    assert body["limit_count"] == 100 and body["limit_bytes"] == 16 * 1024
    assert refused.headers["connection"] == "close"
    assert passed.status_code == 200


def test_header_section_over_the_byte_limit_431() -> None:
    """One 20 KB header, or a 20 KB query string, with max_header_bytes=16 KB -> 431."""
    app = App()

    async def go() -> list[httpx.Response]:
        async with app.client() as c:
            return [
                await c.get("/healthz", headers={"x-big": "a" * 20_000}),
                await c.get("/healthz", params={"q": "a" * 20_000}),
            ]

    for response in run(go()):
        assert_problem(response, 431, "header-fields-too-large")


# -- 408: the body timeout ---------------------------------------------------------------


async def _drip(pieces: int, pause: float) -> AsyncIterator[bytes]:
    body = b'{"agent": "slow"}'
    step = max(1, len(body) // pieces)
    for start in range(0, len(body), step):
        yield body[start : start + step]
        await asyncio.sleep(pause)


def test_slow_body_is_cut_off_with_408() -> None:
    """A body dripping in one byte every 0.2 s with body_timeout_seconds=0.5 -> 408
    problem+json with Connection: close, well before the body would be complete; no
    session is created."""
    app = App(body_timeout_seconds=0.5)

    async def go() -> tuple[httpx.Response, float, httpx.Response]:
        async with app.client() as c:
            started = time.monotonic()
            slow = await c.post("/v1/sessions", content=_drip(17, 0.2), headers=app.auth(**JSON))
            elapsed = time.monotonic() - started
            listed = await c.get("/v1/sessions", headers=app.auth())
            return slow, elapsed, listed

    slow, elapsed, listed = run(go())
    body = assert_problem(slow, 408, "request-timeout")
    assert body["limit_seconds"] == 0.5
    assert slow.headers["connection"] == "close"
    assert elapsed < 3.0  # the whole body would take 3.4 s
    assert listed.json()["items"] == []


def test_body_arriving_in_pieces_within_the_timeout_is_read() -> None:
    """The deadline is for the whole body, not per piece: 4 pieces within 0.2 s under a
    2 s timeout -> 201."""
    app = App(body_timeout_seconds=2)

    async def go() -> httpx.Response:
        async with app.client() as c:
            return await c.post("/v1/sessions", content=_drip(4, 0.05), headers=app.auth(**JSON))

    assert run(go()).status_code == 201


# -- 503: requests in flight -------------------------------------------------------------


def _held_in_the_store(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Make ``create_session`` wait (in its worker thread) until the event is set."""
    release = threading.Event()
    create = SessionManager.create_session

    def held(self: SessionManager, *args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        return create(self, *args, **kwargs)

    monkeypatch.setattr(SessionManager, "create_session", held)
    return release


def test_request_over_the_concurrency_limit_503(monkeypatch: pytest.MonkeyPatch) -> None:
    """max_concurrent_requests=1: while one request is being served (its body read), a
    request without a body and one whose body has arrived are answered 503
    problem+json with Retry-After at once; health, readiness and the OpenAPI document
    still answer 200 (they were 503: a busy service got restarted); the first then
    completes."""
    app = App(max_concurrent_requests=1)
    release = _held_in_the_store(monkeypatch)

    async def go() -> tuple[httpx.Response, list[httpx.Response], list[int]]:
        async with app.client() as c:
            first = asyncio.create_task(
                c.post("/v1/sessions", json={"agent": "held"}, headers=app.auth())
            )
            try:
                await asyncio.sleep(0.2)  # the first request is in flight, in the store
                refused = [
                    await c.get("/v1/sessions", headers=app.auth()),
                    await c.post("/v1/sessions", json={"agent": "b"}, headers=app.auth()),
                ]
                probes = [(await c.get(p)).status_code for p in ("/healthz", "/readyz")]
                probes.append((await c.get("/openapi.json")).status_code)
            finally:
                release.set()
            return await first, refused, probes

    first, refused, probes = run(go())
    for answer in refused:
        body = assert_problem(answer, 503, "overloaded")
        assert body["limit_requests"] == 1
        assert answer.headers["retry-after"] == "1"
    assert probes == [200, 200, 200]
    assert first.status_code == 201


def test_requests_waiting_for_their_body_hold_no_slot() -> None:
    """max_concurrent_requests=1: a client that sent part of its body and waits holds
    no slot (slow bodies locked every client out until their 408): another client's
    requests are served; the held one completes once its body arrives."""
    app = App(max_concurrent_requests=1)

    async def go() -> tuple[httpx.Response, list[int]]:
        gate = asyncio.Event()

        async def held() -> AsyncIterator[bytes]:
            yield b'{"agent": '
            await gate.wait()
            yield b'"held"}'

        async with app.client() as c:
            first = asyncio.create_task(
                c.post("/v1/sessions", content=held(), headers=app.auth(**JSON))
            )
            await asyncio.sleep(0.1)  # the first request waits for the rest of its body
            others = [
                (await c.get("/v1/sessions", headers=app.auth())).status_code,
                (await c.post("/v1/sessions", json={"agent": "b"}, headers=app.auth())).status_code,
            ]
            gate.set()
            return await first, others

    first, others = run(go())
    assert others == [200, 201]
    assert first.status_code == 201


# -- 429: failed authentications ---------------------------------------------------------


def test_bad_key_flood_from_one_address_429() -> None:
    """auth_failures_per_address=5: five bad keys from one address -> 401 each, the
    sixth -> 429 with Retry-After; while limited, alice's correct key from that
    address still works (one bad client must not lock out the others on its
    address), and a bad key from another address is a plain 401."""
    app = App(auth_failures_per_address=5, auth_failure_window_seconds=60)

    async def go() -> tuple[list[httpx.Response], httpx.Response, httpx.Response]:
        async with app.client("10.0.0.1") as c:
            bad = [await c.get("/v1/sessions", headers=app.auth(f"bad{i}")) for i in range(6)]
            correct = await c.get("/v1/sessions", headers=app.auth())
        async with app.client("10.0.0.2") as other:
            elsewhere = await other.get("/v1/sessions", headers=app.auth("bad"))
        return bad, correct, elsewhere

    bad, correct, elsewhere = run(go())
    assert [r.status_code for r in bad] == [401] * 5 + [429]
    body = assert_problem(bad[-1], 429, "too-many-requests")
    assert 1 <= int(bad[-1].headers["retry-after"]) <= 60
    assert body["retry_after"] == int(bad[-1].headers["retry-after"])
    assert correct.status_code == 200
    assert_problem(elsewhere, 401, "unauthenticated")


def test_requests_without_a_key_count_as_failures() -> None:
    """No Authorization at all, four times with auth_failures_per_address=3 -> 429."""
    app = App(auth_failures_per_address=3)

    async def go() -> list[int]:
        async with app.client() as c:
            return [(await c.get("/v1/sessions")).status_code for _ in range(4)]

    assert run(go()) == [401, 401, 401, 429]


def test_bad_secret_flood_for_one_key_id_429() -> None:
    """auth_failures_per_key=3: wrong secrets naming alice's key id, each from another
    address -> 401 x3 then 429; alice's own token still works; a wrong secret for
    another key id -> 401."""
    app = App(auth_failures_per_key=3, auth_failures_per_address=100)
    key_id = app.key.key_id

    async def go() -> tuple[list[httpx.Response], httpx.Response, httpx.Response]:
        flood = []
        for i in range(4):
            async with app.client(f"10.0.1.{i}") as c:
                flood.append(await c.get("/v1/sessions", headers=app.auth(f"{key_id}.wrong{i}")))
        async with app.client("10.0.2.1") as c:
            own = await c.get("/v1/sessions", headers=app.auth())
            other = await c.get(
                "/v1/sessions", headers=app.auth("key_aaaaaaaaaaaaaaaaaaaaaaaaaa.wrong")
            )
        return flood, own, other

    flood, own, other = run(go())
    assert [r.status_code for r in flood] == [401, 401, 401, 429]
    assert int(flood[-1].headers["retry-after"]) >= 1
    assert own.status_code == 200
    assert other.status_code == 401


def test_client_rebuilds_429_with_its_retry_after() -> None:
    """The client's half: a 429 problem becomes TooManyRequests with retry_after."""
    body = {
        "type": "https://agentsession.dev/problems/too-many-requests",
        "title": "Too Many Requests",
        "status": 429,
        "detail": "too many failed authentications from this client address; retry later",
        "retry_after": 42,
    }
    error = error_from_problem(body, 429)
    assert isinstance(error, TooManyRequests)
    assert error.retry_after == 42


# -- the layers ----------------------------------------------------------------------------


def test_every_limit_is_one_layer_inside_the_edge() -> None:
    """The limits (431, 400/415, 503, 400/413, 408) are one ASGI layer, inside the
    edge, so a request pays one pass over its headers and one ``receive`` wrapper; the
    edge still wraps them, so their refusals carry the request id and an access line."""
    from agentsession.http.guards import GuardMiddleware
    from agentsession.http.middleware import EdgeMiddleware

    assert [m.cls for m in App().app.user_middleware] == [EdgeMiddleware, GuardMiddleware]


def test_content_length_of_non_ascii_digits_is_400() -> None:
    """A ``Content-Length`` of a Latin-1 superscript digit (``b"\\xb2"``, which
    ``str.isdigit`` accepts but ``int`` refuses) is the 400 of any non-number, not a
    500."""
    sent = call_asgi(
        App().app,
        [{"type": "http.request", "body": b"", "more_body": False}],
        [(b"host", b"test"), (b"content-length", b"\xb2")],
        client=("10.0.0.1", 40000),
    )
    assert sent[0]["status"] == 400
    assert b"Content-Length is not a number" in sent[1]["body"]
