"""SessionManager: the one place where every rule of DESIGN.md lives.

Callers (the agent engine, the CLI, the HTTP service) never touch a store. Each
mutation here runs as one store transaction that does, in order:

1. lookup and ownership, locking the session row: another user's session is reported
   exactly like a missing one;
2. idempotency: a retried key with the same request returns the first result and
   writes nothing; with a different request it raises IdempotencyKeyReused;
3. lazy TTL expiry: an ACTIVE session idle past its TTL is marked EXPIRED first;
4. status: writes need ACTIVE;
5. optimistic locking: a stale ``expected_version`` raises VersionConflict;
6. the change itself, ``version + 1``, ``updated_at``, one audit event, and the
   idempotency record, all committed together or not at all.

Every method takes keyword arguments only and names its principal with ``user_id``;
``admin=True`` lets a trusted caller act on any user's sessions.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pydantic
from pydantic import TypeAdapter

from .errors import (
    AgentSessionError,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    RunAlreadyRunning,
    RunNotFound,
    RunNotRunning,
    SessionNotActive,
    SessionNotFound,
    StoreBusy,
    ToolCallExists,
    ValidationError,
    VersionConflict,
)
from .ids import check_id, check_name, new_id
from .jsonvalues import canonical_hash, check_json, dumps
from .mergepatch import merge_patch
from .models import (
    AuditEvent,
    Message,
    Page,
    RestoredSession,
    Role,
    Run,
    RunStatus,
    RunStep,
    Session,
    SessionStatus,
    ToolCall,
    ToolCallStatus,
    WorkingMemory,
)
from .policy import Limits, Policy
from .stores.base import IdempotencyRecord, SessionStore, StoreTransaction
from .validation import (
    check_cursor_seq,
    check_enum,
    check_expected_version,
    check_key,
    check_limit,
    check_memory,
    check_message,
    check_metadata,
    check_object,
    check_patch,
    check_reason,
    check_text,
    check_time,
    check_title,
    check_tool_call_id,
    check_tool_name,
    check_ttl,
    check_usage,
    decode_cursor,
    encode_cursor,
)

__all__ = ["SessionManager", "SweepResult", "request_id_context"]

T = TypeVar("T")

_request_id: ContextVar[str | None] = ContextVar("agentsession_request_id", default=None)

_SYSTEM_ACTOR = "system"
_FINISH_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


@contextmanager
def request_id_context(request_id: str | None) -> Iterator[None]:
    """Tag every audit event written inside the block with ``request_id``.

    The HTTP service sets it per request; it follows ``asyncio.to_thread`` calls.
    """
    token = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(token)


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What one :meth:`SessionManager.sweep_expired` pass did.

    Attributes:
        expired_session_ids: sessions moved from ACTIVE to EXPIRED.
        purged_idempotency_keys: idempotency records past their retention, deleted.
    """

    expired_session_ids: list[str]
    purged_idempotency_keys: int


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Marks an optional argument the caller did not pass (distinct from an explicit None).
UNSET: Any = _Unset()


