"""Shared memory over HTTP: ``GET``/``PATCH /v1/shared-memory/{app|user}/{agent}``,
``shared_memory_ops`` in the create and append bodies, and the clients' mirror."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem

from agentsession import (
    AsyncSessionManager,
    Forbidden,
    PatchConflict,
    SessionManager,
    VersionConflict,
)
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent

JSON_PATCH = "application/json-patch+json"


def _patch(api: Api, path: str, ops: Any, who: dict[str, str], media: str = JSON_PATCH) -> Any:
    return api.http.patch(
        f"/v1/shared-memory/{path}",
        content=json.dumps(ops).encode(),
        headers={**who, "Content-Type": media},
    )


def test_user_scope_is_the_callers(api: Api) -> None:
    got = api.http.get("/v1/shared-memory/user/coding", headers=api.alice)
    assert got.status_code == 200 and got.json()["version"] == 0 and got.json()["data"] == {}
    r = _patch(api, "user/coding", [{"op": "add", "path": "/flag", "value": None}], api.alice)
    assert r.status_code == 200, r.text
    assert (r.json()["user_id"], r.json()["version"], r.json()["data"]) == (
        "alice",
        1,
        {"flag": None},
    )
    assert api.http.get("/v1/shared-memory/user/coding", headers=api.bob).json()["version"] == 0
    conflict = _patch(api, "user/coding", [{"op": "remove", "path": "/x"}], api.alice)
    assert assert_problem(conflict, 409, "patch-conflict")["field"] == "ops[0]"
    plain = _patch(
        api,
        "user/coding",
        [{"op": "test", "path": "/flag", "value": None}],
        api.alice,
        "application/json",
    )
    assert plain.status_code == 200 and plain.json()["version"] == 2
    assert_problem(api.http.get("/v1/shared-memory/team/coding", headers=api.alice), 422)


def test_merge_patch_media_is_refused(api: Api) -> None:
    """Shared memory takes ops only: a merge-patch body is 400, whatever it holds."""
    ops = [{"op": "add", "path": "/x", "value": 1}]
    r = _patch(api, "user/coding", ops, api.alice, "application/merge-patch+json")
    assert assert_problem(r, 400, "validation-error")["field"] == "body"
    assert api.http.get("/v1/shared-memory/user/coding", headers=api.alice).json()["version"] == 0


def test_openapi_says_what_the_patch_routes_take(api: Api) -> None:
    """The shared PATCH lists no If-Match problems (412/428); the memory PATCH's plain
    JSON body is an object (a merge patch), as the route accepts."""
    paths = api.http.get("/openapi.json").json()["paths"]
    shared = paths["/v1/shared-memory/{scope}/{agent}"]["patch"]["responses"]
    assert "409" in shared and not {"412", "428"} & set(shared)
    delete = paths["/v1/shared-memory/{scope}/{agent}"]["delete"]
    assert {"400", "403", "412", "428"} <= set(delete["responses"])
    assert "`app`" in delete["responses"]["400"]["description"]
    assert {p["name"].lower() for p in delete["parameters"]} >= {"user_id", "if-match"}
    body = paths["/v1/sessions/{session_id}/memory"]["patch"]["requestBody"]["content"]
    assert body["application/json"]["schema"]["type"] == "object"
    assert "anyOf" not in body["application/json"]["schema"]


def test_app_scope_needs_an_admin_key(api: Api) -> None:
    ops = [{"op": "add", "path": "/model", "value": "m"}]
    assert_problem(api.http.get("/v1/shared-memory/app/coding", headers=api.alice), 403)
    assert_problem(_patch(api, "app/coding", ops, api.alice), 403, "forbidden")
    assert _patch(api, "app/coding", ops, api.admin).json()["data"] == {"model": "m"}
    assert api.http.get("/v1/shared-memory/app/coding", headers=api.admin).json()["version"] == 1


def test_admin_key_names_another_users_document(api: Api) -> None:
    """``?user_id=``: an admin key reads and patches another user's document; a user
    key may name only itself (403 whether or not the document exists); with the app
    scope it is 400. Answers carry the document's ETag."""
    ops = [{"op": "add", "path": "/n", "value": 1}]
    patched = _patch(api, "user/coding?user_id=alice", ops, api.admin)
    assert patched.status_code == 200, patched.text
    assert (patched.json()["user_id"], patched.headers["etag"]) == ("alice", '"1"')
    own = api.http.get("/v1/shared-memory/user/coding?user_id=alice", headers=api.alice)
    assert own.json()["data"] == {"n": 1} and own.headers["etag"] == '"1"'
    by_admin = api.http.get("/v1/shared-memory/user/coding?user_id=alice", headers=api.admin)
    assert by_admin.json() == own.json()
    for agent in ("coding", "never-written"):
        url = f"/v1/shared-memory/user/{agent}?user_id=alice"
        assert_problem(api.http.get(url, headers=api.bob), 403, "forbidden")
        assert_problem(_patch(api, f"user/{agent}?user_id=alice", ops, api.bob), 403)
    app = api.http.get("/v1/shared-memory/app/coding?user_id=alice", headers=api.admin)
    assert assert_problem(app, 400, "validation-error")["field"] == "target_user_id"
    assert api.manager.get_shared_memory(scope="user", agent="coding", user_id="alice").version == 1


