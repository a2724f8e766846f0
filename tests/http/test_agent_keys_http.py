"""Keys limited to agents, over every route of the table of operations: a key of alice
limited to the agent ``support`` never sees nor changes a session of her agent
``billing`` (each answer is exactly the one for a session that does not exist), and on
a ``support`` session answers as her unlimited key does; listings, counts, search, the
change feed and usage read only ``support`` sessions."""

from __future__ import annotations

from typing import Any

import pytest
from http_support import Api, assert_problem, headers_of
from test_scopes_http import QUERIES, ROUTES

from agentsession.ids import new_id
from agentsession.operations import Route

pytestmark = pytest.mark.store_independent


def _seed(api: Api, agent: str, key: str = "k1") -> dict[str, str]:
    """A session of alice and ``agent`` with messages, a run and a rewind: every path
    parameter of the table's routes."""
    sid = api.create(agent=agent, external_key=key)["session_id"]
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
        "agent": agent,
        "user_id": "alice",
    }


def _call(api: Api, route: Route, ids: dict[str, str], headers: dict[str, str]) -> Any:
    body = None if route.method in ("GET", "DELETE") else {}
    params = dict(QUERIES.get(route.path, {}))
    if "agent" in params:
        params["agent"] = ids["agent"]
    return api.http.request(
        route.method, route.path.format(**ids), params=params, json=body, headers=headers
    )


def _type(response: Any) -> str | None:
    if response.headers.get("content-type", "").startswith("application/problem+json"):
        return str(response.json()["type"])
    return None


@pytest.fixture
def limited(api: Api) -> dict[str, str]:
    return headers_of(api.keys.create(user_id="alice", agents=["support"])[1])


def test_whoami_names_the_agents_a_key_is_limited_to(api: Api, limited: dict[str, str]) -> None:
    both = headers_of(api.keys.create(user_id="alice", agents=["support", "billing"])[1])
    assert api.http.get("/v1/whoami", headers=limited).json()["agents"] == ["support"]
    assert api.http.get("/v1/whoami", headers=both).json()["agents"] == ["billing", "support"]
    assert api.http.get("/v1/whoami", headers=api.alice).json()["agents"] is None


def test_c31_a_key_of_one_agent_never_sees_nor_changes_another_agents_session(
    api: Api, limited: dict[str, str]
) -> None:
    theirs = _seed(api, "billing")
    before = api.manager.get_session(session_id=theirs["session_id"], user_id="alice")
    missing = {**theirs, "session_id": new_id("ses")}
    checked = 0
    for op, route in ROUTES:
        refused = _call(api, route, theirs, limited)
        assert theirs["session_id"] not in refused.text or "{session_id}" in route.path, op
        if "{session_id}" in route.path:
            absent = _call(api, route, missing, api.alice)
            assert (op, refused.status_code, _type(refused)) == (
                op,
                absent.status_code,
                _type(absent),
            ), refused.text
        elif "{agent}" in route.path or (route.path == "/v1/sessions" and route.method == "POST"):
            assert refused.status_code in (403, 422), (op, refused.text)
        elif route.path == "/v1/users/{user_id}/data":  # every agent's sessions
            assert_problem(refused, 403, "forbidden")
        checked += 1
    assert checked >= 40
    refused = api.http.post("/v1/sessions", json={"agent": "billing"}, headers=limited)
    assert_problem(refused, 403, "forbidden")
    after = api.manager.get_session(session_id=theirs["session_id"], user_id="alice")
    assert (after.version, after.status, after.message_count) == (
        before.version,
        before.status,
        before.message_count,
    )