@dataclass(slots=True)
class _Change:
    """What a mutation wants stored besides its own rows."""

    session: Session
    action: str
    details: dict[str, Any]
    result: Any


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SessionManager:
    """Creates, continues, closes, restores, expires and deletes agent sessions.

    Args:
        store: the storage adapter (``MemoryStore``, ``SQLStore``...). The manager
            closes it in :meth:`close` only if it opened it (see :meth:`from_url`).
        clock: returns the current time as an aware UTC datetime; tests pass a frozen one.
        limits: payload size limits (bytes).
        policy: lifecycle and retry policy.

    Thread-safe: any number of threads may share one manager.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        clock: Callable[[], datetime] | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
    ) -> None:
        self._store = store
        self._clock = clock or _utcnow
        self.limits = limits or Limits()
        self.policy = policy or Policy()
        self._owns_store = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        auto_migrate: bool = False,
        clock: Callable[[], datetime] | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
        **store_options: Any,
    ) -> SessionManager:
        """Open the store named by ``url`` and return a manager that owns it.

        Args:
            url: ``memory://``, ``sqlite:///path/to/file.db``,
                ``postgresql+psycopg://...``, ``mysql+pymysql://...``, ``redis://...``.
            auto_migrate: bring an SQL schema to the current revision at start; if False
                an out-of-date schema raises SchemaOutOfDate.
            store_options: passed to the store (e.g. ``sqlite_synchronous="NORMAL"``,
                or ``require_durable=False`` for Redis).

        Raises:
            ValidationError: unknown URL scheme. SchemaOutOfDate, StoreError: see above.
        """
        from .stores.registry import open_store

        manager = cls(
            open_store(url, auto_migrate=auto_migrate, **store_options),
            clock=clock,
            limits=limits,
            policy=policy,
        )
        manager._owns_store = True
        return manager

    @property
    def store(self) -> SessionStore:
        """The storage adapter this manager writes through."""
        return self._store

    def close(self) -> None:
        """Close the store if this manager opened it (:meth:`from_url`)."""
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> SessionManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ================================================================== sessions

    def create_session(
        self,
        *,
        user_id: str,
        agent: str = "default",
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: float | None = None,
        working_memory: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """Create an ACTIVE session owned by ``user_id``.

        Args:
            user_id: the owner (1-128 chars of ``A-Za-z0-9._:@+-``).
            agent: which agent the session belongs to, e.g. ``"coding"``.
            title: free text, at most ``limits.max_title_chars`` characters.
            metadata: a JSON object of at most ``limits.max_metadata_bytes``.
            ttl_seconds: idle timeout in seconds (None = never expires).
            working_memory: the initial working-memory document, if any.
            idempotency_key: makes a retried create return the same session.

        Returns:
            The new session at version 1 (2 if ``working_memory`` was given).

        Raises:
            ValidationError, IdempotencyKeyReused.
        """
        check_name(user_id, field="user_id")
        check_name(agent, field="agent")
        title = check_title(title, self.limits)
        meta = check_metadata(metadata, "metadata", self.limits)
        ttl = check_ttl(ttl_seconds)
        memory = None
        if working_memory is not None:
            memory = check_memory(working_memory, self.limits)
        key = check_key(idempotency_key)
        fingerprint = self._fingerprint(
            "create_session", None, agent, title, meta, ttl, memory
        )

        def body(tx: StoreTransaction) -> Any:
            replay = self._replay(tx, user_id, "create_session", key, fingerprint)
            if replay is not None:
                return _SESSION.validate_python(replay)
            now = self._now()
            session = Session(
                session_id=new_id("ses"),
                user_id=user_id,
                agent=agent,
                title=title,
                metadata=meta,
                version=1,
                created_at=now,
                updated_at=now,
                last_active_at=now,
                ttl_seconds=ttl,
                expires_at=_expiry(now, ttl),
            )
            tx.insert_session(session)
            self._audit(tx, session, user_id, "session.created", None, 1, {"agent": agent}, now)
            if memory is not None:
                before = session.version
                session = session.model_copy(update={"version": before + 1})
                tx.put_working_memory(
                    WorkingMemory(
                        session_id=session.session_id, version=2, updated_at=now, data=memory
                    )
                )
                tx.update_session(session, expected_version=before)
                details = {"mode": "replace"}
                self._audit(tx, session, user_id, "memory.updated", before, 2, details, now)
            self._remember(tx, user_id, "create_session", key, fingerprint, session, session)
            return session

        return self._transact(body, write=True)

    def get_session(self, *, session_id: str, user_id: str, admin: bool = False) -> Session:
        """Return the session.

        Raises:
            SessionNotFound: missing, deleted, or not the caller's (unless ``admin``).
            ValidationError: a malformed ``session_id``.
        """
        return self._read(session_id, user_id, admin, lambda tx, s: s)

    def list_sessions(
        self,
        *,
        user_id: str,
        status: SessionStatus | str | None = None,
        agent: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        all_users: bool = False,
        admin: bool = False,
    ) -> Page[Session]:
        """List the caller's sessions, most recently updated first.

        Order: ``updated_at`` descending, then ``session_id`` descending (a unique
        tie-breaker, so pages never repeat or skip a session that did not change).

        Args:
            status, agent: filters; None = any.
            limit: page size, 0..``limits.max_page_size``.
            cursor: ``next_cursor`` of the previous page.
            all_users: list every user's sessions; needs ``admin=True``.

        Returns:
            A page; ``next_cursor`` is None on the last page.

        Raises:
            ValidationError: bad limit, status or cursor.
            Forbidden: ``all_users`` without admin.
        """
        check_name(user_id, field="user_id")
        if all_users and not admin:
            raise Forbidden("listing every user's sessions needs admin=True")
        wanted_status = check_enum(SessionStatus, status, "status")
        if agent is not None:
            check_name(agent, field="agent")
        size = check_limit(limit, "limit", allow_none=False, maximum=self.limits.max_page_size)
        after = decode_cursor(cursor)
        rows: list[Session] = self._transact(
            lambda tx: tx.list_sessions(
                user_id=None if all_users else user_id,
                status=wanted_status,
                agent=agent,
                after=after,
                limit=size + 1,
            ),
            write=False,
        )
        more = len(rows) > size
        rows = rows[:size]
        next_cursor = encode_cursor(rows[-1]) if more and rows else None
        now = self._now()
        if any(_due(r, now) for r in rows):
            # Lazy expiry on access: the listed sessions idle past their TTL expire now.
            for r in rows:
                if _due(r, now):
                    self._expire_if_due(r.session_id)
            fresh = self._transact(
                lambda tx: [tx.get_session(r.session_id) for r in rows], write=False
            )
            rows = [
                r for r in fresh if r is not None and wanted_status in (None, r.status)
            ]
        return Page[Session](items=rows, next_cursor=next_cursor)

    def update_session(
        self,
        *,
        session_id: str,
        user_id: str,
        title: str | None = UNSET,
        metadata: Mapping[str, Any] = UNSET,
        ttl_seconds: float | None = UNSET,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Session:
        """Change a session's title, metadata (replaced whole) or TTL; needs ACTIVE.

        Arguments left out stay as they are; ``title=None`` / ``ttl_seconds=None`` clear.

        Raises:
            SessionNotFound, SessionNotActive, VersionConflict, ValidationError,
            IdempotencyKeyReused.
        """
        update: dict[str, Any] = {}
        if title is not UNSET:
            update["title"] = check_title(title, self.limits)
        if metadata is not UNSET:
            update["metadata"] = check_metadata(metadata, "metadata", self.limits)
        if ttl_seconds is not UNSET:
            update["ttl_seconds"] = check_ttl(ttl_seconds)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change:
            new = s.model_copy(update=update)
            if "ttl_seconds" in update:
                new = new.model_copy(
                    update={"expires_at": _expiry(s.last_active_at, new.ttl_seconds)}
                )
            return _Change(new, "session.updated", {"fields": sorted(update)}, None)

        return self._write(
            "update_session",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (sorted(update.items()),),
            change,
            _SESSION,
            result_is_session=True,
        )

    # ================================================================== messages

    def append_message(
        self,
        *,
        session_id: str,
        user_id: str,
        message: Mapping[str, Any],
        working_memory_patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Message:
        """Append one message; see :meth:`append_messages` for every rule.

        Returns:
            The stored message with its ``message_id``, ``seq`` and ``created_at``.
        """
        return self.append_messages(
            session_id=session_id,
            user_id=user_id,
            messages=[message],
            working_memory_patch=working_memory_patch,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            admin=admin,
        )[0]

    def append_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        messages: Sequence[Mapping[str, Any]],
        working_memory_patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> list[Message]:
        """Append messages atomically: all get consecutive seqs, or none is stored.

        Each message is a mapping with ``role`` (``system|user|assistant|tool``) and
        optionally ``content`` (str, list of parts, or None), ``name``, ``tool_calls``,
        ``tool_call_id``, ``run_id`` (a run of this session), ``metadata``, and any
        further JSON fields, which are kept and returned unchanged. The whole batch is
        one version step. With ``working_memory_patch`` (RFC 7396) the working memory
        changes in the same transaction (one agent turn, C03).

        Returns:
            The stored messages in seq order.

        Raises:
            ValidationError / PayloadTooLarge / UnsupportedValue: a bad message, over
                ``limits.max_message_bytes``, or more than ``limits.max_batch_messages``.
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
        """
        if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
            raise ValidationError("messages must be a list of message objects", field="messages")
        if not messages:
            raise ValidationError("messages must not be empty", field="messages")
        if len(messages) > self.limits.max_batch_messages:
            raise ValidationError(
                f"at most {self.limits.max_batch_messages} messages per call",
                field="messages",
            )
        payloads = [check_message(m, f"messages[{i}]", self.limits) for i, m in enumerate(messages)]
        patch = None
        if working_memory_patch is not None:
            patch = check_patch(working_memory_patch, self.limits)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change:
            for run_id in {p["run_id"] for p in payloads if p.get("run_id") is not None}:
                if tx.get_run(s.session_id, run_id) is None:
                    raise RunNotFound(s.session_id, run_id)
            stored = [
                _MESSAGE.validate_python(
                    {
                        **payload,
                        "message_id": new_id("msg"),
                        "session_id": s.session_id,
                        "seq": s.message_count + 1 + i,
                        "created_at": now,
                    }
                )
                for i, payload in enumerate(payloads)
            ]
            tx.insert_messages(stored)
            new = s.model_copy(update={"message_count": s.message_count + len(stored)})
            details: dict[str, Any] = {
                "count": len(stored),
                "first_seq": stored[0].seq,
                "last_seq": stored[-1].seq,
            }
            if patch is not None:
                self._apply_memory(tx, s, now, patch=patch)
                details["memory"] = "merge"
            return _Change(new, "message.appended", details, stored)

        return self._write(
            "append_messages",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (payloads, patch),
            change,
            _MESSAGES,
            touch=True,
        )

    def get_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
        align_tool_calls: bool = True,
        admin: bool = False,
    ) -> list[Message]:
        """Read history, oldest first, in ``seq`` order (never by timestamp; C07).

        Without cursors, ``limit=k`` gives the newest k messages (C09); ``limit=None``
        gives all of them; ``limit=0`` an empty list. ``before=seq`` pages backwards
        (the newest k older than that seq), ``after=seq`` pages forwards (the oldest k
        newer than it). Both cursors are exclusive seqs, e.g. ``before=page[0].seq``.

        With ``align_tool_calls`` (the default) a window never starts with a tool result
        whose assistant tool call lies outside it, nor ends inside a group of parallel
        tool results (C27): it is widened to the whole group, so it may hold a few more
        than ``limit`` messages. Cursors taken from the returned messages still visit
        every message exactly once.

        Raises:
            ValidationError: negative or over-large limit, non-integer cursors, both
                cursors at once.
            SessionNotFound.
        """
        size = check_limit(limit, "limit", allow_none=True, maximum=None)
        before_seq = check_cursor_seq(before, "before")
        after_seq = check_cursor_seq(after, "after")
        if before_seq is not None and after_seq is not None:
            raise ValidationError("pass before or after, not both", field="before")

        def read(tx: StoreTransaction, s: Session) -> list[Message]:
            if size == 0:
                return []
            newest = after_seq is None
            rows = tx.get_messages(
                s.session_id,
                after_seq=after_seq,
                before_seq=before_seq,
                limit=size,
                newest=newest,
            )
            if align_tool_calls and rows and size is not None:
                rows = _align_window(tx, s.session_id, rows, s.message_count)
            return rows

        return self._read(session_id, user_id, admin, read)

    # ============================================================ working memory

    def get_working_memory(
        self, *, session_id: str, user_id: str, admin: bool = False
    ) -> WorkingMemory:
        """Return the working memory (an empty document at version 0 if never written).

        Raises:
            SessionNotFound, ValidationError.
        """
        return self._read(session_id, user_id, admin, _memory_of)

    def update_working_memory(
        self,
        *,
        session_id: str,
        user_id: str,
        data: Mapping[str, Any] | None = None,
        patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> WorkingMemory:
        """Replace the working memory (``data``) or merge-patch it (``patch``, RFC 7396).

        Exactly one of ``data`` and ``patch``. Standard keys are type-checked: ``goal``
        and ``next_action`` str or null, ``completed`` and ``errors`` lists, ``facts`` an
        object. The result is at most ``limits.max_working_memory_bytes``.

        Returns:
            The new working memory; its ``version`` is the session's new version.

        Raises:
            ValidationError, PayloadTooLarge, UnsupportedValue, SessionNotFound,
            SessionNotActive, VersionConflict, IdempotencyKeyReused.
        """
        if (data is None) == (patch is None):
            raise ValidationError("pass exactly one of data and patch", field="data")
        full = check_memory(data, self.limits) if data is not None else None
        merge = check_patch(patch, self.limits) if patch is not None else None

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change:
            memory = self._apply_memory(tx, s, now, data=full, patch=merge)
            mode = "replace" if full is not None else "merge"
            return _Change(s, "memory.updated", {"mode": mode}, memory)

        return self._write(
            "update_working_memory",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (full, merge),
            change,
            _MEMORY,
            touch=True,
        )

    def modify_working_memory(
        self,
        *,
        session_id: str,
        user_id: str,
        fn: Callable[[dict[str, Any]], Mapping[str, Any]],
        max_attempts: int = 10,
        admin: bool = False,
    ) -> WorkingMemory:
        """Read-modify-write with optimistic locking, retried on VersionConflict.

        ``fn`` receives a copy of the current document and returns the new one; it may
        run more than once, so it must not have side effects. The read version is sent
        as ``expected_version``, so no concurrent update is ever lost.

        Raises:
            VersionConflict: still conflicting after ``max_attempts`` tries.
            Everything :meth:`update_working_memory` raises.
        """
        if type(max_attempts) is not int or max_attempts < 1:
            raise ValidationError("max_attempts must be an integer >= 1", field="max_attempts")
        for attempt in range(1, max_attempts + 1):
            current = self.get_working_memory(
                session_id=session_id, user_id=user_id, admin=admin
            )
            try:
                return self.update_working_memory(
                    session_id=session_id,
                    user_id=user_id,
                    data=fn(dict(current.data)),
                    expected_version=current.session_version,
                    admin=admin,
                )
            except VersionConflict:
                if attempt == max_attempts:
                    raise
                time.sleep(random.uniform(0, 0.002 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # ================================================================ tool calls

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
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> ToolCall:
        """Record a tool call that really ran (tool history).

        Args:
            tool: the tool's name (1-128 chars of ``A-Za-z0-9._:-``).
            arguments: a JSON object; result: any JSON value; error: text when failed.
            started_at, ended_at: aware datetimes; default: now for both.
            run_id: the run it belongs to (must exist in the session).
            call_id: the model's tool-call id if it had one; generated otherwise.

        Returns:
            The stored call with ``seq``, ``duration_ms`` and ``arguments_hash``.

        Raises:
            ValidationError, PayloadTooLarge, UnsupportedValue, SessionNotFound,
            SessionNotActive, RunNotFound, VersionConflict, IdempotencyKeyReused.
        """
        check_tool_name(tool)
        args = check_object(arguments, "arguments")
        call_status = check_enum(ToolCallStatus, status, "status", optional=False)
        check_text(error, "error")
        size_doc = {"arguments": args, "result": result, "error": error}
        check_json(size_doc, field="tool_call", limit_bytes=self.limits.max_tool_call_bytes)
        started = check_time(started_at, "started_at")
        ended = check_time(ended_at, "ended_at")
        if call_id is not None:
            check_tool_call_id(call_id)
        if run_id is not None:
            check_id(run_id, field="run_id", prefix="run")

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change:
            if run_id is not None and tx.get_run(s.session_id, run_id) is None:
                raise RunNotFound(s.session_id, run_id)
            if call_id is not None and tx.get_tool_call(s.session_id, call_id) is not None:
                raise ToolCallExists(s.session_id, call_id)
            end = ended or now
            start = started or end
            if start > end:
                raise ValidationError("started_at is after ended_at", field="started_at")
            call = ToolCall(
                call_id=call_id or new_id("call"),
                session_id=s.session_id,
                seq=s.tool_call_count + 1,
                run_id=run_id,
                tool=tool,
                arguments=args,
                arguments_hash=canonical_hash(args),
                result=result,
                status=call_status,
                error=error,
                started_at=start,
                ended_at=end,
                duration_ms=(end - start).total_seconds() * 1000.0,
                created_at=now,
            )
            tx.insert_tool_call(call)
            new = s.model_copy(update={"tool_call_count": s.tool_call_count + 1})
            details = {"tool": tool, "call_id": call.call_id, "status": call_status.value}
            return _Change(new, "tool_call.recorded", details, call)

        return self._write(
            "record_tool_call",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (tool, args, result, call_status, error, started, ended, run_id, call_id),
            change,
            _TOOL_CALL,
            touch=True,
        )

    def get_tool_history(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str | None = None,
        after: int | None = None,
        limit: int | None = None,
        admin: bool = False,
    ) -> list[ToolCall]:
        """Tool calls, oldest first; optionally one tool's, after a seq, at most ``limit``.

        Raises:
            SessionNotFound, ValidationError.
        """
        if tool is not None:
            check_tool_name(tool)
        after_seq = check_cursor_seq(after, "after")
        size = check_limit(limit, "limit", allow_none=True, maximum=self.limits.max_page_size)
        return self._read(
            session_id,
            user_id,
            admin,
            lambda tx, s: tx.list_tool_calls(
                s.session_id, tool=tool, after_seq=after_seq, limit=size
            ),
        )

    def find_tool_call(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        admin: bool = False,
    ) -> ToolCall | None:
        """The newest recorded call of ``tool`` with equal ``arguments`` (key order
        ignored), or None; lets an engine see a call already ran instead of repeating it.

        Raises:
            SessionNotFound, ValidationError.
        """
        check_tool_name(tool)
        args = check_object(arguments, "arguments")
        digest = canonical_hash(args)
        return self._read(
            session_id,
            user_id,
            admin,
            lambda tx, s: tx.find_tool_call(s.session_id, tool=tool, arguments_hash=digest),
        )

    # ====================================================================== runs

    def start_run(
        self,
        *,
        session_id: str,
        user_id: str,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Run:
        """Start a run (one task) in RUNNING state.

        Args:
            input: the task, any JSON value (e.g. the user's request).
            metadata: a JSON object of at most ``limits.max_metadata_bytes``.

        Raises:
            RunAlreadyRunning: the session has a RUNNING run (at most one at a time).
            SessionNotFound, SessionNotActive, VersionConflict, ValidationError,
            IdempotencyKeyReused.
        """
        check_json(input, field="input", limit_bytes=self.limits.max_run_payload_bytes)
        meta = check_metadata(metadata, "metadata", self.limits)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change:
            running = tx.list_runs(s.session_id, status=RunStatus.RUNNING, limit=1)
            if running:
                raise RunAlreadyRunning(s.session_id, running[0].run_id)
            run = Run(
                run_id=new_id("run"),
                session_id=s.session_id,
                seq=s.run_count + 1,
                input=input,
                status=RunStatus.RUNNING,
                created_at=now,
                started_at=now,
                metadata=meta,
            )
            tx.insert_run(run)
            new = s.model_copy(update={"run_count": s.run_count + 1})
            return _Change(new, "run.started", {"run_id": run.run_id}, run)

        return self._write(
            "start_run",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (input, meta),
            change,
            _RUN,
            touch=True,
        )

    def add_run_step(
        self,
        *,
        session_id: str,
        user_id: str,
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
    ) -> RunStep:
        """Append a step to a RUNNING run; steps are numbered 0, 1, 2...

        Args:
            kind: what the step is, e.g. ``"model"``, ``"tool"``, ``"message"``.
            name: e.g. the tool's name. input/output: JSON values. status: free text
                such as ``"ok"`` or ``"error"``. started_at/ended_at: default now.

        Raises:
            RunNotFound, RunNotRunning, SessionNotFound, SessionNotActive,
            VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        check_id(run_id, field="run_id", prefix="run")
        check_name(kind, field="kind")
        check_name(status, field="status")
        # 120 characters: even fully escaped (PostgreSQL, see PlainText) it fits 255.
        check_text(name, "name", max_chars=120)
        check_text(error, "error")
        check_json(
            {"input": input, "output": output, "error": error, "name": name, "status": status},
            field="step",
            limit_bytes=self.limits.max_run_payload_bytes,
        )
        started = check_time(started_at, "started_at")
        ended = check_time(ended_at, "ended_at")

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change:
            run = self._running_run(tx, s, run_id)
            step = RunStep(
                run_id=run_id,
                index=len(run.steps),
                kind=kind,
                name=name,
                input=input,
                output=output,
                status=status,
                error=error,
                started_at=started or now,
                ended_at=ended or now,
            )
            tx.insert_run_step(s.session_id, step)
            details = {"run_id": run_id, "index": step.index, "kind": kind}
            return _Change(s, "run.step_added", details, step)

        return self._write(
            "add_run_step",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (run_id, kind, name, input, output, status, error, started, ended),
            change,
            _STEP,
            touch=True,
        )

    def finish_run(
        self,
        *,
        session_id: str,
        user_id: str,
        run_id: str,
        status: RunStatus | str,
        error: str | None = None,
        output: Any = None,
        usage: Mapping[str, int] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Run:
        """End a RUNNING run as SUCCEEDED, FAILED or CANCELLED.

        Args:
            error: what went wrong (FAILED). output: the run's result, any JSON.
            usage: token counts, e.g. ``{"input_tokens": 812, "output_tokens": 95}``.

        Raises:
            RunNotFound, RunNotRunning, SessionNotFound, SessionNotActive,
            VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        check_id(run_id, field="run_id", prefix="run")
        final = check_enum(RunStatus, status, "status", optional=False)
        check_text(error, "error")
        if final not in _FINISH_STATUSES:
            raise ValidationError(
                "status must be SUCCEEDED, FAILED or CANCELLED", field="status"
            )
        counts = check_usage(usage)
        check_json(
            {"output": output, "error": error},
            field="run",
            limit_bytes=self.limits.max_run_payload_bytes,
        )

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change:
            run = self._running_run(tx, s, run_id)
            done = run.model_copy(
                update={
                    "status": final,
                    "ended_at": now,
                    "error": error,
                    "output": output,
                    "usage": counts,
                }
            )
            tx.update_run(done)
            details = {"run_id": run_id, "status": final.value}
            return _Change(s, "run.finished", details, done)

        return self._write(
            "finish_run",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (run_id, final, error, output, counts),
            change,
            _RUN,
            touch=True,
        )

    def get_run(
        self, *, session_id: str, user_id: str, run_id: str, admin: bool = False
    ) -> Run:
        """Return one run with its steps.

        Raises:
            RunNotFound, SessionNotFound, ValidationError.
        """
        check_id(run_id, field="run_id", prefix="run")

        def read(tx: StoreTransaction, s: Session) -> Run:
            run = tx.get_run(s.session_id, run_id)
            if run is None:
                raise RunNotFound(s.session_id, run_id)
            return run

        return self._read(session_id, user_id, admin, read)

    def list_runs(
        self,
        *,
        session_id: str,
        user_id: str,
        status: RunStatus | str | None = None,
        after: int | None = None,
        limit: int | None = None,
        admin: bool = False,
    ) -> list[Run]:
        """Runs oldest first, with steps; optionally of one status, after a run seq.

        Raises:
            SessionNotFound, ValidationError.
        """
        wanted = check_enum(RunStatus, status, "status")
        after_seq = check_cursor_seq(after, "after")
        size = check_limit(limit, "limit", allow_none=True, maximum=self.limits.max_page_size)
        return self._read(
            session_id,
            user_id,
            admin,
            lambda tx, s: tx.list_runs(
                s.session_id, status=wanted, after_seq=after_seq, limit=size
            ),
        )

    # ================================================================= lifecycle

    def close_session(
        self,
        *,
        session_id: str,
        user_id: str,
        reason: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Session:
        """Close the session on purpose: history stays readable, restore re-opens it.

        Closing a CLOSED session changes nothing and returns it. A run still RUNNING is
        marked CANCELLED (no write can finish it once the session is closed).

        Raises:
            IllegalTransition: the session is EXPIRED.
            SessionNotFound, VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        text = check_reason(reason) or "closed"

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change | Session:
            if s.status == SessionStatus.CLOSED:
                return s
            if s.status != SessionStatus.ACTIVE:
                raise IllegalTransition(s.session_id, s.status.value, "close")
            stopped = _stop_running_runs(tx, s, now, RunStatus.CANCELLED, "session closed")
            new = s.model_copy(
                update={
                    "status": SessionStatus.CLOSED,
                    "status_reason": text,
                    "closed_at": now,
                    "expires_at": None,
                }
            )
            details = {"reason": text, "cancelled_runs": stopped}
            return _Change(new, "session.closed", details, None)

        return self._write(
            "close_session",
            session_id,
            user_id,
            admin,
            expected_version,
            idempotency_key,
            (text,),
            change,
            _SESSION,
            require_active=False,
            result_is_session=True,
        )

    def expire_session(
        self,
        *,
        session_id: str,
        user_id: str,
        reason: str | None = None,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> Session:
        """Expire the session now (policy ended it; not the same as closing).

        Expiring an EXPIRED session changes nothing. Runs still RUNNING become
        INTERRUPTED.

        Raises:
            IllegalTransition: the session is CLOSED.
            SessionNotFound, VersionConflict, ValidationError.
        """
        text = check_reason(reason) or "expired by request"

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change | Session:
            if s.status == SessionStatus.EXPIRED:
                return s
            if s.status != SessionStatus.ACTIVE:
                raise IllegalTransition(s.session_id, s.status.value, "expire")
            return self._expiry_change(tx, s, now, text)

        return self._write(
            "expire_session",
            session_id,
            user_id,
            admin,
            expected_version,
            None,
            (text,),
            change,
            _SESSION,
            require_active=False,
            result_is_session=True,
        )

    def restore_session(
        self,
        *,
        session_id: str,
        user_id: str,
        message_limit: int | None = None,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> RestoredSession:
        """Take over a session to continue it, and return all an engine needs.

        CLOSED is re-opened always; EXPIRED only within
        ``policy.expired_restore_window_seconds`` of expiring; ACTIVE stays ACTIVE.
        Restoring means the caller is now the session's worker, so a run still RUNNING
        was left by a dead process and is marked INTERRUPTED. When nothing changes, the
        version does not move.

        Args:
            message_limit: how many recent messages to return (default
                ``policy.restore_message_limit``), aligned to whole tool-call groups.

        Returns:
            Session, working memory, recent messages, full tool history, all runs,
            and the ids of runs this call interrupted.

        Raises:
            IllegalTransition: EXPIRED past the restore window.
            SessionNotFound, VersionConflict, ValidationError.
        """
        limit = check_limit(
            self.policy.restore_message_limit if message_limit is None else message_limit,
            "message_limit",
            allow_none=False,
            maximum=None,
        )
        interrupted: list[str] = []
        previous: list[SessionStatus] = []

        def change(tx: StoreTransaction, s: Session, now: datetime) -> _Change | Session:
            interrupted.clear()  # the store may re-run this transaction
            previous[:] = [s.status]
            if s.status == SessionStatus.EXPIRED:
                window = self.policy.expired_restore_window_seconds
                if window is not None and (
                    s.expired_at is None or now - s.expired_at >= timedelta(seconds=window)
                ):
                    raise IllegalTransition(
                        s.session_id,
                        s.status.value,
                        "restore",
                        f"it expired more than {window:g} s ago (policy)",
                    )
            interrupted.extend(
                _stop_running_runs(
                    tx, s, now, RunStatus.INTERRUPTED, "worker stopped while RUNNING"
                )
            )
            if s.status == SessionStatus.ACTIVE and not interrupted:
                return s
            new = s.model_copy(
                update={
                    "status": SessionStatus.ACTIVE,
                    "status_reason": None,
                    "closed_at": None,
                    "expired_at": None,
                    "last_active_at": now,
                    "expires_at": _expiry(now, s.ttl_seconds),
                }
            )
            details = {"from": s.status.value, "interrupted_runs": list(interrupted)}
            return _Change(new, "session.restored", details, None)

        session = self._write(
            "restore_session",
            session_id,
            user_id,
            admin,
            expected_version,
            None,
            (),
            change,
            _SESSION,
            require_active=False,
            result_is_session=True,
        )

        def read(tx: StoreTransaction, s: Session) -> RestoredSession:
            messages = tx.get_messages(s.session_id, limit=limit) if limit else []
            if messages:
                messages = _align_window(tx, s.session_id, messages, s.message_count)
            return RestoredSession(
                session=s,
                working_memory=_memory_of(tx, s),
                messages=messages,
                tool_calls=tx.list_tool_calls(s.session_id),
                runs=tx.list_runs(s.session_id),
                interrupted_run_ids=interrupted,
                previous_status=previous[0],
            )

        return self._read(session.session_id, user_id, admin, read)

    def sweep_expired(self, *, limit: int = 1000) -> SweepResult:
        """Expire every ACTIVE session idle past its TTL, and purge old idempotency keys.

        A system task (run it from cron or ``agentsession sweep``); sessions are also
        expired lazily whenever they are touched, so the sweep only bounds staleness.

        Args:
            limit: at most this many sessions per call.

        Returns:
            What was expired and purged.
        """
        size = check_limit(limit, "limit", allow_none=False, maximum=None)
        now = self._now()
        due = self._transact(lambda tx: tx.list_due_sessions(now=now, limit=size), write=False)
        expired = [sid for sid in due if self._expire_if_due(sid)]
        cutoff = self._now() - timedelta(seconds=self.policy.idempotency_retention_seconds)
        purged = self._transact(
            lambda tx: tx.purge_idempotency(created_before=cutoff), write=True
        )
        return SweepResult(expired_session_ids=expired, purged_idempotency_keys=purged)

    def delete_session(
        self,
        *,
        session_id: str,
        user_id: str,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> None:
        """Delete the session and everything in it, for good, in any status.

        Messages, working memory, tool calls, runs, idempotency records and audit
        events go; one content-free tombstone audit event (``session.deleted``) stays.
        Afterwards every call on the id raises SessionNotFound, including a second delete.

        Raises:
            SessionNotFound, VersionConflict, ValidationError.
        """
        check_expected_version(expected_version)

        def body(tx: StoreTransaction) -> None:
            s = self._load(tx, session_id, user_id, admin)
            _check_version(s, expected_version)
            self._delete(tx, s, actor=user_id)

        self._transact(body, write=True)

    def delete_user_data(
        self, *, user_id: str, target_user_id: str | None = None, admin: bool = False
    ) -> int:
        """Erase every session of a user (right to erasure), and their idempotency keys.

        Args:
            user_id: the caller. target_user_id: whose data to erase; defaults to the
                caller; another user's needs ``admin=True``.

        Returns:
            How many sessions were deleted.

        Raises:
            Forbidden: another user's data without admin.
        """
        check_name(user_id, field="user_id")
        target = user_id if target_user_id is None else target_user_id
        check_name(target, field="target_user_id")
        if target != user_id and not admin:
            raise Forbidden("erasing another user's data needs admin=True")

        def body(tx: StoreTransaction) -> int:
            ids = tx.list_user_session_ids(target)
            for sid in ids:
                s = tx.get_session(sid)
                if s is not None:
                    self._delete(tx, s, actor=user_id)
            far_future = self._now() + timedelta(days=36500)
            tx.purge_idempotency(created_before=far_future, user_id=target)
            return len(ids)

        return self._transact(body, write=True)

    def get_audit_log(
        self,
        *,
        session_id: str,
        user_id: str,
        after: int | None = None,
        limit: int | None = None,
        admin: bool = False,
    ) -> list[AuditEvent]:
        """The session's audit events, oldest first (after an event seq, at most limit).

        An admin may also read the tombstone of a deleted session.

        Raises:
            SessionNotFound, ValidationError.
        """
        after_seq = check_cursor_seq(after, "after")
        size = check_limit(limit, "limit", allow_none=True, maximum=self.limits.max_page_size)
        check_id(session_id, field="session_id", prefix="ses")
        check_name(user_id, field="user_id")

        def body(tx: StoreTransaction) -> list[AuditEvent]:
            s = tx.get_session(session_id)
            tombstone_only = s is None and admin and tx.list_audit(session_id, limit=1)
            if not tombstone_only and (s is None or (not admin and s.user_id != user_id)):
                raise SessionNotFound(session_id)
            return tx.list_audit(session_id, after_seq=after_seq, limit=size)

        return self._transact(body, write=False)  # type: ignore[no-any-return]

    # ================================================================= internals

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None or now.utcoffset() != timedelta(0):
            now = now.astimezone(UTC) if now.tzinfo is not None else now.replace(tzinfo=UTC)
        return now

    def _transact(self, fn: Callable[[StoreTransaction], Any], *, write: bool) -> Any:
        """Run ``fn`` in one transaction; re-run it when the store reports a lost race
        (bounded by ``policy.max_retries`` and ``policy.max_retry_seconds``)."""
        started = time.monotonic()
        for attempt in range(1, self.policy.max_retries + 1):
            try:
                with self._store.transaction(write=write) as tx:
                    result = fn(tx)
            except StoreBusy:
                spent = time.monotonic() - started
                if attempt == self.policy.max_retries or spent >= self.policy.max_retry_seconds:
                    raise
                time.sleep(random.uniform(0, 0.005 * 2**attempt))
                continue
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _load(
        self, tx: StoreTransaction, session_id: str, user_id: str, admin: bool
    ) -> Session:
        check_id(session_id, field="session_id", prefix="ses")
        check_name(user_id, field="user_id")
        s = tx.get_session(session_id)
        if s is None or (not admin and s.user_id != user_id):
            raise SessionNotFound(session_id)
        return s

    def _read(
        self,
        session_id: str,
        user_id: str,
        admin: bool,
        fn: Callable[[StoreTransaction, Session], T],
    ) -> T:
        """Run a read; a session found due for expiry is expired (a write) first."""

        def body(tx: StoreTransaction) -> Any:
            s = self._load(tx, session_id, user_id, admin)
            if _due(s, self._now()):
                raise _ExpireFirst("session is due for expiry")
            return fn(tx, s)

        try:
            return self._transact(body, write=False)  # type: ignore[no-any-return]
        except _ExpireFirst:
            self._expire_if_due(session_id)
            return self._transact(body, write=False)  # type: ignore[no-any-return]

    def _write(
        self,
        scope: str,
        session_id: str,
        user_id: str,
        admin: bool,
        expected_version: int | None,
        idempotency_key: str | None,
        request: tuple[Any, ...],
        change: Callable[[StoreTransaction, Session, datetime], _Change | Session],
        adapter: TypeAdapter[Any],
        *,
        require_active: bool = True,
        touch: bool = False,
        result_is_session: bool = False,
    ) -> Any:
        """The one mutation path: see the module docstring for the order of checks.

        ``change`` returns a :class:`_Change` (bump the version, audit, store) or the
        unchanged session (a no-op such as closing a CLOSED session).
        """
        check_expected_version(expected_version)
        key = check_key(idempotency_key)
        fingerprint = self._fingerprint(scope, session_id, *request) if key else ""

        def body(tx: StoreTransaction) -> Any:
            # Lock the session row first: a concurrent retry with the same key then
            # waits here and finds the first one's record, instead of racing it.
            s = self._load(tx, session_id, user_id, admin)
            replay = self._replay(tx, user_id, scope, key, fingerprint)
            if replay is not None:
                return adapter.validate_python(replay)
            now = self._now()
            if _due(s, now):
                raise _ExpireFirst("session is due for expiry")
            if require_active and s.status != SessionStatus.ACTIVE:
                raise SessionNotActive(s.session_id, s.status.value)
            _check_version(s, expected_version)
            outcome = change(tx, s, now)
            if isinstance(outcome, Session):
                result: Any = outcome
            else:
                if touch:
                    outcome.session = outcome.session.model_copy(
                        update={
                            "last_active_at": now,
                            "expires_at": _expiry(now, outcome.session.ttl_seconds),
                        }
                    )
                stored = self._store_change(tx, s, outcome, user_id, now)
                result = stored if result_is_session else outcome.result
            self._remember(tx, user_id, scope, key, fingerprint, s, result)
            return result

        try:
            return self._transact(body, write=True)
        except _ExpireFirst:
            # Lazy TTL expiry is its own committed change; then the call acts on an
            # EXPIRED session (a write fails, close is illegal, restore re-opens).
            self._expire_if_due(session_id)
            return self._transact(body, write=True)

    def _store_change(
        self, tx: StoreTransaction, before: Session, change: _Change, actor: str, now: datetime
    ) -> Session:
        """Write the session row at ``before.version + 1`` (compare-and-set) and audit it."""
        target = before.version + 1
        new = change.session.model_copy(update={"version": target, "updated_at": now})
        tx.update_session(new, expected_version=before.version)
        self._audit(tx, new, actor, change.action, before.version, target, change.details, now)
        return new

    def _audit(
        self,
        tx: StoreTransaction,
        s: Session,
        actor: str,
        action: str,
        before: int | None,
        after: int | None,
        details: dict[str, Any],
        now: datetime,
    ) -> None:
        tx.insert_audit(
            AuditEvent(
                seq=0,
                session_id=s.session_id,
                user_id=s.user_id,
                actor=actor,
                action=action,
                at=now,
                version_before=before,
                version_after=after,
                request_id=_request_id.get(),
                details=details,
            )
        )

    def _delete(self, tx: StoreTransaction, s: Session, *, actor: str) -> None:
        tx.delete_session(s.session_id)
        details = {
            "agent": s.agent,
            "message_count": s.message_count,
            "run_count": s.run_count,
            "tool_call_count": s.tool_call_count,
        }
        self._audit(tx, s, actor, "session.deleted", s.version, None, details, self._now())

    def _expiry_change(
        self, tx: StoreTransaction, s: Session, now: datetime, reason: str
    ) -> _Change:
        stopped = _stop_running_runs(
            tx, s, now, RunStatus.INTERRUPTED, "session expired while RUNNING"
        )
        new = s.model_copy(
            update={
                "status": SessionStatus.EXPIRED,
                "status_reason": reason,
                "expired_at": now,
                "expires_at": None,
            }
        )
        details = {"reason": reason, "interrupted_runs": stopped}
        return _Change(new, "session.expired", details, None)

    def _expire_if_due(self, session_id: str) -> bool:
        def body(tx: StoreTransaction) -> bool:
            s = tx.get_session(session_id)
            now = self._now()
            if s is None or not _due(s, now):
                return False
            self._store_change(tx, s, self._expiry_change(tx, s, now, "ttl"), _SYSTEM_ACTOR, now)
            return True

        return bool(self._transact(body, write=True))

    def _replay(
        self, tx: StoreTransaction, user_id: str, scope: str, key: str | None, fingerprint: str
    ) -> Any:
        if key is None:
            return None
        record = tx.get_idempotency(user_id, scope, key)
        if record is None:
            return None
        retention = timedelta(seconds=self.policy.idempotency_retention_seconds)
        if self._now() - record.created_at > retention:
            tx.delete_idempotency(user_id, scope, key)
            return None
        if record.fingerprint != fingerprint:
            raise IdempotencyKeyReused(key, scope)
        return json.loads(record.result)

    def _remember(
        self,
        tx: StoreTransaction,
        user_id: str,
        scope: str,
        key: str | None,
        fingerprint: str,
        s: Session,
        result: Any,
    ) -> None:
        if key is None:
            return
        tx.put_idempotency(
            IdempotencyRecord(
                user_id=user_id,
                scope=scope,
                key=key,
                fingerprint=fingerprint,
                session_id=s.session_id,
                result=dumps(_to_json(result)),
                created_at=self._now(),
            )
        )

    def _running_run(self, tx: StoreTransaction, s: Session, run_id: str) -> Run:
        run = tx.get_run(s.session_id, run_id)
        if run is None:
            raise RunNotFound(s.session_id, run_id)
        if run.status != RunStatus.RUNNING:
            raise RunNotRunning(s.session_id, run_id, run.status.value)
        return run

    def _apply_memory(
        self,
        tx: StoreTransaction,
        s: Session,
        now: datetime,
        *,
        data: dict[str, Any] | None = None,
        patch: dict[str, Any] | None = None,
    ) -> WorkingMemory:
        """Write the working memory at the version ``s`` (the session before this
        change) will have once the change is stored: ``s.version + 1``."""
        if patch is not None:
            current = tx.get_working_memory(s.session_id)
            data = check_memory(merge_patch(current.data if current else {}, patch), self.limits)
        memory = WorkingMemory(
            session_id=s.session_id, version=s.version + 1, updated_at=now, data=data or {}
        )
        tx.put_working_memory(memory)
        return memory.model_copy(update={"session_version": memory.version})

    # ------------------------------------------------------------- validation

    def _fingerprint(self, scope: str, session_id: str | None, *request: Any) -> str:
        return canonical_hash([scope, session_id, _to_json(list(request))])


class _ExpireFirst(AgentSessionError):
    """Internal signal: the session is due for expiry; expire it (its own transaction)
    and run the call again. Raised before the call has written anything."""


_SESSION: TypeAdapter[Session] = TypeAdapter(Session)
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_MEMORY: TypeAdapter[WorkingMemory] = TypeAdapter(WorkingMemory)
_TOOL_CALL: TypeAdapter[ToolCall] = TypeAdapter(ToolCall)
_RUN: TypeAdapter[Run] = TypeAdapter(Run)
_STEP: TypeAdapter[RunStep] = TypeAdapter(RunStep)


def _to_json(value: Any) -> Any:
    """JSON form of a result or request part (models keep unset fields unset)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _memory_of(tx: StoreTransaction, s: Session) -> WorkingMemory:
    """The stored memory (empty at version 0 if never written) with ``session_version``
    of ``s``: read in the same transaction, after the session row, so a pairing with a
    memory newer than ``s`` can only make a later compare-and-set fail, never lose."""
    memory = tx.get_working_memory(s.session_id) or WorkingMemory(session_id=s.session_id)
    return memory.model_copy(update={"session_version": s.version})


def _expiry(now: datetime, ttl: float | None) -> datetime | None:
    return None if ttl is None else now + timedelta(seconds=ttl)


def _due(s: Session, now: datetime) -> bool:
    return s.status == SessionStatus.ACTIVE and s.expires_at is not None and s.expires_at <= now


def _check_version(s: Session, expected_version: int | None) -> None:
    if expected_version is not None and expected_version != s.version:
        raise VersionConflict(s.session_id, expected_version, s.version)


def _stop_running_runs(
    tx: StoreTransaction, s: Session, now: datetime, status: RunStatus, error: str
) -> list[str]:
    stopped = []
    for run in tx.list_runs(s.session_id, status=RunStatus.RUNNING):
        tx.update_run(run.model_copy(update={"status": status, "ended_at": now, "error": error}))
        stopped.append(run.run_id)
    return stopped


def _align_window(
    tx: StoreTransaction, session_id: str, rows: list[Message], message_count: int
) -> list[Message]:
    """Widen a window so it never splits an assistant tool call from its results (C27).

    At the start: while the first message is a tool result, pull in older messages down
    to the assistant message that made the call. At the end: if the window ends inside a
    group of tool results (or right after the assistant call), pull in the rest of the
    group's results that follow it.
    """
    while rows and rows[0].role == Role.TOOL and rows[0].seq > 1:
        older = tx.get_messages(session_id, before_seq=rows[0].seq, limit=8)
        if not older:
            break
        rows = older + rows
        # Stop once an assistant message that made tool calls is the first one in.
        idx = next(
            (i for i in range(len(older) - 1, -1, -1) if older[i].role != Role.TOOL),
            None,
        )
        if idx is not None:
            rows = rows[idx:]
            break
    while rows and rows[-1].seq < message_count:
        last = rows[-1]
        opens_group = last.role == Role.ASSISTANT and bool(last.tool_calls)
        if not (opens_group or last.role == Role.TOOL):
            break
        newer = tx.get_messages(session_id, after_seq=last.seq, limit=8, newest=False)
        results = []
        for m in newer:
            if m.role != Role.TOOL:
                break
            results.append(m)
        rows = rows + results
        if len(results) < len(newer) or not results:
            break
    return rows
