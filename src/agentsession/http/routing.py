"""How requests reach the routes: strict JSON bodies, only declared query parameters,
the methods a path allows, the order routes are tried in, and each route's
``operationId``.

Every router is built with ``route_class=StrictRoute``: a query parameter the
operation does not declare is refused (422 naming it), and before FastAPI reads the
body of an operation that has one, the body is checked and parsed by
:func:`~agentsession.http.strictjson.read_json` (UTF-8 JSON, no duplicate keys, a
depth limit), and FastAPI's ``request.json()`` answers that parsed value. Errors are
raised before FastAPI's own body handling, so they reach the problem+json handlers
as they are.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections import abc
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute, APIRouter
from pydantic_core import PydanticUndefined
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from ..operations import operation_ids
from ..protocol import UnsupportedMediaType
from .leanhandler import lean_handler
from .strictjson import check_media_type, read_json

__all__ = [
    "StrictJsonRequest",
    "StrictRoute",
    "add_flat",
    "allowed_methods",
    "in_match_order",
    "operation_id",
    "precedes",
]


class StrictJsonRequest(Request):
    """A request whose ``json()`` is the strict reader's."""

    async def parse_body(self) -> None:
        """Check and parse a non-empty body once; an empty body is left to the route.

        Raises:
            UnsupportedMediaType: no ``Content-Type``, or one that is not JSON in UTF-8.
            MalformedJson: see :func:`~agentsession.http.strictjson.read_json`.
        """
        if hasattr(self, "_json"):
            return
        body = await self.body()
        if not body:
            return
        content_type = self.headers.get("content-type")
        if content_type is None:
            raise UnsupportedMediaType(
                "send the body with Content-Type: application/json", field="content-type"
            )
        check_media_type(content_type)
        self._json = read_json(body, where="body")

    async def json(self) -> Any:
        """The parsed body (FastAPI calls this after :meth:`parse_body` has run)."""
        await self.parse_body()
        if not hasattr(self, "_json"):
            return read_json(b"", where="body")  # raises: an empty body is not JSON
        return self._json


