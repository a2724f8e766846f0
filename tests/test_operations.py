"""Parity of every surface with the table of operations (agentsession.operations).

Every row exists, with the same parameters, on SessionManager, AsyncSessionManager,
SessionClient and AsyncSessionClient (as the row declares), its routes are in the
OpenAPI document under its name with the declared method, path, status, body and
headers, and its CLI command exists; every public method of each surface is a row.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import typing
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer
from fastapi.routing import APIRoute
from pydantic import BaseModel

from agentsession import SessionManager, clientgen
from agentsession.cli.app import build_app
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http import schemas
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.http.routes import routers
from agentsession.http.routes.table import TableEndpoint
from agentsession.operations import OPERATIONS, Operation, Route, operation_ids
from agentsession.service import AsyncSessionManager
from agentsession.settings import Settings

#: The caller's identity: the manager takes it as arguments, a client from its API key
#: (it accepts them and ignores them, so code written for one runs on the other).
IDENTITY = frozenset({"user_id", "admin"})

#: Public attributes of a surface that are not operations, each with why.
NOT_OPERATIONS = {
    "close": "releases the store or the connection pool",
    "from_url": "a constructor: opens a store by URL",
    "store": "the storage adapter a manager was built over",
    "stop_threads": "the async manager's worker threads, not a use case",
    "watch": "follows `changes` page by page (an iterator, not one call); over HTTP the "
    "Server-Sent Events of the `changes` routes",
}

SURFACES: dict[str, type[Any]] = {
    "SessionManager": SessionManager,
    "AsyncSessionManager": AsyncSessionManager,
    "SessionClient": SessionClient,
    "AsyncSessionClient": AsyncSessionClient,
}


def _surfaces_of(op: Operation) -> list[str]:
    library = ["SessionManager", "AsyncSessionManager"] if op.library else []
    return library + (["SessionClient", "AsyncSessionClient"] if op.client else [])


def _parameters(method: Any) -> dict[str, tuple[str, Any, str]]:
    """``{name: (kind, default, annotation text)}``, without ``self`` and identity."""
    return {
        p.name: (p.kind.name, p.default, " ".join(str(p.annotation).split()))
        for p in inspect.signature(method).parameters.values()
        if p.name != "self" and p.name not in IDENTITY
    }


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_every_surface_has_the_row_with_the_same_parameters(op: Operation) -> None:
    surfaces = _surfaces_of(op)
    missing = [name for name in surfaces if not hasattr(SURFACES[name], op.name)]
    assert not missing, f"{op.name} is missing on {missing}"
    methods = {name: getattr(SURFACES[name], op.name) for name in surfaces}
    if not methods:
        return
    first, reference = next(iter(methods.items()))
    expected = _parameters(reference)
    for name, method in methods.items():
        got = _parameters(method)
        differ = {
            key: (expected.get(key), got.get(key))
            for key in expected.keys() | got.keys()
            if expected.get(key) != got.get(key)
        }
        assert not differ, f"{name}.{op.name} differs from {first}: {differ}"
        returns = inspect.signature(method).return_annotation
        assert str(returns) == op.result, f"{name}.{op.name} returns {returns}"
        is_async = inspect.iscoroutinefunction(method)
        assert is_async == name.startswith("Async"), f"{name}.{op.name}: async {is_async}"


@pytest.mark.parametrize("surface", SURFACES)
def test_every_public_method_is_a_row(surface: str) -> None:
    declared = {op.name for op in OPERATIONS if surface in _surfaces_of(op)}
    public = {name for name in dir(SURFACES[surface]) if not name.startswith("_")}
    assert public - NOT_OPERATIONS.keys() == declared


@cache
def _document() -> dict[str, Any]:
    manager = SessionManager.from_url("memory://")
    app = create_app(manager, Settings(url="memory://"), keys=MemoryKeyStore())
    return app.openapi()


ROUTES = [(op, route) for op in OPERATIONS for route in op.routes]


@pytest.mark.parametrize(("op", "route"), ROUTES, ids=[f"{r.method} {r.path}" for _, r in ROUTES])
def test_every_route_is_in_the_openapi_document_under_its_name(op: Operation, route: Route) -> None:
    operation = _document()["paths"].get(route.path, {}).get(route.method.lower())
    assert operation is not None, f"{route.method} {route.path} is not in the document"
    assert operation["operationId"] == (route.operation_id or op.name)
    assert str(route.status) in operation["responses"]
    headers = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
    if route.if_match != "none":
        assert "if-match" in headers
    if route.idempotency_key:
        assert "idempotency-key" in headers


def test_the_openapi_document_has_no_operation_without_a_row() -> None:
    documented = {
        (method.upper(), path): operation["operationId"]
        for path, operations in _document()["paths"].items()
        for method, operation in operations.items()
    }
    assert documented == operation_ids()


def _body_model(route: APIRoute) -> str | None:
    """The name of the route's body model of agentsession.http.schemas, if any."""
    if route.body_field is None:
        return None
    annotation = route.body_field.field_info.annotation
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            assert getattr(schemas, candidate.__name__, None) is candidate
            return candidate.__name__
    return None


