"""The lean HTTP path: worker threads enough for every admitted request, orjson
answers with the standard library's fallback, cheap request ids, the routes in the
app's own router."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from agentsession import SessionManager
from agentsession.errors import Forbidden
from agentsession.http.app import create_app
from agentsession.http.deps import FastJSONResponse, _read_ctx
from agentsession.http.keys import MemoryKeyStore
from agentsession.http.leanhandler import lean_handler
from agentsession.http.middleware import new_request_id
from agentsession.http.routes import routers
from agentsession.http.routing import StrictRoute, operation_id
from agentsession.ids import new_id
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore


def test_every_admitted_request_can_hold_a_worker_thread() -> None:
    """max_concurrent_requests (40) store calls of the app run at once: asyncio's
    default executor stops at min(32, cores + 4) threads, so 40 parties would never all
    meet at the barrier."""
    parties = 40
    manager = SessionManager(MemoryStore())
    app = create_app(
        manager, Settings(url="memory://", max_concurrent_requests=parties), keys=MemoryKeyStore()
    )
    barrier = threading.Barrier(parties, timeout=30)
    manager.get_session = lambda **kw: barrier.wait()  # type: ignore[method-assign,assignment]

    async def main() -> list[int]:
        calls = app.state.services.manager
        return await asyncio.gather(
            *(calls.get_session(session_id="x", user_id="u") for _ in range(parties))
        )

    assert sorted(asyncio.run(main())) == list(range(parties))


def test_answers_are_the_standard_librarys_json() -> None:
    """orjson writes what json.dumps (compact, UTF-8) writes; an int beyond 64 bits,
    which orjson refuses, falls back to the standard library."""
    value = {"text": "é你\u2028\x00\x1f\x7f", "n": [0, -1, 2**63, True, None], "f": 1.5}
    body = FastJSONResponse(value).body
    assert body == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert FastJSONResponse({"big": 2**70}).body == b'{"big":1180591620717411303424}'


def test_request_ids_are_32_hex_and_distinct() -> None:
    """Generated ids keep the shape of the uuid4 hex they replace."""
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 and i == i.lower() for i in ids)


def _app() -> FastAPI:
    return create_app(
        SessionManager(MemoryStore()), Settings(url="memory://"), keys=MemoryKeyStore()
    )


def test_the_routes_are_the_apps_own_not_an_included_router() -> None:
    """Every declared route is a route of the app's router itself, remade for the app
    (a request tries each by its path pattern; FastAPI's included-router wrapper set
    up per-route context for every route it tried, twice per request), with the
    app's operationIds and the paths a more specific route takes yielded."""
    app = _app()
    declared = [r for router in routers() for r in router.routes if isinstance(r, APIRoute)]
    own = {
        (r.path_format, tuple(sorted(r.methods))): r
        for r in app.router.routes
        if isinstance(r, APIRoute)
    }
    for route in declared:
        made = own[(route.path_format, tuple(sorted(route.methods)))]
        assert made is not route and type(made) is type(route)
        assert made.dependency_overrides_provider is app
        assert made.unique_id == operation_id(route)
        assert made.yields_to == route.yields_to
    assert len(own) == len(declared)


def test_a_dependency_override_of_the_app_reaches_its_routes() -> None:
    """``app.dependency_overrides`` works on the remade routes as on included ones."""
    app = _app()
    app.dependency_overrides[_read_ctx] = lambda: (_ for _ in ()).throw(Forbidden("overridden"))
    with TestClient(app) as http:
        answer = http.get(f"/v1/sessions/{new_id('ses')}")
    assert answer.status_code == 403 and "overridden" in answer.text


#: The hot routes: (method, path template).
HOT = {
    ("POST", "/v1/sessions/{session_id}/messages"),
    ("GET", "/v1/sessions/{session_id}/messages"),
    ("GET", "/v1/sessions/{session_id}"),
    ("PUT", "/v1/sessions/{session_id}/memory"),
    ("PATCH", "/v1/sessions/{session_id}/memory"),
    ("POST", "/v1/sessions/{session_id}/memory"),
}


def test_the_hot_routes_take_the_lean_handler() -> None:
    """Appends, message and session reads and memory writes skip FastAPI's generic
    handler; a route whose dependency has parameters of its own does not."""
    routes = {
        (m, r.path_format): r
        for r in _app().router.routes
        if isinstance(r, APIRoute)
        for m in r.methods
    }
    assert all(lean_handler(routes[key]) is not None for key in HOT)
    assert lean_handler(routes[("GET", "/v1/whoami")]) is None  # Auth: bearer sub-dependency


