"""API key scopes over every route of the table of operations: a ``read`` key (of a user
or an admin) gets 403 ``insufficient-scope`` problem+json on every write, before
anything is written, and answers every read exactly as a ``write`` key does."""

from __future__ import annotations

from typing import Any

import pytest
from http_support import Api, assert_problem, headers_of

from agentsession.http.scopes import route_writes
from agentsession.operations import OPERATIONS, Route

pytestmark = pytest.mark.store_independent

#: Query strings that make a read meaningful (its required parameters).
QUERIES = {
    "/v1/search": {"q": "hello"},
    "/v1/sessions-by-key": {"agent": "support", "external_key": "k1"},
    "/v1/sessions/{session_id}/records/one": {"namespace": "ns", "key": "k"},
    "/v1/sessions/{session_id}/tool-calls/find": {"tool": "t", "arguments": "{}"},
}
ROUTES = [
    (op.name, route)
    for op in OPERATIONS
    for route in op.routes
    if route.path not in ("/healthz", "/readyz")
]


def _url(route: Route, ids: dict[str, str]) -> str:
    return route.path.format(**ids)


def _seed(api: Api) -> dict[str, str]:
    """A session of alice with a message, a run and a rewind: every path parameter."""
    sid = api.create(agent="support", external_key="k1")["session_id"]
    api.http.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "hello"}] * 2},
        headers=api.alice,
    ).raise_for_status()
    run = api.http.post(f"/v1/sessions/{sid}/runs", json={}, headers=api.alice)
    assert run.status_code == 201, run.text
    return {
        "session_id": sid,
        "run_id": run.json()["run_id"],
        "number": "1",
        "scope": "user",
        "agent": "support",
        "user_id": "alice",
    }


def _call(api: Api, route: Route, ids: dict[str, str], headers: dict[str, str]) -> Any:
    body = None if route.method in ("GET", "DELETE") else {}
    return api.http.request(
        route.method, _url(route, ids), params=QUERIES.get(route.path), json=body, headers=headers
    )


@pytest.fixture
def keys(api: Api) -> dict[str, dict[str, str]]:
    return {
        "read": headers_of(api.keys.create(user_id="alice", scope="read")[1]),
        "admin-read": headers_of(api.keys.create(user_id="root", admin=True, scope="read")[1]),
    }


def test_every_route_is_classified_by_its_operation() -> None:
    """Reads are GETs (and find_tool_call's POST); every other method writes."""
    writes = {(op, r.method, r.path) for op, r in ROUTES if route_writes(r.method, r.path)}
    reads = {(op, r.method) for op, r in ROUTES if not route_writes(r.method, r.path)}
    assert all(method == "GET" for _, method in reads - {("find_tool_call", "POST")})
    assert ("find_tool_call", "POST") in reads
    written = {op for op, _, _ in writes}
    assert written >= {"create_session", "append_messages", "delete_user_data", "put_records"}
    assert route_writes("POST", "/v1/not-in-the-table") and not route_writes("GET", "/x")


@pytest.mark.parametrize("scope", ["read", "admin-read"])
def test_a_read_key_is_refused_every_write_and_nothing_changes(
    api: Api, keys: dict[str, dict[str, str]], scope: str
) -> None:
    ids = _seed(api)
    before = api.manager.get_session(session_id=ids["session_id"], user_id="alice")
    refused = []
    for op, route in ROUTES:
        if not route_writes(route.method, route.path):
            continue
        r = _call(api, route, ids, keys[scope])
        body = assert_problem(r, 403, "insufficient-scope")
        assert route.method in body["detail"], body
        refused.append(op)
    assert len(refused) >= 25, refused
    after = api.manager.get_session(session_id=ids["session_id"], user_id="alice")
    assert after.version == before.version and after.status == before.status


@pytest.mark.parametrize("scope", ["read", "admin-read"])
def test_a_read_key_answers_every_read_as_a_write_key(
    api: Api, keys: dict[str, dict[str, str]], scope: str
) -> None:
    ids = _seed(api)
    writer = api.alice if scope == "read" else api.admin
    compared = 0
    for op, route in ROUTES:
        if route_writes(route.method, route.path):
            continue
        mine, theirs = (_call(api, route, ids, h) for h in (keys[scope], writer))
        assert (op, mine.status_code) == (op, theirs.status_code), mine.text
        # Never refused for its scope; an admin-only read refuses both keys alike.
        assert "insufficient-scope" not in mine.text, (op, mine.text)
        if mine.status_code == 200 and op != "whoami":
            assert mine.json() == theirs.json(), op
        compared += 1
    assert compared >= 20


def test_whoami_says_the_scope(api: Api, keys: dict[str, dict[str, str]]) -> None:
    me = api.http.get("/v1/whoami", headers=keys["read"]).json()
    assert me == {"user_id": "alice", "admin": False, "scope": "read", "agents": None}
    writes = api.http.post("/v1/sessions", json={}, headers=keys["read"])
    assert_problem(writes, 403, "insufficient-scope")
    assert api.http.post("/v1/sessions", json={}, headers=api.alice).status_code == 201
