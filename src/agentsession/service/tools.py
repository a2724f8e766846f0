"""Use cases on the tool history: record a call that ran, list, find an earlier call
(by tool and arguments, or by the provider's call id)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ..errors import ToolCallExists, ValidationError
from ..ids import check_id, new_id
from ..jsonvalues import canonical_hash, check_json
from ..models import Page, Session, ToolCall, ToolCallStatus
from ..principal import Principal
from ..stores.base import StoreTransaction
from .core import ServiceCore
from .paging import Listing, read_gapless
from .pipeline import Change, WriteRequest
from .transitions import running_run
from .validation import (
    check_cursor_seq,
    check_enum,
    check_object,
    check_text,
    check_time,
    check_tool_call_id,
    check_tool_name,
)

__all__ = ["ToolCallUseCases"]

_TOOL_CALL: TypeAdapter[ToolCall] = TypeAdapter(ToolCall)


class ToolCallUseCases(ServiceCore):
    """Tool-call use cases (part of :class:`SessionManager`)."""

    def record_tool_call(
        self,
        *,
        session_id: str,
        user_id: str,
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
    ) -> ToolCall:
        """Record a tool call that really ran (tool history).

        Args:
            user_id: the caller (the principal).
            tool: the tool's name (1-128 chars of ``A-Za-z0-9._:-``).
            arguments: a JSON object; result: any JSON value; error: text when failed.
            started_at, ended_at: aware datetimes; default: now for both.
            run_id: the run it belongs to (a RUNNING run of the session).
            call_id: our id of the call, unique in the session; generated (``call_...``)
                when None. A chosen one that is already recorded raises ToolCallExists.
            provider_call_id: the model provider's id of the call (its messages'
                ``tool_call_id``); providers reuse ids, so it may repeat.

        Returns:
            The stored call with ``seq``, ``duration_ms`` and ``arguments_hash``.

        Raises:
            ValidationError, PayloadTooLarge, UnsupportedValue, SessionNotFound, RunNotFound,
            SessionNotActive, RunNotRunning, ToolCallExists, VersionConflict, IdempotencyKeyReused.
        """
        check_tool_name(tool)
        args = check_object(arguments, "arguments")
        call_status = check_enum(ToolCallStatus, status, "status", optional=False)
        check_text(error, "error")
        size_doc = {"arguments": args, "result": result, "error": error}
        check_json(size_doc, field="tool_call", limit_bytes=self.limits.max_tool_call_bytes)
        started, ended = check_time(started_at, "started_at"), check_time(ended_at, "ended_at")
        _check_ids(run_id, call_id, provider_call_id)
        fields: dict[str, Any] = dict(
            provider_call_id=provider_call_id,
            run_id=run_id,
            tool=tool,
            arguments=args,
            arguments_hash=canonical_hash(args),
            result=result,
            status=call_status,
            error=error,
        )
        # Only when given: keys stored before the field existed keep their fingerprint.
        pid = () if provider_call_id is None else (provider_call_id,)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
            _check_references(tx, s, run_id, call_id)
            call = ToolCall(
                call_id=call_id or new_id("call"),
                session_id=s.session_id,
                seq=s.tool_call_count + 1,
                created_at=now,
                **fields,
                **_timing(started, ended, now),
            )
            tx.insert_tool_call(call)
            new = s.model_copy(update={"tool_call_count": s.tool_call_count + 1})
            return Change(new, "tool_call.recorded", _audit_details(call), call)

        request = WriteRequest(
            scope="record_tool_call",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_TOOL_CALL,
            request=(tool, args, result, call_status, error, started, ended, run_id, call_id, *pid),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def get_tool_history(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str | None = None,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[ToolCall]:
        """A page of tool calls, oldest first; optionally one tool's. ``user_id`` names
        the caller (the principal).

        Args:
            tool: only calls of this tool.
            after: start after this call seq (exclusive); None = from the first call.
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this listing (same session and
                ``tool``), or ``tool_calls_next_cursor`` of a restore (pages back to
                older calls; without ``tool``).

        Returns:
            A page; ``next_cursor`` is None when no more calls lie beyond it.

        Raises:
            SessionNotFound, ValidationError (also: a cursor with ``after``, or a cursor
            not of this listing).
        """
        if tool is not None:
            check_tool_name(tool)
        size = self._page_size(limit)
        listing = Listing("tool_calls", session_id, tool, older_ok=tool is None)
        start = listing.start(cursor, after=check_cursor_seq(after, "after"), newest_first=False)

        def read(tx: StoreTransaction, s: Session) -> Page[ToolCall]:
            def fetch(after_seq: int | None, n: int) -> list[ToolCall]:
                return tx.list_tool_calls(s.session_id, tool=tool, after_seq=after_seq, limit=n)

            return read_gapless(fetch, start, size, s.tool_call_count, listing)

        return self._reads.read(session_id, Principal(user_id, admin), read)

    def find_tool_call(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        provider_call_id: str | None = None,
        admin: bool = False,
    ) -> ToolCall | None:
        """Find an earlier recorded call, or None; ``user_id`` names the caller.

        Two lookups, each served by an index:

        * ``tool`` (and ``arguments``, key order ignored): the newest call of ``tool``
          with equal arguments; lets an engine see a call already ran instead of
          repeating it;
        * ``provider_call_id``: the newest call with that provider id (providers reuse
          ids within a conversation; older ones stay in the tool history).

        Raises:
            ValidationError: both or neither of ``tool`` and ``provider_call_id``,
                ``arguments`` with ``provider_call_id``, or a malformed value.
            SessionNotFound.
        """
        principal = Principal(user_id, admin)
        if provider_call_id is not None:
            if tool is not None or arguments is not None:
                raise ValidationError(
                    "find by provider_call_id, or by tool and arguments, not both",
                    field="provider_call_id",
                )
            check_tool_call_id(provider_call_id, "provider_call_id")
            return self._reads.read(
                session_id,
                principal,
                lambda tx, s: tx.find_tool_call_by_provider_id(s.session_id, provider_call_id),
            )
        if tool is None:
            raise ValidationError("pass tool (and arguments) or provider_call_id", field="tool")
        check_tool_name(tool)
        args = check_object(arguments, "arguments")
        digest = canonical_hash(args)
        return self._reads.read(
            session_id,
            principal,
            lambda tx, s: tx.find_tool_call(s.session_id, tool=tool, arguments_hash=digest),
        )


def _check_references(
    tx: StoreTransaction, s: Session, run_id: str | None, call_id: str | None
) -> None:
    """A tool call's run must be a RUNNING run of the session; a caller-chosen
    ``call_id`` must be new.

    Raises:
        RunNotFound, RunNotRunning, ToolCallExists.
    """
    if run_id is not None:
        running_run(tx, s, run_id)
    if call_id is not None and tx.get_tool_call(s.session_id, call_id) is not None:
        raise ToolCallExists(session_id=s.session_id, call_id=call_id)


def _audit_details(call: ToolCall) -> dict[str, Any]:
    """What the audit event of a recorded call says (never arguments or results)."""
    details = {"tool": call.tool, "call_id": call.call_id, "status": call.status.value}
    if call.provider_call_id is not None:
        details["provider_call_id"] = call.provider_call_id
    return details


def _timing(started: datetime | None, ended: datetime | None, now: datetime) -> dict[str, Any]:
    """``started_at``, ``ended_at`` and ``duration_ms`` of a call: the end defaults to
    now, the start to the end.

    Raises:
        ValidationError: the start is after the end.
    """
    end = ended or now
    start = started or end
    if start > end:
        raise ValidationError("started_at is after ended_at", field="started_at")
    duration_ms = (end - start).total_seconds() * 1000.0
    return {"started_at": start, "ended_at": end, "duration_ms": duration_ms}


def _check_ids(run_id: str | None, call_id: str | None, provider_call_id: str | None) -> None:
    """The shapes of a tool call's optional ``run_id``, ``call_id`` and ``provider_call_id``.

    Raises:
        ValidationError: a malformed id.
    """
    if call_id is not None:
        check_tool_call_id(call_id)
    if provider_call_id is not None:
        check_tool_call_id(provider_call_id, "provider_call_id")
    if run_id is not None:
        check_id(run_id, field="run_id", prefix="run")