def _requests(sid: str, other: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Requests to the lean routes, most of them refused, each on its own ground."""
    m = f"/v1/sessions/{sid}/messages"
    return [
        ("POST", m, {"json": {"message": {"role": "user", "content": "hi"}}}),
        ("POST", m, {"json": {"message": {"role": "user", "content": 5}}}),
        ("POST", m, {"json": {"messages": "x", "extra": 1}}),
        ("POST", m, {"content": b"", "headers": {"content-type": "application/json"}}),
        ("POST", m, {"json": [1, 2]}),
        ("POST", m, {"json": {"message": {"role": "user", "content": "x"}}, "auth": False}),
        ("POST", m, {"json": {"message": {"role": "nobody"}}, "headers": {"If-Match": "W/x"}}),
        ("POST", m, {"json": {"message": {}}, "headers": {"Idempotency-Key": " bad"}}),
        ("POST", f"/v1/sessions/{other}/messages", {"json": {"message": 1}}),
        ("GET", m, {"params": {"limit": "20"}}),
        ("GET", m, {"params": {"limit": "-1", "before": "x"}}),
        ("GET", m, {"params": {"limt": "2"}}),
        ("GET", m, {"params": {"limit": ["2", "3"]}}),
        ("GET", f"/v1/sessions/{sid}", {}),
        ("GET", "/v1/sessions/ses_bad", {}),
        ("PUT", f"/v1/sessions/{sid}/memory", {"json": [1], "headers": {"If-Match": "*"}}),
        ("PUT", f"/v1/sessions/{sid}/memory", {"json": {"a": 1}}),
        (
            "PATCH",
            f"/v1/sessions/{sid}/memory",
            {"json": {"a": None}, "headers": {"If-Match": "*"}},
        ),
        ("POST", f"/v1/sessions/{sid}/memory", {"json": {"data": 3, "patch": {}}}),
    ]


def test_the_lean_handler_answers_as_fastapis_does() -> None:
    """The same requests, to an app whose routes take the lean handler and to one whose
    dependency override (the same function) sends every request to FastAPI's handler,
    get the same status and, but for generated ids and times, the same answer: the
    same checks in the same order (401 and 404 before 422), the same 422 errors."""
    answers: list[list[tuple[int, Any]]] = []
    for fastapis in (False, True):
        manager = SessionManager(MemoryStore())
        keys = MemoryKeyStore()
        token = keys.create(user_id="alice")[1]
        app = create_app(manager, Settings(url="memory://"), keys=keys)
        if fastapis:
            app.dependency_overrides[_read_ctx] = _read_ctx
        sid = manager.create_session(user_id="alice", agent="a").session_id
        other = manager.create_session(user_id="bob", agent="a").session_id
        got = []
        with TestClient(app) as http:
            for method, path, options in _requests(sid, other):
                options = dict(options)
                auth = {"Authorization": f"Bearer {token}"} if options.pop("auth", True) else {}
                headers = {**auth, **options.pop("headers", {})}
                r = http.request(method, path, headers=headers, **options)
                text = r.text.replace(sid, "SID").replace(other, "OTHER")
                got.append((r.status_code, _stable(json.loads(text))))
        answers.append(got)
    lean, general = answers
    assert lean == general
    statuses = [201, 400, 422, 422, 422, 401, 412, 400, 404, 200, 422, 422, 422, 200, 404, 422]
    assert [status for status, _ in lean] == [*statuses, 200, 200, 422]


def _stable(doc: Any) -> Any:
    """``doc`` without the fields that differ between two runs (ids, times)."""
    if isinstance(doc, dict):
        drop = {"session_id", "message_id", "request_id", "audit_head"}
        drop |= {k for k in doc if k.endswith("_at")}
        return {k: _stable(v) for k, v in doc.items() if k not in drop}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


_CALLS: list[int] = []


async def _counted(request: Request) -> int:
    _CALLS.append(1)
    return len(_CALLS)


async def _once(
    a: Annotated[int, Depends(_counted)], b: Annotated[int, Depends(_counted)]
) -> Response:
    return JSONResponse([a, b])


async def _twice(
    a: Annotated[int, Depends(_counted, use_cache=False)],
    b: Annotated[int, Depends(_counted, use_cache=False)],
) -> Response:
    return JSONResponse([a, b])


def test_the_lean_handler_solves_a_repeated_dependency_once() -> None:
    """As FastAPI does (its per-request cache): two parameters of the same dependency
    get one call's value; with ``use_cache=False`` each gets its own call."""
    _CALLS.clear()
    router = APIRouter(route_class=StrictRoute)
    router.add_api_route("/once", _once, methods=["GET"])
    router.add_api_route("/twice", _twice, methods=["GET"])
    app = FastAPI()
    app.include_router(router)
    assert all(lean_handler(r) is not None for r in router.routes if isinstance(r, APIRoute))
    with TestClient(app) as http:
        assert http.get("/once").json() == [1, 1]
        assert http.get("/twice").json() == [2, 3]