class StrictRoute(APIRoute):
    """An ``APIRoute`` that takes only the query parameters it declares and whose body,
    if the operation takes one, is read strictly, and that leaves to a more specific
    route the paths that route serves (:attr:`yields_to`)."""

    #: The path patterns of the routes tried before this one that can match the same
    #: paths (set by :func:`in_match_order`): a path one of them serves is theirs for
    #: every method, so ``PATCH /v1/sessions/count`` is a 405 naming ``GET``, not a
    #: ``PATCH /v1/sessions/{session_id}`` with a malformed id.
    yields_to: tuple[re.Pattern[str], ...] = ()

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """Starlette's match, except :data:`Match.NONE` on a path a route of
        :attr:`yields_to` serves.

        A request tries the routes in order, so most routes see paths they do not
        serve: those are answered by the route's own path pattern alone, before
        FastAPI's matching (which sets up per-route context first). The routers are
        included without a prefix, so that pattern is the one FastAPI matches (with a
        ``root_path``, FastAPI's matching alone decides)."""
        path, root = scope["path"], scope.get("root_path", "")
        path = path.removeprefix(root) if root else path  # as Starlette matches it
        if not root and scope["type"] == "http" and self.path_regex.match(path) is None:
            return Match.NONE, {}
        match, child = super().matches(scope)
        if match is not Match.NONE and any(pattern.match(path) for pattern in self.yields_to):
            return Match.NONE, {}
        return match, child

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, given a :class:`StrictJsonRequest` with its body parsed.

        The handler raises ``RequestValidationError`` (422 ``request-validation``) for
        an undeclared query parameter, before authentication like a body error: a
        misspelt ``limt=5`` would otherwise be ignored without a word.
        """
        handler = super().get_route_handler()
        lean = lean_handler(self)
        overrides = self.dependency_overrides_provider
        takes_body = self.body_field is not None
        declared, repeatable, prefixes = _query_names(self.dependant)

        async def strict(request: Request) -> Response:
            # No query string (most requests): no parameter to check, none parsed.
            if request.scope.get("query_string"):
                _check_query(request, declared, repeatable, prefixes)
            strict_request = StrictJsonRequest(request.scope, request.receive)
            if takes_body:
                await strict_request.parse_body()
            if lean is None or getattr(overrides, "dependency_overrides", None):
                return await handler(strict_request)
            return await lean(strict_request, getattr(strict_request, "_json", PydanticUndefined))

        return strict


def _check_query(
    request: Request, declared: set[str], repeatable: set[str], prefixes: set[str]
) -> None:
    """Refuse a query parameter the operation does not declare (by name, or under the
    prefix of a mapping, ``metadata.<key>``), and one given twice that takes one value
    (``?status=ACTIVE&status=CLOSED`` would otherwise mean the last).

    Raises:
        RequestValidationError: 422 ``request-validation``, naming each parameter.
    """
    names = [name for name, _ in request.query_params.multi_items()]
    mapped = {n for n in names if any(n.startswith(p) and n != p for p in prefixes)}
    unknown = sorted(set(names) - declared - mapped)
    repeated = sorted({n for n in names if names.count(n) > 1} - repeatable - set(unknown))
    errors = [{"loc": ("query", n[:40]), "msg": "unknown query parameter"} for n in unknown]
    errors += [{"loc": ("query", n), "msg": "given more than once"} for n in repeated]
    if errors:
        raise RequestValidationError(errors)


def _query_names(dependant: Dependant) -> tuple[set[str], set[str], set[str]]:
    """The names of the query parameters ``dependant`` and its dependencies declare,
    those of them that take a list (and so may be repeated), and the prefixes of the
    mappings its dependencies read (:class:`~.querymap.QueryMap`, ``"metadata."``)."""
    names = {param.alias for param in dependant.query_params}
    lists = {p.alias for p in dependant.query_params if _takes_list(p.field_info.annotation)}
    prefixes: set[str] = set()
    for sub in dependant.dependencies:
        sub_names, sub_lists, sub_prefixes = _query_names(sub)
        names |= sub_names
        lists |= sub_lists
        prefixes |= sub_prefixes
        prefix = getattr(sub.call, "query_prefix", None)
        if isinstance(prefix, str):
            prefixes.add(prefix)
    return names, lists, prefixes


def _takes_list(annotation: Any) -> bool:
    """Whether a parameter of ``annotation`` (``list[str] | None``...) takes a sequence."""
    for member in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(member) in (list, tuple, set, frozenset, abc.Sequence):
            return True
    return False


#: The methods a route of this service may accept (HEAD is not served: 405).
_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(routes: list[Any], scope: Scope) -> list[str]:
    """Every method some route of ``routes`` accepts on the path of ``scope``, sorted:
    the ``Allow`` of a 405. Starlette names only the first matching route's methods,
    but a path served by several routes (``GET`` and ``POST``) needs them all."""
    return [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    ]


def precedes(path: str, other: str) -> bool:
    """Whether a route of ``path`` must be tried before one of ``other``: both can match
    one request path (as many segments, each fixed segment equal to the other's or
    facing a ``{parameter}``), and at the first position where one has a parameter and
    the other a fixed segment, ``path`` has the fixed one. ``/v1/sessions/count``
    precedes ``/v1/sessions/{session_id}``, which would otherwise take it as an id.

    Args:
        path, other: path templates as OpenAPI writes them.
    """
    mine, theirs = path.strip("/").split("/"), other.strip("/").split("/")
    if len(mine) != len(theirs):
        return False
    first: bool | None = None
    for segment, facing in zip(mine, theirs, strict=True):
        fixed, fixed_facing = not segment.startswith("{"), not facing.startswith("{")
        if fixed and fixed_facing and segment != facing:
            return False
        if first is None and fixed != fixed_facing:
            first = fixed
    return bool(first)


def in_match_order(routes: Sequence[APIRoute]) -> list[APIRoute]:
    """``routes`` in the order to try them (Starlette takes the first that matches):
    each after every route that :func:`precedes` it, and otherwise as given (the
    first route free to go next goes next). A table that lists
    ``/v1/sessions/{session_id}`` before ``/v1/sessions/count`` is served right all the
    same, and each :class:`StrictRoute` learns which routes it yields its paths to
    (:attr:`StrictRoute.yields_to`). Some order always exists: a route precedes another
    only if its fixed and parameter segments, read as 0 and 1, make the smaller
    number."""
    for route in routes:
        if isinstance(route, StrictRoute):
            route.yields_to = tuple(
                other.path_regex
                for other in routes
                if precedes(other.path_format, route.path_format)
            )
    remaining = list(routes)
    ordered: list[APIRoute] = []
    while remaining:
        free = next(
            i
            for i, route in enumerate(remaining)
            if not any(precedes(o.path_format, route.path_format) for o in remaining)
        )
        ordered.append(remaining.pop(free))
    return ordered


def operation_id(route: APIRoute) -> str:
    """The OpenAPI ``operationId`` of ``route``: its operation's name in
    :data:`agentsession.operations.OPERATIONS` (FastAPI's ``generate_unique_id_function``).

    Raises:
        LookupError: no row of the table declares the route (method and whole path).
    """
    ids = operation_ids()
    for method in sorted(route.methods or ()):
        found = ids.get((method, route.path_format))
        if found is not None:
            return found
    raise LookupError(
        f"no operation in agentsession.operations declares {sorted(route.methods or ())} "
        f"{route.path_format}"
    )


def add_flat(router: APIRouter, routes: Sequence[BaseRoute]) -> None:
    """Add ``routes`` to ``router`` (an app's own) one by one, each ``APIRoute`` as
    ``add_api_route`` makes one: remade with every setting it was declared with, the
    router's ``dependency_overrides_provider`` and ``generate_unique_id_function``
    (the app's), its class and :attr:`StrictRoute.yields_to`; another route as it is.

    This is what ``include_router`` did in older FastAPI, on every version: recent
    ones (0.165 here) add one route standing for the included router instead, whose
    matching sets up and restores per-route context for every route it tries, twice
    per request (about a third of an append's CPU in the event loop, 100 routes).
    """
    accepted = inspect.signature(router.add_api_route).parameters
    for route in routes:
        if not isinstance(route, APIRoute):
            router.routes.append(route)
            continue
        options = {
            name: getattr(route, name)
            for name in accepted
            if name not in ("path", "endpoint") and hasattr(route, name)
        }
        router.add_api_route(
            route.path, route.endpoint, route_class_override=type(route), **options
        )
        made = router.routes[-1]
        if isinstance(route, StrictRoute) and isinstance(made, StrictRoute):
            made.yields_to = route.yields_to
