"""JSON Patch ops over HTTP: ``PATCH .../memory`` as ``application/json-patch+json``
(RFC 6902 section 6), ``working_memory_ops`` in an append, ``POST .../memory`` with
shared-memory ops, and the clients' mirror."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem

from agentsession import AsyncSessionManager, PatchConflict, SessionManager, ValidationError
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.protocol import format_etag
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from inprocess import InProcess

pytestmark = pytest.mark.store_independent

JSON_PATCH = "application/json-patch+json"


def _patch(api: Api, sid: str, body: Any, media: str = JSON_PATCH) -> httpx.Response:
    return api.http.patch(
        f"/v1/sessions/{sid}/memory",
        content=json.dumps(body).encode(),
        headers={**api.alice, "Content-Type": media},
    )


def test_json_patch_body_applies_ops(api: Api) -> None:
    """Null is stored, an object replaced whole; the ETag is the new version."""
    sid = api.create(working_memory={"adk": {"state": {"p": {"a": 1, "b": 2}}}})["session_id"]
    r = _patch(
        api,
        sid,
        [
            {"op": "add", "path": "/adk/state/p", "value": {"a": 9}},
            {"op": "add", "path": "/adk/state/flag", "value": None},
        ],
    )
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"adk": {"state": {"p": {"a": 9}, "flag": None}}}
    assert r.headers["etag"] == f'"{sid}@{r.json()["version"]}"'
    merged = _patch(api, sid, {"adk": {"state": {"flag": None}}}, "application/merge-patch+json")
    assert merged.status_code == 200, merged.text
    assert merged.json()["data"] == {"adk": {"state": {"p": {"a": 9}}}}


def test_conflicting_op_is_409_patch_conflict(api: Api) -> None:
    sid = api.create()["session_id"]
    r = _patch(
        api, sid, [{"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/missing"}]
    )
    body = assert_problem(r, 409, "patch-conflict")
    assert (body["field"], body["op"], body["path"]) == ("ops[1]", "remove", "/missing")
    assert api.manager.get_working_memory(session_id=sid, user_id="alice").data == {}


@pytest.mark.parametrize(
    ("body", "media", "field"),
    [
        ([{"op": "upsert", "path": "/a"}], JSON_PATCH, "ops[0].op"),
        ({"a": 1}, JSON_PATCH, "body"),
        ([{"op": "add", "path": "/a", "value": 1}], "application/merge-patch+json", "body"),
    ],
)
def test_malformed_patch_is_400_naming_the_field(
    api: Api, body: Any, media: str, field: str
) -> None:
    """A malformed patch document is 400 (RFC 5789 section 2.2); an op list needs the
    JSON Patch media type and a merge patch must be an object."""
    sid = api.create()["session_id"]
    assert assert_problem(_patch(api, sid, body, media), 400, "validation-error")["field"] == field


def test_append_with_working_memory_ops(api: Api) -> None:
    sid = api.create(working_memory={"n": 1})["session_id"]
    url = f"/v1/sessions/{sid}/messages"
    r = api.http.post(
        url,
        headers=api.alice,
        json={
            "message": {"role": "user", "content": "hi"},
            "working_memory_ops": [{"op": "replace", "path": "/n", "value": None}],
        },
    )
    assert r.status_code == 201, r.text
    memory = api.manager.get_working_memory(session_id=sid, user_id="alice")
    assert memory.data == {"n": None} and memory.version == r.json()["session_version"]
    failed = api.http.post(
        url,
        headers=api.alice,
        json={
            "message": {"role": "user", "content": "lost"},
            "working_memory_ops": [{"op": "test", "path": "/n", "value": 1}],
        },
    )
    assert_problem(failed, 409, "patch-conflict")
    both = api.http.post(
        url,
        headers=api.alice,
        json={"message": {"role": "user"}, "working_memory_patch": {}, "working_memory_ops": []},
    )
    assert assert_problem(both, 400)["field"] == "working_memory_ops"
    assert api.manager.get_session(session_id=sid, user_id="alice").message_count == 1


def _app() -> tuple[Any, str]:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    return create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys), token


def test_clients_mirror_the_manager() -> None:
    """Same keyword arguments as the manager's; ops reach the server and PatchConflict
    comes back typed, from the sync and the async client."""
    for name in ("update_working_memory", "append_message", "append_messages"):
        want = list(inspect.signature(getattr(SessionManager, name)).parameters)
        mirrored = inspect.signature(getattr(AsyncSessionManager, name)).parameters
        assert list(mirrored) == want, name
        assert list(inspect.signature(getattr(SessionClient, name)).parameters) == want, name
    app, token = _app()
    ops = [{"op": "add", "path": "/p", "value": {"x": None}}]
    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))
        s = client.create_session(agent="a", working_memory={"p": {"y": 1}})
        memory = client.update_working_memory(session_id=s.session_id, ops=ops)
        assert memory.data == {"p": {"x": None}}
        client.append_message(
            session_id=s.session_id,
            message={"role": "user"},
            working_memory_ops=[{"op": "remove", "path": "/p/x"}],
        )
        assert client.get_working_memory(session_id=s.session_id).data == {"p": {}}
        with pytest.raises(PatchConflict) as caught:
            client.update_working_memory(
                session_id=s.session_id, ops=[{"op": "remove", "path": "/p/x"}]
            )
        assert caught.value.field == "ops[0]"
        with pytest.raises(ValidationError):
            client.update_working_memory(session_id=s.session_id, ops=[{"op": "nope"}])
        client.close()

    async def main() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            s = await c.create_session(agent="a")
            await c.append_messages(
                session_id=s.session_id, messages=[{"role": "user"}], working_memory_ops=ops
            )
            return (await c.get_working_memory(session_id=s.session_id)).data

    assert asyncio.run(main()) == {"p": {"x": None}}


def test_post_memory_writes_working_and_shared_memory_in_one_step(api: Api) -> None:
    """``POST .../memory``: the memory write and its shared-memory ops apply together
    (the new ETag), or neither does; ``app`` ops need an admin key."""
    sid = api.create(agent="coding", working_memory={"n": 0})["session_id"]
    url = f"/v1/sessions/{sid}/memory"
    r = api.http.post(
        url,
        headers=api.alice,
        json={
            "patch": {"n": 1},
            "shared_memory_ops": {"user": [{"op": "add", "path": "/s", "value": 1}]},
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"n": 1}
    assert r.headers["etag"] == format_etag(sid, r.json()["version"])
    shared = api.manager.get_shared_memory(scope="user", agent="coding", user_id="alice")
    assert (shared.version, shared.data) == (1, {"s": 1})
    failing = api.http.post(
        url,
        headers=api.alice,
        json={"data": {"n": 2}, "shared_memory_ops": {"user": [{"op": "remove", "path": "/gone"}]}},
    )
    assert_problem(failing, 409, "patch-conflict")
    denied = api.http.post(
        url,
        headers=api.alice,
        json={
            "ops": [{"op": "replace", "path": "/n", "value": 3}],
            "shared_memory_ops": {"app": []},
        },
    )
    assert_problem(denied, 403)
    assert_problem(api.http.post(url, headers=api.alice, json={"data": {}, "patch": {}}), 400)
    memory = api.manager.get_working_memory(session_id=sid, user_id="alice")
    assert memory.data == {"n": 1}
    assert api.manager.get_shared_memory(scope="user", agent="coding", user_id="alice").version == 1


def test_clients_send_shared_memory_ops_with_a_memory_update() -> None:
    """``update_working_memory(shared_memory_ops=...)`` reaches the server from the sync
    and the async client; without them the request is the PUT or PATCH it was."""
    app, token = _app()
    add = {"user": [{"op": "add", "path": "/k", "value": "v"}]}
    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))
        s = client.create_session(agent="a")
        memory = client.update_working_memory(
            session_id=s.session_id, data={"goal": "g"}, shared_memory_ops=add
        )
        assert memory.data == {"goal": "g"}
        assert client.get_shared_memory(scope="user", agent="a").data == {"k": "v"}
        client.close()

    async def main() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            s = await c.create_session(agent="b")
            await c.update_working_memory(
                session_id=s.session_id,
                ops=[{"op": "add", "path": "/x", "value": 1}],
                shared_memory_ops=add,
            )
            return (await c.get_shared_memory(scope="user", agent="b")).data

    assert asyncio.run(main()) == {"k": "v"}
