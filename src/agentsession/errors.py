"""The one error hierarchy of agentsession.

Every error the library raises on purpose derives from :class:`AgentSessionError`;
driver exceptions (``sqlite3``, ``sqlalchemy``, ``redis``) are translated at the store
boundary and never escape.

Every class takes an optional message first and its context as keyword arguments, e.g.
``VersionConflict(session_id="ses_...", current_version=3, expected_version=2)``; without
a message it builds one from the context. The same call rebuilds an error from an HTTP
problem document. Each class carries its context as attributes and names the
HTTP status it maps to (docs/architecture.md, "Errors")::

    AgentSessionError
    ├── ValidationError              400  bad field, bad cursor, bad limit
    │   ├── PayloadTooLarge          413  a JSON document over its byte limit
    │   ├── UnsupportedValue         422  a value that is not JSON (names its path)
    │   ├── ContextBudgetTooSmall    422  build_context's minimum does not fit the budget
    │   └── ImportSourceError        422  an import's source is malformed (names file, row)
    ├── Forbidden                    403  needs an admin principal
    ├── NotFound                     404  missing, deleted, or owned by another user
    │   ├── SessionNotFound
    │   ├── RunNotFound
    │   ├── RewindNotFound
    │   └── RecordNotFound           (HTTP only: the manager answers None)
    ├── Conflict                     409
    │   ├── SessionNotActive         409  a write to a CLOSED or EXPIRED session
    │   ├── IllegalTransition        409  e.g. restoring an expired session past its grace window
    │   ├── RunAlreadyRunning        409  at most one RUNNING run per session
    │   ├── ToolCallExists           409  a caller-chosen call_id already recorded
    │   ├── SessionExists            409  a session with this external key exists
    │   ├── PatchConflict            409  a JSON Patch op that cannot apply to the document
    │   ├── RunNotRunning            409  a step, finish, message or tool call tagged with a
    │   │                                 run that is not RUNNING
    │   │   └── RunLeaseExpired      409  ... whose lease lapsed: the run was INTERRUPTED
    │   ├── BudgetExceeded           409  the user's or session's usage budget is spent
    │   └── VersionConflict          412  stale ``expected_version`` (optimistic locking)
    ├── IdempotencyKeyReused         422  same key, different request
    ├── SearchNotSupported           501  the store has no search index (Redis)
    └── StoreError                   500  the store failed; nothing was written
        ├── StoreBusy                503  transient (lock timeout); safe to retry
        ├── StoreUnavailable         503  unreachable, connection lost, or disk full
        │   └── KeyringError         503  stored content cannot be sealed or opened with the
        │       │                         keyring (missing, wrong, of another store, or a
        │       │                         corrupted or plaintext value); HTTP answers it as
        │       │                         a plain ``store-unavailable``
        │       └── KeyringMismatch  503  the store is marked as sealed with another
        │                                 keyring than the one given, or none was given
        └── SchemaOutOfDate          500  database schema older than the code: run migrations
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

__all__ = [
    "AgentSessionError",
    "BudgetExceeded",
    "Conflict",
    "ContextBudgetTooSmall",
    "Forbidden",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "ImportSourceError",
    "KeyringError",
    "KeyringMismatch",
    "NotFound",
    "PatchConflict",
    "PayloadTooLarge",
    "RecordNotFound",
    "RewindNotFound",
    "RunAlreadyRunning",
    "RunLeaseExpired",
    "RunNotFound",
    "RunNotRunning",
    "SchemaOutOfDate",
    "SearchNotSupported",
    "SessionExists",
    "SessionNotActive",
    "SessionNotFound",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "ToolCallExists",
    "UnsupportedValue",
    "ValidationError",
    "VersionConflict",
]


class AgentSessionError(Exception):
    """Root of every error agentsession raises on purpose.

    Args:
        message: what went wrong, for people; None builds it from the context.
        context: facts a program may act on (ids, versions, statuses), also shown in
            HTTP problem documents.

    Attributes:
        http_status: the status code an HTTP layer answers with (docs/architecture.md, "Errors").
        code: a stable machine-readable name, used as the RFC 9457 problem ``type`` suffix.
        message: the message; context: the context keywords as a dict.
    """

    http_status: ClassVar[int] = 500
    code: ClassVar[str] = "error"

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.context = context
        self.message = message if message is not None else self._default_message()
        super().__init__(self.message)

    def _default_message(self) -> str:
        """The message built from the context when none was given."""
        return self.code.replace("-", " ")

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"code", "message", **context}``, safe to show a client (no secrets)."""
        return {"code": self.code, "message": self.message, **self.context}


