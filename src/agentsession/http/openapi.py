"""The OpenAPI document as the server reads requests: :func:`install_openapi`.

A dependency that reads its parameters from the request itself (the session contexts
of :mod:`.deps`, for speed) declares them through a function of its own
(:data:`~agentsession.http.deps.DOCUMENTED_BY`); every operation taking it gets those
declarations, as FastAPI writes them, and their security requirement.

FastAPI writes an optional parameter (``str | None = None``) as
``anyOf: [{type: string}, {type: null}]``. A header or query parameter is text or
absent, never JSON ``null``: a client following that schema sends the text ``null``,
which the server reads as the string ``"null"``. The document states the parameter's
own schema instead; leaving the parameter out is how to send "none".
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from .deps import DOCUMENTED_BY

__all__ = ["install_openapi", "with_declared_parameters", "without_null_parameters"]

#: OpenAPI's parameter locations, in the order FastAPI lists an operation's parameters.
_LOCATIONS = ("path", "query", "header", "cookie")


def install_openapi(app: FastAPI, routes: Iterable[BaseRoute]) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``) answer the tidied document,
    built once on first use.

    Args:
        app: the app whose document it is.
        routes: the app's routes as declared (each with its whole path), which
            :func:`with_declared_parameters` inspects: what ``app.routes`` holds of an
            included router depends on the FastAPI version.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = with_declared_parameters(build(), routes)
            app.openapi_schema = without_null_parameters(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def without_null_parameters(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (changed in place and returned) with the ``null`` alternative
    dropped from every parameter's ``anyOf``; the other alternative's keywords move
    up next to the parameter's own (``description``, ``pattern``...)."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                parameter["schema"] = _without_null(parameter.get("schema", {}))
    return document


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    alternatives = [a for a in schema.get("anyOf", []) if a != {"type": "null"}]
    if "anyOf" not in schema or len(alternatives) != 1:
        return schema
    own = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**alternatives[0], **own}


def with_declared_parameters(
    document: dict[str, Any], routes: Iterable[BaseRoute]
) -> dict[str, Any]:
    """``document`` (changed in place and returned) with, on every operation of
    ``routes`` that takes a dependency of ``DOCUMENTED_BY`` (a dependency of the
    endpoint itself, not of another dependency), the parameters and security
    requirement its declaring function states, each parameter first in its location
    (so ``session_id`` comes before an operation's own path parameters, in path
    order). Every operation gets its own copies."""
    declared: dict[Callable[..., None], dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        for dependency in route.dependant.dependencies:
            declare = DOCUMENTED_BY.get(dependency.call)  # type: ignore[arg-type]
            if declare is None:
                continue
            if declare not in declared:
                declared[declare] = _declared_operation(declare, route.path_format)
            probe = declared[declare]
            for method in route.methods or ():
                operation = document["paths"][route.path_format][method.lower()]
                _merge(operation, probe)
            schemes = probe["components"].get("securitySchemes", {})
            document.setdefault("components", {}).setdefault("securitySchemes", {}).update(schemes)
    return document


def _declared_operation(declare: Callable[..., None], path: str) -> dict[str, Any]:
    """The operation FastAPI documents for a route at ``path`` taking ``declare`` as a
    dependency (its ``parameters`` and ``security``), with the document's components."""
    probe = FastAPI()

    @probe.get(path, dependencies=[Depends(declare)])
    def operation() -> None:
        """A route of the probe app."""

    document = probe.openapi()
    return {**document["paths"][path]["get"], "components": document.get("components", {})}


def _merge(operation: dict[str, Any], probe: dict[str, Any]) -> None:
    names = {(p["in"], p["name"]) for p in operation.get("parameters", [])}
    added = [
        copy.deepcopy(p) for p in probe.get("parameters", []) if (p["in"], p["name"]) not in names
    ]
    merged = [*added, *operation.get("parameters", [])]
    if merged:
        operation["parameters"] = sorted(merged, key=lambda p: _LOCATIONS.index(p["in"]))
    security = copy.deepcopy(probe.get("security", []))
    security += [s for s in operation.get("security", []) if s not in security]
    if security:
        operation["security"] = security
