"""Runs over HTTP: a late writer of a run that a take-over ended gets 409 (C35), and a
run's steps page through ``GET .../runs/{run_id}/steps`` (also with the client)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from http_support import Api, assert_problem

from agentsession import Limits, RunLeaseExpired, SessionManager
from agentsession.client import AsyncSessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from frozen_clock import FrozenClock

# The rules live in the manager (tests/contract runs them on every store).
pytestmark = pytest.mark.store_independent


def _state(api: Api, base: str) -> tuple[Any, ...]:
    """What a refused write must leave unchanged."""
    h = api.alice
    return (
        api.http.get(base, headers=h).json()["version"],
        api.http.get(f"{base}/messages", headers=h).json()["items"],
        api.http.get(f"{base}/tool-calls", headers=h).json()["items"],
        api.http.get(f"{base}/runs", headers=h).json()["items"],
    )


def test_c35_late_writer_after_takeover_is_refused_over_http(api: Api) -> None:
    """C35: run R RUNNING; restore takes the session over (R INTERRUPTED); the old worker
    posts a message and a tool call tagged with R -> 409 problem+json, nothing stored."""
    base = f"/v1/sessions/{api.create()['session_id']}"
    rid = api.http.post(f"{base}/runs", json={"input": "task"}, headers=api.alice).json()["run_id"]
    restored = api.http.post(f"{base}/restore", json={}, headers=api.alice)
    assert restored.status_code == 200 and restored.json()["interrupted_run_ids"] == [rid]
    before = _state(api, base)
    late = [
        ("messages", {"message": {"role": "assistant", "content": "late", "run_id": rid}}),
        ("tool-calls", {"tool": "run_command", "arguments": {"c": "x"}, "run_id": rid}),
    ]
    for path, body in late:
        r = api.http.post(f"{base}/{path}", json=body, headers=api.alice)
        problem = assert_problem(r, 409, "run-not-running")
        assert (problem["run_id"], problem["current_status"]) == (rid, "INTERRUPTED")
    assert _state(api, base) == before


def test_run_steps_page_over_http(api: Api) -> None:
    """GET .../runs/{id} shows the run's first steps and step_count; GET .../runs lists
    no steps; GET .../steps pages through all of them with after/limit."""
    base = f"/v1/sessions/{api.create()['session_id']}"
    rid = api.http.post(f"{base}/runs", json={}, headers=api.alice).json()["run_id"]
    for i in range(5):
        r = api.http.post(f"{base}/runs/{rid}/steps", json={"kind": f"k{i}"}, headers=api.alice)
        assert r.status_code == 201, r.text
    run = api.http.get(f"{base}/runs/{rid}", headers=api.alice).json()
    assert run["step_count"] == 5 and [s["index"] for s in run["steps"]] == list(range(5))
    listed = api.http.get(f"{base}/runs", headers=api.alice).json()["items"]
    assert [(r["step_count"], r["steps"]) for r in listed] == [(5, [])]
    pages = []
    after: int | None = None
    while True:
        params = {"limit": 2} if after is None else {"limit": 2, "cursor": after}
        r = api.http.get(f"{base}/runs/{rid}/steps", params=params, headers=api.alice)
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) >= {"items", "next_cursor"}
        pages.append([s["kind"] for s in body["items"]])
        if body["next_cursor"] is None:
            break
        after = body["next_cursor"]
    assert pages == [["k0", "k1"], ["k2", "k3"], ["k4"]]
    for bad in ({"limit": 0}, {"after": -1}):
        r = api.http.get(f"{base}/runs/{rid}/steps", params=bad, headers=api.alice)
        assert_problem(r, 422, "request-validation")
    missing = api.http.get(f"{base}/runs/run_aaaaaaaaaaaaaaaaaaaaaaaaaa/steps", headers=api.alice)
    assert_problem(missing, 404, "not-found")


def test_clients_page_run_steps() -> None:
    """The client's list_run_steps mirrors the manager's: same pages, same cursors."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore(), limits=Limits(default_page_size=3))
    app = create_app(manager, Settings(url="memory://"), keys=keys)

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            sid = (await c.create_session()).session_id
            rid = (await c.start_run(session_id=sid)).run_id
            for i in range(7):
                await c.add_run_step(session_id=sid, run_id=rid, kind=f"k{i}")
            run = await c.get_run(session_id=sid, run_id=rid)
            assert (run.step_count, [s.index for s in run.steps]) == (7, [0, 1, 2])
            seen: list[int] = []
            where: dict[str, Any] = {"after": run.steps[-1].index}
            while where:
                page = await c.list_run_steps(session_id=sid, run_id=rid, **where)
                mine = manager.list_run_steps(session_id=sid, user_id="alice", run_id=rid, **where)
                assert page == mine
                seen += [s.index for s in page.items]
                where = {} if page.next_cursor is None else {"cursor": page.next_cursor}
            assert seen == [3, 4, 5, 6]

    asyncio.run(main())


