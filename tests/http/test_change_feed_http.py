"""The change feed over HTTP: the JSON pages of ``GET /v1/changes`` and ``GET
/v1/sessions/{id}/changes`` (routes built from the row), both clients, and the
Server-Sent Events of the same routes on a real uvicorn server: event ids are cursors,
``Last-Event-ID`` resumes, heartbeats, one poll per worker for many subscribers, and a
subscriber that falls behind the ring still gets everything once."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from http_support import Api, assert_problem, headers_of

from agentsession import SessionManager
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.changestream import ChangeHub
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent

MSG = {"role": "user", "content": "hi"}


def test_json_pages_scoped_like_every_read(api: Api) -> None:
    sid = api.create()["session_id"]
    theirs = api.create(api.bob)["session_id"]
    r = api.http.get("/v1/changes?limit=1", headers=api.alice)
    assert r.status_code == 200, r.text
    page = r.json()
    assert [c["action"] for c in page["items"]] == ["session.created"]
    assert page["items"][0]["cursor"] == page["next_cursor"]
    rest = api.http.get(f"/v1/changes?after={page['next_cursor']}", headers=api.alice).json()
    assert rest == {"items": [], "next_cursor": page["next_cursor"], "has_more": False}
    one = api.http.get(f"/v1/sessions/{sid}/changes", headers=api.alice).json()
    assert [c["session_id"] for c in one["items"]] == [sid]
    assert_problem(api.http.get(f"/v1/sessions/{theirs}/changes", headers=api.alice), 404)
    assert_problem(api.http.get("/v1/changes?all_users=true", headers=api.alice), 403)
    assert_problem(api.http.get("/v1/changes?after=nope", headers=api.alice), 400)
    ahead = api.http.get("/v1/changes?after=99999999999", headers=api.alice)
    assert_problem(ahead, 400)
    assert "not a change feed cursor this store issued" in ahead.json()["detail"]
    assert_problem(api.http.get("/v1/changes"), 401)
    everyone = api.http.get("/v1/changes?all_users=true", headers=api.admin).json()
    assert {c["session_id"] for c in everyone["items"]} == {sid, theirs}


def test_both_clients_read_the_feed_as_the_manager_does() -> None:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore())
    sid = manager.create_session(user_id="alice").session_id
    manager.append_message(session_id=sid, user_id="alice", message=MSG)
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    with (
        TestClient(app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as c,
    ):
        assert c.changes() == manager.changes(user_id="alice")
        assert c.changes(session_id=sid, limit=1) == manager.changes(
            user_id="alice", session_id=sid, limit=1
        )
        first = c.changes(limit=1).next_cursor
        assert [x.action for x in c.watch(after=first, timeout=0.3)] == ["message.appended"]

    async def main() -> list[str]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            page = await c.changes(session_id=sid)
            return [x.action async for x in c.watch(after=page.items[0].cursor, timeout=0.3)]

    assert asyncio.run(main()) == ["message.appended"]


# ------------------------------------------------------------------ Server-Sent Events


class Live:
    """A uvicorn server in a thread over one manager, with alice's headers."""

    def __init__(self, hub: dict[str, Any], **settings: Any) -> None:
        keys = MemoryKeyStore()
        self.alice = headers_of(keys.create(user_id="alice")[1])
        self.manager = SessionManager(MemoryStore())
        app = create_app(self.manager, Settings(url="memory://", **settings), keys=keys)
        self.hub = app.state.change_hub = ChangeHub(app.state.services.manager, **hub)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Live:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def append(self, sid: str, n: int) -> None:
        for _ in range(n):
            self.manager.append_message(session_id=sid, user_id="alice", message=MSG)


