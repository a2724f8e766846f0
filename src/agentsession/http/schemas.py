"""Request bodies and query parameters of the HTTP API. Responses are the models of
:mod:`agentsession.models` (``Page`` for every listing), :class:`Items` for a list
(``{"items": [...]}``) and :class:`CountResult` for a number (``{"count": n}``).

These models only shape requests for FastAPI and OpenAPI; every rule (sizes, JSON
policy, lifecycle) is checked by the SessionManager. Bounded text fields state their
longest value from :mod:`agentsession.fieldlimits`; a longer one is a 422 here. Numbers
are strict: ``"5"`` or ``true`` where a number belongs is a 422, never coerced. Optional
fields a client leaves out are told apart from explicit nulls via ``model_fields_set``.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from fastapi import Query
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..fieldlimits import (
    CALL_ID_CHARS,
    EXTERNAL_KEY_CHARS,
    IDEMPOTENCY_KEY_CHARS,
    MODEL_CHARS,
    NAME_CHARS,
    REASON_CHARS,
    RECORD_KEY_CHARS,
    RECORD_NAMESPACE_CHARS,
    SEARCH_QUERY_CHARS,
    STEP_KIND_CHARS,
    STEP_NAME_CHARS,
    STEP_STATUS_CHARS,
    SUMMARY_LABEL_CHARS,
    TEXT_CHARS,
    TITLE_CHARS,
    TOOL_NAME_CHARS,
)
from ..models import Message, ToolCallStatus
from ..service.paging import CURSOR_MAX_CHARS
from ..service.policy import Limits
from ..service.validation import MAX_COUNT, MAX_LEASE_SECONDS, MAX_TTL_SECONDS

__all__ = [
    "BOUNDED_CURSOR",
    "CALL_ID",
    "EXTERNAL_KEY",
    "IDEMPOTENCY_KEY",
    "KEY_BOUND",
    "MODEL",
    "NAME",
    "PAGE_MAX",
    "QUERY",
    "QUERY_OVERRIDES",
    "RECORD_KEY",
    "RECORD_NAMESPACE",
    "SEARCH_QUERY",
    "TOOL",
    "AddSummary",
    "AppendMessages",
    "CountResult",
    "CreateSession",
    "FindToolCall",
    "FinishRun",
    "ForkSession",
    "HeartbeatRun",
    "Items",
    "LimitQuery",
    "OpenSession",
    "PutRecords",
    "Reason",
    "RecordIn",
    "RecordOut",
    "RecordToolCall",
    "RestoreSession",
    "Rfc3339",
    "SetBudget",
    "SharedMemoryOps",
    "StartRun",
    "StepIn",
    "UpdateSession",
    "UpdateWorkingMemory",
    "decode_base64",
    "query_parameter",
    "seq_query",
]

#: The largest page a listing gives: ``Limits.max_page_size`` of the default limits,
#: so the OpenAPI document states the bound the SessionManager enforces.
PAGE_MAX = Limits().max_page_size

#: The patterns the service enforces, as the OpenAPI document states them (ECMA regex).
#: User ids, agents, step kinds and statuses (``ids.NAME_PATTERN``).
NAME = rf"^[A-Za-z0-9._:@+\-]{{1,{NAME_CHARS}}}$"
#: A search query (``SessionManager.search``): a character other than NUL, space, tab
#: and line breaks, and no NUL.
SEARCH_QUERY = r"^[^\x00]*[^\x00 \t\n\r][^\x00]*$"
#: Tool names (``ids.is_label``).
TOOL = rf"^[A-Za-z0-9._:\-]{{1,{TOOL_NAME_CHARS}}}$"
#: Caller-chosen and provider tool-call ids (``ids.is_label``).
CALL_ID = rf"^[A-Za-z0-9._:\-]{{1,{CALL_ID_CHARS}}}$"
#: A session's external key (``validation.check_external_key``): no control characters.
EXTERNAL_KEY = rf"^[^\x00-\x1f\x7f-\x9f]{{1,{EXTERNAL_KEY_CHARS}}}$"
#: A session record's namespace and key (``validation.check_record_name``).
RECORD_NAMESPACE = rf"^[^\x00-\x1f\x7f-\x9f]{{0,{RECORD_NAMESPACE_CHARS}}}$"
RECORD_KEY = rf"^[^\x00-\x1f\x7f-\x9f]{{1,{RECORD_KEY_CHARS}}}$"
#: A model's name (``usage.check_model``): printable ASCII, no space.
MODEL = rf"^[!-~]{{1,{MODEL_CHARS}}}$"
#: Printable ASCII; no space at either end, which HTTP would strip from a header.
IDEMPOTENCY_KEY = rf"^[!-~]([ -~]{{0,{IDEMPOTENCY_KEY_CHARS - 2}}}[!-~])?$"


def id_pattern(prefix: str) -> str:
    """The pattern of a generated id with ``prefix`` (``ids.is_id``), e.g. ``ses``."""
    return rf"^{prefix}_[a-z2-7]{{26}}$"


def seq_query(description: str | None = None) -> Any:
    """The ``Query`` of a seq bound (``after``, ``before``): an integer 0..2**53-1."""
    return Query(ge=0, le=MAX_COUNT, description=description)


#: A record key bound (``prefix``, ``after``, ``before`` of a records listing): a key's
#: characters, possibly none.
KEY_BOUND = rf"^[^\x00-\x1f\x7f-\x9f]{{0,{RECORD_KEY_CHARS}}}$"

#: The query parameters of the routes, by name: the limits and description of each,
#: declared once. A route built from the table of operations
#: (:mod:`agentsession.http.routes.table`) takes the type from the manager's argument
#: of the same name and the rest from here (:func:`query_parameter`); a route written
#: by hand takes them from here too.
QUERY: dict[str, Any] = {
    "status": Query(),  # an enum: its values are its limits
    "agent": Query(max_length=NAME_CHARS, pattern=NAME, description="The session's agent."),
    "external_key": Query(
        max_length=EXTERNAL_KEY_CHARS,
        pattern=EXTERNAL_KEY,
        description="The session's external key, exactly (query-encoded).",
    ),
    "limit": Query(
        ge=0,
        le=PAGE_MAX,
        description=f"Page size (default {Limits().default_page_size}, at most {PAGE_MAX}).",
    ),
    "cursor": Query(max_length=CURSOR_MAX_CHARS, description="`next_cursor` of the previous page."),
    "all_users": Query(description="Every user's sessions (admin keys)."),
    "parent_session_id": Query(
        pattern=id_pattern("ses"), description="Only the forks made from this session."
    ),
    "after": seq_query(),
    "before": seq_query("Start below this seq. Not together with `after`: 400."),
    "align_tool_calls": Query(),  # a boolean
    "after_seq": seq_query("Remove every message above this seq (0 = all)."),
    "at_seq": seq_query("The memory as it stood at this message seq (0..message_count)."),
    "tool": Query(max_length=TOOL_NAME_CHARS, pattern=TOOL),
    "namespace": Query(
        max_length=RECORD_NAMESPACE_CHARS,
        pattern=RECORD_NAMESPACE,
        description="Only this namespace.",
    ),
    "prefix": Query(max_length=RECORD_KEY_CHARS, pattern=KEY_BOUND),
    # search's: the manager's `query` is `q` on the wire.
    "query": Query(
        alias="q",
        min_length=1,
        max_length=SEARCH_QUERY_CHARS,
        pattern=SEARCH_QUERY,
        description="The text to find (case ignored): no NUL, not only spaces and line breaks.",
    ),
    "session_id": Query(pattern=id_pattern("ses"), description="Only this session."),
    # get_usage's and the budgets'.
    "group_by": Query(
        pattern="^(session|agent|model|day)$",
        description="One total per session, agent, model or UTC day.",
    ),
    "since": Query(description="Only runs finished at or after this time (RFC 3339, with offset)."),
    "until": Query(description="Only runs finished before this time (RFC 3339, with offset)."),
    "target_user_id": Query(
        alias="user_id",
        max_length=NAME_CHARS,
        pattern=NAME,
        description="Whose user budget (default: the caller's; another user's: admin "
        "keys). Not with `session_id`.",
    ),
}

#: ``cursor`` of a listing that also takes a seq bound (``after``, ``before``), with the
#: rule between them (``paging.Listing.start``) stated.
BOUNDED_CURSOR = Query(
    max_length=CURSOR_MAX_CHARS,
    description="`next_cursor` of the previous page. Not together with a seq bound "
    "(`after`, `before`): 400, `field` `cursor`.",
)

#: Where a parameter of one operation differs from :data:`QUERY`:
#: ``{(operation, name): Query}``.
QUERY_OVERRIDES: dict[tuple[str, str], Any] = {
    ("get_messages", "after"): seq_query("Start above this seq. Not together with `before`: 400."),
    ("replace_messages", "after_seq"): seq_query(
        "Replace every message above this seq (0 = all; at or above the session's "
        "`message_count`: remove nothing, append)."
    ),
    ("list_summaries", "after"): seq_query("Only numbers above this."),
    ("changes", "after"): Query(
        max_length=CURSOR_MAX_CHARS,
        description="A `cursor` (`next_cursor`) of this feed: the changes after it.",
    ),
    ("changes", "all_users"): Query(description="Every user's changes (admin keys)."),
    ("list_run_steps", "after"): seq_query("A step index (exclusive)."),
    # The manager refuses an empty page of steps.
    ("list_run_steps", "limit"): Query(
        ge=1,
        le=PAGE_MAX,
        description=f"Page size, 1..{PAGE_MAX} (default {Limits().default_page_size}).",
    ),
}


def query_parameter(operation: str, name: str, names: Collection[str]) -> Any:
    """The ``Query`` of the query parameter ``name`` of ``operation``.

    Args:
        operation: the operation's name (a row of the table of operations).
        name: the parameter (the manager's argument of that name).
        names: every query parameter of the operation: ``cursor`` beside a seq bound
            (``after``, ``before``) is :data:`BOUNDED_CURSOR`.

    Returns:
        Its override in :data:`QUERY_OVERRIDES`, else its entry in :data:`QUERY`.

    Raises:
        LookupError: ``name`` is declared nowhere (declare its limits in :data:`QUERY`).
    """
    override = QUERY_OVERRIDES.get((operation, name))
    if override is not None:
        return override
    if name == "cursor" and {"after", "before"} & set(names):
        return BOUNDED_CURSOR
    if name not in QUERY:
        raise LookupError(
            f"{operation}: no query parameter `{name}` in agentsession.http.schemas.QUERY"
        )
    return QUERY[name]


#: ``limit`` of a listing; absent = the service's default page size.
LimitQuery = Annotated[int | None, QUERY["limit"]]


T = TypeVar("T")


def _integral(value: Any) -> Any:
    # JSON Schema counts 1.0 as an integer; a strict int would refuse it.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# A JSON integer, ``1.0`` included; ``"1"``, ``true`` and ``1.5`` are refused. The
# bounds sit before the validator: after it, pydantic would write them into the OpenAPI
# document as ``ge``/``le``, which JSON Schema ignores, so fuzzers and clients would
# take any integer for valid.
#: ``message_limit``: an integer from 0 to ``PAGE_MAX``.
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d{1,6})?([Zz]|[+-]\d\d:\d\d)")


def _rfc3339(value: Any) -> datetime:
    """An RFC 3339 date-time with its offset, within the years 1-9999 in UTC: what a
    time query parameter takes (not a Unix time, nor a time without an offset)."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError("an RFC 3339 date-time with an offset, e.g. 2026-03-01T00:00:00Z")
    try:
        return datetime.fromisoformat(value.upper()).astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError("a date-time within the years 1-9999 in UTC") from None


#: A time query parameter (``since``, ``until``): see :func:`_rfc3339`.
Rfc3339 = Annotated[datetime, BeforeValidator(_rfc3339)]

PageSize = Annotated[int, Field(strict=True, ge=0, le=PAGE_MAX), BeforeValidator(_integral)]
#: A count (a ``usage`` value): an integer from 0 to 2**53-1.
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT), BeforeValidator(_integral)]
#: ``ttl_seconds``: its bounds (``check_ttl``) stated for the OpenAPI document.
_TTL: dict[str, Any] = {"exclusiveMinimum": 0, "maximum": MAX_TTL_SECONDS}