def test_run_lease_and_heartbeat_over_http(api: Api) -> None:
    """POST .../runs takes lease_seconds; POST .../runs/{id}/heartbeat extends it with
    no version step (the ETag stays); a bad lease is 422; another user gets 404; a run
    that is no longer RUNNING answers 409."""
    base = f"/v1/sessions/{api.create()['session_id']}"
    started = api.http.post(f"{base}/runs", json={"lease_seconds": 30}, headers=api.alice)
    assert started.status_code == 201, started.text
    run = started.json()
    assert run["lease_seconds"] == 30 and run["lease_expires_at"] is not None
    beat = api.http.post(
        f"{base}/runs/{run['run_id']}/heartbeat", json={"lease_seconds": 60}, headers=api.alice
    )
    assert beat.status_code == 200, beat.text
    assert beat.json()["lease_seconds"] == 60 and beat.json()["status"] == "RUNNING"
    assert beat.headers["ETag"] == started.headers["ETag"]
    for bad in ({"lease_seconds": 0}, {"lease_seconds": "5"}, {"lease_seconds": 86401}):
        r = api.http.post(f"{base}/runs/{run['run_id']}/heartbeat", json=bad, headers=api.alice)
        assert r.status_code in (400, 422), r.text
    other = api.http.post(f"{base}/runs/{run['run_id']}/heartbeat", json={}, headers=api.bob)
    assert_problem(other, 404, "not-found")
    api.http.post(f"{base}/restore", json={}, headers=api.alice)
    late = api.http.post(f"{base}/runs/{run['run_id']}/heartbeat", json={}, headers=api.alice)
    assert_problem(late, 409, "run-not-running")


def test_clients_start_leased_runs_and_heartbeat() -> None:
    """The async client's start_run(lease_seconds=) and heartbeat_run answer what the
    manager answers; a lapsed lease comes back as RunLeaseExpired."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    clock = FrozenClock()
    manager = SessionManager(MemoryStore(), clock=clock)
    app = create_app(manager, Settings(url="memory://"), keys=keys)

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            sid = (await c.create_session()).session_id
            run = await c.start_run(session_id=sid, lease_seconds=30)
            assert run.lease_expires_at == clock.now + timedelta(seconds=30)
            clock.advance(20)
            beat = await c.heartbeat_run(session_id=sid, run_id=run.run_id)
            assert beat.lease_expires_at == clock.now + timedelta(seconds=30)
            assert beat.session_version == run.session_version
            assert beat == manager.get_run(
                session_id=sid, user_id="alice", run_id=run.run_id
            ).model_copy(update={"session_version": run.session_version})
            clock.advance(31)
            with pytest.raises(RunLeaseExpired):
                await c.heartbeat_run(session_id=sid, run_id=run.run_id)

    asyncio.run(main())