class ValidationError(AgentSessionError):
    """An argument is malformed: a bad field, id, cursor or limit.

    Attributes:
        field: dotted path of the offending argument or value, when known.
    """

    http_status = 400
    code = "validation-error"

    def __init__(
        self, message: str | None = None, *, field: str | None = None, **context: Any
    ) -> None:
        self.field = field
        super().__init__(message, field=field, **context)

    def _default_message(self) -> str:
        return f"{self.field} is invalid" if self.field else "invalid request"


class PayloadTooLarge(ValidationError):
    """A JSON document is larger than its limit (bytes of its UTF-8 JSON encoding).

    Attributes:
        limit_bytes: the maximum allowed.
        size_bytes: the size of what was sent; None when it is not known (a request
            body without ``Content-Length`` is refused as it streams in, unread to
            its end).
    """

    http_status = 413
    code = "payload-too-large"

    def __init__(
        self,
        message: str | None = None,
        *,
        field: str,
        limit_bytes: int,
        size_bytes: int | None = None,
    ) -> None:
        self.limit_bytes = limit_bytes
        self.size_bytes = size_bytes
        known = {} if size_bytes is None else {"size_bytes": size_bytes}
        super().__init__(message, field=field, limit_bytes=limit_bytes, **known)

    def _default_message(self) -> str:
        if self.size_bytes is None:
            return f"{self.field} is over the limit of {self.limit_bytes} bytes"
        return f"{self.field} is {self.size_bytes} bytes, over the limit of {self.limit_bytes}"


class UnsupportedValue(ValidationError):
    """A value cannot be stored as JSON (bytes, NaN, a datetime, a custom object...).

    ``field`` holds the path of the bad value, e.g. ``message.content[0].data``.
    """

    http_status = 422
    code = "unsupported-value"


class ContextBudgetTooSmall(ValidationError):
    """``build_context``'s budget cannot hold even its minimum: the system text, the
    summary in use and the newest user message.

    Attributes:
        needed_tokens: the tokens that minimum takes (by the tokenizer used).
        budget_tokens: the budget asked for.
    """

    http_status = 422
    code = "context-budget-too-small"

    def __init__(
        self, message: str | None = None, *, needed_tokens: int, budget_tokens: int
    ) -> None:
        self.needed_tokens = needed_tokens
        self.budget_tokens = budget_tokens
        super().__init__(
            message, field="budget_tokens", needed_tokens=needed_tokens, budget_tokens=budget_tokens
        )

    def _default_message(self) -> str:
        return (
            f"budget_tokens={self.budget_tokens} is too small: the system text, the summary "
            f"and the newest user message with what follows it need {self.needed_tokens}"
        )


class ImportSourceError(ValidationError):
    """An import's source cannot be read as its format: not UTF-8, not JSON, nesting
    deeper than a stored value may, a value of the wrong type in a column or field, a
    file cut short, not a database of that kind, an unknown format version, or a line
    the store refuses. The import writes nothing (docs/export.md, "What an import
    refuses").

    The message starts with the source and the row, e.g. ``agents.db: agent_messages
    rowid 17: message_data nests deeper than 64 levels``; the error the row caused, if
    any, is chained as ``__cause__``.

    Attributes:
        source: the file as given (or a URL, its password masked).
        row: where in it (``line 3``, ``agent_messages rowid 17``, ``session
            app/user/id``); None when the source as a whole is wrong.
        field: the column or field, when known.
    """

    http_status = 422
    code = "import-source-error"

    def __init__(
        self,
        message: str | None = None,
        *,
        source: str,
        row: str | None = None,
        field: str | None = None,
    ) -> None:
        self.source = source
        self.row = row
        super().__init__(message, field=field, source=source, row=row)

    def _default_message(self) -> str:
        where = f"{self.source}: {self.row}" if self.row else self.source
        return f"{where}: malformed"


