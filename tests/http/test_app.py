"""The HTTP service end to end in-process: resources, ETags, request ids, limits, errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from http_support import Api, assert_problem

from agentsession import Limits, SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.http.routes import routers
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

# The HTTP layer maps requests onto the manager; the stores' contract is tested in
# tests/contract, so these run on memory and SQLite only.
pytestmark = pytest.mark.store_independent


def test_health_ready_openapi_docs(api: Api) -> None:
    """Probes answer without a key; OpenAPI and the docs page are served."""
    assert api.http.get("/healthz").json() == {"status": "ok"}
    assert api.http.get("/readyz").json() == {"status": "ready"}
    spec = api.http.get("/openapi.json").json()
    assert "/v1/sessions/{session_id}/memory" in spec["paths"]
    assert "ApiKey" in spec["components"]["securitySchemes"]
    assert api.http.get("/docs").status_code == 200


def test_openapi_states_what_the_session_contexts_read() -> None:
    """The session contexts read the bearer key, the session id and the conditional
    headers from the request themselves; every operation taking one still documents
    them (path parameter with its pattern, the two headers on writes, the ApiKey
    security requirement), as FastAPI wrote them when they were declared parameters."""
    manager = SessionManager(MemoryStore())
    app = create_app(manager, Settings(url="memory://"), keys=MemoryKeyStore())
    paths = app.openapi()["paths"]
    taking: dict[str, list[tuple[str, str]]] = {"_read_ctx": [], "_write_ctx": []}
    for route in (r for router in routers() for r in router.routes):
        if not isinstance(route, APIRoute):
            continue
        for dependency in route.dependant.dependencies:
            name = getattr(dependency.call, "__name__", "")
            if name in taking:
                taking[name] += [(route.path_format, m.lower()) for m in route.methods]
    assert len(taking["_read_ctx"]) >= 15 and len(taking["_write_ctx"]) >= 15
    seen: list[int] = []
    for name, operations in taking.items():
        for path, method in operations:
            operation = paths[path][method]
            params = {(p["in"], p["name"]): p for p in operation["parameters"]}
            session_id = params[("path", "session_id")]
            assert session_id["required"] and session_id["schema"]["pattern"].startswith("^ses_")
            assert {"ApiKey": []} in operation["security"]
            locations = [p["in"] for p in operation["parameters"]]
            assert locations == sorted(locations, key=("path", "query", "header").index)
            if name == "_write_ctx":
                assert ("header", "if-match") in params
                assert params[("header", "idempotency-key")]["schema"]["pattern"]
            seen.extend(id(p) for p in operation["parameters"])
    assert len(seen) == len(set(seen)), "operations share parameter objects"


def test_session_lifecycle_with_etags(api: Api) -> None:
    """Create, read, patch, close, restore, expire, delete; every session answer has an ETag."""
    created = api.http.post(
        "/v1/sessions", json={"agent": "coding", "title": "fix"}, headers=api.alice
    )
    assert created.status_code == 201
    s = created.json()
    sid = s["session_id"]
    assert created.headers["etag"] == f'"{sid}@1"'
    assert created.headers["location"] == f"/v1/sessions/{sid}"

    got = api.http.get(f"/v1/sessions/{sid}", headers=api.alice)
    assert got.json() == s and got.headers["etag"] == f'"{sid}@1"'

    patched = api.http.patch(
        f"/v1/sessions/{sid}",
        json={"title": None, "metadata": {"k": "v"}},
        headers={**api.alice, "If-Match": got.headers["etag"]},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["title"] is None and patched.json()["metadata"] == {"k": "v"}
    assert patched.headers["etag"] == f'"{sid}@2"'

    closed = api.http.post(f"/v1/sessions/{sid}/close", json={"reason": "done"}, headers=api.alice)
    assert closed.json()["status"] == "CLOSED" and closed.headers["etag"] == f'"{sid}@3"'
    write = api.http.post(
        f"/v1/sessions/{sid}/messages", json={"message": {"role": "user"}}, headers=api.alice
    )
    assert assert_problem(write, 409, "session-not-active")["current_status"] == "CLOSED"

    restored = api.http.post(f"/v1/sessions/{sid}/restore", headers=api.alice)
    assert restored.status_code == 200
    assert restored.json()["session"]["status"] == "ACTIVE"
    assert restored.headers["etag"] == f'"{sid}@4"'

    expired = api.http.post(f"/v1/sessions/{sid}/expire", headers=api.alice)
    assert expired.json()["status"] == "EXPIRED"

    listed = api.http.get("/v1/sessions?status=EXPIRED&agent=coding", headers=api.alice).json()
    assert [x["session_id"] for x in listed["items"]] == [sid]

    assert api.http.delete(f"/v1/sessions/{sid}", headers=api.alice).status_code == 204
    assert_problem(api.http.get(f"/v1/sessions/{sid}", headers=api.alice), 404, "not-found")


def test_list_paging_and_limit_bounds(api: Api) -> None:
    """limit is 0..Limits.max_page_size; cursors visit every session once, newest first."""
    ids = [api.create()["session_id"] for _ in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = api.http.get("/v1/sessions", params=params, headers=api.alice).json()
        seen += [x["session_id"] for x in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))
    for bad in (Limits().max_page_size + 1, -1):
        body = assert_problem(
            api.http.get(f"/v1/sessions?limit={bad}", headers=api.alice), 422, "request-validation"
        )
        assert body["errors"][0]["field"] == "query.limit"
    assert_problem(
        api.http.get("/v1/sessions?cursor=nope", headers=api.alice), 400, "validation-error"
    )


def test_messages_memory_tools_runs_audit(api: Api) -> None:
    """One pass over every session resource."""
    sid = api.create(agent="coding")["session_id"]
    base = f"/v1/sessions/{sid}"
    one = api.http.post(
        f"{base}/messages",
        json={"message": {"role": "user", "content": "修复 👩‍💻", "refusal": None}},
        headers=api.alice,
    )
    assert one.status_code == 201 and one.json()["seq"] == 1
    assert one.json()["refusal"] is None and "name" not in one.json()
    batch = api.http.post(
        f"{base}/messages",
        json={
            "messages": [{"role": "assistant", "content": str(i)} for i in range(9)],
            "working_memory_patch": {"goal": "fix"},
        },
        headers=api.alice,
    )
    assert [m["seq"] for m in batch.json()["items"]] == list(range(2, 11))
    window = api.http.get(f"{base}/messages?limit=3", headers=api.alice).json()["items"]
    assert [m["seq"] for m in window] == [8, 9, 10]
    older = api.http.get(f"{base}/messages?limit=3&before=8", headers=api.alice).json()["items"]
    assert [m["seq"] for m in older] == [5, 6, 7]
    newer = api.http.get(f"{base}/messages?limit=2&after=1", headers=api.alice).json()["items"]
    assert [m["seq"] for m in newer] == [2, 3]
    assert_problem(
        api.http.post(f"{base}/messages", json={}, headers=api.alice), 422, "request-validation"
    )

    memory = api.http.get(f"{base}/memory", headers=api.alice).json()
    assert memory["data"] == {"goal": "fix"}
    session = api.http.get(base, headers=api.alice)
    put = api.http.put(
        f"{base}/memory",
        json={"goal": "g", "facts": {"a": 1}},
        headers={**api.alice, "If-Match": session.headers["etag"]},
    )
    assert put.status_code == 200 and put.headers["etag"] == f'"{sid}@{put.json()["version"]}"'
    patched = api.http.patch(
        f"{base}/memory",
        content=b'{"facts": {"a": null, "b": 2}}',
        headers={**api.alice, "Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["data"] == {"goal": "g", "facts": {"b": 2}}

    call = api.http.post(
        f"{base}/tool-calls",
        json={"tool": "pip.install", "arguments": {"pkg": "requests", "v": 2}, "result": "ok"},
        headers=api.alice,
    )
    assert call.status_code == 201, call.text
    found = api.http.get(
        f"{base}/tool-calls/find",
        params={"tool": "pip.install", "arguments": '{"v": 2, "pkg": "requests"}'},
        headers=api.alice,
    ).json()["item"]
    assert found["call_id"] == call.json()["call_id"]
    none = api.http.get(
        f"{base}/tool-calls/find", params={"tool": "pip.install"}, headers=api.alice
    ).json()
    assert none == {"item": None}
    assert len(api.http.get(f"{base}/tool-calls", headers=api.alice).json()["items"]) == 1
    assert_problem(
        api.http.get(
            f"{base}/tool-calls/find", params={"tool": "x", "arguments": "[1]"}, headers=api.alice
        ),
        422,
        "request-validation",
    )

    run = api.http.post(f"{base}/runs", json={"input": "task"}, headers=api.alice).json()
    rid = run["run_id"]
    assert_problem(
        api.http.post(f"{base}/runs", json={}, headers=api.alice), 409, "run-already-running"
    )
    step = api.http.post(
        f"{base}/runs/{rid}/steps", json={"kind": "model", "output": {"t": 1}}, headers=api.alice
    )
    assert step.status_code == 201 and step.json()["index"] == 0
    done = api.http.post(
        f"{base}/runs/{rid}/finish",
        json={"status": "SUCCEEDED", "usage": {"input_tokens": 3}},
        headers=api.alice,
    )
    assert done.json()["status"] == "SUCCEEDED"
    assert api.http.get(f"{base}/runs/{rid}", headers=api.alice).json()["steps"][0]["kind"] == (
        "model"
    )
    assert [
        r["run_id"] for r in api.http.get(f"{base}/runs", headers=api.alice).json()["items"]
    ] == [rid]
    missing_run = api.http.get(f"{base}/runs/run_aaaaaaaaaaaaaaaaaaaaaaaaaa", headers=api.alice)
    assert assert_problem(missing_run, 404, "not-found")["run_id"] == (
        "run_aaaaaaaaaaaaaaaaaaaaaaaaaa"
    )

    audit = api.http.get(f"{base}/audit", headers=api.alice).json()["items"]
    assert audit[0]["action"] == "session.created"
    assert "修复" not in str(audit)


def test_request_id_is_echoed_and_audited(api: Api) -> None:
    """X-Request-ID is echoed (or generated) and lands in the audit log."""
    r = api.http.post("/v1/sessions", json={}, headers={**api.alice, "X-Request-ID": "req-42"})
    assert r.headers["x-request-id"] == "req-42"
    sid = r.json()["session_id"]
    audit = api.http.get(f"/v1/sessions/{sid}/audit", headers=api.alice).json()["items"]
    assert audit[0]["request_id"] == "req-42"
    generated = api.http.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert generated.headers["x-request-id"] != "bad id\twith spaces"
    assert len(generated.headers["x-request-id"]) == 32


def test_unauthenticated_is_401_problem(api: Api) -> None:
    """No key, a bad key, a revoked key, another scheme: 401 problem with WWW-Authenticate."""
    sid = api.create()["session_id"]
    key_id = next(k.key_id for k in api.keys.list() if k.user_id == "bob")
    api.keys.revoke(key_id)
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic YTpi"}, api.bob):
        for method, path in (("GET", "/v1/sessions"), ("GET", f"/v1/sessions/{sid}")):
            r = api.http.request(method, path, headers=headers)
            assert_problem(r, 401, "unauthenticated")
            assert r.headers["www-authenticate"].startswith("Bearer")
    # 401 comes before 404 and before body validation
    r = api.http.post("/v1/sessions/../x/messages", json={"bad": 1})
    assert r.status_code in (401, 404)
    r = api.http.post(f"/v1/sessions/{sid}/messages", json={"bad": 1})
    assert_problem(r, 401)


def test_body_limit_413_before_reading(make_api: Any) -> None:
    """A body over max_body_bytes is 413 (by Content-Length, or counted while streaming)."""
    api = make_api(max_body_bytes=10_000)
    sid = api.create()["session_id"]
    big = {"message": {"role": "user", "content": "x" * 20_000}}
    sent = api.http.post(f"/v1/sessions/{sid}/messages", json=big, headers=api.alice)
    body = assert_problem(sent, 413, "payload-too-large")
    assert body["limit_bytes"] == 10_000
    assert body["size_bytes"] == int(sent.request.headers["content-length"]) > 20_000

    def chunks() -> Iterator[bytes]:
        yield b'{"message": {"role": "user", "content": "'
        for _ in range(30):
            yield b"y" * 1000
        yield b'"}}'

    streamed = api.http.post(
        f"/v1/sessions/{sid}/messages",
        content=chunks(),
        headers={**api.alice, "Content-Type": "application/json"},
    )
    assert "size_bytes" not in assert_problem(streamed, 413, "payload-too-large")
    assert api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()["message_count"] == 0


def test_manager_payload_limit_is_413_naming_the_limit(api: Api) -> None:
    """C14 over HTTP: over the manager's metadata limit -> 413 with limit_bytes, nothing kept."""
    r = api.http.post("/v1/sessions", json={"metadata": {"x": "y" * 20_000}}, headers=api.alice)
    body = assert_problem(r, 413, "payload-too-large")
    assert body["limit_bytes"] == 16 * 1024 and body["field"] == "metadata"


