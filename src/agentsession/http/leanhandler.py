"""A route's request handler without FastAPI's generic per-request work:
:func:`lean_handler`.

FastAPI's handler serves any route: per request it reads the content type with the
``email`` package, sets up exit stacks, a dependency cache and a response for the
endpoint to change, solves the tree of dependencies (each through the same general
function, overrides looked up), and records telemetry. Most routes of this service
need none of it: the endpoint is a coroutine answering a ``Response``, and its one
dependency, a session context of :mod:`.deps`, takes the request alone. For such a
route the lean handler takes the same steps in the same order itself: each dependency
awaited in turn (its errors raised as they come: 401, 404...), then the path, query
and header parameters and the body validated by FastAPI's own functions
(``request_params_to_args``, ``request_body_to_args``: the same values and the same
422 errors, raised together before the endpoint runs), then the endpoint. The body
was read and parsed strictly before (:class:`~.routing.StrictRoute`), as for every
route. A route that needs anything more, and every request of an app with dependency
overrides set, is served by FastAPI's handler.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import (
    get_typed_return_annotation,
    request_body_to_args,
    request_params_to_args,
)
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic_core import PydanticUndefined
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["lean_handler"]

Handler = Callable[[Request, Any], Coroutine[Any, Any, Response]]


def lean_handler(route: APIRoute) -> Handler | None:
    """The lean handler of ``route``, or None when the route needs FastAPI's.

    The handler is called with the request and its parsed body
    (``pydantic_core.PydanticUndefined`` when none was sent) and returns the
    endpoint's response; it raises what the dependencies raise, and
    ``RequestValidationError`` for invalid parameters or body.

    Lean routes: the endpoint is a coroutine function (or an object with a coroutine
    ``__call__``) whose return annotation is a ``Response`` class, taking no
    ``Response``, ``BackgroundTasks``, ``SecurityScopes``, WebSocket or cookie
    parameter; each dependency is a coroutine function of the request alone (no
    parameter or dependency of its own, not a generator, no concurrency limit).
    """
    dependant = route.dependant
    if not _plain_coroutine(dependant.call) or not _answers_response(dependant.call):
        return None
    if dependant.cookie_params or _special(dependant):
        return None
    deps: list[tuple[str | None, Callable[..., Any], str, bool]] = []
    for sub in dependant.dependencies:
        if not _leaf(sub):
            return None
        assert sub.call is not None and sub.request_param_name is not None
        deps.append((sub.name, sub.call, sub.request_param_name, sub.use_cache))
    endpoint = dependant.call
    assert endpoint is not None
    params = [
        (fields, source)
        for fields, source in (
            (dependant.path_params, "path_params"),
            (dependant.query_params, "query_params"),
            (dependant.header_params, "headers"),
        )
        if fields
    ]
    body_fields = dependant.body_params
    embed = bool(getattr(route, "_embed_body_fields", False))
    own_request = dependant.request_param_name

    async def handle(request: Request, body: Any) -> Response:
        values: dict[str, Any] = {}
        solved: dict[int, Any] = {}  # FastAPI's per-request cache, by the call's identity
        for name, call, request_name, use_cache in deps:
            if use_cache and id(call) in solved:
                value = solved[id(call)]
            else:
                value = await call(**{request_name: request})
                solved.setdefault(id(call), value)
            if name is not None:
                values[name] = value
        errors: list[Any] = []
        for fields, source in params:
            found, wrong = request_params_to_args(fields, getattr(request, source))
            values.update(found)
            errors += wrong
        if body_fields:
            found, wrong = await request_body_to_args(body_fields, body, embed)
            values.update(found)
            errors += wrong
        if errors:
            raise RequestValidationError(errors, body=None if body is PydanticUndefined else body)
        if own_request is not None:
            values[own_request] = request
        answer = await endpoint(**values)
        if not isinstance(answer, Response):
            raise TypeError(f"{route.name} answered {type(answer).__name__}, not a Response")
        return answer

    return handle


def _plain_coroutine(call: Any) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one (not a generator)."""
    if call is None:
        return False
    return inspect.iscoroutinefunction(call) or (
        not inspect.isroutine(call) and inspect.iscoroutinefunction(type(call).__call__)
    )


def _answers_response(call: Any) -> bool:
    """Whether ``call`` is annotated to return a ``Response`` (FastAPI then sends that
    response as it is, with no response model to apply)."""
    annotation = get_typed_return_annotation(call)
    return inspect.isclass(annotation) and issubclass(annotation, Response)


def _special(dependant: Dependant) -> bool:
    """Whether ``dependant`` takes a parameter FastAPI fills specially, the request
    aside (a WebSocket, a connection, a response, background tasks, security scopes)."""
    names = (
        "websocket_param_name",
        "http_connection_param_name",
        "response_param_name",
        "background_tasks_param_name",
        "security_scopes_param_name",
    )
    return any(getattr(dependant, name, None) for name in names)


def _leaf(sub: Dependant) -> bool:
    """A dependency the lean handler can await itself: a coroutine function of the
    request alone."""
    return (
        _plain_coroutine(sub.call)
        and sub.request_param_name is not None
        and not _special(sub)
        and not (
            sub.dependencies
            or sub.path_params
            or sub.query_params
            or sub.header_params
            or sub.cookie_params
            or sub.body_params
        )
        and getattr(sub, "concurrency", None) is None
    )