def events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """``("change", (id, data))`` per event and ``("comment", text)`` per comment."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            yield "comment", line[1:].strip()
        elif line == "":
            if "data" in fields:
                yield "change", (fields["id"], json.loads(fields["data"]))
            fields = {}
        else:
            name, _, value = line.partition(": ")
            fields[name] = value


def _stream(live: Live, path: str = "/v1/changes", **headers: str) -> Any:
    client = httpx.Client(base_url=live.base, timeout=10)
    sent = {**live.alice, "Accept": "text/event-stream", **headers}
    return client, client.stream("GET", path, headers=sent)


def test_sse_delivers_resumes_and_keeps_alive() -> None:
    with Live({"poll_seconds": 0.02, "heartbeat_seconds": 0.2}) as live:
        sid = live.manager.create_session(user_id="alice").session_id
        client, stream = _stream(live, f"/v1/sessions/{sid}/changes")
        with client, stream as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            got: list[tuple[str, Any]] = []
            writer = threading.Timer(0.1, live.append, (sid, 2))
            writer.start()
            for kind, value in events(r):
                if kind == "change":
                    got.append(value)
                if len(got) == 3:
                    break
            writer.join()
        assert [d["action"] for _, d in got] == ["session.created", *["message.appended"] * 2]
        assert [i for i, _ in got] == [d["cursor"] for _, d in got]
        # Resume with Last-Event-ID: only what came after it, then a heartbeat.
        live.append(sid, 1)
        client, stream = _stream(live, **{"Last-Event-ID": got[-1][0]})
        with client, stream as r:
            seen = []
            for kind, value in events(r):
                seen.append(kind if kind == "comment" else value[1]["action"])
                if kind == "comment" and value == "keep-alive":
                    break
        assert seen == ["message.appended", "comment"]


def test_sse_refuses_as_the_json_route_does() -> None:
    with Live({}) as live, httpx.Client(base_url=live.base, timeout=10) as client:
        sse = {"Accept": "text/event-stream"}
        assert client.get("/v1/changes", headers=sse).status_code == 401
        r = client.get("/v1/changes?all_users=true", headers={**live.alice, **sse})
        assert r.status_code == 403
        for cursor in ("x", "99999999999"):  # not a cursor; one ahead of the feed
            r = client.get("/v1/changes", headers={**live.alice, **sse, "Last-Event-ID": cursor})
            assert r.status_code == 400
        other = live.manager.create_session(user_id="bob").session_id
        r = client.get(f"/v1/sessions/{other}/changes", headers={**live.alice, **sse})
        assert r.status_code == 404


def test_many_subscribers_share_one_poll_and_a_laggard_misses_nothing() -> None:
    """20 subscribers on one worker: the hub's reads do not grow with them; a ring of
    4 and a burst of 30 writes: each subscriber still gets all 30, once, in order."""
    with Live({"poll_seconds": 0.05, "ring": 4}) as live:
        sid = live.manager.create_session(user_id="alice").session_id
        start = live.manager.changes(user_id="alice").next_cursor
        assert start is not None
        streams = [_stream(live, **{"Last-Event-ID": start}) for _ in range(20)]
        responses = [stack.__enter__() for _, stack in streams]
        try:
            time.sleep(0.3)  # everyone subscribed and idle
            before = live.hub.polls
            time.sleep(1.0)
            idle_polls = live.hub.polls - before
            assert idle_polls <= 1.0 / 0.05 + 2  # one loop, not one per subscriber
            live.append(sid, 30)
            for r in responses:
                ids = []
                for kind, value in events(r):
                    if kind == "change":
                        ids.append(value[0])
                    if len(ids) == 30:
                        break
                assert len(set(ids)) == 30 and ids == sorted(ids, key=int)
        finally:
            for (client, stack), _ in zip(streams, responses, strict=True):
                stack.__exit__(None, None, None)
                client.close()


def test_streams_do_not_take_the_workers_request_slots() -> None:
    """Open streams do not count among the requests in flight (a worker with room for
    2 still answers writes beside 5 streams); the hub caps streams itself (503)."""
    with Live({"max_streams": 5}, max_concurrent_requests=2) as live:
        opened = [_stream(live) for _ in range(5)]
        responses = [stack.__enter__() for _, stack in opened]
        try:
            assert all(r.status_code == 200 for r in responses)
            with httpx.Client(base_url=live.base, timeout=10) as client:
                created = client.post("/v1/sessions", json={}, headers=live.alice)
                assert created.status_code == 201, created.text
                sse = {**live.alice, "Accept": "text/event-stream"}
                refused = client.get("/v1/changes", headers=sse)
                assert refused.status_code == 503
        finally:
            for (client, stack), _ in zip(opened, responses, strict=True):
                stack.__exit__(None, None, None)
                client.close()


def test_each_event_is_rendered_once_for_every_subscriber(monkeypatch: pytest.MonkeyPatch) -> None:
    """10 subscribers and 20 writes: the hub makes each event's text once (not once per
    subscriber), and every subscriber gets all 20."""
    from agentsession.http import changestream

    rendered: list[str] = []
    real = changestream._event

    def counted(cursor: str, event: Any) -> str:
        rendered.append(cursor)
        return real(cursor, event)

    monkeypatch.setattr(changestream, "_event", counted)
    with Live({"poll_seconds": 0.02}) as live:
        sid = live.manager.create_session(user_id="alice").session_id
        start = live.manager.changes(user_id="alice").next_cursor
        assert start is not None
        streams = [_stream(live, **{"Last-Event-ID": start}) for _ in range(10)]
        responses = [stack.__enter__() for _, stack in streams]
        try:
            time.sleep(0.3)
            live.append(sid, 20)
            for r in responses:
                got = [v for kind, v in _take(events(r), 20)]
                assert len(got) == 20
        finally:
            for (client, stack), _ in zip(streams, responses, strict=True):
                stack.__exit__(None, None, None)
                client.close()
    assert len(rendered) == len(set(rendered)) == 20


def _take(found: Iterator[tuple[str, Any]], n: int) -> Iterator[tuple[str, Any]]:
    """The first ``n`` changes of ``found``."""
    for kind, value in found:
        if kind == "change":
            yield kind, value
            n -= 1
            if n == 0:
                return


def test_subscribers_are_woken_a_batch_per_turn_of_the_loop() -> None:
    """30 subscribers waiting when a change comes: at most ``wake_batch`` (10) of them
    run in one turn of the event loop, so the worker's requests get turns between."""
    from collections import Counter

    from agentsession.service import AsyncSessionManager

    async def scenario() -> list[int]:
        manager = AsyncSessionManager(SessionManager(MemoryStore()))
        sid = (await manager.create_session(user_id="alice")).session_id
        hub = ChangeHub(manager, poll_seconds=0.01)
        turns, woken = [0], []

        async def count_turns() -> None:
            while True:
                turns[0] += 1
                await asyncio.sleep(0)

        async def subscriber() -> None:
            await hub.join()
            try:
                assert await hub.wait(5)
                woken.append(turns[0])
            finally:
                hub.leave()

        tasks = [asyncio.create_task(subscriber()) for _ in range(30)]
        await asyncio.sleep(0.1)  # all joined and waiting
        counter = asyncio.create_task(count_turns())
        await manager.append_message(session_id=sid, user_id="alice", message=MSG)
        await asyncio.gather(*tasks)
        counter.cancel()
        await manager.close()
        return woken

    woken = asyncio.run(scenario())
    assert len(woken) == 30
    assert max(Counter(woken).values()) <= 10