class _BrokenStore(MemoryStore):
    """A memory store whose transactions fail with a driver-looking error."""

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Any]:
        raise RuntimeError("SELECT secret FROM sessions WHERE password='hunter2'")
        yield  # pragma: no cover


def test_unexpected_error_is_bare_500() -> None:
    """An unexpected exception: 500 problem without trace or SQL, request id still set."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(SessionManager(_BrokenStore()), Settings(url="memory://"), keys=keys)
    with TestClient(app, raise_server_exceptions=False) as http:
        r = http.post("/v1/sessions", json={}, headers={"Authorization": f"Bearer {token}"})
        body = assert_problem(r, 500, "internal-error")
        assert "SELECT" not in r.text and "hunter2" not in r.text and "Traceback" not in r.text
        assert body["detail"] == "internal error"
        assert r.headers["x-request-id"]
        ready = http.get("/readyz")
        assert_problem(ready, 503)


def test_unknown_route_and_method_are_problems(api: Api) -> None:
    """Router-level 404 and 405 also answer problem+json."""
    assert_problem(api.http.get("/v2/nothing", headers=api.alice), 404, "not-found")
    assert_problem(api.http.put("/v1/sessions", headers=api.alice), 405, "method-not-allowed")


def test_lifespan_opens_and_closes_store_from_settings(tmp_path: Any) -> None:
    """create_app() without a manager opens settings.url in the lifespan."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    settings = Settings(url=f"sqlite:///{tmp_path / 'x.db'}", auto_migrate=True)
    app = create_app(settings=settings, keys=keys)
    with TestClient(app) as http:
        r = http.post("/v1/sessions", json={}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201
        assert http.get("/readyz").status_code == 200
    assert app.state.services is None


def test_admin_acts_across_users(api: Api) -> None:
    """An admin key reads and closes another user's session and erases a user's data."""
    sid = api.create()["session_id"]
    assert api.http.get(f"/v1/sessions/{sid}", headers=api.admin).status_code == 200
    listed = api.http.get("/v1/sessions?all_users=true", headers=api.admin).json()["items"]
    assert sid in [x["session_id"] for x in listed]
    assert_problem(api.http.get("/v1/sessions?all_users=true", headers=api.alice), 403, "forbidden")
    assert_problem(api.http.delete("/v1/users/alice/data", headers=api.bob), 403)
    r = api.http.delete("/v1/users/alice/data", headers=api.admin)
    assert r.json() == {"deleted_sessions": 1}
    assert_problem(api.http.get(f"/v1/sessions/{sid}", headers=api.alice), 404)
    assert api.http.get("/v1/whoami", headers=api.admin).json() == {
        "user_id": "root",
        "admin": True,
        "scope": "write",
        "agents": None,
    }


def test_numbers_in_bodies_are_not_coerced(api: Api) -> None:
    """A string or boolean where the API takes a number is 422 naming the field, and
    nothing is written; a JSON integer where a float belongs is fine."""
    for bad in ("5", True, "1e3"):
        body = assert_problem(
            api.http.post("/v1/sessions", json={"ttl_seconds": bad}, headers=api.alice),
            422,
            "request-validation",
        )
        assert body["errors"][0]["field"] == "body.ttl_seconds"
    assert api.http.get("/v1/sessions", headers=api.alice).json()["items"] == []
    s = api.create(ttl_seconds=5)
    assert s["ttl_seconds"] == 5
    base = f"/v1/sessions/{s['session_id']}"
    star = {**api.alice, "If-Match": "*"}
    patched = api.http.patch(base, json={"ttl_seconds": "60"}, headers=star)
    assert_problem(patched, 422, "request-validation")
    restore = api.http.post(f"{base}/restore", json={"message_limit": "3"}, headers=star)
    assert_problem(restore, 422, "request-validation")
    run = api.http.post(f"{base}/runs", json={}, headers=api.alice).json()
    finish = api.http.post(
        f"{base}/runs/{run['run_id']}/finish",
        json={"status": "SUCCEEDED", "usage": {"input_tokens": "12"}},
        headers=api.alice,
    )
    assert_problem(finish, 422, "request-validation")
    assert api.http.get(base, headers=api.alice).json()["version"] == s["version"] + 1
