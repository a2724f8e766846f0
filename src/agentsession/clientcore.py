"""The sans-I/O machinery of the clients (:mod:`agentsession.client`): a method's work
is a *flow*, a generator that yields the I/O it needs (:class:`_Send` one HTTP request,
:class:`_Sleep`) and returns the method's result; :class:`_Exchange` sends one request
as a flow, with retries and typed errors; :func:`_sync` and :func:`_async` make a flow
a client method. Private to the client modules.
"""

from __future__ import annotations

import inspect
import json
import random
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from .metafilter import check_filter
from .models import Page
from .protocol import (
    PROBLEM_CONTENT_TYPE,
    ServerError,
    error_from_problem,
    format_document_etag,
    format_etag,
)
from .unset import UNSET

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")

#: Answers worth retrying: the request may not have been processed, or is safe to repeat.
RETRY_STATUSES = frozenset({500, 502, 503, 504})
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


# ------------------------------------------------------------------ flows


@dataclass(frozen=True, slots=True)
class _Send:
    """I/O step: send this request once. The flow is answered with the
    ``httpx.Response``, or has the ``httpx.TransportError`` thrown into it."""

    method: str
    path: str
    params: dict[str, Any]
    content: bytes | None
    headers: dict[str, str]

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        """The ``httpx.Request`` for ``http`` (its base URL, auth header, timeout)."""
        return http.build_request(
            self.method, self.path, params=self.params, content=self.content, headers=self.headers
        )


@dataclass(frozen=True, slots=True)
class _Sleep:
    """I/O step: wait ``seconds``; the flow is answered with None."""

    seconds: float


#: A method's work without its I/O: yields steps, is sent their answers, returns a T.
_Flow = Generator[_Send | _Sleep, Any, T]


class _Stepper(Generic[T]):
    """Walks a flow for a client: ``for step in stepper`` gives each I/O step; set
    ``reply`` (or ``error``) to answer it. ``result`` is what the flow returned."""

    def __init__(self, flow: _Flow[T]) -> None:
        self._flow = flow
        self.reply: Any = None
        self.error: httpx.TransportError | None = None
        self.result: T

    def __iter__(self) -> Iterator[_Send | _Sleep]:
        return self

    def __next__(self) -> _Send | _Sleep:
        reply, error, self.reply, self.error = self.reply, self.error, None, None
        try:
            return self._flow.send(reply) if error is None else self._flow.throw(error)
        except StopIteration as stop:
            self.result = stop.value
            raise StopIteration from None


@dataclass(slots=True)
class _Call(Generic[T]):
    """One HTTP request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    session_id: str | None = None

    def send(self) -> _Send:
        """The request as sent (the same bytes and headers on every retry)."""
        if self.body is None and self.method in ("GET", "DELETE"):
            return _Send(self.method, self.path, self.params, None, self.headers)
        content = json.dumps(self.body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        headers = {**self.headers, "Content-Type": self.content_type}
        return _Send(self.method, self.path, self.params, content, headers)


@dataclass(frozen=True, slots=True)
class _Retry:
    max_retries: int
    backoff: float
    max_backoff: float

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            after = response.headers.get("retry-after", "")
            if after.isdigit():
                return min(float(after), self.max_backoff)
        return min(self.max_backoff, self.backoff * 2.0**attempt) * random.uniform(0.5, 1.0)


def _raise_for(call: _Call[Any], response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    body: Any = None
    content_type = response.headers.get("content-type", "")
    if content_type.startswith((PROBLEM_CONTENT_TYPE, "application/json")):
        try:
            body = response.json()
        except ValueError:
            body = None
    if not isinstance(body, dict):
        if response.status_code >= 500:
            raise ServerError(f"HTTP {response.status_code}")
        body = {"detail": f"HTTP {response.status_code}: {response.text[:200]}"}
    raise error_from_problem(body, response.status_code, session_id=call.session_id)


def _sid(session_id: str) -> str:
    return quote(session_id, safe="")


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _enum(value: Any) -> Any:
    return getattr(value, "value", value)


def _opt_dict(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A mapping as a JSON object; None and ``UNSET`` (an argument left out) as they are."""
    return value if value is None or value is UNSET else dict(value)


