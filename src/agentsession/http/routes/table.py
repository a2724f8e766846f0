"""The routes built from the table of operations (:data:`agentsession.operations.OPERATIONS`).

Every route of a row with no ``route_by_hand`` is built here when the app is created:
an endpoint whose signature FastAPI reads (so its parameters, validation and OpenAPI
description are FastAPI's, as for a route written by hand) and whose body makes the
row's one manager call and replies. Built at startup, not generated and checked in as
the client flows are (``scripts/generate_client.py``): nobody calls a route function,
its interface is the OpenAPI document, which the tests check (``tests/test_operations.py``
and the fuzzing of ``tests/http/test_fuzz_openapi.py``); the client is code that users'
mypy and IDEs read.

How a row and the manager's signature make a route:

- a manager whose ``session_id`` is optional may also have a route without it (every
  session's: ``GET /v1/changes`` beside ``GET /v1/sessions/{session_id}/changes``),
  where it is a query parameter (below); the clients take the session's route when
  one is given;
- the caller: a path with ``{session_id}`` takes :data:`~..deps.WriteCtx` when the row
  reads ``If-Match`` (it also reads ``Idempotency-Key``), else :data:`~..deps.ReadCtx`;
  another path takes the authenticated principal (:data:`~..deps.Auth`). The
  manager's ``user_id`` and ``admin`` are the principal's, ``session_id`` the path's
  (on a path without one, a manager's optional ``session_id`` is a filter: a query
  parameter, as search's);
- other path parameters: :data:`PATH_PARAMETERS` (``run_id``, ``number``);
- the body, when the row names a model of :mod:`..schemas`: each member is the
  manager argument of the same name (a member the manager lacks is an error); a
  member left out whose manager default is ``UNSET`` is not passed (the manager's
  "left out" is not null); a member that is a model goes as the mapping of its
  non-null members (``shared_memory_ops`` by scope);
- every other manager argument is a query parameter: its type the manager's
  annotation (an enum that also takes its value as text is the enum on the wire), its
  default the manager's, its limits and description :func:`..schemas.query_parameter`;
- ``expected_version`` is ``If-Match`` and ``idempotency_key`` the header, exactly when
  the row says the route reads them (else an error);
- the answer: the row's result, as ``{"items": [...]}`` for a list and
  ``{"count": n}`` for an ``int``, nothing (the row's status, 204) for None; the row's
  status; the session's ``ETag`` when the row says so (a session's own version, else
  the result's ``session_version``); ``Idempotent-Replayed`` on a replayed write;
  ``Location`` for a session created (201);
- OpenAPI: ``operationId``, tag, description and problem statuses from the row.

Routes are tried in :func:`~..routing.in_match_order`: a fixed path segment before a
``{parameter}`` at the same place, whatever the table's order.
"""

from __future__ import annotations

import inspect
import operator
import re
import types
import typing
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum
from functools import reduce
from typing import Annotated, Any

from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.responses import Response

from ... import models
from ...models import Page, RestoredSession, Session
from ...operations import Operation, Route
from ...service import SessionManager
from ...unset import UNSET
from .. import schemas
from ..deps import (
    Auth,
    Ctx,
    IdempotencyKey,
    ReadCtx,
    RewindNumber,
    RunId,
    WriteCtx,
    reply,
    services,
    version_etag,
    write,
)
from ..problems import ERRORS, problem_responses
from ..routing import StrictRoute, in_match_order

__all__ = ["PATH_PARAMETERS", "TableEndpoint", "build_route", "served_routes"]

#: The path parameters a built route may have besides ``{session_id}``, each the
#: annotation of its endpoint parameter (``run_id`` after the session's: its 404 is
#: the session's first).
PATH_PARAMETERS: dict[str, Any] = {"run_id": RunId, "number": RewindNumber}

#: The caller's identity: the principal's, never a request parameter.
_IDENTITY = ("user_id", "admin")
#: Arguments that travel as headers.
_HEADERS = ("expected_version", "idempotency_key")
_KEYWORD = inspect.Parameter.KEYWORD_ONLY


