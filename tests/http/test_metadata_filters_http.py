"""Metadata filters over HTTP, both clients and the CLI: ``?metadata.<key>=<value>`` on
``GET /v1/sessions`` and ``GET /v1/sessions/count`` (repeatable with other keys, an
AND), a typed value by its text, and a 422 naming a bad filter."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem
from typer.testing import CliRunner

from agentsession import SessionManager, ValidationError
from agentsession.cli.app import build_app
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent


def _seed(api: Api) -> None:
    api.create(metadata={"team": "x", "env": "prod", "n": 3})
    api.create(metadata={"team": "x", "env": "dev", "flag": True})
    api.create(metadata={"team": "y.z", "env": "prod"})
    api.create(api.bob, metadata={"team": "x", "env": "prod"})


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?metadata.team=x", 2),
        ("?metadata.team=x&metadata.env=prod", 1),
        ("?metadata.env=prod", 2),
        ("?metadata.team=y.z", 1),
        ("?metadata.team=X", 0),
        ("?metadata.n=3", 1),
        ("?metadata.flag=true", 1),
        ("?metadata.team=x&status=CLOSED", 0),
        ("?metadata.team=x&limit=1", 1),
    ],
)
def test_the_filters_list_and_count_the_same(api: Api, query: str, expected: int) -> None:
    """The listing and the count take the same filters and find the caller's sessions
    only (bob has one of team x in prod)."""
    _seed(api)
    listed = api.http.get(f"/v1/sessions{query}", headers=api.alice)
    assert listed.status_code == 200, listed.text
    assert len(listed.json()["items"]) == expected
    if "limit" not in query:
        counted = api.http.get(f"/v1/sessions/count{query}", headers=api.alice)
        assert counted.json() == {"count": expected}


@pytest.mark.parametrize(
    "query",
    [
        "?" + "&".join(f"metadata.k{i}=v" for i in range(9)),  # too many keys
        "?metadata.bad%20key=v",
        "?metadata.=v",
        "?metadata.team=" + "v" * 201,
        "?metadata.team=",
        "?metadata.team=x&metadata.team=y",  # one key twice
        "?metadatax=1",
    ],
    ids=["keys", "space", "empty-key", "long", "empty", "repeated", "unknown"],
)
def test_a_bad_filter_is_a_422_naming_it(api: Api, query: str) -> None:
    for path in ("/v1/sessions", "/v1/sessions/count"):
        r = api.http.get(f"{path}{query}", headers=api.alice)
        assert_problem(r, 422)
        assert "metadata" in r.text


def test_both_clients_send_the_filter() -> None:
    """Typed values travel as their text; a bad filter is the manager's ValidationError,
    raised before anything is sent."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore())
    for i, n in enumerate((3, 3.0, 4)):
        manager.create_session(user_id="alice", metadata={"n": n, "ok": i == 0})
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    with (
        TestClient(app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as c,
    ):
        assert c.count_sessions(metadata={"n": 3}) == 2
        assert len(c.list_sessions(metadata={"n": "3", "ok": True}).items) == 1
        with pytest.raises(ValidationError):
            c.list_sessions(metadata={"bad key": 1})

    async def main() -> int:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            return await c.count_sessions(metadata={"n": 4})

    assert asyncio.run(main()) == 1


def test_the_cli_filters_by_meta(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        for team in ("a", "a", "b"):
            manager.create_session(user_id="alice", metadata={"team": team, "n": 1})
    runner = CliRunner()
    base = ["--url", url, "sessions"]
    counted = runner.invoke(build_app(), [*base, "count", "-u", "alice", "--meta", "team=a"])
    assert counted.exit_code == 0, counted.output
    assert counted.output.strip() == "2"
    both = ["--meta", "team=b", "--meta", "n=1", "--json"]
    listed = runner.invoke(build_app(), [*base, "list", "-u", "alice", *both])
    assert listed.exit_code == 0, listed.output
    assert [s["metadata"]["team"] for s in json.loads(listed.output)["items"]] == ["b"]
    for bad in (["--meta", "team"], ["--meta", "a=1", "--meta", "a=2"], ["--meta", "k k=1"]):
        refused = runner.invoke(build_app(), [*base, "count", "-u", "alice", *bad])
        assert refused.exit_code != 0 and "meta" in refused.output, refused.output