class Items(BaseModel, Generic[T]):
    """The answer to a batch append: the stored ``items`` in seq order."""

    items: list[T]


class CountResult(BaseModel):
    """The answer to an operation whose result is a number: ``{"count": n}``."""

    count: int


class PopResult(BaseModel):
    """The answer to a pop: the removed ``message``, or null when the history was
    empty (nothing changed)."""

    message: Message | None


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SharedMemoryOps(_Body):
    """JSON Patch ops (RFC 6902) by shared-memory scope; a scope left out is untouched."""

    app: list[dict[str, Any]] | None = None
    user: list[dict[str, Any]] | None = None

    @staticmethod
    def by_scope_of(ops: SharedMemoryOps | None) -> dict[str, list[dict[str, Any]]] | None:
        """The scopes sent, as ``shared_memory_ops`` of a manager call (None: none)."""
        return None if ops is None else ops.model_dump(exclude_none=True)


class OpenSession(_Body):
    """``PUT /v1/sessions-by-key``: the fields of a session it creates (ignored when
    the key's session exists)."""

    title: str | None = Field(default=None, max_length=TITLE_CHARS)
    metadata: dict[str, Any] | None = None
    ttl_seconds: float | None = Field(
        default=None,
        strict=True,
        description="Idle timeout in seconds (a JSON number), at most 10 years.",
        json_schema_extra=_TTL,
    )
    working_memory: dict[str, Any] | None = None