class TableEndpoint:
    """The endpoint of a route built from a row: FastAPI reads its ``__signature__``
    and calls it with the parsed request; it makes the row's manager call and replies.

    Args:
        operation: the row.
        route: the route of the row it serves.
        library: the class whose method ``operation.name`` states the arguments
            (:class:`~agentsession.service.SessionManager`); the call goes to the
            app's async manager.

    Raises:
        LookupError, TypeError: the row, the manager and the request model do not fit
            (see the module docstring): the app is not created.
    """

    def __init__(self, operation: Operation, route: Route, library: type[Any]) -> None:
        self.operation = operation
        self.route = route
        self.__name__ = operation.name
        method = getattr(library, operation.name)
        parameters = dict(inspect.signature(method).parameters)
        parameters.pop("self", None)
        hints = typing.get_type_hints(method)
        self._identity = [name for name in _IDENTITY if name in parameters]
        self._in_session = "{session_id}" in route.path
        self._writes = route.method != "GET"
        self._body_model = _body_model(route)
        body = set(self._body_model.model_fields) if self._body_model is not None else set()
        path = [name for name in re.findall(r"\{(\w+)\}", route.path) if name != "session_id"]
        from_path = ("session_id",) if self._in_session else ()
        arguments = [
            name for name in parameters if name not in (*_IDENTITY, *_HEADERS, *from_path, *path)
        ]
        self._body = [name for name in arguments if name in body]
        self._direct = [*path, *(name for name in arguments if name not in body)]
        #: Body members left out only when not sent (the manager's default is UNSET).
        self._unset = {name for name in self._body if parameters[name].default is UNSET}
        _check(operation, route, parameters, body, path)
        query = [name for name in arguments if name not in body]
        self.__signature__ = inspect.Signature(
            [
                *self._caller(),
                *(
                    inspect.Parameter(name, _KEYWORD, annotation=PATH_PARAMETERS[name])
                    for name in path
                ),
                *(_query(operation.name, parameters[name], hints[name], query) for name in query),
                *self._body_and_key(),
            ],
            return_annotation=Response,
        )

    def _caller(self) -> list[inspect.Parameter]:
        if self._in_session:
            context = WriteCtx if self.route.if_match != "none" else ReadCtx
            return [inspect.Parameter("ctx", _KEYWORD, annotation=context)]
        return [
            inspect.Parameter("request", _KEYWORD, annotation=Request),
            inspect.Parameter("principal", _KEYWORD, annotation=Auth),
        ]

    def _body_and_key(self) -> list[inspect.Parameter]:
        found: list[inspect.Parameter] = []
        model = self._body_model
        if model is not None and self.route.optional_body:
            found.append(inspect.Parameter("body", _KEYWORD, annotation=model | None, default=None))
        elif model is not None:
            found.append(inspect.Parameter("body", _KEYWORD, annotation=model))
        if self.route.idempotency_key and not self._reads_headers:
            found.append(
                inspect.Parameter(
                    "idempotency_key", _KEYWORD, annotation=IdempotencyKey, default=None
                )
            )
        return found

    @property
    def _reads_headers(self) -> bool:
        """The context reads ``If-Match`` and ``Idempotency-Key`` (``WriteCtx``)."""
        return self._in_session and self.route.if_match != "none"

    async def __call__(self, **values: Any) -> Response:
        """Answer one request; ``values`` are the parameters of ``__signature__``."""
        ctx: Ctx | None = values.get("ctx")
        if ctx is not None:
            manager, principal = ctx.manager, ctx.principal
        else:
            manager, principal = services(values["request"]).manager, values["principal"]
        arguments = {name: values[name] for name in self._direct}
        body = values.get("body")
        if body is not None:
            sent = body.model_fields_set
            for name in self._body:
                if name in sent or name not in self._unset:
                    arguments[name] = _argument(getattr(body, name))
        identity = {"user_id": principal.user_id, "admin": principal.admin}
        arguments.update((name, identity[name]) for name in self._identity)
        route = self.route
        if ctx is not None:
            arguments["session_id"] = ctx.session_id
            if self._reads_headers:
                required = route.if_match == "required"
                arguments["expected_version"] = await ctx.expected_version(required=required)
                if route.idempotency_key:
                    arguments["idempotency_key"] = ctx.idempotency_key
        if "idempotency_key" in values:  # a header parameter of its own
            arguments["idempotency_key"] = values["idempotency_key"]
        call = getattr(manager, self.operation.name)(**arguments)
        if self._writes:
            result, replayed = await write(call)
        else:
            result, replayed = await call, False
        return self._reply(result, ctx.session_id if ctx is not None else None, replayed)

    def _reply(self, result: Any, session_id: str | None, replayed: bool) -> Response:
        route, kind = self.route, self.operation.result
        if kind == "None":
            headers = {"Idempotent-Replayed": "true"} if replayed else None
            return Response(status_code=route.status, headers=headers)
        etag = _session_etag(result, session_id) if route.etag == "session" else None
        created = route.status == 201 and isinstance(result, Session)
        location = f"/v1/sessions/{result.session_id}" if created else None
        if kind.startswith("list["):
            result = {"items": result}
        elif kind == "int":
            result = {"count": result}
        return reply(result, status=route.status, etag=etag, replayed=replayed, location=location)