def test_c31_a_key_of_one_agent_works_on_that_agents_session_as_an_unlimited_key(
    api: Api, limited: dict[str, str]
) -> None:
    mine, twin = _seed(api, "support"), _seed(api, "support", "k2")
    compared = 0
    for op, route in ROUTES:
        if route.path == "/v1/users/{user_id}/data" or "{session_id}" not in route.path:
            continue
        if op == "changes":  # deleted by now: its tombstone keeps no agent (docs/security.md)
            assert_problem(_call(api, route, mine, limited), 404)
            continue
        got, want = _call(api, route, mine, limited), _call(api, route, twin, api.alice)
        assert (op, got.status_code, _type(got)) == (op, want.status_code, _type(want)), got.text
        compared += 1
    assert compared >= 30
    created = api.http.post("/v1/sessions", json={"agent": "support"}, headers=limited)
    assert created.status_code == 201, created.text


def test_c31_listings_counts_search_feed_and_usage_read_only_the_keys_agents(
    api: Api, limited: dict[str, str]
) -> None:
    mine, theirs = _seed(api, "support"), _seed(api, "billing")
    listed = api.http.get("/v1/sessions", headers=limited).json()["items"]
    assert [s["session_id"] for s in listed] == [mine["session_id"]]
    assert api.http.get("/v1/sessions/count", headers=limited).json()["count"] == 1
    assert api.http.get("/v1/sessions/count", headers=api.alice).json()["count"] == 2
    found = api.http.get("/v1/search", params={"q": "hello"}, headers=limited).json()["items"]
    assert {h["session_id"] for h in found} == {mine["session_id"]}
    for path in ("/v1/sessions", "/v1/sessions/count", "/v1/usage"):
        named = api.http.get(path, params={"agent": "billing"}, headers=limited)
        assert_problem(named, 403, "forbidden")
    assert_problem(api.http.get("/v1/changes", headers=limited), 403, "forbidden")
    feed = api.http.get(f"/v1/sessions/{mine['session_id']}/changes", headers=limited)
    assert feed.status_code == 200 and feed.json()["items"], feed.text
    hidden = api.http.get(f"/v1/sessions/{theirs['session_id']}/changes", headers=limited)
    assert_problem(hidden, 404)
    usage = api.http.get("/v1/usage", params={"group_by": "agent"}, headers=limited)
    assert usage.status_code == 200, usage.text
    assert {u["group"] for u in usage.json()["items"]} <= {"support"}


def test_c31_several_agents_name_one_per_listing(api: Api) -> None:
    both = headers_of(api.keys.create(user_id="alice", agents=["support", "sales"])[1])
    _seed(api, "sales")
    assert_problem(api.http.get("/v1/sessions", headers=both), 403, "forbidden")
    named = api.http.get("/v1/sessions", params={"agent": "sales"}, headers=both)
    assert len(named.json()["items"]) == 1


def test_f7_an_admin_key_limited_to_agents_verifies_only_its_agents_sessions(api: Api) -> None:
    """The store-wide audit verify reaches every agent: 403, as the store-wide feed;
    another agent's session answers as a missing one, its own as an unlimited key's."""
    limited = headers_of(api.keys.create(user_id="root", admin=True, agents=["support"])[1])
    mine, theirs = _seed(api, "support"), _seed(api, "billing")
    verify = "/v1/admin/audit/verify"
    assert_problem(api.http.get(verify, headers=limited), 403, "forbidden")
    assert_problem(api.http.get("/v1/changes?all_users=true", headers=limited), 403)
    hidden = api.http.get(verify, params={"session_id": theirs["session_id"]}, headers=limited)
    absent = api.http.get(verify, params={"session_id": new_id("ses")}, headers=api.admin)
    assert absent.status_code == 404, absent.text
    assert (hidden.status_code, _type(hidden)) == (404, _type(absent)), hidden.text
    assert theirs["session_id"] not in hidden.text
    own = api.http.get(verify, params={"session_id": mine["session_id"]}, headers=limited)
    want = api.http.get(verify, params={"session_id": mine["session_id"]}, headers=api.admin)
    assert own.status_code == 200 and own.json() == want.json(), own.text