class Forbidden(AgentSessionError):
    """The call needs an admin principal (listing every user, erasing another's data).

    Never used for another user's session: that is reported as NotFound.
    """

    http_status = 403
    code = "forbidden"


class NotFound(AgentSessionError):
    """The object does not exist, was deleted, or belongs to another user.

    The three cases are indistinguishable on purpose (docs/semantics.md, "Ownership").
    """

    http_status = 404
    code = "not-found"


class SessionNotFound(NotFound):
    """No session with this id is visible to the caller.

    Attributes:
        session_id: the id that was asked for.
    """

    def __init__(self, message: str | None = None, *, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(message, session_id=session_id)

    def _default_message(self) -> str:
        return f"session {self.session_id!r} not found"


class RunNotFound(NotFound):
    """No run with this id exists in the session.

    Attributes:
        session_id, run_id: what was asked for.
    """

    def __init__(self, message: str | None = None, *, session_id: str, run_id: str) -> None:
        self.session_id = session_id
        self.run_id = run_id
        super().__init__(message, session_id=session_id, run_id=run_id)

    def _default_message(self) -> str:
        return f"run {self.run_id!r} not found in session {self.session_id!r}"


class RewindNotFound(NotFound):
    """No rewind with this number in the session.

    Attributes:
        session_id, number: what was asked for.
    """

    def __init__(self, message: str | None = None, *, session_id: str, number: int) -> None:
        self.session_id = session_id
        self.number = number
        super().__init__(message, session_id=session_id, number=number)

    def _default_message(self) -> str:
        return f"rewind {self.number!r} not found in session {self.session_id!r}"


class RecordNotFound(NotFound):
    """No record of this namespace and key in the session: how the HTTP service says
    ``get_record`` answered None (a 404 with the standard not-found problem, naming
    the record), so the client can answer None too.

    Attributes:
        namespace, key: what was asked for.
    """

    def __init__(self, message: str | None = None, *, namespace: str, key: str) -> None:
        self.namespace = namespace
        self.key = key
        super().__init__(message, namespace=namespace, key=key)

    def _default_message(self) -> str:
        return "record not found"


class Conflict(AgentSessionError):
    """The request is well formed but the current state does not allow it."""

    http_status = 409
    code = "conflict"


class SessionNotActive(Conflict):
    """A write was attempted on a session that is not ACTIVE.

    Attributes:
        session_id: the session.
        status: its current status (``CLOSED`` or ``EXPIRED``).
    """

    code = "session-not-active"

    def __init__(self, message: str | None = None, *, session_id: str, status: str) -> None:
        self.session_id = session_id
        self.status = status
        super().__init__(message, session_id=session_id, status=status)

    def _default_message(self) -> str:
        return (
            f"session {self.session_id!r} is {self.status}; writes need an ACTIVE session "
            "(restore it first)"
        )


class IllegalTransition(Conflict):
    """A lifecycle action is not allowed from the session's current status.

    Attributes:
        session_id, status: the session and its status; action: what was attempted.
        reason: why, when more than the status explains it (message only).
    """

    code = "illegal-transition"

    def __init__(
        self,
        message: str | None = None,
        *,
        session_id: str,
        status: str,
        action: str,
        reason: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.status = status
        self.action = action
        self.reason = reason
        super().__init__(message, session_id=session_id, status=status, action=action)

    def _default_message(self) -> str:
        detail = f": {self.reason}" if self.reason else ""
        return f"cannot {self.action} session {self.session_id!r} in status {self.status}{detail}"


class RunAlreadyRunning(Conflict):
    """The session already has a RUNNING run (at most one at a time).

    Attributes:
        session_id, run_id: the session and the run that is still RUNNING.
    """

    code = "run-already-running"

    def __init__(self, message: str | None = None, *, session_id: str, run_id: str) -> None:
        self.session_id = session_id
        self.run_id = run_id
        super().__init__(message, session_id=session_id, run_id=run_id)

    def _default_message(self) -> str:
        return (
            f"session {self.session_id!r} already has RUNNING run {self.run_id!r}; finish it first"
        )


class BudgetExceeded(Conflict):
    """The usage budget of the user or of the session is spent: ``start_run`` and
    ``add_run_step`` refuse to go on (docs/semantics.md, "Usage and budgets"). The
    refused call wrote nothing but its ``run.refused`` audit event.

    A conflict with the state of the caller's account (409), not ``402 Payment
    Required``, which HTTP reserves without defined semantics: raising the budget (an
    operator's ``set_budget``) or a new period lets the same request succeed.

    Attributes:
        scope: ``"user"`` (the user's budget over all their sessions) or ``"session"``.
        session_id: the session the call was for.
        limit: ``"tokens"`` or ``"cost"``: which bound is reached.
        maximum: the budget's bound; used: the usage counted against it.
    """

    code = "budget-exceeded"

    def __init__(
        self,
        message: str | None = None,
        *,
        scope: str,
        session_id: str,
        limit: str,
        maximum: float,
        used: float,
    ) -> None:
        self.scope = scope
        self.session_id = session_id
        self.limit = limit
        self.maximum = maximum
        self.used = used
        super().__init__(
            message, scope=scope, session_id=session_id, limit=limit, maximum=maximum, used=used
        )

    def _default_message(self) -> str:
        return (
            f"the {self.scope}'s {self.limit} budget is spent ({self.used} of {self.maximum}); "
            "an operator may raise it"
        )


class ToolCallExists(Conflict):
    """A tool call with this caller-chosen ``call_id`` is already in the session.

    ``call_id`` is unique in a session; a model provider's id (an OpenAI ``call_...``,
    the ``tool_call_id`` of its messages) may repeat, so it belongs in
    ``provider_call_id``, which the message says.

    Attributes:
        session_id, call_id: the session and the id that was sent again.
    """

    code = "tool-call-exists"

    def __init__(self, message: str | None = None, *, session_id: str, call_id: str) -> None:
        self.session_id = session_id
        self.call_id = call_id
        super().__init__(message, session_id=session_id, call_id=call_id)

    def _default_message(self) -> str:
        return (
            f"tool call {self.call_id!r} is already recorded in session {self.session_id!r}: "
            "call_id must be unique in the session. A model provider's id (the "
            "tool_call_id of its messages), which may repeat, goes in provider_call_id "
            "(leave call_id out for a generated one); to make retries safe, send an "
            "idempotency key"
        )


class SessionExists(Conflict):
    """A session with this ``external_key`` already exists for the owner and agent.

    Attributes:
        session_id: the existing session (open it by its key, or by this id).
    """

    code = "session-exists"

    def __init__(self, message: str | None = None, *, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(message, session_id=session_id)

    def _default_message(self) -> str:
        return (
            f"a session with this external_key exists: {self.session_id!r}; "
            "use open_session to get it or create it"
        )


class PatchConflict(Conflict):
    """A JSON Patch (RFC 6902) op cannot apply to the current document: ``remove`` or
    ``replace`` of a missing path, an ``add`` under a missing parent, an array index out
    of range, or a failed ``test``: "conflicting state" (RFC 5789, section 2.2). Nothing
    was written.

    Attributes:
        field: the op list's argument and the op's index, e.g. ``ops[2]``.
        op: the op's name; path: its JSON Pointer (RFC 6901).
    """

    code = "patch-conflict"

    def __init__(self, message: str | None = None, *, field: str, op: str, path: str) -> None:
        self.field = field
        self.op = op
        self.path = path
        super().__init__(message, field=field, op=op, path=path)

    def _default_message(self) -> str:
        return f"{self.field} ({self.op} {self.path!r}) does not apply to the document"


class RunNotRunning(Conflict):
    """A write tagged with a run that is not RUNNING: a step, a finish, a message or a
    tool call (e.g. from a worker whose run a restore interrupted). Nothing is stored.

    Attributes:
        session_id, run_id, status: the run and its current status.
    """

    code = "run-not-running"

    def __init__(
        self, message: str | None = None, *, session_id: str, run_id: str, status: str
    ) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.status = status
        super().__init__(message, session_id=session_id, run_id=run_id, status=status)

    def _default_message(self) -> str:
        return f"run {self.run_id!r} is {self.status}, not RUNNING"


class RunLeaseExpired(RunNotRunning):
    """A write tagged with a run whose lease lapsed without a heartbeat: the run was
    INTERRUPTED, and its worker's heartbeat, steps, finish, messages and tool calls are
    refused from then on (a new run may start). Nothing is stored.

    Attributes:
        session_id, run_id, status: the run and its status (``INTERRUPTED``).
    """

    code = "run-lease-expired"

    def _default_message(self) -> str:
        return (
            f"run {self.run_id!r} lost its lease (no heartbeat before it lapsed) and was "
            "INTERRUPTED; start a new run"
        )


class VersionConflict(Conflict):
    """Optimistic locking failed: ``expected_version`` is not the current version.

    Nothing was written. Re-read, re-apply, retry (``modify_working_memory`` of the
    manager and of the client does this for you, ``max_attempts`` times). A Conflict,
    answered 412 Precondition Failed over HTTP.

    Attributes:
        session_id: the session.
        current_version: the version now stored.
        expected_version: what the caller sent; None when the precondition named no
            single version (an HTTP ``If-Match`` list that matches nothing).
        attempts: how many read-modify-write attempts conflicted before a retry helper
            gave up (its ``max_attempts``); None for a single write.
    """

    http_status = 412
    code = "version-conflict"

    def __init__(
        self,
        message: str | None = None,
        *,
        session_id: str,
        current_version: int,
        expected_version: int | None = None,
        attempts: int | None = None,
    ) -> None:
        self.session_id = session_id
        self.current_version = current_version
        self.expected_version = expected_version
        self.attempts = attempts
        context: dict[str, Any] = {} if attempts is None else {"attempts": attempts}
        super().__init__(
            message,
            session_id=session_id,
            expected_version=expected_version,
            current_version=current_version,
            **context,
        )

    def _default_message(self) -> str:
        expected = (
            f"not the expected {self.expected_version}"
            if self.expected_version is not None
            else "which the precondition does not match"
        )
        text = f"session {self.session_id!r} is at version {self.current_version}, {expected}"
        if self.attempts is None:
            return text
        return (
            f"{text}: gave up after {self.attempts} attempts, each beaten by a concurrent "
            "write to the session (nothing was lost; pass a larger max_attempts to "
            "try longer)"
        )

    def gave_up(self, attempts: int) -> VersionConflict:
        """This conflict, as the error of a retry helper that tried ``attempts`` times.

        Returns:
            A new VersionConflict with the same versions and ``attempts`` set (its
            message says so); raise it ``from`` this one.
        """
        return VersionConflict(
            session_id=self.session_id,
            current_version=self.current_version,
            expected_version=self.expected_version,
            attempts=attempts,
        )

    @staticmethod
    def retry_delay(attempt: int) -> float:
        """The pause, in seconds, after conflicting attempt number ``attempt`` (1, 2...)
        of a read-modify-write: exponential from 5 ms, at most 0.5 s, full jitter (a
        uniform draw below it), so writers that collided spread out rather than
        colliding again in step."""
        return random.uniform(0, min(0.5, 0.005 * 2.0 ** (attempt - 1)))


class IdempotencyKeyReused(AgentSessionError):
    """An idempotency key was sent again with a different request.

    Attributes:
        idempotency_key: the key; operation: the method it was first used with.
    """

    http_status = 422
    code = "idempotency-key-reused"

    def __init__(self, message: str | None = None, *, idempotency_key: str, operation: str) -> None:
        self.idempotency_key = idempotency_key
        self.operation = operation
        super().__init__(message, idempotency_key=idempotency_key, operation=operation)

    def _default_message(self) -> str:
        return (
            f"idempotency key {self.idempotency_key!r} was already used with a different "
            f"{self.operation} request"
        )


class SearchNotSupported(AgentSessionError):
    """The store keeps no search index, so it cannot search across sessions (Redis,
    which has no full-text engine without a server module; docs/guide.md, "Search").
    Nothing was read; the other operations work as ever.

    Args:
        store: the kind of store (``"redis"``).
    """

    http_status = 501
    code = "search-not-supported"

    def __init__(self, message: str | None = None, *, store: str) -> None:
        self.store = store
        super().__init__(message, store=store)

    def _default_message(self) -> str:
        return (
            f"search is not supported on the {self.store} store: it keeps no full-text "
            "index; use an SQLite, PostgreSQL or MariaDB store to search"
        )


class StoreError(AgentSessionError):
    """The storage backend failed. The transaction was rolled back; nothing was written."""

    http_status = 500
    code = "store-error"


class StoreBusy(StoreError):
    """A transient store condition (lock wait timed out, serialization failure).

    The SessionManager retries these itself a bounded number of times before raising.
    """

    http_status = 503
    code = "store-busy"


class StoreUnavailable(StoreError):
    """The store cannot be reached or cannot write: the connection was refused or lost
    (a server stopped, restarting or failing over), or its disk is full.

    A transaction whose connection was lost before its COMMIT is re-run on a fresh
    connection first; this is raised when that did not help (nothing was written),
    and when the connection was lost during the COMMIT, whose outcome is then
    unknown: the write may or may not be stored. Retry with the same idempotency key,
    which makes the retry safe either way (docs/deployment.md, "When the store is
    unavailable").
    """

    http_status = 503
    code = "store-unavailable"


class KeyringError(StoreUnavailable):
    """Stored content cannot be sealed or opened with the configured keyring: the keyring
    is missing or wrong, belongs to another store, a user's data key was destroyed
    (erasure), a ciphertext is corrupted or was moved to another place, or a plaintext
    value stands where a ciphertext is expected (fail closed: a store written without
    a keyring is not opened with one). Nothing was written.

    The message names the place (user, session, kind) and the reason, never content.
    The HTTP service logs it and answers ``503 store-unavailable`` without details: it
    is the server's data that cannot be read, not the client's request that is wrong
    (docs/security.md, "Encryption at rest").
    """

    code = "keyring-error"


class KeyringMismatch(KeyringError):
    """The store records that its content is sealed with a keyring (its keyring mark: the
    keyring's store id, never key material), and it is opened without a keyring or with
    another one. Raised when the store is opened (``SessionManager.from_url``, the CLI,
    ``serve``), before anything is read or written, so a process without the keyring
    never shows ciphertext as values nor writes plaintext beside it. The message names
    the store ids of both keyrings (docs/security.md, "Encryption at rest").
    """

    code = "keyring-mismatch"


class SchemaOutOfDate(StoreError):
    """The database schema is older (or newer) than this code expects.

    Attributes:
        current_revision, expected_revision: Alembic revision ids (None = no schema yet,
            or unknown: an HTTP problem document does not carry them).
    """

    code = "schema-out-of-date"

    def __init__(
        self,
        message: str | None = None,
        *,
        current_revision: str | None = None,
        expected_revision: str | None = None,
    ) -> None:
        self.current_revision = current_revision
        self.expected_revision = expected_revision
        super().__init__(
            message, current_revision=current_revision, expected_revision=expected_revision
        )

    def _default_message(self) -> str:
        return (
            f"database schema is at revision {self.current_revision or '(none)'}, code "
            f"expects {self.expected_revision}: run `agentsession db upgrade` (or pass "
            "auto_migrate=True)"
        )