def build_route(
    operation: Operation, route: Route, library: type[Any] = SessionManager
) -> APIRoute:
    """The route that serves ``route`` of ``operation`` (a row with no
    ``route_by_hand``), its endpoint a :class:`TableEndpoint`.

    Raises:
        LookupError, TypeError: see :class:`TableEndpoint`; also a row with no ``doc``,
            or whose ``answer_member`` is not ``"count"`` for an ``int`` result (else None).
    """
    if not operation.doc:
        raise LookupError(f"{operation.name}: a route built from the table needs the row's doc")
    member = "count" if operation.result == "int" else None
    if route.answer_member != member:  # the clients read the answer by the row's word
        raise LookupError(f"{operation.name}: a built route answers in member {member!r}")
    statuses = [p if isinstance(p, int) else p[0] for p in route.problems]
    descriptions = {p[0]: p[1] for p in route.problems if not isinstance(p, int)}
    return StrictRoute(
        route.path,
        TableEndpoint(operation, route, library),
        response_model=_answer_model(operation.result),
        status_code=route.status,
        tags=[operation.tag],
        description=inspect.cleandoc(operation.doc),
        responses={**ERRORS, **problem_responses(*statuses, descriptions=descriptions)},
        methods=[route.method],
        operation_id=route.operation_id or operation.name,
        name=operation.name,
    )


def served_routes(
    operations: Iterable[Operation],
    by_hand: Iterable[APIRoute],
    library: type[Any] = SessionManager,
) -> list[APIRoute]:
    """Every route of ``operations``, in :func:`~..routing.in_match_order` of the
    table's order: built from the row (:func:`build_route`), or, for a row with
    ``route_by_hand``, the route of ``by_hand`` with its method and path.

    Raises:
        LookupError: a row with ``route_by_hand`` whose route is not in ``by_hand``, a
            route of ``by_hand`` that no row with ``route_by_hand`` declares (a row
            without it, or none), or a route a row cannot be built into.
    """
    written = {
        (method, route.path_format): route for route in by_hand for method in route.methods or ()
    }
    served: list[APIRoute] = []
    for op in operations:
        for route in op.routes:
            hand = written.pop((route.method, route.path), None)
            where = f"{op.name}: {route.method} {route.path}"
            if op.route_by_hand is None and hand is not None:
                raise LookupError(f"{where} is written by hand: say why in the row's route_by_hand")
            if op.route_by_hand is not None and hand is None:
                raise LookupError(f"{where}: the row has route_by_hand but no route is written")
            served.append(hand if hand is not None else build_route(op, route, library))
    if written:
        raise LookupError(f"routes written by hand that no row declares: {sorted(written)}")
    return in_match_order(served)