class CreateSession(OpenSession):
    """``POST /v1/sessions``."""

    agent: str = Field(default="default", max_length=NAME_CHARS, pattern=NAME)
    external_key: str | None = Field(
        default=None,
        max_length=EXTERNAL_KEY_CHARS,
        pattern=EXTERNAL_KEY,
        description="The caller's own name for the session, unique per user and agent "
        "(1-256 characters, so at most 1024 bytes of UTF-8, no control characters; compared "
        "exactly). A key in use is a 409 `session-exists` naming the session.",
    )
    shared_memory_ops: SharedMemoryOps | None = Field(
        default=None,
        description="RFC 6902 JSON Patch ops by scope for the shared memory of the "
        "session's agent (`app`, admin keys only) and of its owner and agent (`user`), "
        "applied in the same transaction.",
    )


class ForkSession(_Body):
    """``POST /v1/sessions/{id}/fork``: where to fork, and the fork's own fields. A
    ``ttl_seconds`` left out is the parent's; null is no TTL."""

    at_seq: Count | None = Field(
        default=None,
        description="The parent's seq to fork at, 0..message_count; absent = all of it.",
    )
    title: str | None = Field(default=None, max_length=TITLE_CHARS)
    metadata: dict[str, Any] | None = None
    external_key: str | None = Field(
        default=None,
        max_length=EXTERNAL_KEY_CHARS,
        pattern=EXTERNAL_KEY,
        description="The fork's own key, unique per user and agent (as on create).",
    )
    ttl_seconds: float | None = Field(default=None, strict=True, json_schema_extra=_TTL)


