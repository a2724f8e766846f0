"""The client flows written by hand: the operations of
:data:`agentsession.operations.OPERATIONS` whose ``client_by_hand`` says why their
client method is more than one request mapped from its arguments (the others are
generated into :mod:`agentsession.clientgen`, which combines both into the flows the
clients run). Private to the client modules.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from .clientcore import (
    JSON_PATCH,
    MERGE_PATCH,
    _Exchange,
    _Flow,
    _member,
    _members,
    _memory_write,
    _model,
    _ops_member,
    _opt_dict,
    _shared_member,
    _sid,
    _Sleep,
)
from .errors import AgentSessionError, RecordNotFound, ValidationError, VersionConflict
from .models import (
    Context,
    Message,
    PutRecordsResult,
    Record,
    RecordWrite,
    Scope,
    Session,
    SharedMemory,
    Summary,
    WorkingMemory,
)
from .tokens import DEFAULT_TOKENIZER, Tokenizer

__all__ = ["HandRequests"]


class _SessionRequests(_Exchange):
    """Open-or-create, a user's erasure and a shared-memory patch."""

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
            f"/v1/users/{_sid(target)}/data",
            _member("deleted_sessions", int),
            session_id=None,
        )

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
            f"/v1/shared-memory/{_sid(scope)}/{_sid(agent)}",
            _model(SharedMemory),
            session_id=None,
            body=[dict(op) for op in ops],
            idempotency_key=idempotency_key,
            content_type=JSON_PATCH,
            params=_members(user_id=target_user_id),
        )


class _HistoryRequests(_Exchange):
    """Message and working-memory requests."""

    #: The generated read of the working memory (:mod:`agentsession.clientgen`), which
    #: the 412 loop of :meth:`modify_working_memory` calls.
    get_working_memory: Callable[..., _Flow[WorkingMemory]]

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
        explain: bool = False,
        admin: bool = False,
    ) -> _Flow[Context]:
        """See :meth:`SessionManager.build_context` (``GET .../context``, with
        ``explain=true`` when ``explain``). Over HTTP the default tokenizer counts: a
        ``tokenizer`` of another name is a ValidationError."""
        _default_tokenizer_only(tokenizer)
        return self._read(
            f"/v1/sessions/{_sid(session_id)}/context",
            _model(Context),
            session_id=session_id,
            budget_tokens=budget_tokens,
            explain="true" if explain else None,
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


class HandRequests(_SessionRequests, _HistoryRequests, _SessionRecordRequests, _ContextRequests):
    """The client flows written by hand."""