def _check(
    operation: Operation,
    route: Route,
    parameters: Mapping[str, inspect.Parameter],
    body: set[str],
    path: list[str],
) -> None:
    """Raise where the row, the manager's signature and the body model disagree."""
    where = f"{operation.name}: {route.method} {route.path}"
    if route.etag == "document":
        raise LookupError(f"{where}: a document's ETag is written by hand")
    session = parameters.get("session_id")
    required = session is not None and session.default is inspect.Parameter.empty
    in_path = "{session_id}" in route.path
    if (in_path and session is None) or (required and not in_path):
        raise LookupError(f"{where}: the manager's session_id is the path's, unless a filter")
    unknown = sorted(body - parameters.keys()) + [n for n in path if n not in PATH_PARAMETERS]
    unknown += [n for n in path if n not in parameters]
    if unknown:
        raise LookupError(f"{where}: no manager argument or path parameter for {unknown}")
    if route.if_match != "none" and "{session_id}" not in route.path:
        raise LookupError(f"{where}: If-Match is read only on a session's path")
    if ("expected_version" in parameters) != (route.if_match != "none"):
        raise LookupError(f"{where}: the row's if_match and the manager's expected_version differ")
    if ("idempotency_key" in parameters) != route.idempotency_key:
        raise LookupError(f"{where}: the row's idempotency_key and the manager's differ")


def _query(
    operation: str, parameter: inspect.Parameter, hint: Any, names: list[str]
) -> inspect.Parameter:
    """The endpoint parameter of the query parameter of manager argument ``parameter``."""
    if parameter.default is UNSET:
        raise TypeError(f"{operation}: `{parameter.name}` left out (UNSET) is no query value")
    query = schemas.query_parameter(operation, parameter.name, names)
    return inspect.Parameter(
        parameter.name,
        _KEYWORD,
        annotation=Annotated[_wire_type(hint), query],
        default=parameter.default,
    )


def _wire_type(hint: Any) -> Any:
    """``hint`` as a query parameter's type: ``RunStatus | str | None`` (the enum or its
    value) is ``RunStatus | None`` on the wire, so the document lists the values; a
    ``datetime`` is :data:`~..schemas.Rfc3339` (text with an offset, not a Unix time)."""
    if not isinstance(hint, types.UnionType):
        return schemas.Rfc3339 if hint is datetime else hint
    members = typing.get_args(hint)
    if any(isinstance(m, type) and issubclass(m, Enum) for m in members):
        members = tuple(m for m in members if m is not str)
    members = tuple(schemas.Rfc3339 if m is datetime else m for m in members)
    return reduce(operator.or_, members)


def _body_model(route: Route) -> type[BaseModel] | None:
    if route.request is None:
        return None
    model = getattr(schemas, route.request, None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise LookupError(f"{route.request} is no request model of agentsession.http.schemas")
    return model


def _argument(value: Any) -> Any:
    """A body member as the manager's argument: a model as its non-null members."""
    return value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value


def _answer_model(result: str) -> Any:
    """The ``response_model`` (for OpenAPI) of a row's result annotation."""
    if result == "None":
        return None
    if result == "int":
        return schemas.CountResult
    outer, _, inner = result.partition("[")
    if not inner:
        return _model(result)
    item = _model(inner.removesuffix("]"))
    if outer == "Page":
        return Page[item]  # type: ignore[valid-type]
    if outer == "list":
        return schemas.Items[item]  # type: ignore[valid-type]
    raise LookupError(f"no answer model for a result {result!r}")


def _model(name: str) -> type[BaseModel]:
    found = getattr(models, name, None)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise LookupError(f"{name} is no model of agentsession.models")
    return found


def _session_etag(result: Any, session_id: str | None) -> tuple[str, int] | None:
    """The session ETag of a result: a session's own version, else the result's
    ``session_version`` (a list's: its first item's) of the path's session."""
    if isinstance(result, RestoredSession):
        result = result.session
    if isinstance(result, Session):
        return (result.session_id, result.version)
    if isinstance(result, list):
        result = result[0] if result else None
    version = getattr(result, "session_version", None)
    return None if session_id is None else version_etag(session_id, version)