def _ops_member(ops: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """``{"working_memory_ops": [...]}``, or nothing when there are none (so a server
    without JSON Patch still takes the body)."""
    return {} if ops is None else {"working_memory_ops": [dict(op) for op in ops]}


def _shared_member(ops: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> dict[str, Any]:
    """``{"shared_memory_ops": {...}}``, or nothing when there are none."""
    if ops is None:
        return {}
    return {"shared_memory_ops": {scope: [dict(op) for op in v] for scope, v in ops.items()}}


def _memory_write(
    data: Mapping[str, Any] | None,
    patch: Mapping[str, Any] | None,
    ops: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """The ``data``, ``patch`` or ``ops`` member of a ``POST .../memory`` body."""
    if data is not None:
        return {"data": dict(data)}
    if patch is not None:
        return {"patch": dict(patch)}
    return {"ops": [dict(op) for op in ops or ()]}


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda r: cls.model_validate(r.json())


def _optional(cls: type[M]) -> Callable[[Any], M | None]:
    """A JSON value as a ``cls``, null as None."""
    return lambda value: None if value is None else cls.model_validate(value)


def _member(name: str, parse: Callable[[Any], T]) -> Callable[[httpx.Response], T]:
    """The member ``name`` of a JSON object answer, read by ``parse``: ``{"count": n}``
    is ``_member("count", int)``."""
    return lambda r: parse(r.json()[name])


def _object(response: httpx.Response) -> dict[str, Any]:
    """A JSON object answer as a dict."""
    return dict(response.json())


def _list(cls: type[M]) -> Callable[[httpx.Response], list[M]]:
    """An ``{"items": [...]}`` answer as a list of ``cls``."""
    return lambda r: [cls.model_validate(item) for item in r.json()["items"]]


def _members(**values: Any) -> dict[str, Any]:
    """A request's body or query: the members given (a None one is left out, which the
    service reads as its default; a server older than the member takes the request)."""
    return {name: value for name, value in values.items() if value is not None}


def _metadata_query(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """A metadata filter as its query parameters, ``metadata.<key>=<text>``: each value
    as the text it matches by (a number or boolean as its text), checked as the
    manager checks it (:func:`agentsession.metafilter.check_filter`).

    Raises:
        ValidationError: the filter the manager would refuse; nothing is sent.
    """
    return {f"metadata.{k}": v for k, v in (check_filter(metadata) or {}).items()}


def _given(**values: Any) -> dict[str, Any]:
    """A request's members whose argument was passed (not ``UNSET``), a None too: where
    leaving a member out means something else than null (a fork's TTL is its parent's)."""
    return {name: value for name, value in values.items() if value is not UNSET}


def _dicts(items: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    return None if items is None else [dict(item) for item in items]


def _scoped(ops: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> dict[str, Any] | None:
    """Shared-memory ops by scope, as JSON."""
    return None if ops is None else {scope: [dict(op) for op in v] for scope, v in ops.items()}


def _nothing(response: httpx.Response) -> None:
    """An answer with nothing to read (204)."""
    return None


def _flag(value: bool, default: bool) -> str | None:
    """A boolean query parameter: left out (None) at its default, else its JSON text."""
    return None if value == default else ("true" if value else "false")


def _page(cls: type[M]) -> Callable[[httpx.Response], Page[M]]:
    return lambda r: Page[cls].model_validate(r.json())  # type: ignore[valid-type]


class _Exchange:
    """Sends calls as flows: retries with bounded backoff, typed errors; the base of the
    request classes of :mod:`agentsession.client` and :mod:`agentsession.clientgen`."""

    def __init__(self, retry: _Retry) -> None:
        self._retry = retry

    def _exchange(self, call: _Call[T]) -> _Flow[T]:
        """Send ``call``, retrying with bounded backoff; parse the answer or raise its
        typed error."""
        send = call.send()
        for attempt in range(self._retry.max_retries + 1):
            last = attempt == self._retry.max_retries
            try:
                response = yield send
            except httpx.TransportError:
                if last:
                    raise
                yield _Sleep(self._retry.delay(attempt, None))
                continue
            if response.status_code in RETRY_STATUSES and not last:
                yield _Sleep(self._retry.delay(attempt, response))
                continue
            _raise_for(call, response)
            return call.parse(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(
        self,
        method: str,
        path: str,
        parse: Callable[[httpx.Response], T],
        *,
        session_id: str | None,
        body: Any = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        content_type: str = "application/json",
        params: dict[str, Any] | None = None,
        generate_key: bool | None = None,
    ) -> _Flow[T]:
        """A request other than a GET. ``expected_version`` is sent as ``If-Match``: the
        session's ETag, or with no ``session_id`` a shared document's (``"<version>"``).
        ``generate_key``: send a new ``Idempotency-Key`` when ``idempotency_key`` is None,
        the same on every retry; None means for a POST, PUT or PATCH."""
        headers = {}
        if expected_version is not None:
            headers["If-Match"] = (
                format_document_etag(expected_version)
                if session_id is None
                else format_etag(session_id, expected_version)
            )
        if generate_key is None:
            generate_key = method in ("POST", "PUT", "PATCH")
        key = idempotency_key
        if key is None and generate_key:
            key = str(uuid.uuid4())
        if key is not None:
            headers["Idempotency-Key"] = key
        return self._exchange(
            _Call(
                method,
                path,
                parse,
                body=body,
                params=params or {},
                headers=headers,
                content_type=content_type,
                session_id=session_id,
            )
        )

    def _read(
        self,
        path: str,
        parse: Callable[[httpx.Response], T],
        *,
        session_id: str | None = None,
        params: dict[str, Any] | None = None,
        **members: Any,
    ) -> _Flow[T]:
        """A GET: ``members`` and ``params`` (for a member named like an argument of
        this method: search's ``session_id`` filter) are the query, a None one left out;
        ``session_id`` names the session a 404 is about."""
        query = {k: _enum(v) for k, v in {**(params or {}), **members}.items() if v is not None}
        return self._exchange(_Call("GET", path, parse, params=query, session_id=session_id))


# ------------------------------------------------------------------ client methods


class _RunsFlows(Protocol):
    """A sync client: runs a flow of its ``_requests`` with its I/O."""

    _requests: Any

    def _run(self, flow: _Flow[T]) -> T: ...


class _AwaitsFlows(Protocol):
    """An async client: runs a flow of its ``_requests`` with its I/O."""

    _requests: Any

    async def _run(self, flow: _Flow[T]) -> T: ...


def _present(method: Any, build: Callable[..., Any], owner: str) -> None:
    """Give ``method`` the name, docstring and keyword arguments of ``build``, and as
    return annotation what ``build``'s flow returns (for ``help()`` and ``inspect``)."""
    signature = inspect.signature(build)
    returns = signature.return_annotation
    if isinstance(returns, str) and returns.startswith("_Flow["):
        returns = returns.removeprefix("_Flow[").removesuffix("]")
    method.__name__ = build.__name__
    method.__qualname__ = f"{owner}.{build.__name__}"
    method.__doc__ = build.__doc__
    method.__signature__ = signature.replace(return_annotation=returns)


def _sync(
    build: Callable[Concatenate[Any, P], _Flow[T]],
) -> Callable[Concatenate[_RunsFlows, P], T]:
    """The flow method ``build`` as a ``SessionClient`` method: runs the flow, returns
    its result. mypy sees ``build``'s keyword arguments and the flow's result type."""

    def method(self: _RunsFlows, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(build(self._requests, *args, **kwargs))

    _present(method, build, "SessionClient")
    return method


def _async(
    build: Callable[Concatenate[Any, P], _Flow[T]],
) -> Callable[Concatenate[_AwaitsFlows, P], Coroutine[Any, Any, T]]:
    """The flow method ``build`` as an ``AsyncSessionClient`` coroutine method."""

    async def method(self: _AwaitsFlows, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(build(self._requests, *args, **kwargs))

    _present(method, build, "AsyncSessionClient")
    return method