def test_a_herd_resuming_from_one_cursor_shares_its_catch_up_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """15 subscribers resuming from one cursor 30 events behind (10 per read): they
    share the reads of each page instead of making one each, and each still gets all
    30, once, in order, then what comes after."""
    from agentsession.http import changestream

    monkeypatch.setattr(changestream, "PAGE", 10)
    with Live({"poll_seconds": 0.02}) as live:
        sid = live.manager.create_session(user_id="alice").session_id
        start = live.manager.changes(user_id="alice").next_cursor
        assert start is not None
        live.append(sid, 30)
        reads: list[str | None] = []
        real = live.manager.changes

        def counted(**kwargs: Any) -> Any:
            if kwargs.get("limit") == 10:  # not the stream's check before it starts
                reads.append(kwargs.get("after"))
                time.sleep(0.05)  # a read that takes a while: subscribers overlap
            return real(**kwargs)

        monkeypatch.setattr(live.manager, "changes", counted)
        streams = [_stream(live, **{"Last-Event-ID": start}) for _ in range(15)]
        responses = [stack.__enter__() for _, stack in streams]
        try:
            found = [events(r) for r in responses]
            for changes in found:
                ids = [v[0] for _, v in _take(changes, 30)]
                assert len(set(ids)) == 30 and ids == sorted(ids, key=int)
            live.append(sid, 1)
            for changes in found:
                assert next(_take(changes, 1))[1][1]["action"] == "message.appended"
        finally:
            for (client, stack), _ in zip(streams, responses, strict=True):
                stack.__exit__(None, None, None)
                client.close()
    assert reads.count(start) == 1, reads  # one read, not one per subscriber
