"""The data model as immutable pydantic models (docs/semantics.md).

Every model handed out is a snapshot: frozen at the top level and deep-copied out of the
store, so changing one (even a nested dict in place) changes nothing stored.
All timestamps are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    computed_field,
    model_validator,
)

from .callgroups import item_role

__all__ = [
    "AuditBreak",
    "AuditEvent",
    "AuditReport",
    "Budget",
    "Change",
    "ChangePage",
    "Context",
    "DeleteRecordsResult",
    "MemoryVersion",
    "Message",
    "Page",
    "PutRecordsResult",
    "Record",
    "RecordWrite",
    "RestoredSession",
    "Rewind",
    "RewindResult",
    "Role",
    "Run",
    "RunStatus",
    "RunStep",
    "Scope",
    "SearchHit",
    "Session",
    "SessionStatus",
    "SharedMemory",
    "Summary",
    "ToolCall",
    "ToolCallStatus",
    "TruncateResult",
    "UsageEntry",
    "UsageTotal",
    "WorkingMemory",
]

T = TypeVar("T")


def _same(value: Any) -> Any:
    """A stored value taken as it is (:meth:`Message.from_store_rows`' default)."""
    return value


class SessionStatus(StrEnum):
    """Lifecycle state of a session (docs/semantics.md, "Lifecycle"). Deleted sessions
    are gone."""

    ACTIVE = "ACTIVE"
    CLOSED = "CLOSED"
    EXPIRED = "EXPIRED"


class RunStatus(StrEnum):
    """State of a run. ``INTERRUPTED`` marks a run whose worker died while it was RUNNING."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    INTERRUPTED = "INTERRUPTED"

    @property
    def is_final(self) -> bool:
        """True for the statuses a run never leaves."""
        return self not in (RunStatus.PENDING, RunStatus.RUNNING)


class Role(StrEnum):
    """Author of a message, as in the chat-completions family of APIs."""

    SYSTEM = "system"
    #: OpenAI's name for system instructions to newer models (chat and Responses).
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolCallStatus(StrEnum):
    """Outcome of a tool call that really ran."""

    OK = "ok"
    ERROR = "error"


class _Snapshot(BaseModel):
    model_config = ConfigDict(frozen=True, use_enum_values=False)


class Session(_Snapshot):
    """One continuing conversation between a user and an agent.

    ``version`` rises by exactly 1 on every change to the session or anything in it
    (messages, working memory, tool calls, runs, lifecycle); it is the optimistic-locking
    token (``expected_version``) and the HTTP ETag. ``expires_at`` is
    ``last_active_at + ttl_seconds`` while ACTIVE with a TTL, else None.
    ``status_reason`` says why a session left ACTIVE (``"closed by user"``, ``"ttl"``...).
    ``external_key`` is the caller's own name for the session (a framework's session or
    thread id), unique per ``(user_id, agent)`` among existing sessions; None if not given.
    ``lease_expires_at`` is when the lease of the session's RUNNING run lapses (None: no
    RUNNING run holds a lease); a heartbeat moves it without a version step, as it is
    liveness, not content (docs/semantics.md, "Run leases").
    ``parent_session_id`` and ``fork_seq`` name the session a fork was made from and the
    seq it was made at (``fork_session``); None for a session that is not a fork. The
    parent may be gone since: the fork keeps its own copies (docs/semantics.md, "Forks").
    ``audit_head`` is the hash of the session's newest audit event (None before the
    audit chain existed): :mod:`agentsession.auditchain`.
    """

    session_id: str
    user_id: str
    agent: str
    external_key: str | None = None
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: SessionStatus = SessionStatus.ACTIVE
    status_reason: str | None = None
    version: int = 1
    created_at: datetime
    updated_at: datetime
    last_active_at: datetime
    closed_at: datetime | None = None
    expired_at: datetime | None = None
    ttl_seconds: float | None = None
    expires_at: datetime | None = None
    message_count: int = 0
    run_count: int = 0
    tool_call_count: int = 0
    lease_expires_at: datetime | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None
    audit_head: str | None = None


def _role_may_be_absent(schema: dict[str, Any]) -> None:
    """JSON schema of :class:`Message`: ``role`` is absent on Responses items."""
    schema["required"] = [name for name in schema.get("required", []) if name != "role"]


class Message(BaseModel):
    """One entry of the conversation history.

    ``seq`` (1, 2, 3... per session, gapless) is the order of truth, never
    ``created_at``. Fields a client sends beyond the known ones (``refusal``,
    provider-specific keys) are kept and returned unchanged, and a field that was
    absent stays absent: :meth:`payload` gives back exactly what was appended.

    An OpenAI Responses item (``{"type": "function_call", ...}``,
    ``function_call_output``, ``custom_tool_call[_output]``, ``reasoning``) may come
    without a ``role``: ``role`` is then derived from its type (a call or reasoning
    item is ``assistant``, an output ``tool``; :mod:`agentsession.callgroups`) and is
    not part of :meth:`payload`, since the client did not send it.
    ``session_version`` is the session's version after the write that returned this
    message (pass it as the next ``expected_version``); None on a read.
    """

    model_config = ConfigDict(frozen=True, extra="allow", json_schema_extra=_role_may_be_absent)

    message_id: str
    session_id: str
    seq: int
    created_at: datetime
    role: Role
    content: str | list[Any] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    session_version: int | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _derive_item_role(cls, data: Any, handler: ModelWrapValidatorHandler[Message]) -> Message:
        """Give a Responses item without ``role`` its derived role, left unset (so
        :meth:`payload` and ``exclude_unset`` dumps leave it out)."""
        derived = item_role(data) if isinstance(data, dict) and "role" not in data else None
        if derived is None:
            return handler(data)
        message = handler({**data, "role": derived})
        message.model_fields_set.discard("role")
        return message

    @classmethod
    def from_store(
        cls,
        payload: dict[str, Any],
        *,
        message_id: str,
        session_id: str,
        seq: int,
        created_at: datetime,
    ) -> Message:
        """The message a store kept: ``payload`` (a :meth:`payload` as decoded from
        storage, handed over: it becomes the message's) with the store's fields.

        Equal to ``model_validate({**payload, message_id=..., ...})`` in every respect
        (fields, fields set, extra fields, errors). A payload was validated when it was
        appended, so a value of the exact type a field holds is taken as it is, without
        a second validation; any other value (a row written by something else) goes
        through ``model_validate``, whose error (a ``ValueError``) is raised.
        """
        return cls.from_store_rows([(message_id, session_id, seq, created_at, payload)])[0]

    @classmethod
    def from_store_rows(
        cls,
        rows: Iterable[Sequence[Any]],
        load: Callable[[Any], Any] = _same,
        at: Callable[[Any], Any] = _same,
    ) -> list[Message]:
        """:meth:`from_store` of each row ``(message_id, session_id, seq, created_at,
        payload)``, in one loop: ``load`` turns each row's stored payload into the
        payload (e.g. decodes its JSON text, once) and ``at`` its stored time into the
        ``created_at`` value; both default to the value as it is.

        Returns:
            The messages in the rows' order, each equal to :meth:`from_store`'s.

        Raises:
            ValueError: a row whose values do not validate (pydantic's error); whatever
                ``load`` or ``at`` raises.
        """
        defaults, size, roles = _MESSAGE_DEFAULTS, len(_MESSAGE_DEFAULTS), _ROLES
        kinds_of, store_fields = _STORED_TYPES.get, _STORE_FIELDS
        new, set_ = object.__new__, object.__setattr__
        out: list[Message] = []
        for message_id, session_id, seq, stored_at, stored in rows:
            payload, created_at = load(stored), at(stored_at)
            values = {**defaults, **payload}
            extra: dict[str, Any] = {}
            if len(values) != size:  # extra fields, kept in payload order
                extra = {k: v for k, v in payload.items() if k not in defaults}
                for key in extra:
                    del values[key]
            named = payload["role"] if "role" in payload else item_role(payload)
            role = roles.get(named) if type(named) is str else None
            kept = role is not None and (
                type(message_id) is str
                and type(session_id) is str
                and type(seq) is int
                and type(created_at) is datetime
            )
            if kept:
                for key, value in payload.items():
                    kinds = kinds_of(key)
                    if kinds is not None and type(value) not in kinds:
                        kept = False
                        break
                calls = payload.get("tool_calls")
                kept = kept and (calls is None or all(type(c) is dict for c in calls))
            if not kept:
                store = {"message_id": message_id, "session_id": session_id, "seq": seq}
                out.append(cls.model_validate({**payload, **store, "created_at": created_at}))
                continue
            values["message_id"] = message_id  # the store's own values win, as in the merge
            values["session_id"] = session_id
            values["seq"] = seq
            values["created_at"] = created_at
            values["role"] = role
            message = new(cls)
            set_(message, "__dict__", values)
            # A derived role is left unset, as validation leaves it.
            set_(message, "__pydantic_fields_set__", payload.keys() | store_fields)
            set_(message, "__pydantic_extra__", extra)
            set_(message, "__pydantic_private__", None)
            out.append(message)
        return out

    def payload(self) -> dict[str, Any]:
        """Return the message as the client appended it: no store fields, unset stays unset."""
        data = self.model_dump(mode="json", exclude_unset=True)
        for key in ("message_id", "session_id", "seq", "created_at", "session_version"):
            data.pop(key, None)
        return data


_TEXT = (str, type(None))
#: The payload fields of a Message (``role`` aside) -> the exact types of the values
#: it keeps as they are; JSON decodes to exactly these. ``session_version`` is never
#: stored, so a payload holding one takes the validating way.
_STORED_TYPES: dict[str, tuple[type, ...]] = {
    "content": (str, list, type(None)),
    "name": _TEXT,
    "tool_calls": (list, type(None)),
    "tool_call_id": _TEXT,
    "run_id": _TEXT,
    "metadata": (dict, type(None)),
    "session_version": (type(None),),
}


#: Every field of a Message with its default, in declaration order (as validation
#: fills ``__dict__``); the required ones are always overwritten.
_MESSAGE_DEFAULTS: dict[str, Any] = {
    name: info.default for name, info in Message.model_fields.items()
}
_MESSAGE_FIELDS = _MESSAGE_DEFAULTS.keys()
#: The fields a store supplies beside the payload: always set.
_STORE_FIELDS = frozenset({"message_id", "session_id", "seq", "created_at"})
_ROLES: dict[str, Role] = {role.value: role for role in Role}


class WorkingMemory(_Snapshot):
    """The agent's current understanding of its task: one JSON object per session.

    ``data`` holds the standard keys ``goal`` (str), ``completed`` (list), ``errors``
    (list), ``next_action`` (str), ``facts`` (object) and any free-form keys. ``version``
    is the session version written by the last memory update (0 = never written).
    ``session_version`` is the session's version when this copy was read or written: pass
    it as ``expected_version`` to change the memory read-modify-write without a lost
    update, with no second read of the session. ``None`` when unknown: a store's own
    copy, or an idempotent replay recorded before the field existed.
    """

    session_id: str
    version: int = 0
    updated_at: datetime | None = None
    session_version: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def goal(self) -> str | None:
        """The task the agent is working on."""
        return self.data.get("goal")

    @property
    def completed(self) -> list[Any]:
        """What is already done, oldest first."""
        return list(self.data.get("completed") or [])

    @property
    def errors(self) -> list[Any]:
        """Errors seen so far."""
        return list(self.data.get("errors") or [])

    @property
    def next_action(self) -> str | None:
        """What the agent means to do next."""
        return self.data.get("next_action")

    @property
    def facts(self) -> dict[str, Any]:
        """Things learned about the world (``{"missing_module": "requests"}``)."""
        return dict(self.data.get("facts") or {})


#: The scope of a shared-memory document: per agent (``app``) or per user and agent
#: (``user``).
Scope = Literal["app", "user"]


class MemoryVersion(_Snapshot):
    """One version of a session's working-memory history
    (``list_memory_versions``): the memory as of message ``seq`` and of every later
    seq up to the next version's (``get_working_memory(at_seq=...)``).

    ``seq`` is the first message seq it was in effect at: the history's length when
    the write was stored (0: before the first message). A history keeps one version per
    seq, the newest (docs/semantics.md, "Working-memory history"). ``version`` is the
    session version its write produced, ``updated_at`` when, ``data`` the document.
    """

    seq: int
    version: int
    updated_at: datetime | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class SharedMemory(_Snapshot):
    """A JSON object shared by sessions: per agent (``scope="app"``, every user of the
    agent, ``user_id`` None) or per user and agent (``scope="user"``, that user's
    sessions of the agent).

    ``version`` counts the writes (0 = never written: it reads as an empty object);
    ``updated_at`` is the last write's time (None before the first). Optimistic
    locking of the document uses this version, not a session's.
    """

    scope: Scope
    agent: str
    user_id: str | None = None
    version: int = 0
    updated_at: datetime | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class ToolCall(_Snapshot):
    """A tool that really ran: what was called, with what, and what came back.

    ``call_id`` is ours: unique in the session, generated (``call_...``) unless the
    caller chose it. ``provider_call_id`` is the model provider's id for the call (the
    ``tool_call_id`` its messages carry); providers reuse ids within one conversation,
    so it is not unique: :meth:`SessionManager.find_tool_call` by provider id returns
    the newest. ``duration_ms`` is milliseconds between ``started_at`` and ``ended_at``.
    ``arguments_hash`` is the SHA-256 of the canonical JSON of ``arguments``; it is how
    :meth:`SessionManager.find_tool_call` finds an earlier identical call.
    ``session_version`` is the session's version after the write that returned this
    call (pass it as the next ``expected_version``); None on a read.
    """

    call_id: str
    session_id: str
    seq: int
    provider_call_id: str | None = None
    run_id: str | None = None
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_hash: str
    result: Any = None
    status: ToolCallStatus = ToolCallStatus.OK
    error: str | None = None
    started_at: datetime
    ended_at: datetime
    duration_ms: float
    created_at: datetime
    session_version: int | None = None


class RunStep(_Snapshot):
    """One step of a run: a model call, a tool call, a message. ``index`` starts at 0.

    ``session_version`` is the session's version after the write that returned this
    step; None on a read.
    """

    run_id: str
    index: int
    kind: str
    name: str | None = None
    input: Any = None
    output: Any = None
    status: str = "ok"
    error: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    session_version: int | None = None


class UsageEntry(_Snapshot):
    """The normalised token counts of one model in one run: a row of the usage ledger
    (docs/semantics.md, "Usage and budgets"). Counts are integers >= 0, as the provider
    reported them; ``reasoning_tokens`` are also inside ``output_tokens`` for the
    providers that report both (OpenAI, Gemini), so totals never add them twice.

    Attributes:
        model: the model's name as the caller gave it; None when not said.
    """

    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class UsageTotal(_Snapshot):
    """The usage of one group of runs (``SessionManager.get_usage``).

    Attributes:
        group: the session id, agent, model (None: runs that named none) or UTC day
            (``YYYY-MM-DD``) of the group, as ``group_by`` asked.
        input_tokens ... reasoning_tokens: the sums of the ledger's counts.
        total_tokens: input + output + cache read + cache write tokens (reasoning tokens
            are inside output): what a token budget counts.
        runs: how many runs reported usage in the group.
        cost: the price of the group's tokens by the operator's price table, in its
            currency; None when a model of the group with tokens has no price.
    """

    group: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    runs: int = 0
    cost: float | None = None


class Budget(_Snapshot):
    """A usage budget of a user (over all their sessions) or of one session, and what
    is spent of it (docs/semantics.md, "Usage and budgets"). Once ``used_tokens``
    reaches ``max_tokens`` or ``used_cost`` reaches ``max_cost``, ``start_run`` and
    ``add_run_step`` raise :class:`~agentsession.errors.BudgetExceeded`.

    Attributes:
        user_id: the user the budget is of (the session's owner for a session budget).
        session_id: the session; None for the user's budget.
        max_tokens: the bound on ``total_tokens``; None: no token bound.
        max_cost: the bound on the cost (the price table's currency); None: no cost bound.
        used_tokens: the ``total_tokens`` of the usage counted against it.
        used_cost: the cost of that usage; None when no price table is set.
            Tokens of a model without a price count no cost.
        updated_at: when the budget was last set; None when none is set.
    """

    user_id: str
    session_id: str | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    used_tokens: int = 0
    used_cost: float | None = None
    updated_at: datetime | None = None


class Run(_Snapshot):
    """One task inside a session (locate a bug, fix it, verify), with its steps.

    ``usage`` counts tokens as the caller reported them (any names, e.g.
    ``input_tokens``, ``prompt_tokens``, ``total_tokens``); ``usage_entries`` are the
    same counts normalised, one per model (the usage ledger's rows of this run; empty
    for a run that reported none).
    ``seq`` numbers the runs of a session from 1. ``step_count`` is how many steps the
    run has; ``steps`` holds at most a window of them, oldest first: none in a listing
    (``list_runs``), the first page in ``get_run``. ``len(steps) < step_count`` means
    there are more: page through them with ``list_run_steps``. ``session_version`` is
    the session's version after the write that returned this run; None on a read.
    ``lease_seconds`` is the run's lease (None: it holds none) and ``lease_expires_at``
    when it lapses unless a heartbeat extends it; a run whose lease lapsed is
    INTERRUPTED (docs/semantics.md, "Run leases").
    """

    run_id: str
    session_id: str
    seq: int
    input: Any = None
    status: RunStatus = RunStatus.RUNNING
    created_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error: str | None = None
    output: Any = None
    usage: dict[str, int] = Field(default_factory=dict)
    usage_entries: list[UsageEntry] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    step_count: int = 0
    steps: list[RunStep] = Field(default_factory=list)
    session_version: int | None = None
    lease_seconds: float | None = None
    lease_expires_at: datetime | None = None


class SearchHit(_Snapshot):
    """One match of a search across sessions (``SessionManager.search``).

    Attributes:
        session_id: the session the match is in.
        kind: what matched: ``"message"`` (its text parts in any format, tool-call
            arguments and outputs), ``"title"`` (the session's title) or
            ``"tool_call"`` (a recorded tool call's name, arguments and result).
        seq: the message's or the tool call's seq; 0 for a title.
        role: the message's role; None for a title or a tool call.
        snippet: at most 160 characters of the matched text around the first match.
        match_start, match_end: ``snippet[match_start:match_end]`` is the first match
            (offsets in characters, so a page escapes the snippet and marks the match
            itself); both 0 when the match cannot be placed (see ``searchtext.snippet``).
        score: how many times the query occurs in the matched text (case ignored), >= 1.
    """

    session_id: str
    kind: Literal["message", "title", "tool_call"]
    seq: int
    role: str | None = None
    snippet: str
    match_start: int
    match_end: int
    score: int


class TruncateResult(_Snapshot):
    """What ``truncate_messages`` removed.

    Attributes:
        removed: how many messages went (0 when the history already ended at or before
            ``after_seq``: then nothing changed).
        session_version: the session's version after the call (unchanged when
            ``removed`` is 0); pass it as the next ``expected_version``.
    """

    removed: int
    session_version: int


class Rewind(_Snapshot):
    """One rewind of a session (``rewind_session``): its history moved back to
    ``to_seq``.

    Attributes:
        session_id: the session rewound.
        number: 1, 2, 3... per session, in the order of the rewinds.
        to_seq: the seq the history was moved back to (the messages above it left).
        count: how many messages left the history.
        mode: ``"hide"`` (the messages are kept, readable by this ``number``) or
            ``"remove"`` (they were deleted).
        memory_version: the version of the working memory the rewind wrote (the
            memory as of ``to_seq``).
        created_at: when the rewind committed (UTC).
    """

    session_id: str
    number: int
    to_seq: int
    count: int
    mode: Literal["hide", "remove"]
    memory_version: int
    created_at: datetime

    @property
    def seq(self) -> int:
        """The rewind's number: its position in the listing (for paging)."""
        return self.number


class RewindResult(_Snapshot):
    """What ``rewind_session`` did.

    Attributes:
        number: the rewind's number, or None when nothing changed (the session was
            already at ``to_seq`` with that memory: no rewind was recorded).
        to_seq: the seq the history now ends at.
        count: how many messages left the history (0 when nothing changed).
        mode: ``"hide"`` or ``"remove"``, as asked.
        memory_version: the working memory's version after the call.
        session_version: the session's version after the call (unchanged when
            nothing changed); pass it as the next ``expected_version``.
    """

    number: int | None
    to_seq: int
    count: int
    mode: Literal["hide", "remove"]
    memory_version: int
    session_version: int


class Record(_Snapshot):
    """An opaque record of a session: ``(namespace, key) -> (data, meta)``.

    The store keeps ``data`` as bytes and never interprets it; ``meta`` is a small JSON
    object beside it (e.g. the type tag of a serializer). Records go with the session
    on delete and erasure.

    Attributes:
        session_id: the session holding it.
        namespace: 0-128 characters (``""`` is a namespace too).
        key: 1-512 characters, unique within ``(session_id, namespace)``.
        data: the bytes as written.
        meta: the JSON object as written.
        version: the session version written by the write that stored this record.
        updated_at: when that write committed (UTC).
    """

    session_id: str
    namespace: str
    key: str
    data: bytes = b""
    meta: dict[str, Any] = Field(default_factory=dict)
    version: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class RecordWrite:
    """One record to store with ``SessionManager.put_records``.

    Attributes:
        namespace: 0-128 characters, no control characters.
        key: 1-512 characters, no control characters.
        data: the bytes to keep (at most ``Limits.max_record_bytes``).
        meta: a JSON object (at most 64 KiB as JSON).
        if_absent: keep an existing record of this ``(namespace, key)`` untouched
            instead of replacing it (insert-if-absent).
    """

    namespace: str
    key: str
    data: bytes = b""
    meta: Mapping[str, Any] = field(default_factory=dict)
    if_absent: bool = False


class PutRecordsResult(_Snapshot):
    """What ``put_records`` did.

    Attributes:
        written: how many records were inserted or replaced (an ``if_absent`` write
            that found its record is not counted).
        session_version: the session's version after the call (unchanged for ``[]``).
    """

    written: int
    session_version: int


class DeleteRecordsResult(_Snapshot):
    """What ``delete_records`` removed.

    Attributes:
        removed: how many records went (0: nothing changed).
        session_version: the session's version after the call (unchanged when
            ``removed`` is 0).
    """

    removed: int
    session_version: int


class Summary(_Snapshot):
    """A stored summary of the messages ``from_seq..to_seq`` of a session (compaction).

    The messages it covers stay stored and readable; a context built after it leaves
    them out and sends the summary instead (``build_context``). Summaries are numbered
    1, 2, 3... per session in the order they were added; a newer one may name an older
    one in ``supersedes`` (the older one stays readable).

    Attributes:
        session_id: the session summarised.
        number: 1, 2, 3... per session, in the order added.
        text: the summary itself.
        from_seq, to_seq: the first and last seq it covers (inclusive).
        author: who wrote it (free text, e.g. ``"engine"``; defaults to the caller's
            user id).
        model: the model that wrote it, if any.
        summary_tokens: tokens of ``text``, by ``tokenizer``.
        replaced_tokens: tokens of the messages ``from_seq..to_seq``, by ``tokenizer``.
        tokenizer: the name of the tokenizer that counted them.
        supersedes: the ``number`` of the summary this one replaces, or None.
        created_at: when it was stored (UTC).
        version: the session version written by the write that stored it.
        session_version: the session's version after the write that returned this
            summary; None on a read.
    """

    session_id: str
    number: int
    text: str
    from_seq: int
    to_seq: int
    author: str
    model: str | None = None
    summary_tokens: int
    replaced_tokens: int
    tokenizer: str
    supersedes: int | None = None
    created_at: datetime
    version: int
    session_version: int | None = None


ContextItemKind = Literal["system", "summary", "message", "range"]
ContextDecision = Literal["kept", "summarised", "dropped"]
ContextReason = Literal[
    "memory", "summary", "fits", "covered_by_summary", "over_budget", "older_exchange", "unpaired"
]


class ContextItem(_Snapshot):
    """One part of a context, or of the history it left out, and why: an entry of
    ``Context.explanation`` (``build_context(explain=True)``; docs/semantics.md,
    "Context provenance").

    Attributes:
        kind: ``"system"`` (the text rendered from working memory), ``"summary"`` (the
            stored summary sent), ``"message"`` (one message) or ``"range"`` (the
            messages ``from_seq..to_seq``, left out without being read one by one).
        decision: ``"kept"`` (sent), ``"summarised"`` (left out: the summary sent
            covers it) or ``"dropped"`` (left out).
        reason: why, a stable code: ``"memory"`` (the system text), ``"summary"`` (the
            newest summary that may be used), ``"fits"`` (a message within the budget),
            ``"covered_by_summary"``, ``"over_budget"`` (older than the oldest cut that
            fits the budget), ``"older_exchange"`` (an older exchange of a newest turn
            too long for the budget), ``"unpaired"`` (its tool call, tool result or
            reasoning successor is not in the window).
        tokens: its tokens by the context's tokenizer; None for a range (not counted).
        seq: a message's seq.
        from_seq, to_seq: the seqs a summary or a range covers (inclusive).
        summary_number: the summary sent (kind ``summary``) or covering the range.
        memory_version: the working-memory version the system text was rendered from
            (0: never written).
    """

    kind: ContextItemKind
    decision: ContextDecision
    reason: ContextReason
    tokens: int | None = None
    seq: int | None = None
    from_seq: int | None = None
    to_seq: int | None = None
    summary_number: int | None = None
    memory_version: int | None = None


class Context(_Snapshot):
    """What to send to a model for a session, within a token budget (``build_context``).

    Send ``system`` (if not empty) as the system prompt, then ``summary.text`` (if a
    summary is used) as an earlier-conversation note, then ``messages`` as they are
    (:meth:`Message.payload`). Token counts are the tokenizer's (``tokenizer``).

    Attributes:
        session_id: the session.
        session_version: the session's version the context was read at.
        system: the text rendered from working memory ("" when it holds none of the
            standard keys).
        summary: the newest summary covering history older than ``messages``, or None.
        messages: the newest messages that fit, oldest first; no tool call without
            its result, no result without its call.
        system_tokens, summary_tokens, message_tokens: tokens of each part.
        total_tokens: their sum, at most ``budget_tokens``.
        budget_tokens: the budget asked for.
        tokenizer: the tokenizer's name.
        omitted_messages: how many messages newer than the summary (or the start of
            history) were left out for the budget.
        explanation: with ``explain=True``, the provenance of every part
            (:class:`ContextItem`): the system text, the summary, each message kept
            or read and left out, and the ranges left out unread, in seq order; the
            kept items' tokens add up to ``total_tokens``. None otherwise.
    """

    session_id: str
    session_version: int
    system: str
    summary: Summary | None = None
    messages: list[Message]
    system_tokens: int
    summary_tokens: int
    message_tokens: int
    total_tokens: int
    budget_tokens: int
    tokenizer: str
    omitted_messages: int
    explanation: list[ContextItem] | None = None


class AuditEvent(_Snapshot):
    """Who changed what, and when. Written in the same transaction as the change.

    Holds no message content. ``seq`` increases across the whole store. After a session
    is deleted only its tombstone event (``action="session.deleted"``) remains.
    ``prev_hash`` and ``hash`` chain a session's events (SHA-256 hex; None on events
    written before the chain existed): :mod:`agentsession.auditchain`.
    """

    seq: int
    session_id: str
    user_id: str
    actor: str
    action: str
    at: datetime
    version_before: int | None = None
    version_after: int | None = None
    request_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    prev_hash: str | None = None
    hash: str | None = None


class AuditBreak(_Snapshot):
    """The first broken link of a session's audit chain (:mod:`agentsession.auditchain`).

    ``session_id`` is the session (or deleted session) whose chain is broken;
    ``version`` the ``version_after`` (else ``version_before``) of the event at the
    break, None when the break is the session row's head. ``problem`` is ``changed``
    (an event's hash does not match its content), ``removed`` (an event the chain
    names is missing), ``reordered`` (the events are there in another order) or
    ``unchained`` (a session whose head names an event, with none kept); ``detail``
    says it in one sentence. A break of the store-wide session chain
    (:mod:`agentsession.sessionchain`) carries ``link``, the seq of the link at the
    break (None otherwise), and names the session of that link where it can be known:
    ``session_id`` is ``""`` when it cannot (a missing link whose session left no
    event, or a missing head of the chain).
    """

    session_id: str
    version: int | None = None
    problem: str
    detail: str
    link: int | None = None


class AuditReport(_Snapshot):
    """What ``verify_audit`` found: how many ``sessions`` (live, or deleted with a
    tombstone) and audit ``events`` it checked, and the first broken link (``broken``;
    None when every chain is intact)."""

    sessions: int
    events: int
    broken: AuditBreak | None = None


class Change(AuditEvent):
    """One committed write, as the change feed delivers it: the write's audit event
    (every field of :class:`AuditEvent`, content-free) and ``cursor``, where the feed
    resumes after it.

    ``cursor`` is opaque and belongs to the store that gave it (its order is the feed's
    order, not ``seq``'s: docs/semantics.md, "Change feed"); pass it back as ``after``.
    """

    cursor: str


class ChangePage(_Snapshot):
    """A page of the change feed, oldest first.

    Unlike a listing's :class:`Page`, a feed page always says where to resume:
    ``next_cursor`` is the cursor of its last change, or the ``after`` it was asked with
    when it holds none (None only when the feed was read from its start and is empty).
    Pass it back as ``after`` to get what was committed since; nothing is ever skipped
    or repeated. ``has_more`` is True when more changes were already waiting beyond
    this page (read again at once rather than wait).
    """

    items: list[Change]
    next_cursor: str | None = None
    has_more: bool = False

    def __iter__(self) -> Iterator[Change]:  # type: ignore[override]
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


class Page(_Snapshot, Sequence[T], Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` for the next page.

    ``next_cursor`` is None on the last page, and only there: a page that leaves items
    out always has one, and a cursor never leads to an empty page. ``has_more`` says
    the same as a bool (it is in the JSON too).

    A page is a read-only sequence of its ``items``: ``for item in page``,
    ``len(page)``, ``page[0]``, ``page[-1]``, ``page[1:3]`` (a list), ``item in page``,
    ``reversed(page)``; ``bool(page)`` is False when it holds no items (an empty
    listing, or ``limit=0``), whatever ``has_more`` says. Iterating it therefore does not
    give pydantic's ``(field, value)`` pairs, so ``dict(page)`` does not work: use
    ``page.model_dump()`` (the JSON shape ``{"items", "next_cursor", "has_more"}``).
    """

    items: list[T]
    next_cursor: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def has_more(self) -> bool:
        """True exactly when ``next_cursor`` is not None."""
        return self.next_cursor is not None

    # pydantic's __iter__ yields (field, value) pairs; a page iterates its items.
    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self.items[index]

    def __bool__(self) -> bool:
        return bool(self.items)

    def __contains__(self, item: object) -> bool:
        return item in self.items

    def __reversed__(self) -> Iterator[T]:
        return reversed(self.items)


class RestoredSession(_Snapshot):
    """Everything an engine needs to continue a session, as one snapshot.

    Each list is a bounded window, oldest first: ``messages`` the most recent ones
    (aligned to whole tool-call groups), ``tool_calls`` the most recent calls, ``runs``
    the most recent runs (a run still RUNNING is among them: a session runs one at a
    time, its newest). How many: the ``Policy.restore_*_limit`` fields. Each
    ``*_next_cursor`` pages on to older items (``cursor=`` of ``get_messages``,
    ``get_tool_history``, ``list_runs``); None when the window holds them all.
    ``interrupted_run_ids`` are the runs this restore found RUNNING and marked
    INTERRUPTED; ``interrupted_call_ids`` the tool calls an interrupted run left without
    a result, which this restore answered with a synthetic result (metadata
    ``{"agentsession": {"synthetic": "interrupted"}}``); ``previous_status`` the status
    the session had before this restore (CLOSED, EXPIRED, or ACTIVE when taken over).
    """

    session: Session
    working_memory: WorkingMemory
    messages: list[Message]
    tool_calls: list[ToolCall]
    runs: list[Run]
    messages_next_cursor: str | None = None
    tool_calls_next_cursor: str | None = None
    runs_next_cursor: str | None = None
    interrupted_run_ids: list[str] = Field(default_factory=list)
    interrupted_call_ids: list[str] = Field(default_factory=list)
    previous_status: SessionStatus
