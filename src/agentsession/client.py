"""Python clients of the agentsession HTTP service: :class:`SessionClient` (sync) and
:class:`AsyncSessionClient` (asyncio), built on httpx.

Both have the methods of :class:`~agentsession.service.SessionManager` with the same
keyword arguments, return the same pydantic models and raise the same typed errors
(rebuilt from the problem+json ``type``). The user is the one of the API key, so
``user_id`` is accepted and ignored. ``expected_version`` travels as ``If-Match``.

Retries: connection errors, timeouts and 500/502/503/504 answers are retried with
bounded exponential backoff (``Retry-After`` honoured up to ``max_backoff``). Every
POST, PUT and PATCH, and a message truncate (a DELETE), carries an ``Idempotency-Key``
(a uuid4 unless you pass ``idempotency_key``), the same one on each retry, so a retried
write is stored once. A session DELETE retried after a lost answer may report the
session as not found.

Example::

    with SessionClient("http://127.0.0.1:8000", api_key="key_...") as client:
        s = client.create_session(agent="coding")
        client.append_message(session_id=s.session_id, message={"role": "user", "content": "hi"})
        client.modify_working_memory(session_id=s.session_id, fn=lambda m: {**m, "goal": "x"})

With the async client every method is a coroutine (``await client.get_session(...)``).

Listings return one :class:`~agentsession.models.Page` per call, as the manager does;
pass its ``next_cursor`` as ``cursor`` for the next one.

Design (sans-I/O): each method is written once, in :class:`_Requests`, as a *flow*: a
generator that yields the I/O it needs (:class:`_Send` one HTTP request, :class:`_Sleep`)
and returns the method's result. The retry loop and the 412 re-read loop are flows too.
The two clients only run flows: ``SessionClient`` with ``httpx.Client`` and
``time.sleep``, ``AsyncSessionClient`` with ``httpx.AsyncClient`` and ``asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import random
import time
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from .errors import AgentSessionError, RecordNotFound, ValidationError, VersionConflict
from .models import (
    AuditEvent,
    Context,
    DeleteRecordsResult,
    Message,
    Page,
    PutRecordsResult,
    Record,
    RecordWrite,
    RestoredSession,
    Rewind,
    RewindResult,
    Run,
    RunStatus,
    RunStep,
    Session,
    SessionStatus,
    SharedMemory,
    Summary,
    ToolCall,
    ToolCallStatus,
    TruncateResult,
    WorkingMemory,
)
from .protocol import (
    PROBLEM_CONTENT_TYPE,
    ServerError,
    error_from_problem,
    format_document_etag,
    format_etag,
)
from .tokens import DEFAULT_TOKENIZER, Tokenizer
from .unset import UNSET

__all__ = ["AsyncSessionClient", "SessionClient"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")

#: Answers worth retrying: the request may not have been processed, or is safe to repeat.
RETRY_STATUSES = frozenset({500, 502, 503, 504})
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

_MESSAGES = TypeAdapter(list[Message])


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
    return None if value is None else dict(value)


def _ops_member(ops: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """``{"working_memory_ops": [...]}``, or nothing when there are none (so a server
    without JSON Patch still takes the body)."""
    return {} if ops is None else {"working_memory_ops": [dict(op) for op in ops]}


def _shared_path(scope: str, agent: str) -> str:
    return f"/v1/shared-memory/{quote(scope, safe='')}/{quote(agent, safe='')}"


def _target(target_user_id: str | None) -> dict[str, Any]:
    """The ``user_id`` query parameter naming another user's shared document."""
    return {} if target_user_id is None else {"user_id": target_user_id}


def _shared_member(ops: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> dict[str, Any]:
    """``{"shared_memory_ops": {...}}``, or nothing when there are none."""
    if ops is None:
        return {}
    return {"shared_memory_ops": {scope: [dict(op) for op in v] for scope, v in ops.items()}}


def _items(adapter: TypeAdapter[list[M]]) -> Callable[[httpx.Response], list[M]]:
    return lambda r: adapter.validate_python(r.json()["items"])


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda r: cls.model_validate(r.json())


def _page(cls: type[M]) -> Callable[[httpx.Response], Page[M]]:
    return lambda r: Page[cls].model_validate(r.json())  # type: ignore[valid-type]


# --------------------------------------------------------------- the methods


class _Exchange:
    """Sends calls as flows: retries with bounded backoff, typed errors; the base of the
    request classes below."""

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
        keyed: bool = False,
        if_match: str | None = None,
        auto_key: bool = True,
    ) -> _Flow[T]:
        # ``keyed``: a key is sent whatever the method (a DELETE the service replays).
        # ``if_match``: the header as is (a shared document's ETag names no session).
        # ``auto_key`` False: no generated key (a write whose retry is harmless anyway).
        headers = {} if if_match is None else {"If-Match": if_match}
        if expected_version is not None and session_id is not None:
            headers["If-Match"] = format_etag(session_id, expected_version)
        key = idempotency_key
        if key is None and auto_key and (keyed or method in ("POST", "PUT", "PATCH")):
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
        **params: Any,
    ) -> _Flow[T]:
        query = {k: _enum(v) for k, v in params.items() if v is not None}
        return self._exchange(_Call("GET", path, parse, params=query, session_id=session_id))


