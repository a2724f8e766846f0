"""External keys over HTTP: ``external_key`` on create, ``GET``/``PUT
/v1/sessions-by-key`` with the key query-encoded, the 409 ``session-exists`` problem,
and the Python clients' methods of the same names and signatures as the manager's."""

from __future__ import annotations

import asyncio
import inspect

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem
from test_client_flows import FlakyASGI

from agentsession import SessionExists, SessionManager, SessionNotFound
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.protocol import RequestInvalid
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent

#: Characters a URL path or query would misread if the key were not encoded.
ODD_KEY = "a/b?c=d&e#f%20 g+h 'x' ../ключ 🔑"
BY_KEY = "/v1/sessions-by-key"


def test_create_with_key_then_get_by_key(api: Api) -> None:
    """The key is stored exactly; the lookup answers the session with its ETag."""
    created = api.create(agent="coding", external_key=ODD_KEY)
    assert created["external_key"] == ODD_KEY
    r = api.http.get(BY_KEY, params={"agent": "coding", "external_key": ODD_KEY}, headers=api.alice)
    assert r.status_code == 200, r.text
    assert r.json()["session_id"] == created["session_id"]
    assert r.headers["ETag"]
    assert api.create(agent="coding")["external_key"] is None


def test_duplicate_key_is_409_session_exists_naming_the_session(api: Api) -> None:
    first = api.create(agent="coding", external_key="k")
    r = api.http.post(
        "/v1/sessions", json={"agent": "coding", "external_key": "k"}, headers=api.alice
    )
    body = assert_problem(r, 409, "session-exists")
    assert body["session_id"] == first["session_id"]


def test_get_by_key_of_another_user_or_unknown_key_is_404(api: Api) -> None:
    api.create(agent="coding", external_key="mine")
    for headers, key in ((api.bob, "mine"), (api.alice, "other")):
        r = api.http.get(BY_KEY, params={"agent": "coding", "external_key": key}, headers=headers)
        assert_problem(r, 404, "not-found")


def test_put_by_key_creates_with_201_then_finds_with_200(api: Api) -> None:
    params = {"agent": "coding", "external_key": ODD_KEY}
    r = api.http.put(BY_KEY, params=params, json={"title": "t"}, headers=api.alice)
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    assert r.headers["Location"] == f"/v1/sessions/{sid}"
    assert r.json()["title"] == "t"
    again = api.http.put(BY_KEY, params=params, headers=api.alice)
    assert again.status_code == 200, again.text
    assert again.json()["session_id"] == sid
    assert again.headers["ETag"] == r.headers["ETag"]


@pytest.mark.parametrize("key", ["", "tab\there", "a" * 257, "🔑" * 256 + "x"])
def test_malformed_key_is_refused(api: Api, key: str) -> None:
    """Control characters, empty and over-long keys: a problem, nothing stored."""
    params = {"agent": "coding", "external_key": key}
    r = api.http.put(BY_KEY, params=params, headers=api.alice)
    assert r.status_code in (400, 422), r.text
    r = api.http.post("/v1/sessions", json=params, headers=api.alice)
    assert r.status_code in (400, 422), r.text
    assert api.manager.list_sessions(user_id="alice").items == []


def _app() -> tuple[object, str]:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    return create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys), token


def test_sync_client_methods_match_the_manager() -> None:
    """create_session(external_key=), get_session_by_key and open_session: the same
    keyword arguments as the manager's, and the same results and errors."""
    for name in ("create_session", "get_session_by_key", "open_session"):
        want = inspect.signature(getattr(SessionManager, name)).parameters
        got = inspect.signature(getattr(SessionClient, name)).parameters
        assert list(got)[1:] == [p for p in want if p != "self"], name
    app, token = _app()
    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))
        s = client.create_session(agent="coding", external_key=ODD_KEY)
        with pytest.raises(SessionExists) as exc_info:
            client.create_session(agent="coding", external_key=ODD_KEY)
        assert exc_info.value.session_id == s.session_id
        assert client.get_session_by_key(agent="coding", external_key=ODD_KEY) == s
        assert client.open_session(agent="coding", external_key=ODD_KEY) == (s, False)
        new, created = client.open_session(agent="coding", external_key="new", title="t")
        assert created and new.title == "t" and new.external_key == "new"
        with pytest.raises(SessionNotFound):
            client.get_session_by_key(agent="coding", external_key="missing")
        with pytest.raises(RequestInvalid):  # the schema states the rule: a 422
            client.open_session(agent="coding", external_key="bad\x00")
        client.close()


def test_async_client_open_session() -> None:
    app, token = _app()

    async def main() -> None:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            results = await asyncio.gather(
                *(c.open_session(agent="a", external_key="k") for _ in range(4))
            )
            assert len({s.session_id for s, _ in results}) == 1
            assert sum(created for _, created in results) == 1
            found = await c.get_session_by_key(agent="a", external_key="k")
            assert found.session_id == results[0][0].session_id

    asyncio.run(main())


def test_async_client_open_session_after_a_lost_answer_reports_created() -> None:
    """The first PUT creates the session but its answer is lost; the retry carries the
    same Idempotency-Key and answers 201 created=True, not a find."""
    app, token = _app()

    async def main() -> None:
        flaky = FlakyASGI(httpx.ASGITransport(app=app), drops=1)  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=flaky, backoff=0.001) as c:
            session, created = await c.open_session(agent="a", external_key="k", title="t")
            assert created and session.title == "t"
            puts = [key for method, key in flaky.seen if method == "PUT"]
            assert len(puts) == 2 and puts[0] is not None and len(set(puts)) == 1
            assert await c.open_session(agent="a", external_key="k") == (session, False)

    asyncio.run(main())


def test_openapi_describes_the_session_exists_409_of_create(api: Api) -> None:
    """POST /v1/sessions documents its own 409 (the key exists), not the shared one;
    other writes keep the shared description."""
    paths = api.http.get("/openapi.json").json()["paths"]
    create = paths["/v1/sessions"]["post"]["responses"]["409"]["description"]
    assert "external_key" in create and "session-exists" in create
    close = paths["/v1/sessions/{session_id}/close"]["post"]["responses"]["409"]["description"]
    assert "external_key" not in close
