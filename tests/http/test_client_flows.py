"""The async client's shared flows in-process: retries with one Idempotency-Key,
which writes carry one, paging through every message, typed errors and the 412
re-read loop."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from agentsession import SessionManager, VersionConflict
from agentsession.client import AsyncSessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.operations import OPERATIONS, Route
from agentsession.protocol import ServerError
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore


class FlakyASGI(httpx.AsyncBaseTransport):
    """Refuses ``refuse`` connections, then answers 503 after the app handled the first
    ``drops`` POST/PUT requests (a lost answer)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, drops: int = 0, refuse: int = 0) -> None:
        self.inner, self.drops, self.refuse = inner, drops, refuse
        self.seen: list[tuple[str, str | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.refuse > 0:
            self.refuse -= 1
            raise httpx.ConnectError("injected", request=request)
        response = await self.inner.handle_async_request(request)
        self.seen.append((request.method, request.headers.get("idempotency-key")))
        if request.method in ("POST", "PUT") and self.drops > 0:
            self.drops -= 1
            await response.aread()
            return httpx.Response(503, headers={"Retry-After": "0"}, request=request)
        return response


class RacingPut(httpx.AsyncBaseTransport):
    """Lets a concurrent merge-patch of the working memory land just before the first PUT."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PUT" and not any(r.method == "PUT" for r in self.requests):
            patch = httpx.Request(
                "PATCH",
                request.url,
                headers={
                    "Authorization": request.headers["authorization"],
                    "Content-Type": "application/merge-patch+json",
                },
                content=b'{"other": 1}',
            )
            assert (await self.inner.handle_async_request(patch)).status_code == 200
        self.requests.append(request)
        return await self.inner.handle_async_request(request)


def _app() -> tuple[Any, str]:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    return create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys), token


def test_async_client_retries_with_the_same_key() -> None:
    app, token = _app()

    async def main() -> None:
        flaky = FlakyASGI(httpx.ASGITransport(app=app), drops=2, refuse=1)
        async with AsyncSessionClient("http://t", token, transport=flaky, backoff=0.001) as c:
            sid = (await c.create_session()).session_id
            assert len((await c.list_sessions()).items) == 1
            posts = [key for method, key in flaky.seen if method == "POST"]
            assert len(posts) == 3 and posts[0] is not None and len(set(posts)) == 1
            flaky.drops = 5
            with pytest.raises(ServerError):
                await c.append_message(session_id=sid, message={"role": "user"})

    asyncio.run(main())


def test_async_client_pages_and_conflicts() -> None:
    app, token = _app()

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            s = await c.create_session(working_memory={"n": 0})
            batch = [{"role": "user", "content": str(i)} for i in range(600)]
            for _ in range(2):
                await c.append_messages(session_id=s.session_id, messages=batch)
            seen_seqs: list[int] = []
            page = await c.get_messages(session_id=s.session_id, after=0)
            while True:  # pages of the default size, forwards, each message once
                seen_seqs += [m.seq for m in page.items]
                if page.next_cursor is None:
                    break
                assert len(page.items) == 100 and page.has_more
                page = await c.get_messages(session_id=s.session_id, cursor=page.next_cursor)
            assert seen_seqs == list(range(1, 1201))
            window = await c.get_messages(session_id=s.session_id, after=10, limit=1000)
            assert (window.items[0].seq, window.items[-1].seq, window.has_more) == (11, 1010, True)
            with pytest.raises(VersionConflict):
                await c.update_session(session_id=s.session_id, title="x", expected_version=1)
            seen: list[dict[str, object]] = []

            def bump(memory: dict[str, object]) -> dict[str, object]:
                seen.append(memory)
                return {**memory, "n": len(seen)}

            memory = await c.modify_working_memory(session_id=s.session_id, fn=bump)
            assert memory.data == {"n": 1} and seen == [{"n": 0}]
            race = RacingPut(transport)
            async with AsyncSessionClient("http://t", token, transport=race) as racing:
                memory = await racing.modify_working_memory(session_id=s.session_id, fn=bump)
            assert [r.method for r in race.requests].count("PUT") == 2  # 412, then re-read
            assert seen[1:] == [{"n": 1}, {"n": 1, "other": 1}]
            assert memory.data == {"n": 3, "other": 1}

    asyncio.run(main())


class Recording(httpx.AsyncBaseTransport):
    """Passes every request on and records its method, path and Idempotency-Key."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.seen: list[tuple[str, str, str | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = request.headers.get("idempotency-key")
        self.seen.append((request.method, request.url.path, key))
        return await self.inner.handle_async_request(request)


def _route_of(method: str, path: str) -> Route:
    """The row's route a request was sent to (its path template matched)."""
    for op in OPERATIONS:
        for route in op.routes:
            pattern = re.sub(r"\{\w+\}", "[^/]+", route.path)
            if route.method == method and re.fullmatch(pattern, path):
                return route
    raise LookupError(f"no route {method} {path}")


def test_a_generated_key_goes_where_the_route_declares_one() -> None:
    """Idempotency-Key on a write whose route replays it by key (a DELETE too), none on
    a write whose route takes none (expire, restore, a find sent as POST) nor on a
    heartbeat (generated_key=False: a retried beat only extends the lease again)."""
    app, token = _app()

    async def main() -> None:
        recording = Recording(httpx.ASGITransport(app=app))
        async with AsyncSessionClient("http://t", token, transport=recording) as c:
            sid = (await c.create_session()).session_id
            await c.append_message(session_id=sid, message={"role": "user", "content": "a"})
            await c.find_tool_call(session_id=sid, tool="t")
            run = await c.start_run(session_id=sid, lease_seconds=60)
            await c.heartbeat_run(session_id=sid, run_id=run.run_id)
            await c.truncate_messages(session_id=sid, after_seq=5)
            await c.delete_records(session_id=sid)
            await c.pop_message(session_id=sid)
            await c.close_session(session_id=sid)
            await c.restore_session(session_id=sid)
            await c.expire_session(session_id=sid)
            await c.delete_session(session_id=sid)
        writes = [(m, p, key) for m, p, key in recording.seen if m != "GET"]
        assert len(writes) == 12
        for method, path, key in writes:
            route = _route_of(method, path)
            expected = route.idempotency_key and route.generated_key
            assert (key is not None) == expected, (method, path, key)

    asyncio.run(main())


def test_whoami_and_the_erasure_of_a_users_data() -> None:
    """whoami answers the key's user; delete_user_data (the caller's own user) answers
    how many sessions it erased."""
    app, token = _app()

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            assert await c.whoami() == {
                "user_id": "alice",
                "admin": False,
                "scope": "write",
                "agents": None,
            }
            for _ in range(2):
                await c.create_session()
            assert await c.delete_user_data(target_user_id="alice") == 2
            assert (await c.list_sessions()).items == []
            with pytest.raises(ValueError, match="target_user_id"):
                await c.delete_user_data()

    asyncio.run(main())
