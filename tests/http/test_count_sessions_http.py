"""Counting sessions over HTTP, both clients and the CLI: ``GET /v1/sessions/count``
answers ``{"count": n}`` with the filters of ``GET /v1/sessions`` (the route built from
its row of the table), the same number as the manager, the listing's errors, and is
never read as a session id."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem
from typer.testing import CliRunner

from agentsession import Forbidden, SessionManager, ValidationError
from agentsession.cli.app import build_app
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent


def _seed(api: Api) -> str:
    """alice: two ACTIVE coding sessions (one a fork), one CLOSED notes session; bob: one."""
    parent = api.create(agent="coding")["session_id"]
    fork = api.http.post(f"/v1/sessions/{parent}/fork", headers=api.alice)
    assert fork.status_code == 201, fork.text
    closed = api.create(agent="notes")
    etag = f'"{closed["session_id"]}@{closed["version"]}"'
    r = api.http.post(
        f"/v1/sessions/{closed['session_id']}/close",
        json={},
        headers={**api.alice, "If-Match": etag},
    )
    assert r.status_code == 200, r.text
    api.create(api.bob, agent="coding")
    return parent


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", 3),
        ("?status=ACTIVE", 2),
        ("?status=CLOSED", 1),
        ("?agent=coding", 2),
        ("?agent=coding&status=CLOSED", 0),
    ],
)
def test_the_count_is_the_listings_length(api: Api, query: str, expected: int) -> None:
    _seed(api)
    r = api.http.get(f"/v1/sessions/count{query}", headers=api.alice)
    assert r.status_code == 200, r.text
    assert r.json() == {"count": expected}
    listed = api.http.get(f"/v1/sessions{query}", headers=api.alice).json()["items"]
    assert len(listed) == expected


def test_forks_admins_and_refusals(api: Api) -> None:
    parent = _seed(api)
    forks = api.http.get(f"/v1/sessions/count?parent_session_id={parent}", headers=api.alice)
    assert forks.json() == {"count": 1}
    everyone = api.http.get("/v1/sessions/count?all_users=true", headers=api.admin)
    assert everyone.json() == {"count": 4}
    assert_problem(api.http.get("/v1/sessions/count?all_users=true", headers=api.alice), 403)
    assert_problem(api.http.get("/v1/sessions/count?status=GONE", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/sessions/count?limit=5", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/sessions/count"), 401)
    assert api.http.get("/v1/sessions/count", headers=api.bob).json() == {"count": 1}


def test_both_clients_count_as_the_manager_does() -> None:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore())
    for agent in ("a", "a", "b"):
        manager.create_session(user_id="alice", agent=agent)
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    with (
        TestClient(app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as c,
    ):
        assert c.count_sessions() == manager.count_sessions(user_id="alice") == 3
        assert c.count_sessions(agent="a", status="ACTIVE") == 2
        with pytest.raises(Forbidden):
            c.count_sessions(all_users=True)
        # The service's schema refuses these before the manager: the same error class.
        for bad in ({"status": "nope"}, {"agent": ""}, {"parent_session_id": "x"}):
            with pytest.raises(ValidationError):
                manager.count_sessions(user_id="alice", **bad)
            with pytest.raises(ValidationError):
                c.count_sessions(**bad)

    async def main() -> int:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            return await c.count_sessions(agent="b")

    assert asyncio.run(main()) == 1


def test_the_cli_counts_with_the_listings_filters(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        for agent in ("a", "a", "b"):
            manager.create_session(user_id="alice", agent=agent)
    runner = CliRunner()
    base = ["--url", url, "sessions", "count", "--user", "alice"]
    plain = runner.invoke(build_app(), base)
    assert plain.exit_code == 0, plain.output
    assert plain.output.strip() == "3"
    as_json = runner.invoke(build_app(), [*base, "--agent", "a", "--json"])
    assert json.loads(as_json.output) == {"count": 2}
    refused = runner.invoke(build_app(), [*base, "--all-users"])
    assert refused.exit_code != 0 and "admin" in refused.output


@pytest.mark.parametrize("method", ["PATCH", "DELETE", "POST"])
def test_the_count_path_is_never_a_session_id(api: Api, method: str) -> None:
    """Another method on ``/v1/sessions/count`` is a 405 naming GET alone, not the
    session route's 422 for a malformed id (the fuzz test's finding)."""
    r = api.http.request(method, "/v1/sessions/count", headers=api.alice)
    assert_problem(r, 405)
    assert r.headers["allow"] == "GET"
    sid = api.create()["session_id"]
    assert api.http.get(f"/v1/sessions/{sid}", headers=api.alice).status_code == 200