def test_every_route_takes_the_body_its_row_names() -> None:
    declared = {(r.method, r.path): r.request for _, r in ROUTES}
    served = {
        (method, route.path_format): _body_model(route)
        for router in routers()
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }
    assert served == declared


def _served() -> dict[tuple[str, str], APIRoute]:
    """Every route the service serves, by (method, path)."""
    return {
        (method, route.path_format): route
        for router in routers()
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }


@pytest.mark.parametrize(("op", "route"), ROUTES, ids=[f"{r.method} {r.path}" for _, r in ROUTES])
def test_a_route_is_built_from_its_row_unless_the_row_says_why_not(
    op: Operation, route: Route
) -> None:
    """A row with no ``route_by_hand`` is served by the route built from it
    (agentsession.http.routes.table); the others by a route written by hand."""
    served = _served().get((route.method, route.path))
    assert served is not None, f"{route.method} {route.path} is not served"
    endpoint = served.endpoint
    if op.route_by_hand is None:
        assert isinstance(endpoint, TableEndpoint), f"{op.name}: written by hand, no reason"
        assert (endpoint.operation, endpoint.route) == (op, route)
    else:
        assert not isinstance(endpoint, TableEndpoint)


def test_every_route_written_by_hand_has_a_row_saying_why() -> None:
    by_hand = {
        key for key, route in _served().items() if not isinstance(route.endpoint, TableEndpoint)
    }
    reasons = {
        (route.method, route.path): op.route_by_hand for op, route in ROUTES if op.route_by_hand
    }
    assert by_hand == reasons.keys()


@pytest.mark.parametrize(("op", "route"), ROUTES, ids=[f"{r.method} {r.path}" for _, r in ROUTES])
def test_every_route_documents_its_problems_and_body(op: Operation, route: Route) -> None:
    """The problem statuses a row declares are in the route's answers (with the row's
    description where it gives one), and its body is required unless the row says
    it may be left out."""
    operation = _document()["paths"][route.path][route.method.lower()]
    for problem in route.problems:
        status, text = (problem, None) if isinstance(problem, int) else problem
        assert str(status) in operation["responses"]
        if text is not None:
            assert operation["responses"][str(status)]["description"] == text
    if route.request is not None:
        assert operation["requestBody"].get("required", False) is not route.optional_body


def _command(path: str) -> Any:
    """The command ``agentsession <path>``, or None (typer's group: ``commands``)."""
    command: Any = typer.main.get_command(build_app())
    for word in path.split():
        command = getattr(command, "commands", {}).get(word)
    return command


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.cli], ids=lambda op: op.name)
def test_every_declared_cli_command_exists(op: Operation) -> None:
    assert op.cli is not None
    assert _command(op.cli) is not None, f"no command `agentsession {op.cli}`"


def test_every_row_is_named_once() -> None:
    names = [op.name for op in OPERATIONS]
    assert len(names) == len(set(names))
    ids = [route.operation_id or op.name for op, route in ROUTES]
    assert len(ids) == len(set(ids))


GENERATOR = Path(__file__).resolve().parent.parent / "scripts" / "generate_client.py"


def _generated(op: Operation) -> bool:
    """The row's client flow is generated (scripts/generate_client.py): a client
    method, routes, no ``client_by_hand`` reason."""
    return op.client and op.client_by_hand is None and bool(op.routes)


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.client], ids=lambda op: op.name)
def test_plain_operations_are_generated_and_the_rest_written_by_hand(op: Operation) -> None:
    module = getattr(clientgen.Requests, op.name).__module__
    expected = "agentsession.clientgen" if _generated(op) else "agentsession.clienthand"
    assert module == expected


def test_the_generated_client_flows_are_current() -> None:
    """``make check-generated``: clientgen.py is what the table makes of it."""
    env = {**os.environ, "PYTHONPATH": str(GENERATOR.parent.parent / "src")}
    run = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_the_table_and_the_client_import_without_the_server_extra() -> None:
    """No FastAPI, Starlette or uvicorn behind ``agentsession.operations`` and the client
    (the ``server`` extra is optional)."""
    code = (
        "import sys\n"
        "for name in ('fastapi', 'starlette', 'uvicorn'):\n"
        "    sys.modules[name] = None\n"
        "import agentsession.client, agentsession.operations\n"
    )
    env = {**os.environ, "PYTHONPATH": str(GENERATOR.parent.parent / "src")}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