class UpdateSession(_Body):
    """``PATCH /v1/sessions/{id}``: fields sent are set (null clears), others stay."""

    title: str | None = Field(default=None, max_length=TITLE_CHARS)
    metadata: dict[str, Any] | None = None
    ttl_seconds: float | None = Field(default=None, strict=True, json_schema_extra=_TTL)


class UpdateWorkingMemory(_Body):
    """``POST .../memory``: one of ``data``, ``patch`` and ``ops``, with
    ``shared_memory_ops`` applied in the same transaction."""

    data: dict[str, Any] | None = Field(
        default=None, description="The whole new document. Exactly one of data, patch, ops."
    )
    patch: dict[str, Any] | None = Field(
        default=None, description="An RFC 7396 merge patch. Exactly one of data, patch, ops."
    )
    ops: list[dict[str, Any]] | None = Field(
        default=None, description="RFC 6902 JSON Patch ops. Exactly one of data, patch, ops."
    )
    shared_memory_ops: SharedMemoryOps | None = Field(
        default=None,
        description="RFC 6902 JSON Patch ops by scope for the shared memory of the "
        "session's agent (`app`, admin keys only) and of its owner and agent (`user`), "
        "applied in the same transaction.",
    )


class Reason(_Body):
    """``POST .../close`` and ``.../expire``."""

    reason: str | None = Field(default=None, max_length=REASON_CHARS)