def test_delete_needs_an_admin_key_and_honours_if_match(api: Api) -> None:
    ops = [{"op": "add", "path": "/n", "value": 1}]
    for _ in range(2):
        _patch(api, "user/coding", ops, api.alice)
    url = "/v1/shared-memory/user/coding?user_id=alice"
    assert_problem(api.http.delete(url, headers=api.alice), 403, "forbidden")
    for stale in ('"1"', '"1", "3"', f'"{api.create()["session_id"]}@2"'):
        refused = api.http.delete(url, headers={**api.admin, "If-Match": stale})
        assert assert_problem(refused, 412, "version-conflict")["current_version"] == 2
    done = api.http.delete(url, headers={**api.admin, "If-Match": '"1", "2"'})
    assert done.status_code == 200 and done.json() == {"deleted": True}
    again = api.http.delete(url, headers={**api.admin, "If-Match": "*"})
    assert again.json() == {"deleted": False}
    got = api.http.get("/v1/shared-memory/user/coding", headers=api.alice)
    assert got.json()["version"] == 0 and got.headers["etag"] == '"0"'
    app = api.http.delete("/v1/shared-memory/app/coding?user_id=alice", headers=api.admin)
    assert assert_problem(app, 400, "validation-error")["field"] == "target_user_id"


def test_delete_may_require_if_match(make_api: Any) -> None:
    api = make_api(require_if_match=True)
    url = "/v1/shared-memory/app/coding"
    assert_problem(api.http.delete(url, headers=api.alice), 403)
    assert_problem(api.http.delete(url, headers=api.admin), 428, "precondition-required")
    assert api.http.delete(url, headers={**api.admin, "If-Match": '"0"'}).json() == {
        "deleted": False
    }


def test_create_and_append_bodies_carry_shared_memory_ops(api: Api) -> None:
    sid = api.create(
        agent="coding", shared_memory_ops={"user": [{"op": "add", "path": "/n", "value": 1}]}
    )["session_id"]
    r = api.http.post(
        f"/v1/sessions/{sid}/messages",
        headers=api.alice,
        json={
            "message": {"role": "user"},
            "shared_memory_ops": {"user": [{"op": "replace", "path": "/n", "value": 2}]},
        },
    )
    assert r.status_code == 201, r.text
    doc = api.manager.get_shared_memory(scope="user", agent="coding", user_id="alice")
    assert (doc.version, doc.data) == (2, {"n": 2})
    denied = api.http.post(
        f"/v1/sessions/{sid}/messages",
        headers=api.alice,
        json={"message": {"role": "user"}, "shared_memory_ops": {"app": []}},
    )
    assert_problem(denied, 403)


def test_clients_mirror_the_manager() -> None:
    for name in (
        "get_shared_memory",
        "update_shared_memory",
        "delete_shared_memory",
        "create_session",
        "append_messages",
    ):
        want = list(inspect.signature(getattr(SessionManager, name)).parameters)
        assert list(inspect.signature(getattr(SessionClient, name)).parameters) == want, name
        assert list(inspect.signature(getattr(AsyncSessionManager, name)).parameters) == want
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    root = keys.create(user_id="root", admin=True)[1]
    app = create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys)
    ops = [{"op": "add", "path": "/a", "value": {"b": None}}]
    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))
        assert client.update_shared_memory(scope="user", agent="x", ops=ops).version == 1
        assert client.get_shared_memory(scope="user", agent="x").data == {"a": {"b": None}}
        with pytest.raises(PatchConflict):
            client.update_shared_memory(
                scope="user", agent="x", ops=[{"op": "test", "path": "/a", "value": 1}]
            )
        with pytest.raises(Forbidden):
            client.get_shared_memory(scope="app", agent="x")
        client.close()

    async def main() -> Any:
        async with AsyncSessionClient(
            "http://t", token, transport=httpx.ASGITransport(app=app)
        ) as c:
            s = await c.create_session(agent="x")
            await c.append_messages(
                session_id=s.session_id,
                messages=[{"role": "user"}],
                shared_memory_ops={"user": [{"op": "remove", "path": "/a"}]},
            )
            return await c.get_shared_memory(scope="user", agent="x")

    assert asyncio.run(main()).version == 2
    with TestClient(app) as http:
        admin = SessionClient("http://testserver", root, transport=InProcess(http))
        assert admin.get_shared_memory(scope="user", agent="x", target_user_id="alice").version == 2
        with pytest.raises(VersionConflict):
            admin.delete_shared_memory(
                scope="user", agent="x", target_user_id="alice", expected_version=1
            )
        assert admin.delete_shared_memory(
            scope="user", agent="x", target_user_id="alice", expected_version=2
        )
        assert admin.get_shared_memory(scope="user", agent="x", target_user_id="alice").version == 0
        admin.close()
