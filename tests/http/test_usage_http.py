"""Usage and budgets over HTTP, both clients and the CLI: ``GET /v1/usage`` answers
the caller's totals as the manager does; budgets are set and cleared with admin keys
(``PUT``/``DELETE /v1/budgets``) and read by their owner; a spent budget answers
problem+json 409 ``budget-exceeded`` and the client raises BudgetExceeded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem
from typer.testing import CliRunner

from agentsession import BudgetExceeded, SessionManager
from agentsession.cli.app import build_app
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent


def _finished(api: Api, sid: str, who: dict[str, str], **finish: Any) -> None:
    run = api.http.post(f"/v1/sessions/{sid}/runs", json={}, headers=who)
    assert run.status_code == 201, run.text
    path = f"/v1/sessions/{sid}/runs/{run.json()['run_id']}/finish"
    done = api.http.post(path, json={"status": "SUCCEEDED", **finish}, headers=who)
    assert done.status_code == 200, done.text


def test_usage_and_budgets_over_http(api: Api) -> None:
    sid = str(api.create(agent="coding")["session_id"])
    bob = str(api.create(api.bob, agent="coding")["session_id"])
    _finished(api, sid, api.alice, usage={"prompt_tokens": 40, "completion_tokens": 2}, model="m")
    _finished(api, bob, api.bob, usage={"input_tokens": 9})
    got = api.http.get("/v1/usage?group_by=model", headers=api.alice)
    assert got.status_code == 200, got.text
    assert [(t["group"], t["input_tokens"], t["total_tokens"]) for t in got.json()["items"]] == [
        ("m", 40, 42)
    ]
    everyone = api.http.get("/v1/usage?group_by=agent&all_users=true", headers=api.admin)
    assert everyone.json()["items"][0]["input_tokens"] == 49
    assert_problem(api.http.get("/v1/usage?all_users=true", headers=api.alice), 403)
    assert_problem(api.http.get("/v1/usage?group_by=week", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/usage?since=yesterday", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/usage?until=0.5", headers=api.alice), 422)  # no Unix time
    naive = api.http.get("/v1/usage?until=2026-01-01T00:00:00", headers=api.alice)
    assert_problem(naive, 422)  # no offset
    far = api.http.get("/v1/usage?since=0001-01-01T00:00:00%2B14:00", headers=api.alice)
    assert_problem(far, 422)
    window = api.http.get(
        "/v1/usage",
        params={"since": "2000-01-01T00:00:00Z", "until": "2999-01-01T00:00:00+02:00"},
        headers=api.alice,
    )
    assert [t["input_tokens"] for t in window.json()["items"]] == [40]
    budget = {"max_tokens": 42}
    assert_problem(
        api.http.put(f"/v1/budgets?session_id={sid}", json=budget, headers=api.alice), 403
    )
    put = api.http.put(f"/v1/budgets?session_id={sid}", json=budget, headers=api.admin)
    assert put.status_code == 200, put.text
    assert (put.json()["max_tokens"], put.json()["used_tokens"]) == (42, 42)
    mine = api.http.get(f"/v1/budgets?session_id={sid}", headers=api.alice).json()
    assert (mine["session_id"], mine["user_id"], mine["max_tokens"]) == (sid, "alice", 42)
    assert_problem(api.http.get(f"/v1/budgets?session_id={sid}", headers=api.bob), 404)
    assert_problem(api.http.get("/v1/budgets?user_id=alice", headers=api.bob), 403)
    refused = api.http.post(f"/v1/sessions/{sid}/runs", json={}, headers=api.alice)
    body = assert_problem(refused, 409, "budget-exceeded")
    assert (body["scope"], body["limit"], body["maximum"], body["used"]) == (
        "session",
        "tokens",
        42,
        42,
    )
    audit = api.http.get(f"/v1/sessions/{sid}/audit", headers=api.alice).json()["items"]
    assert audit[-1]["action"] == "run.refused"
    cleared = api.http.delete(f"/v1/budgets?session_id={sid}", headers=api.admin)
    assert cleared.status_code == 200 and cleared.json()["max_tokens"] is None
    assert api.http.post(f"/v1/sessions/{sid}/runs", json={}, headers=api.alice).status_code == 201
    assert_problem(api.http.put("/v1/budgets", json={"max_cost": -1}, headers=api.admin), 422)


def test_both_clients_and_the_cli_read_usage_and_budgets(tmp_path: Path) -> None:
    manager = SessionManager(MemoryStore())
    sid = manager.create_session(user_id="alice", agent="a").session_id
    run = manager.start_run(session_id=sid, user_id="alice")
    manager.finish_run(
        session_id=sid,
        user_id="alice",
        run_id=run.run_id,
        status="SUCCEEDED",
        usage_by_model={"m1": {"input_tokens": 3}, "m2": {"output_tokens": 4}},
    )
    keys = MemoryKeyStore()
    token, admin = keys.create(user_id="alice")[1], keys.create(user_id="root", admin=True)[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    with (
        TestClient(app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as c,
        SessionClient("http://testserver", admin, transport=InProcess(http)) as root,
    ):
        for group_by in ("session", "agent", "model", "day"):
            assert c.get_usage(group_by=group_by) == manager.get_usage(
                user_id="alice", group_by=group_by
            )
        root.set_budget(target_user_id="alice", max_tokens=7)
        assert c.get_budget().used_tokens == 7
        with pytest.raises(BudgetExceeded) as refused:
            c.start_run(session_id=sid)
        assert refused.value.scope == "user"
        assert root.clear_budget(target_user_id="alice").max_tokens is None

    async def main() -> int:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            return len(await c.get_usage(group_by="model"))

    assert asyncio.run(main()) == 2
    db = tmp_path / "u.db"
    url = f"sqlite:///{db}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        s = sm.create_session(user_id="alice", agent="a").session_id
        r = sm.start_run(session_id=s, user_id="alice")
        sm.finish_run(
            session_id=s,
            user_id="alice",
            run_id=r.run_id,
            status="SUCCEEDED",
            usage={"input_tokens": 5},
            model="m1",
        )
    runner = CliRunner()
    out = runner.invoke(
        build_app(), ["--url", url, "--user", "alice", "--json", "usage", "--by", "model"]
    )
    assert out.exit_code == 0, out.output
    assert [(t["group"], t["input_tokens"]) for t in json.loads(out.output)] == [("m1", 5)]
    table = runner.invoke(
        build_app(), ["--url", url, "--user", "alice", "usage"], env={"COLUMNS": "200"}
    )
    assert table.exit_code == 0 and s in table.output
    since = runner.invoke(
        build_app(), ["--url", url, "--user", "alice", "usage", "--since", "2999-01-01"]
    )
    assert since.exit_code == 0 and "no usage" in since.output
    bad = runner.invoke(build_app(), ["--url", url, "--user", "alice", "usage", "--by", "week"])
    assert bad.exit_code != 0
    setb = runner.invoke(
        build_app(),
        [
            "--url",
            url,
            "--user",
            "root",
            "--admin",
            "budget",
            "set",
            "--for-user",
            "alice",
            "--max-tokens",
            "5",
        ],
    )
    assert setb.exit_code == 0, setb.output
    shown = runner.invoke(
        build_app(), ["--url", url, "--user", "alice", "--json", "budget", "show"]
    )
    assert json.loads(shown.output)["max_tokens"] == 5