class RestoreSession(_Body):
    """``POST .../restore``."""

    message_limit: PageSize | None = None


class AppendMessages(_Body):
    """``POST .../messages``: one ``message`` or a batch of ``messages``, not both.

    A message is an object with ``role`` and optionally ``content``, ``name``,
    ``tool_calls``, ``tool_call_id``, ``run_id``, ``metadata`` and any other fields
    (kept and returned unchanged). OpenAI Responses items (``function_call``,
    ``function_call_output``, ``custom_tool_call[_output]``, ``reasoning``) may leave
    ``role`` out; it is derived from their ``type`` and not added to what is stored.
    """

    message: dict[str, Any] | None = Field(
        default=None, description="One message. Exactly one of `message` and `messages` (else 422)."
    )
    messages: list[dict[str, Any]] | None = Field(
        default=None,
        description=f"1 to {Limits().max_batch_messages} messages, stored in one step. "
        "Exactly one of `message` and `messages` (else 422).",
        json_schema_extra={"minItems": 1, "maxItems": Limits().max_batch_messages},
    )
    working_memory_patch: dict[str, Any] | None = Field(
        default=None,
        description="An RFC 7396 merge patch applied in the same transaction. Not together "
        "with `working_memory_ops`: 400, `field` `working_memory_ops`.",
    )
    working_memory_ops: list[dict[str, Any]] | None = Field(
        default=None,
        description="RFC 6902 JSON Patch ops applied to the working memory in the same "
        "transaction. Not together with `working_memory_patch`: 400, `field` "
        "`working_memory_ops`.",
    )
    shared_memory_ops: SharedMemoryOps | None = Field(
        default=None,
        description="RFC 6902 JSON Patch ops by scope for the shared memory of the "
        "session's agent (`app`, admin keys only) and of its owner and agent (`user`), "
        "applied in the same transaction.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> AppendMessages:
        if (self.message is None) == (self.messages is None):
            raise ValueError("send exactly one of `message` and `messages`")
        return self


class ReplaceMessages(_Body):
    """``PUT .../messages?after_seq=N``: the messages that take the place of every
    message above seq ``after_seq``, in one step (the message shape of ``POST``)."""

    messages: list[dict[str, Any]] = Field(
        description=f"1 to {Limits().max_batch_messages} messages, stored from seq "
        "`after_seq + 1` in the step that removes the ones above `after_seq`.",
        json_schema_extra={"minItems": 1, "maxItems": Limits().max_batch_messages},
    )


class RecordToolCall(_Body):
    """``POST .../tool-calls``."""

    tool: str = Field(max_length=TOOL_NAME_CHARS, pattern=TOOL)
    arguments: dict[str, Any] | None = None
    result: Any = None
    status: str = Field(default="ok", json_schema_extra={"enum": [s.value for s in ToolCallStatus]})
    error: str | None = Field(default=None, max_length=TEXT_CHARS)
    started_at: datetime | None = Field(
        default=None,
        description="When the call started (default: `ended_at`). Not after `ended_at`: "
        "400, `field` `started_at`.",
    )
    ended_at: datetime | None = Field(
        default=None,
        description="When the call ended (default: now). Not before `started_at`: 400, "
        "`field` `started_at`.",
    )
    run_id: str | None = Field(default=None, pattern=id_pattern("run"))
    call_id: str | None = Field(default=None, max_length=CALL_ID_CHARS, pattern=CALL_ID)
    provider_call_id: str | None = Field(default=None, max_length=CALL_ID_CHARS, pattern=CALL_ID)


#: The rule between the fields of a tool-call lookup (``SessionManager.find_tool_call``).
FIND_RULE = (
    "Exactly one of `tool` (with `arguments`) and `provider_call_id`: 400, `field` "
    "`tool` when neither is given, `provider_call_id` when it comes with `tool` or "
    "`arguments`."
)


class FindToolCall(_Body):
    """``POST .../tool-calls/find``: ``tool`` (with ``arguments``, default ``{}``), or
    ``provider_call_id`` alone."""

    tool: str | None = Field(
        default=None,
        max_length=TOOL_NAME_CHARS,
        pattern=TOOL,
        description=f"The tool's name. {FIND_RULE}",
    )
    arguments: dict[str, Any] | None = Field(
        default=None, description="With `tool`: its arguments (default {})."
    )
    provider_call_id: str | None = Field(
        default=None,
        max_length=CALL_ID_CHARS,
        pattern=CALL_ID,
        description=f"The model provider's call id. {FIND_RULE}",
    )


#: ``lease_seconds``: its bounds (``check_lease``) stated for the OpenAPI document.
_LEASE: dict[str, Any] = {"exclusiveMinimum": 0, "maximum": MAX_LEASE_SECONDS}
_LEASE_TEXT = f"The run's lease in seconds (a JSON number), at most {MAX_LEASE_SECONDS}."


class StartRun(_Body):
    """``POST .../runs``."""

    input: Any = None
    metadata: dict[str, Any] | None = None
    lease_seconds: float | None = Field(
        default=None,
        strict=True,
        description=_LEASE_TEXT + " Without it the run holds no lease.",
        json_schema_extra=_LEASE,
    )


class HeartbeatRun(_Body):
    """``POST .../runs/{run_id}/heartbeat``."""

    lease_seconds: float | None = Field(
        default=None,
        strict=True,
        description=_LEASE_TEXT + " Without it the run's own lease.",
        json_schema_extra=_LEASE,
    )


class StepIn(_Body):
    """``POST .../runs/{run_id}/steps``."""

    kind: str = Field(max_length=STEP_KIND_CHARS, pattern=NAME)
    name: str | None = Field(default=None, max_length=STEP_NAME_CHARS)
    input: Any = None
    output: Any = None
    status: str = Field(default="ok", max_length=STEP_STATUS_CHARS, pattern=NAME)
    error: str | None = Field(default=None, max_length=TEXT_CHARS)
    started_at: datetime | None = None
    ended_at: datetime | None = None


class FinishRun(_Body):
    """``POST .../runs/{run_id}/finish``."""

    status: Literal["SUCCEEDED", "FAILED", "CANCELLED"]
    error: str | None = Field(default=None, max_length=TEXT_CHARS)
    output: Any = None
    usage: dict[str, Count] | None = None
    model: str | None = Field(
        default=None, max_length=MODEL_CHARS, pattern=MODEL, description="The model `usage` is of."
    )
    usage_by_model: dict[str, dict[str, Count]] | None = Field(
        default=None,
        description="Model name -> counts, for a run of several models (not with `usage`).",
    )


class SetBudget(_Body):
    """``PUT /v1/budgets`` (whose budget: the query's ``user_id`` or ``session_id``)."""

    max_tokens: Count | None = None
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)