class _SessionRequests(_Exchange):
    """Session, lifecycle and user requests."""

    def create_session(
        self,
        *,
        user_id: str | None = None,
        agent: str = "default",
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: float | None = None,
        working_memory: Mapping[str, Any] | None = None,
        external_key: str | None = None,
        idempotency_key: str | None = None,
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        admin: bool = False,
    ) -> _Flow[Session]:
        """See :meth:`SessionManager.create_session`; the owner is the key's user (an
        admin key may send ``app`` shared-memory ops)."""
        body = {
            "agent": agent,
            "title": title,
            "metadata": None if metadata is None else dict(metadata),
            "ttl_seconds": ttl_seconds,
            "working_memory": None if working_memory is None else dict(working_memory),
        }
        if external_key is not None:  # sent only when given: older servers refuse it
            body["external_key"] = external_key
        body.update(_shared_member(shared_memory_ops))
        return self._write(
            "POST",
            "/v1/sessions",
            _model(Session),
            session_id=None,
            body=body,
            idempotency_key=idempotency_key,
        )

    def get_session(
        self, *, session_id: str, user_id: str | None = None, admin: bool = False
    ) -> _Flow[Session]:
        """See :meth:`SessionManager.get_session`."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}", _model(Session), session_id=session_id
        )

    def get_session_by_key(
        self, *, user_id: str | None = None, agent: str, external_key: str
    ) -> _Flow[Session]:
        """See :meth:`SessionManager.get_session_by_key`; the owner is the key's user.
        The key travels query-encoded (``GET /v1/sessions-by-key``)."""
        # session_id "" makes a 404 the SessionNotFound the manager raises.
        params = {"agent": agent, "external_key": external_key}
        return self._read("/v1/sessions-by-key", _model(Session), session_id="", **params)

    def open_session(
        self,
        *,
        user_id: str | None = None,
        agent: str,
        external_key: str,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: float | None = None,
        working_memory: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> _Flow[tuple[Session, bool]]:
        """See :meth:`SessionManager.open_session`; the owner is the key's user
        (``PUT /v1/sessions-by-key``: 201 created, 200 found). Sends an idempotency key
        (generated if not given), so a retry after a lost answer reports created=True
        when the first attempt created the session."""
        body = {
            "title": title,
            "metadata": _opt_dict(metadata),
            "ttl_seconds": ttl_seconds,
            "working_memory": _opt_dict(working_memory),
        }

        def parse(r: httpx.Response) -> tuple[Session, bool]:
            return Session.model_validate(r.json()), r.status_code == 201

        params = {"agent": agent, "external_key": external_key}
        return self._write(
            "PUT",
            "/v1/sessions-by-key",
            parse,
            session_id=None,
            body=body,
            idempotency_key=idempotency_key,
            params=params,
        )

    def fork_session(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        at_seq: int | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        external_key: str | None = None,
        ttl_seconds: float | None = UNSET,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[Session]:
        """See :meth:`SessionManager.fork_session` (``POST /v1/sessions/{id}/fork``);
        the caller is the key's user. ``ttl_seconds`` left out is the parent's."""
        body: dict[str, Any] = {
            "at_seq": at_seq,
            "title": title,
            "metadata": _opt_dict(metadata),
            "external_key": external_key,
        }
        if ttl_seconds is not UNSET:
            body["ttl_seconds"] = ttl_seconds
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/fork",
            _model(Session),
            session_id=session_id,
            body=body,
            idempotency_key=idempotency_key,
        )

    def list_sessions(
        self,
        *,
        user_id: str | None = None,
        status: SessionStatus | str | None = None,
        agent: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        all_users: bool = False,
        admin: bool = False,
        parent_session_id: str | None = None,
    ) -> _Flow[Page[Session]]:
        """See :meth:`SessionManager.list_sessions`."""
        return self._read(
            "/v1/sessions",
            _page(Session),
            status=status,
            agent=agent,
            limit=limit,
            cursor=cursor,
            all_users="true" if all_users else None,
            parent_session_id=parent_session_id,
        )

    def update_session(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        title: str | None = UNSET,
        metadata: Mapping[str, Any] = UNSET,
        ttl_seconds: float | None = UNSET,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[Session]:
        """See :meth:`SessionManager.update_session`."""
        body: dict[str, Any] = {}
        if title is not UNSET:
            body["title"] = title
        if metadata is not UNSET:
            body["metadata"] = None if metadata is None else dict(metadata)
        if ttl_seconds is not UNSET:
            body["ttl_seconds"] = ttl_seconds
        return self._write(
            "PATCH",
            f"/v1/sessions/{_sid(session_id)}",
            _model(Session),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def close_session(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        reason: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[Session]:
        """See :meth:`SessionManager.close_session`."""
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/close",
            _model(Session),
            session_id=session_id,
            body={"reason": reason},
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def expire_session(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        reason: str | None = None,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> _Flow[Session]:
        """See :meth:`SessionManager.expire_session`."""
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/expire",
            _model(Session),
            session_id=session_id,
            body={"reason": reason},
            expected_version=expected_version,
        )

    def restore_session(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        message_limit: int | None = None,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> _Flow[RestoredSession]:
        """See :meth:`SessionManager.restore_session`."""
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/restore",
            _model(RestoredSession),
            session_id=session_id,
            body={"message_limit": message_limit},
            expected_version=expected_version,
        )

    def delete_session(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> _Flow[None]:
        """See :meth:`SessionManager.delete_session`."""
        return self._write(
            "DELETE",
            f"/v1/sessions/{_sid(session_id)}",
            lambda r: None,
            session_id=session_id,
            expected_version=expected_version,
        )

    def delete_user_data(
        self,
        *,
        user_id: str | None = None,
        target_user_id: str | None = None,
        admin: bool = False,
    ) -> _Flow[int]:
        """See :meth:`SessionManager.delete_user_data`; the target defaults to
        ``target_user_id``, then ``user_id`` (give one of them)."""
        target = target_user_id if target_user_id is not None else user_id
        if target is None:
            raise ValueError("pass target_user_id (or user_id) for delete_user_data")
        return self._write(
            "DELETE",
            f"/v1/users/{quote(target, safe='')}/data",
            lambda r: int(r.json()["deleted_sessions"]),
            session_id=None,
        )

    def whoami(self) -> _Flow[dict[str, Any]]:
        """The API key's principal: ``{"user_id": ..., "admin": ...}`` (not a
        SessionManager method; the user every other call acts as)."""
        return self._read("/v1/whoami", lambda r: dict(r.json()))


class _HistoryRequests(_Exchange):
    """Message and working-memory requests."""

    def append_message(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        message: Mapping[str, Any],
        working_memory_patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        working_memory_ops: Sequence[Mapping[str, Any]] | None = None,
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> _Flow[Message]:
        """See :meth:`SessionManager.append_message`."""
        body = {
            "message": dict(message),
            "working_memory_patch": _opt_dict(working_memory_patch),
            **_ops_member(working_memory_ops),
            **_shared_member(shared_memory_ops),
        }
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/messages",
            _model(Message),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def append_messages(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        messages: Sequence[Mapping[str, Any]],
        working_memory_patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        working_memory_ops: Sequence[Mapping[str, Any]] | None = None,
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> _Flow[list[Message]]:
        """See :meth:`SessionManager.append_messages`."""
        body = {
            "messages": [dict(m) for m in messages],
            "working_memory_patch": _opt_dict(working_memory_patch),
            **_ops_member(working_memory_ops),
            **_shared_member(shared_memory_ops),
        }
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/messages",
            _items(_MESSAGES),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def get_messages(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
        cursor: str | None = None,
        align_tool_calls: bool = True,
        admin: bool = False,
    ) -> _Flow[Page[Message]]:
        """See :meth:`SessionManager.get_messages`."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/messages",
            _page(Message),
            session_id=session_id,
            limit=limit,
            before=before,
            after=after,
            cursor=cursor,
            align_tool_calls="true" if align_tool_calls else "false",
        )

    def replace_messages(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        after_seq: int,
        messages: Sequence[Mapping[str, Any]],
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[list[Message]]:
        """See :meth:`SessionManager.replace_messages` (``PUT .../messages``)."""
        return self._write(
            "PUT",
            f"/v1/sessions/{_sid(session_id)}/messages",
            _items(_MESSAGES),
            session_id=session_id,
            body={"messages": [dict(m) for m in messages]},
            params={"after_seq": after_seq},
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def truncate_messages(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        after_seq: int,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[TruncateResult]:
        """See :meth:`SessionManager.truncate_messages` (``DELETE .../messages``). It
        carries an ``Idempotency-Key`` too (a uuid4 unless given), so a retried
        truncate answers the first result."""
        return self._write(
            "DELETE",
            f"/v1/sessions/{_sid(session_id)}/messages",
            _model(TruncateResult),
            session_id=session_id,
            params={"after_seq": after_seq},
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            keyed=True,
        )

    def pop_message(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[Message | None]:
        """See :meth:`SessionManager.pop_message` (``POST .../messages/pop``)."""

        def parse(r: httpx.Response) -> Message | None:
            message = r.json()["message"]
            return None if message is None else Message.model_validate(message)

        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/messages/pop",
            parse,
            session_id=session_id,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def rewind_session(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        to_seq: int,
        remove: bool = False,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[RewindResult]:
        """See :meth:`SessionManager.rewind_session` (``POST .../rewind``)."""
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/rewind",
            _model(RewindResult),
            session_id=session_id,
            body={"to_seq": to_seq, "remove": remove},
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def list_rewinds(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> _Flow[Page[Rewind]]:
        """See :meth:`SessionManager.list_rewinds` (``GET .../rewinds``)."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/rewinds",
            _page(Rewind),
            session_id=session_id,
            limit=limit,
            cursor=cursor,
        )

    def get_rewound_messages(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        number: int,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> _Flow[Page[Message]]:
        """See :meth:`SessionManager.get_rewound_messages`
        (``GET .../rewinds/{number}/messages``)."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/rewinds/{int(number)}/messages",
            _page(Message),
            session_id=session_id,
            limit=limit,
            cursor=cursor,
        )

    def get_working_memory(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        admin: bool = False,
        at_seq: int | None = None,
    ) -> _Flow[WorkingMemory]:
        """See :meth:`SessionManager.get_working_memory` (``GET .../memory?at_seq=N``)."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/memory",
            _model(WorkingMemory),
            session_id=session_id,
            at_seq=at_seq,
        )

    def update_working_memory(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        data: Mapping[str, Any] | None = None,
        patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        ops: Sequence[Mapping[str, Any]] | None = None,
    ) -> _Flow[WorkingMemory]:
        """See :meth:`SessionManager.update_working_memory` (PUT ``data``, PATCH
        ``patch`` as a merge patch, PATCH ``ops`` as ``application/json-patch+json``)."""
        if sum(arg is not None for arg in (data, patch, ops)) != 1:
            raise ValueError("pass exactly one of data, patch and ops")
        body: Any
        if data is not None:
            body, content_type = dict(data), "application/json"
        elif patch is not None:
            body, content_type = dict(patch), MERGE_PATCH
        else:
            body, content_type = [dict(op) for op in ops or ()], JSON_PATCH
        return self._write(
            "PUT" if data is not None else "PATCH",
            f"/v1/sessions/{_sid(session_id)}/memory",
            _model(WorkingMemory),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            content_type=content_type,
        )

    def modify_working_memory(
        self,
        *,
        session_id: str,
        fn: Callable[[dict[str, Any]], Mapping[str, Any]],
        user_id: str | None = None,
        max_attempts: int = 10,
        admin: bool = False,
    ) -> _Flow[WorkingMemory]:
        """Read-modify-write the working memory; re-read and retry on 412 (bounded).

        One GET of the memory per attempt: its ``session_version`` (the session's version
        read with it) goes back as ``If-Match``, so a concurrent update makes this one
        fail and retry, never get lost. ``fn`` may run more than once.

        Returns:
            The working memory as written.

        Raises:
            VersionConflict: still conflicting after ``max_attempts``.
            AgentSessionError: the server's answer carried no ``session_version``.
        """
        for attempt in range(1, max_attempts + 1):
            current = yield from self.get_working_memory(session_id=session_id)
            if current.session_version is None:  # never write unconditionally
                raise AgentSessionError("the memory answer has no session_version")
            try:
                return (
                    yield from self.update_working_memory(
                        session_id=session_id,
                        data=fn(dict(current.data)),
                        expected_version=current.session_version,
                    )
                )
            except VersionConflict:
                if attempt == max_attempts:
                    raise
                yield _Sleep(random.uniform(0, 0.005 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover


class _RecordRequests(_Exchange):
    """Tool-call, run and audit requests."""

    def record_tool_call(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        result: Any = None,
        status: ToolCallStatus | str = ToolCallStatus.OK,
        error: str | None = None,
        started_at: datetime | None = None,
        ended_at: datetime | None = None,
        run_id: str | None = None,
        call_id: str | None = None,
        provider_call_id: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[ToolCall]:
        """See :meth:`SessionManager.record_tool_call`."""
        body = {
            "tool": tool,
            "arguments": _opt_dict(arguments),
            "result": result,
            "status": _enum(status),
            "error": error,
            "started_at": _time(started_at),
            "ended_at": _time(ended_at),
            "run_id": run_id,
            "call_id": call_id,
        }
        if provider_call_id is not None:  # a server older than the field refuses it
            body["provider_call_id"] = provider_call_id
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/tool-calls",
            _model(ToolCall),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def get_tool_history(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        tool: str | None = None,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> _Flow[Page[ToolCall]]:
        """See :meth:`SessionManager.get_tool_history`."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/tool-calls",
            _page(ToolCall),
            session_id=session_id,
            tool=tool,
            after=after,
            limit=limit,
            cursor=cursor,
        )

    def find_tool_call(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        provider_call_id: str | None = None,
        admin: bool = False,
    ) -> _Flow[ToolCall | None]:
        """See :meth:`SessionManager.find_tool_call`."""

        def parse(r: httpx.Response) -> ToolCall | None:
            item = r.json()["item"]
            return None if item is None else ToolCall.model_validate(item)

        # A POST body, so the arguments stay out of URLs and access logs.
        body = {
            "tool": tool,
            "arguments": _opt_dict(arguments),
            "provider_call_id": provider_call_id,
        }
        path = f"/v1/sessions/{_sid(session_id)}/tool-calls/find"
        return self._exchange(_Call("POST", path, parse, body=body, session_id=session_id))

    def start_run(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        lease_seconds: float | None = None,
    ) -> _Flow[Run]:
        """See :meth:`SessionManager.start_run`."""
        body = {"input": input, "metadata": _opt_dict(metadata)}
        if lease_seconds is not None:  # sent only when given: older servers refuse it
            body["lease_seconds"] = lease_seconds
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/runs",
            _model(Run),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def heartbeat_run(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        run_id: str,
        lease_seconds: float | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[Run]:
        """See :meth:`SessionManager.heartbeat_run`."""
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/runs/{quote(run_id, safe='')}/heartbeat",
            _model(Run),
            session_id=session_id,
            body={"lease_seconds": lease_seconds},
            idempotency_key=idempotency_key,
            # A retried heartbeat just extends the lease again; a generated key would
            # store an idempotency record for every beat.
            auto_key=False,
        )

    def add_run_step(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        run_id: str,
        kind: str,
        name: str | None = None,
        input: Any = None,
        output: Any = None,
        status: str = "ok",
        error: str | None = None,
        started_at: datetime | None = None,
        ended_at: datetime | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[RunStep]:
        """See :meth:`SessionManager.add_run_step`."""
        body = {
            "kind": kind,
            "name": name,
            "input": input,
            "output": output,
            "status": status,
            "error": error,
            "started_at": _time(started_at),
            "ended_at": _time(ended_at),
        }
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/runs/{quote(run_id, safe='')}/steps",
            _model(RunStep),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def finish_run(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        run_id: str,
        status: RunStatus | str,
        error: str | None = None,
        output: Any = None,
        usage: Mapping[str, int] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[Run]:
        """See :meth:`SessionManager.finish_run`."""
        body = {
            "status": _enum(status),
            "error": error,
            "output": output,
            "usage": None if usage is None else dict(usage),
        }
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/runs/{quote(run_id, safe='')}/finish",
            _model(Run),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def get_run(
        self, *, session_id: str, user_id: str | None = None, run_id: str, admin: bool = False
    ) -> _Flow[Run]:
        """See :meth:`SessionManager.get_run`."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/runs/{quote(run_id, safe='')}",
            _model(Run),
            session_id=session_id,
        )

    def list_run_steps(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        run_id: str,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> _Flow[Page[RunStep]]:
        """See :meth:`SessionManager.list_run_steps` (``limit`` at least 1)."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/runs/{quote(run_id, safe='')}/steps",
            lambda r: Page[RunStep].model_validate(r.json()),
            session_id=session_id,
            after=after,
            limit=limit,
            cursor=cursor,
        )

    def list_runs(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        status: RunStatus | str | None = None,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> _Flow[Page[Run]]:
        """See :meth:`SessionManager.list_runs`."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/runs",
            _page(Run),
            session_id=session_id,
            status=status,
            after=after,
            limit=limit,
            cursor=cursor,
        )

    def get_audit_log(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> _Flow[Page[AuditEvent]]:
        """See :meth:`SessionManager.get_audit_log`."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/audit",
            _page(AuditEvent),
            session_id=session_id,
            after=after,
            limit=limit,
            cursor=cursor,
        )


class _SharedRequests(_Exchange):
    """Shared-memory requests."""

    def get_shared_memory(
        self,
        *,
        scope: str,
        agent: str,
        user_id: str | None = None,
        target_user_id: str | None = None,
        admin: bool = False,
    ) -> _Flow[SharedMemory]:
        """See :meth:`SessionManager.get_shared_memory` (``app``, and another user's
        document, need an admin key)."""
        return self._read(_shared_path(scope, agent), _model(SharedMemory), user_id=target_user_id)

    def update_shared_memory(
        self,
        *,
        scope: str,
        agent: str,
        user_id: str | None = None,
        target_user_id: str | None = None,
        ops: Sequence[Mapping[str, Any]] | None = None,
        data: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[SharedMemory]:
        """See :meth:`SessionManager.update_shared_memory`; over HTTP only ``ops``
        (``PATCH`` as ``application/json-patch+json``) without ``expected_version``.

        Raises:
            ValueError: ``data`` or ``expected_version`` given, or no ``ops``.
        """
        if ops is None or data is not None or expected_version is not None:
            raise ValueError("over HTTP, shared memory takes ops only, without expected_version")
        return self._write(
            "PATCH",
            _shared_path(scope, agent),
            _model(SharedMemory),
            session_id=None,
            body=[dict(op) for op in ops],
            idempotency_key=idempotency_key,
            content_type=JSON_PATCH,
            params=_target(target_user_id),
        )

    def delete_shared_memory(
        self,
        *,
        scope: str,
        agent: str,
        user_id: str | None = None,
        target_user_id: str | None = None,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> _Flow[bool]:
        """See :meth:`SessionManager.delete_shared_memory` (an admin key);
        ``expected_version`` travels as ``If-Match: "<version>"``."""
        return self._write(
            "DELETE",
            _shared_path(scope, agent),
            lambda r: bool(r.json()["deleted"]),
            session_id=None,
            params=_target(target_user_id),
            if_match=None if expected_version is None else format_document_etag(expected_version),
        )


class _SessionRecordRequests(_Exchange):
    """Session records over HTTP; ``data`` travels as base64."""

    def put_records(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        records: Sequence[RecordWrite],
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[PutRecordsResult]:
        """See :meth:`SessionManager.put_records` (``PUT .../records``)."""
        body = {
            "records": [
                {
                    "namespace": r.namespace,
                    "key": r.key,
                    "data": base64.b64encode(r.data).decode("ascii"),
                    "meta": dict(r.meta),
                    "if_absent": r.if_absent,
                }
                for r in records
            ]
        }
        return self._write(
            "PUT",
            f"/v1/sessions/{_sid(session_id)}/records",
            _model(PutRecordsResult),
            session_id=session_id,
            body=body,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def get_record(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        namespace: str,
        key: str,
        admin: bool = False,
    ) -> _Flow[Record | None]:
        """See :meth:`SessionManager.get_record` (``GET .../records/one``; its 404
        naming the record is None here)."""
        try:
            return (
                yield from self._read(
                    f"/v1/sessions/{_sid(session_id)}/records/one",
                    _record,
                    session_id=session_id,
                    namespace=namespace,
                    key=key,
                )
            )
        except RecordNotFound:
            return None

    def list_records(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        namespace: str | None = None,
        prefix: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        descending: bool = False,
        admin: bool = False,
    ) -> _Flow[list[Record]]:
        """See :meth:`SessionManager.list_records` (``GET .../records``)."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/records",
            lambda r: [_record_of(item) for item in r.json()["items"]],
            session_id=session_id,
            namespace=namespace,
            prefix=prefix,
            after=after,
            before=before,
            limit=limit,
            order="desc" if descending else "asc",
        )

    def delete_records(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        namespace: str | None = None,
        prefix: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[DeleteRecordsResult]:
        """See :meth:`SessionManager.delete_records` (``DELETE .../records``). It
        carries an ``Idempotency-Key`` too (a uuid4 unless given), so a retried delete
        answers the first result."""
        params = {k: v for k, v in (("namespace", namespace), ("prefix", prefix)) if v is not None}
        return self._write(
            "DELETE",
            f"/v1/sessions/{_sid(session_id)}/records",
            _model(DeleteRecordsResult),
            session_id=session_id,
            params=params,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            keyed=True,
        )


def _record_of(item: dict[str, Any]) -> Record:
    """A record from its JSON answer (``data`` in base64)."""
    return Record.model_validate({**item, "data": base64.b64decode(item["data"], validate=True)})


def _record(r: httpx.Response) -> Record:
    return _record_of(r.json())


class _ContextRequests(_Exchange):
    """Context assembly and compaction over HTTP (the default tokenizer only)."""

    def build_context(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        budget_tokens: int,
        tokenizer: Tokenizer | None = None,
        admin: bool = False,
    ) -> _Flow[Context]:
        """See :meth:`SessionManager.build_context` (``GET .../context``). Over HTTP the
        default tokenizer counts: a ``tokenizer`` of another name is a ValidationError."""
        _default_tokenizer_only(tokenizer)
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/context",
            _model(Context),
            session_id=session_id,
            budget_tokens=budget_tokens,
        )

    def add_summary(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        text: str,
        from_seq: int,
        to_seq: int,
        author: str | None = None,
        model: str | None = None,
        summary_tokens: int | None = None,
        replaced_tokens: int | None = None,
        tokenizer: Tokenizer | None = None,
        supersedes: int | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> _Flow[Summary]:
        """See :meth:`SessionManager.add_summary` (``POST .../summaries``; the default
        tokenizer only, as for :meth:`build_context`)."""
        _default_tokenizer_only(tokenizer)
        body = {"text": text, "from_seq": from_seq, "to_seq": to_seq, "author": author,
                "model": model, "summary_tokens": summary_tokens,
                "replaced_tokens": replaced_tokens, "supersedes": supersedes}  # fmt: skip
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/summaries",
            _model(Summary),
            session_id=session_id,
            body={k: v for k, v in body.items() if v is not None},
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    def list_summaries(
        self,
        *,
        session_id: str,
        user_id: str | None = None,
        after: int | None = None,
        limit: int | None = None,
        admin: bool = False,
    ) -> _Flow[list[Summary]]:
        """See :meth:`SessionManager.list_summaries` (``GET .../summaries``)."""
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/summaries",
            lambda r: [Summary.model_validate(item) for item in r.json()["items"]],
            session_id=session_id,
            after=after,
            limit=limit,
        )


def _default_tokenizer_only(tokenizer: Tokenizer | None) -> None:
    if tokenizer is not None and getattr(tokenizer, "name", None) != DEFAULT_TOKENIZER.name:
        raise ValidationError(
            f"over HTTP only the default tokenizer ({DEFAULT_TOKENIZER.name}) counts",
            field="tokenizer",
        )


class _Requests(
    _SessionRequests,
    _HistoryRequests,
    _RecordRequests,
    _SessionRecordRequests,
    _SharedRequests,
    _ContextRequests,
):
    """The SessionManager methods as flows over HTTP; the clients expose each one
    (see :func:`_sync` and :func:`_async`) under the same name and docstring."""


# ---------------------------------------------------------------- the clients


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
    build: Callable[Concatenate[_Requests, P], _Flow[T]],
) -> Callable[Concatenate[SessionClient, P], T]:
    """``build`` as a :class:`SessionClient` method: runs the flow, returns its result."""

    def method(self: SessionClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(build(self._requests, *args, **kwargs))

    _present(method, build, "SessionClient")
    return method


def _async(
    build: Callable[Concatenate[_Requests, P], _Flow[T]],
) -> Callable[Concatenate[AsyncSessionClient, P], Coroutine[Any, Any, T]]:
    """``build`` as an :class:`AsyncSessionClient` coroutine method."""

    async def method(self: AsyncSessionClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(build(self._requests, *args, **kwargs))

    _present(method, build, "AsyncSessionClient")
    return method


def _http_options(base_url: str, api_key: str, timeout: float) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "headers": {"Authorization": f"Bearer {api_key}"},
        "timeout": timeout,
    }


class SessionClient:
    """Synchronous client (see the module docstring).

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000"``.
        api_key: a token from ``agentsession keys create``.
        timeout: seconds per request attempt.
        max_retries: retries after the first attempt (connection errors, timeouts, 5xx).
        backoff, max_backoff: first and largest delay between attempts, in seconds.
        transport: an httpx transport (tests: ``httpx.ASGITransport`` or a fault injector).

    Raises (from every method): the typed errors of :mod:`agentsession.errors`, plus
    :class:`~agentsession.protocol.Unauthenticated` (401) and
    ``httpx.TransportError`` once retries are used up.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._requests = _Requests(_Retry(max_retries, backoff, max_backoff))
        self._http = httpx.Client(**_http_options(base_url, api_key, timeout), transport=transport)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> SessionClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, flow: _Flow[T]) -> T:
        steps = _Stepper(flow)
        for step in steps:
            if isinstance(step, _Sleep):
                time.sleep(step.seconds)
                continue
            try:
                steps.reply = self._http.send(step.request(self._http))
            except httpx.TransportError as exc:
                steps.error = exc
        return steps.result

    create_session = _sync(_Requests.create_session)
    get_session = _sync(_Requests.get_session)
    get_session_by_key = _sync(_Requests.get_session_by_key)
    open_session = _sync(_Requests.open_session)
    fork_session = _sync(_Requests.fork_session)
    list_sessions = _sync(_Requests.list_sessions)
    update_session = _sync(_Requests.update_session)
    close_session = _sync(_Requests.close_session)
    expire_session = _sync(_Requests.expire_session)
    restore_session = _sync(_Requests.restore_session)
    delete_session = _sync(_Requests.delete_session)
    delete_user_data = _sync(_Requests.delete_user_data)
    whoami = _sync(_Requests.whoami)
    append_message = _sync(_Requests.append_message)
    append_messages = _sync(_Requests.append_messages)
    get_messages = _sync(_Requests.get_messages)
    replace_messages = _sync(_Requests.replace_messages)
    truncate_messages = _sync(_Requests.truncate_messages)
    rewind_session = _sync(_Requests.rewind_session)
    list_rewinds = _sync(_Requests.list_rewinds)
    get_rewound_messages = _sync(_Requests.get_rewound_messages)
    pop_message = _sync(_Requests.pop_message)
    put_records = _sync(_Requests.put_records)
    get_record = _sync(_Requests.get_record)
    list_records = _sync(_Requests.list_records)
    delete_records = _sync(_Requests.delete_records)
    build_context = _sync(_Requests.build_context)
    add_summary = _sync(_Requests.add_summary)
    list_summaries = _sync(_Requests.list_summaries)
    get_working_memory = _sync(_Requests.get_working_memory)
    update_working_memory = _sync(_Requests.update_working_memory)
    modify_working_memory = _sync(_Requests.modify_working_memory)
    get_shared_memory = _sync(_Requests.get_shared_memory)
    update_shared_memory = _sync(_Requests.update_shared_memory)
    delete_shared_memory = _sync(_Requests.delete_shared_memory)
    record_tool_call = _sync(_Requests.record_tool_call)
    get_tool_history = _sync(_Requests.get_tool_history)
    find_tool_call = _sync(_Requests.find_tool_call)
    start_run = _sync(_Requests.start_run)
    heartbeat_run = _sync(_Requests.heartbeat_run)
    add_run_step = _sync(_Requests.add_run_step)
    finish_run = _sync(_Requests.finish_run)
    get_run = _sync(_Requests.get_run)
    list_runs = _sync(_Requests.list_runs)
    list_run_steps = _sync(_Requests.list_run_steps)
    get_audit_log = _sync(_Requests.get_audit_log)


class AsyncSessionClient:
    """Asyncio client: :class:`SessionClient`'s methods, each a coroutine.

    Args: as :class:`SessionClient` (``transport`` is an ``httpx.AsyncBaseTransport``).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._requests = _Requests(_Retry(max_retries, backoff, max_backoff))
        self._http = httpx.AsyncClient(
            **_http_options(base_url, api_key, timeout), transport=transport
        )

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSessionClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _run(self, flow: _Flow[T]) -> T:
        steps = _Stepper(flow)
        for step in steps:
            if isinstance(step, _Sleep):
                await asyncio.sleep(step.seconds)
                continue
            try:
                steps.reply = await self._http.send(step.request(self._http))
            except httpx.TransportError as exc:
                steps.error = exc
        return steps.result

    create_session = _async(_Requests.create_session)
    get_session = _async(_Requests.get_session)
    get_session_by_key = _async(_Requests.get_session_by_key)
    open_session = _async(_Requests.open_session)
    fork_session = _async(_Requests.fork_session)
    list_sessions = _async(_Requests.list_sessions)
    update_session = _async(_Requests.update_session)
    close_session = _async(_Requests.close_session)
    expire_session = _async(_Requests.expire_session)
    restore_session = _async(_Requests.restore_session)
    delete_session = _async(_Requests.delete_session)
    delete_user_data = _async(_Requests.delete_user_data)
    whoami = _async(_Requests.whoami)
    append_message = _async(_Requests.append_message)
    append_messages = _async(_Requests.append_messages)
    get_messages = _async(_Requests.get_messages)
    replace_messages = _async(_Requests.replace_messages)
    truncate_messages = _async(_Requests.truncate_messages)
    rewind_session = _async(_Requests.rewind_session)
    list_rewinds = _async(_Requests.list_rewinds)
    get_rewound_messages = _async(_Requests.get_rewound_messages)
    pop_message = _async(_Requests.pop_message)
    put_records = _async(_Requests.put_records)
    get_record = _async(_Requests.get_record)
    list_records = _async(_Requests.list_records)
    delete_records = _async(_Requests.delete_records)
    build_context = _async(_Requests.build_context)
    add_summary = _async(_Requests.add_summary)
    list_summaries = _async(_Requests.list_summaries)
    get_working_memory = _async(_Requests.get_working_memory)
    update_working_memory = _async(_Requests.update_working_memory)
    modify_working_memory = _async(_Requests.modify_working_memory)
    get_shared_memory = _async(_Requests.get_shared_memory)
    update_shared_memory = _async(_Requests.update_shared_memory)
    delete_shared_memory = _async(_Requests.delete_shared_memory)
    record_tool_call = _async(_Requests.record_tool_call)
    get_tool_history = _async(_Requests.get_tool_history)
    find_tool_call = _async(_Requests.find_tool_call)
    start_run = _async(_Requests.start_run)
    heartbeat_run = _async(_Requests.heartbeat_run)
    add_run_step = _async(_Requests.add_run_step)
    finish_run = _async(_Requests.finish_run)
    get_run = _async(_Requests.get_run)
    list_runs = _async(_Requests.list_runs)
    list_run_steps = _async(_Requests.list_run_steps)
    get_audit_log = _async(_Requests.get_audit_log)
