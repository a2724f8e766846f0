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

Design (sans-I/O): each method is written once, as a *flow*: a generator that yields
the I/O it needs (one HTTP request, or a sleep) and returns the method's result (the
machinery: :mod:`agentsession.clientcore`). The flows of the plain operations are
generated from the table of operations (:mod:`agentsession.clientgen`); the others
are written here, in :class:`_Requests`, each row's ``client_by_hand`` saying why. The
retry loop and the 412 re-read loop are flows too. The two clients only run flows:
``SessionClient`` with ``httpx.Client`` and ``time.sleep``, ``AsyncSessionClient`` with
``httpx.AsyncClient`` and ``asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from .clientcore import (
    JSON_PATCH,
    MERGE_PATCH,
    _Call,
    _Exchange,
    _Flow,
    _memory_write,
    _model,
    _ops_member,
    _opt_dict,
    _Retry,
    _shared_member,
    _shared_path,
    _sid,
    _Sleep,
    _Stepper,
    _target,
)
from .clientgen import PlainRequests
from .errors import AgentSessionError, RecordNotFound, ValidationError, VersionConflict
from .models import (
    Context,
    Message,
    PutRecordsResult,
    Record,
    RecordWrite,
    Run,
    Scope,
    Session,
    SharedMemory,
    Summary,
    ToolCall,
    WorkingMemory,
)
from .protocol import format_document_etag
from .tokens import DEFAULT_TOKENIZER, Tokenizer

__all__ = ["AsyncSessionClient", "SessionClient"]

T = TypeVar("T")
P = ParamSpec("P")

_MESSAGES = TypeAdapter(list[Message])


class _SessionRequests(_Exchange):
    """Session, lifecycle and user requests."""

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

    def delete_user_data(
        self, *, user_id: str | None = None, target_user_id: str | None = None, admin: bool = False
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


class _HistoryRequests(PlainRequests):
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
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> _Flow[WorkingMemory]:
        """See :meth:`SessionManager.update_working_memory` (PUT ``data``, PATCH
        ``patch`` as a merge patch, PATCH ``ops`` as ``application/json-patch+json``;
        with ``shared_memory_ops``, one POST carrying both)."""
        if sum(arg is not None for arg in (data, patch, ops)) != 1:
            raise ValueError("pass exactly one of data, patch and ops")
        body: Any
        method, content_type = "PATCH", "application/json"
        if shared_memory_ops is not None:  # only the POST form carries them
            body, method = _memory_write(data, patch, ops), "POST"
            body.update(_shared_member(shared_memory_ops))
        elif data is not None:
            body, method = dict(data), "PUT"
        elif patch is not None:
            body, content_type = dict(patch), MERGE_PATCH
        else:
            body, content_type = [dict(op) for op in ops or ()], JSON_PATCH
        return self._write(
            method,
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
        fail and retry, never get lost. ``fn`` may run more than once. Any write to the
        session (an append too) bumps that version, so a busy session needs more
        attempts: between them the client waits :meth:`VersionConflict.retry_delay`
        (exponential from 5 ms to 0.5 s, jittered).

        Args:
            max_attempts: how many read-modify-write attempts, at least 1.

        Returns:
            The working memory as written.

        Raises:
            VersionConflict: still conflicting after ``max_attempts`` (its ``attempts``
                says how many, and its message).
            ValidationError: ``max_attempts`` is not an integer >= 1.
            AgentSessionError: the server's answer carried no ``session_version``.
        """
        if type(max_attempts) is not int or max_attempts < 1:
            raise ValidationError("max_attempts must be an integer >= 1", field="max_attempts")
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
            except VersionConflict as exc:
                if attempt == max_attempts:
                    raise exc.gave_up(attempt) from exc
                yield _Sleep(VersionConflict.retry_delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover


class _RecordRequests(_Exchange):
    """Tool-call, run and audit requests."""

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


class _SharedRequests(_Exchange):
    """Shared-memory requests."""

    def get_shared_memory(
        self,
        *,
        scope: Scope,
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
        scope: Scope,
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
        scope: Scope,
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
        body = {
            "text": text,
            "from_seq": from_seq,
            "to_seq": to_seq,
            "author": author,
            "model": model,
            "summary_tokens": summary_tokens,
            "replaced_tokens": replaced_tokens,
            "supersedes": supersedes,
        }
        return self._write(
            "POST",
            f"/v1/sessions/{_sid(session_id)}/summaries",
            _model(Summary),
            session_id=session_id,
            body={k: v for k, v in body.items() if v is not None},
            expected_version=expected_version,
            idempotency_key=idempotency_key,
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