_BASE64 = "RFC 4648 base64 (standard alphabet, padded)"
#: What ``decode_base64`` takes, as a pattern, so the OpenAPI document says it too
#: (``contentEncoding`` alone is not a constraint a client or a fuzzer checks).
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


def decode_base64(text: str) -> bytes:
    """Strict base64: the standard alphabet, padded, nothing after the padding.

    Raises:
        ValueError: anything else (in a request body: a 422).
    """
    try:
        if len(text) % 4:
            raise ValueError("base64 must be padded to a multiple of 4 characters")
        return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError(f"not {_BASE64}") from None


def _base64(text: str) -> str:
    decode_base64(text)
    return text


class RecordIn(_Body):
    """One record of ``PUT .../records``."""

    namespace: str = Field(default="", max_length=RECORD_NAMESPACE_CHARS, pattern=RECORD_NAMESPACE)
    key: str = Field(max_length=RECORD_KEY_CHARS, pattern=RECORD_KEY)
    data: Annotated[str, AfterValidator(_base64)] = Field(
        default="",
        description=f"The bytes, {_BASE64}; at most `Limits.max_record_bytes` decoded.",
        json_schema_extra={"contentEncoding": "base64", "pattern": BASE64},
    )
    meta: dict[str, Any] | None = Field(default=None, description="A JSON object, at most 64 KiB.")
    if_absent: bool = Field(
        default=False, strict=True, description="Keep an existing record untouched."
    )


