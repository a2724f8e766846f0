"""Search over HTTP, both clients and the CLI: ``GET /v1/search?q=`` (the route built
from its row; the manager's ``query`` is ``q`` on the wire) answers a page of hits as
the manager does, the caller's only, with its filters, cursor and errors; a store with
no search index answers problem+json 501 and the clients raise SearchNotSupported."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem
from typer.testing import CliRunner

from agentsession import Forbidden, SearchNotSupported, SessionManager
from agentsession.cli.app import build_app
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent


def _seed(api: Api) -> str:
    sid = str(api.create(agent="coding", title="启动 fix")["session_id"])
    messages = [
        {"role": "user", "content": "帮我修复启动失败"},
        {"role": "assistant", "content": "pin requirements.txt"},
    ]
    r = api.http.post(
        f"/v1/sessions/{sid}/messages", json={"messages": messages}, headers=api.alice
    )
    assert r.status_code in (200, 201), r.text
    api.create(api.bob, agent="coding", title="requirements.txt of bob")
    return sid


def _hits(r: httpx.Response) -> list[tuple[str, str, int]]:
    assert r.status_code == 200, r.text
    return [(h["session_id"], h["kind"], h["seq"]) for h in r.json()["items"]]


def test_search_answers_the_callers_hits_with_filters_and_pages(api: Api) -> None:
    sid = _seed(api)
    assert _hits(api.http.get("/v1/search?q=修复启动", headers=api.alice)) == [(sid, "message", 1)]
    assert _hits(api.http.get("/v1/search?q=requirements.txt", headers=api.alice)) == [
        (sid, "message", 2)
    ]
    body = api.http.get("/v1/search", params={"q": "启动"}, headers=api.alice).json()
    assert {(h["kind"], h["seq"]) for h in body["items"]} == {("title", 0), ("message", 1)}
    hit = next(h for h in body["items"] if h["kind"] == "message")
    assert hit["snippet"][hit["match_start"] : hit["match_end"]] == "启动"
    only = api.http.get(f"/v1/search?q=启动&session_id={sid}&agent=coding", headers=api.alice)
    assert len(_hits(only)) == 2
    first = api.http.get("/v1/search?q=启动&limit=1", headers=api.alice).json()
    assert first["has_more"] and first["next_cursor"]
    rest = api.http.get(
        "/v1/search", params={"q": "启动", "cursor": first["next_cursor"]}, headers=api.alice
    ).json()
    assert len(first["items"]) + len(rest["items"]) == 2 and not rest["has_more"]
    everyone = api.http.get("/v1/search?q=requirements.txt&all_users=true", headers=api.admin)
    assert len(_hits(everyone)) == 2


def test_search_refusals(api: Api) -> None:
    _seed(api)
    assert_problem(api.http.get("/v1/search", headers=api.alice), 422)  # q is required
    assert_problem(api.http.get("/v1/search?q=", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/search?q=" + "x" * 201, headers=api.alice), 422)
    assert_problem(api.http.get("/v1/search?q=%20%0A", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/search?q=a%00b", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/search?q=abc&session_id=nope", headers=api.alice), 422)
    assert_problem(api.http.get("/v1/search?q=abc&cursor=garbage", headers=api.alice), 400)
    assert_problem(api.http.get("/v1/search?q=abc&all_users=true", headers=api.alice), 403)
    assert_problem(api.http.get("/v1/search?q=abc"), 401)


def _app(manager: SessionManager) -> tuple[Any, str]:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    return create_app(manager, Settings(url="memory://"), keys=keys), token


def test_both_clients_search_as_the_manager_does() -> None:
    manager = SessionManager(MemoryStore())
    sid = manager.create_session(user_id="alice", agent="a").session_id
    texts = [{"role": "user", "content": f"needle {i}"} for i in range(5)]
    manager.append_messages(session_id=sid, user_id="alice", messages=texts)
    other = manager.create_session(user_id="alice", agent="b", title="needle title").session_id
    app, token = _app(manager)
    with (
        TestClient(app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as c,
    ):
        assert c.search(query="needle") == manager.search(user_id="alice", query="needle")
        assert [h.session_id for h in c.search(query="needle", session_id=other)] == [other]
        assert [h.kind for h in c.search(query="needle", agent="b")] == ["title"]
        page = c.search(query="needle", limit=4)
        assert len(page) == 4 and len(c.search(query="needle", cursor=page.next_cursor)) == 2
        with pytest.raises(Forbidden):
            c.search(query="needle", all_users=True)

    async def main() -> int:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            return len(await c.search(query="needle 3"))

    assert asyncio.run(main()) == 1


def test_a_store_without_search_answers_501_and_the_client_raises(redis_url: str) -> None:
    from agentsession.stores.redis.store import RedisStore

    with RedisStore(redis_url) as store:
        app, token = _app(SessionManager(store))
        with TestClient(app) as http:
            r = http.get("/v1/search?q=anything", headers={"Authorization": f"Bearer {token}"})
            assert_problem(r, 501)
            assert r.json()["type"].endswith("/search-not-supported")
            assert "not supported" in r.json()["detail"]
            with SessionClient("http://testserver", token, transport=InProcess(http)) as c:
                with pytest.raises(SearchNotSupported) as caught:
                    c.search(query="anything")
                assert caught.value.store == "redis"


def test_search_off_with_a_keyring_says_why_over_http_and_logs_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store with a keyring (search off) answers 501 naming the keyring and the
    setting that turns search on, as the CLI says; an expected answer, so the service
    logs it at INFO, never as a failure (ERROR)."""
    from agentsession.crypto import ContentCipher, Keyring
    from agentsession.crypto import MemoryKeyStore as RingKeys
    from agentsession.stores.sealed import SealedStore

    ring = Keyring.create(tmp_path / "k.keyring", key_store=RingKeys())
    app, token = _app(SessionManager(SealedStore(MemoryStore(), ContentCipher(ring))))
    with TestClient(app) as http, caplog.at_level(logging.INFO, logger="agentsession.http"):
        r = http.get("/v1/search?q=x", headers={"Authorization": f"Bearer {token}"})
    assert_problem(r, 501)
    detail = r.json()["detail"]
    assert "keyring" in detail and "AGENTSESSION_SEARCH_WITH_KEYRING" in detail
    assert "no search index" not in detail
    records = [rec for rec in caplog.records if rec.name == "agentsession.http"]
    assert records and all(rec.levelno == logging.INFO for rec in records)
    assert "search-not-supported" in records[0].getMessage()


def test_the_cli_searches(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        sid = manager.create_session(user_id="alice", agent="a").session_id
        manager.append_message(
            session_id=sid, user_id="alice", message={"role": "user", "content": "帮我修复启动失败"}
        )
    runner = CliRunner()
    base = ["--url", url, "search", "修复启动", "--user", "alice"]
    plain = runner.invoke(build_app(), base)
    assert plain.exit_code == 0, plain.output
    assert sid in plain.output and "message 1" in plain.output
    as_json = json.loads(runner.invoke(build_app(), [*base, "--json", "--session", sid]).output)
    assert [(h["session_id"], h["seq"]) for h in as_json["items"]] == [(sid, 1)]
    none = runner.invoke(build_app(), [*base, "--agent", "other"])
    assert none.exit_code == 0 and "no matches" in none.output
    refused = runner.invoke(build_app(), [*base, "--all-users"])
    assert refused.exit_code != 0 and "admin" in refused.output