class PutRecords(_Body):
    """``PUT .../records``: the records to insert or replace, in one version step."""

    records: list[RecordIn] = Field(
        description=(
            f"At most {Limits().max_batch_messages} records; a (namespace, key) given twice: "
            "the later one wins."
        ),
        json_schema_extra={"maxItems": Limits().max_batch_messages},
    )


class RecordOut(BaseModel):
    """A stored record; ``data`` is its bytes in base64."""

    session_id: str
    namespace: str
    key: str
    data: str = Field(description=_BASE64, json_schema_extra={"contentEncoding": "base64"})
    meta: dict[str, Any]
    version: int
    updated_at: datetime


#: A summary's ``author`` or ``model``: 1-255 characters, no control characters.
SUMMARY_LABEL = rf"^[^\x00-\x1f\x7f-\x9f]{{1,{SUMMARY_LABEL_CHARS}}}$"
#: A seq or summary number: an integer from 1 to 2**53-1.
Positive = Annotated[int, Field(strict=True, ge=1, le=MAX_COUNT), BeforeValidator(_integral)]


class AddSummary(_Body):
    """``POST .../summaries``: a summary of the messages ``from_seq..to_seq``. Token
    counts left out are counted by the default tokenizer (``bytes/4``)."""

    text: str = Field(min_length=1, max_length=TEXT_CHARS)
    from_seq: Positive = Field(
        description="The first seq summarised. At most `to_seq`: 400, `field` `from_seq`."
    )
    to_seq: Positive = Field(
        description="The last seq summarised. At least `from_seq` (400, `field` "
        "`from_seq`) and at most the session's `message_count` (400, `field` `to_seq`)."
    )
    author: str | None = Field(
        default=None,
        max_length=SUMMARY_LABEL_CHARS,
        pattern=SUMMARY_LABEL,
        description="Who wrote it; absent = the caller's user id.",
    )
    model: str | None = Field(default=None, max_length=SUMMARY_LABEL_CHARS, pattern=SUMMARY_LABEL)
    summary_tokens: Count | None = None
    replaced_tokens: Count | None = None
    supersedes: Positive | None = Field(
        default=None, description="The number of an earlier summary this one replaces."
    )


class RewindBody(_Body):
    """``POST .../rewind``: move the session back to message ``to_seq``."""

    to_seq: Count = Field(description="The seq the history ends at afterwards (0..message_count).")
    remove: bool = Field(
        default=False,
        strict=True,
        description="Delete the messages above to_seq instead of keeping them hidden.",
    )
