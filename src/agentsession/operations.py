"""The operations of agentsession, declared once: one :class:`Operation` row each.

A row names an operation (the :class:`~agentsession.service.SessionManager` method,
the OpenAPI ``operationId`` and the client method all carry that name), the text of
its result annotation, its HTTP routes, its CLI command, the description of its
routes, and, when its client flow or its routes are more than a mapping of arguments
to a request, why (``client_by_hand``, ``route_by_hand``).

The table is data, not behaviour: the manager holds the rules. The HTTP service
builds the routes of the rows with no ``route_by_hand`` from them when the app is
created (:mod:`agentsession.http.routes.table`) and takes every route's
``operationId`` from here; the plain client flows are generated from the rows
(``scripts/generate_client.py``); ``tests/test_operations.py`` checks every surface
against every row. It imports no web framework (the client is usable without the
``server`` extra), so a request body is named by its class name in
:mod:`agentsession.http.schemas`, where its field limits are declared.

Adding an operation: docs/architecture.md, "The table of operations".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

__all__ = ["OPERATIONS", "ETagKind", "IfMatch", "Operation", "Problem", "Route", "operation_ids"]

#: What the success answer's ``ETag`` names: the session's version after the call
#: (``"<session_id>@<version>"``), a shared-memory document's own version
#: (``"<version>"``), or nothing.
ETagKind = Literal["none", "session", "document"]

#: ``If-Match`` on the route: not read; read when sent; read, and demanded (428) when
#: the service runs with ``require_if_match``.
IfMatch = Literal["none", "optional", "required"]

#: A problem status a route may answer beyond the ones every route may (400, 401,
#: 404, 408, 413, 422, 429, 431, 500, 503), alone or with the OpenAPI description of
#: what it means on that route.
Problem = int | tuple[int, str]


@dataclass(frozen=True, slots=True)
class Route:
    """One HTTP route of an operation.

    Attributes:
        method: the HTTP method, upper case.
        path: the path template as OpenAPI writes it (``/v1/sessions/{session_id}``).
        status: the success status (an open-or-create also answers 201).
        request: the class name of the JSON body model in
            :mod:`agentsession.http.schemas`; None when the route takes no body or a
            bare JSON document (working and shared memory).
        etag: what the success answer's ``ETag`` names (:data:`ETagKind`).
        if_match: how the route treats ``If-Match`` (:data:`IfMatch`).
        idempotency_key: the route replays a retried write with the same
            ``Idempotency-Key``.
        operation_id: the OpenAPI ``operationId`` when it is not the operation's name
            (a second route of one operation).
        problems: the problem statuses it may answer beyond every route's
            (:data:`Problem`), in the order the OpenAPI document lists them.
        optional_body: the body may be left out (every member then takes its default).
        generated_key: with ``idempotency_key``, the clients send a new key when the
            caller passes none (False: a retry is harmless and a key per call would
            cost a stored replay, as for a heartbeat).
        answer_member: the member of the JSON object answer that holds the result
            (``{"count": n}``: ``"count"``); None when the answer is the result.
    """

    method: str
    path: str
    status: int = 200
    request: str | None = None
    etag: ETagKind = "none"
    if_match: IfMatch = "none"
    idempotency_key: bool = False
    operation_id: str | None = None
    problems: tuple[Problem, ...] = ()
    optional_body: bool = False
    generated_key: bool = True
    answer_member: str | None = None


@dataclass(frozen=True, slots=True)
class Operation:
    """One public operation.

    Attributes:
        name: the manager method, the client method and the ``operationId`` of each
            of its routes that names no other.
        result: the return annotation of the manager and client methods, as written.
        routes: its HTTP routes; empty when it has none of its own.
        cli: the ``agentsession`` command that runs it (``"sessions list"``), if any.
        client_by_hand: why its client flow is written by hand (more than a mapping of
            arguments to one request); None when it is generated from the row.
        route_by_hand: why its routes are written by hand (more than a mapping of a
            request to the manager's arguments), or why it has none; None when they
            are built from the row.
        library: a method of ``SessionManager`` and ``AsyncSessionManager``.
        client: a method of ``SessionClient`` and ``AsyncSessionClient``.
        doc: the description of its routes built from the row (OpenAPI's
            ``description``, reStructuredText as in a docstring); a route written by
            hand has its endpoint's docstring.
        tag: the OpenAPI tag of its routes: its section of :data:`OPERATIONS`.
        post_reads: its POST route only reads (a query too big or too structured for
            a query string); see :attr:`writes`.
    """

    name: str
    result: str
    routes: tuple[Route, ...] = ()
    cli: str | None = None
    client_by_hand: str | None = None
    route_by_hand: str | None = None
    library: bool = True
    client: bool = True
    doc: str = ""
    tag: str = ""
    post_reads: bool = False

    @property
    def writes(self) -> bool:
        """Whether the operation may change anything, so a ``read`` API key may not call
        it (docs/security.md, "Scopes"): a route with another method than GET, unless
        :attr:`post_reads` says its POST only reads."""
        allowed = {"GET", "POST"} if self.post_reads else {"GET"}
        return any(route.method not in allowed for route in self.routes)


_S = "/v1/sessions/{session_id}"
_SHARED = "/v1/shared-memory/{scope}/{agent}"
_RUN = _S + "/runs/{run_id}"

#: What a write to an existing session may answer: 409 (a conflict with its state),
#: 412 (``If-Match`` stale), 428 (``If-Match`` required).
_WRITE_PROBLEMS: tuple[Problem, ...] = (409, 412, 428)


def _write(
    method: str,
    path: str,
    status: int = 200,
    request: str | None = None,
    *,
    if_match: IfMatch = "optional",
    idempotency_key: bool = True,
    operation_id: str | None = None,
    optional_body: bool = False,
    generated_key: bool = True,
    answer_member: str | None = None,
) -> Route:
    """A write to one session: its answer's ETag is the session's new version."""
    return Route(
        method,
        path,
        status,
        request,
        "session",
        if_match,
        idempotency_key,
        operation_id,
        _WRITE_PROBLEMS,
        optional_body,
        generated_key,
        answer_member,
    )


#: What a search answers on a store that keeps no search index.
_NO_SEARCH = "The store keeps no search index (Redis): `search-not-supported`"


def _section(tag: str, *operations: Operation) -> tuple[Operation, ...]:
    """``operations`` with their OpenAPI tag."""
    return tuple(dataclasses.replace(op, tag=tag) for op in operations)


_BASE64 = "records' base64: binary values travel as base64 text"
_TOKENIZER = "over HTTP only the default tokenizer counts (the manager's tokenizer argument)"
_SHARED_ETAG = "shared-memory ETags: the document's own version, not a session's"
_KEY_TAKEN = (
    "A session of the caller and `agent` has this `external_key` (`session-exists`; "
    "the problem's `session_id` names it)"
)

#: Every public operation, in the order of the OpenAPI document: a section per tag.
OPERATIONS: tuple[Operation, ...] = (
    *_section(
        "health",
        Operation(
            "healthz",
            "dict[str, str]",
            (Route("GET", "/healthz"),),
            library=False,
            client=False,
            route_by_hand="a probe of the process: no store, no user",
        ),
        Operation(
            "readyz",
            "dict[str, str]",
            (Route("GET", "/readyz"),),
            library=False,
            client=False,
            route_by_hand="a probe of the store: an empty listing, or 503",
        ),
    ),
    *_section(
        "sessions",
        Operation(
            "create_session",
            "Session",
            (
                Route(
                    "POST",
                    "/v1/sessions",
                    201,
                    "CreateSession",
                    "session",
                    idempotency_key=True,
                    problems=(403, (409, _KEY_TAKEN)),
                ),
            ),
            doc="Create an ACTIVE session owned by the caller.",
        ),
        Operation(
            "list_sessions",
            "Page[Session]",
            (Route("GET", "/v1/sessions", problems=(403,)),),
            cli="sessions list",
            doc="""The caller's sessions, most recently updated first; ``next_cursor`` pages
            on. Filters: `status`, `agent`, `parent_session_id`, and metadata as
            `metadata.<key>=<value>` query parameters (one per key, at most 8, an AND of
            exact values; a stored number or boolean matches its text, `3`, `true`; a
            bad key or value: 422).""",
        ),
        Operation(
            "count_sessions",
            "int",
            (Route("GET", "/v1/sessions/count", problems=(403,), answer_member="count"),),
            cli="sessions count",
            doc="""How many sessions ``GET /v1/sessions`` would list with the same filters
            (`metadata.<key>=<value>` too), over all its pages: ``{"count": n}``.""",
        ),
        Operation(
            "search",
            "Page[SearchHit]",
            (Route("GET", "/v1/search", problems=(403, (501, _NO_SEARCH))),),
            cli="search",
            doc="""Find `q` (1..200 characters; case ignored; any language, text without
            spaces and identifiers alike) in the caller's sessions: titles, the text of
            the messages in their histories (every format; tool-call arguments and
            outputs) and recorded tool calls. Never another user's content (admin keys:
            `all_users`), nor removed, hidden or erased messages. Each hit has a snippet
            with the first match at `snippet[match_start:match_end]` and a score (the
            query's occurrences); newest first; `next_cursor` pages on. 501 on a store
            with no search index (Redis).""",
        ),
        Operation(
            "get_session",
            "Session",
            (Route("GET", _S, etag="session"),),
            cli="sessions show",
            doc="One session; its ``ETag`` is the token for ``If-Match``.",
        ),
        Operation(
            "fork_session",
            "Session",
            (
                Route(
                    "POST",
                    _S + "/fork",
                    201,
                    "ForkSession",
                    "session",
                    if_match="optional",
                    idempotency_key=True,
                    problems=((409, _KEY_TAKEN), 412),
                    optional_body=True,
                ),
            ),
            cli="sessions fork",
            doc="""Make a new ACTIVE session of the same owner and agent from this one as it stood
            at ``at_seq``: copies of its messages ``1..at_seq``, the summaries within them and
            its working memory as of ``at_seq`` (runs and tool calls are not copied). The
            parent, in any status, is not changed. ``If-Match`` (the parent's ETag) is
            compared in the fork's transaction: 412 when the parent changed since. The
            fork's ETag and ``Location``; a retry with the same ``Idempotency-Key`` answers
            the same fork.""",
        ),
        Operation(
            "update_session",
            "Session",
            (_write("PATCH", _S, 200, "UpdateSession", if_match="required"),),
            doc="Set the title, metadata (replaced whole) or TTL; fields left out stay.",
        ),
        Operation(
            "delete_session",
            "None",
            (_write("DELETE", _S, 204, if_match="required"),),
            cli="delete",
            doc="""Delete the session and everything in it; afterwards it is not found, except
            that a retry with the same ``Idempotency-Key`` answers 204 again.""",
        ),
        Operation(
            "close_session",
            "Session",
            (
                _write(
                    "POST", _S + "/close", 200, "Reason", if_match="required", optional_body=True
                ),
            ),
            cli="close",
            doc="Close the session (history stays readable; restore re-opens it).",
        ),
        Operation(
            "expire_session",
            "Session",
            (
                _write(
                    "POST", _S + "/expire", 200, "Reason", if_match="required", optional_body=True
                ),
            ),
            cli="expire",
            doc="""Expire the session now (expiring EXPIRED changes nothing); a retry with the
            same ``Idempotency-Key`` answers the first result.""",
        ),
        Operation(
            "restore_session",
            "RestoredSession",
            (
                _write(
                    "POST",
                    _S + "/restore",
                    200,
                    "RestoreSession",
                    if_match="required",
                    optional_body=True,
                ),
            ),
            cli="restore",
            doc="""Re-open a CLOSED (or recently EXPIRED) session and return all an engine
            needs; a retry with the same ``Idempotency-Key`` writes nothing and answers the
            first restore's ``previous_status`` and interrupted ids.""",
        ),
        Operation(
            "get_session_by_key",
            "Session",
            (Route("GET", "/v1/sessions-by-key", etag="session"),),
            doc="The caller's session of ``agent`` with this external key; 404 if none.",
        ),
        Operation(
            "open_session",
            "tuple[Session, bool]",
            (
                Route(
                    "PUT",
                    "/v1/sessions-by-key",
                    200,
                    "OpenSession",
                    "session",
                    idempotency_key=True,
                    optional_body=True,
                ),
            ),
            client_by_hand="open-or-create: 200 when found, 201 when this request created it",
            route_by_hand="open-or-create: 200 when found, 201 when this request created it",
        ),
        Operation(
            "sweep_expired",
            "SweepResult",
            cli="sweep",
            client=False,
            route_by_hand="an operator's task (CLI or scheduler), not a user's request",
        ),
    ),
    *_section(
        "messages",
        Operation(
            "append_message",
            "Message",
            client_by_hand="one message through append_messages' route (POST .../messages)",
        ),
        Operation(
            "append_messages",
            "list[Message]",
            (_write("POST", _S + "/messages", 201, "AppendMessages"),),
            route_by_hand="one `message` (the answer: the message) or a batch of `messages` "
            '(the answer: {"items": [...]}) in one body',
        ),
        Operation(
            "get_messages",
            "Page[Message]",
            (Route("GET", _S + "/messages"),),
            cli="sessions messages",
            doc="""A page of history, oldest first, in seq order: the newest messages unless a
            bound or cursor says otherwise; ``next_cursor`` goes on in the same direction.""",
        ),
        Operation(
            "replace_messages",
            "list[Message]",
            (_write("PUT", _S + "/messages", 200, "ReplaceMessages", if_match="required"),),
            doc="""Remove every message with ``seq > after_seq`` and store ``messages`` in their
            place, in one transaction and one version step (``{"items"}``, each with
            ``session_version``, also the ETag): a crash or an outage leaves the history before
            or after, never the removal alone. An ``after_seq`` at or past the session's
            ``message_count`` removes nothing and only appends (as ``DELETE`` with it removes
            0). ``If-Match`` is required when the service requires it for destructive
            requests; an ``Idempotency-Key`` makes a retry answer the first result.""",
        ),
        Operation(
            "truncate_messages",
            "TruncateResult",
            (_write("DELETE", _S + "/messages", if_match="required"),),
            doc="""Remove every message with ``seq > after_seq`` in one version step:
            ``{"removed", "session_version"}``, the ETag the session's version after it (the
            current one when nothing was removed: an ``after_seq`` at or past the session's
            ``message_count`` removes 0). Tool calls, runs and working memory stay.
            ``If-Match`` is required when the service requires it for destructive requests;
            an ``Idempotency-Key`` makes a retry answer the first result.""",
        ),
        Operation(
            "pop_message",
            "Message | None",
            (_write("POST", _S + "/messages/pop", if_match="required", answer_member="message"),),
            route_by_hand='the answer is {"message": ...}, null when the history was empty',
        ),
    ),
    *_section(
        "working memory",
        Operation(
            "get_working_memory",
            "WorkingMemory",
            (Route("GET", _S + "/memory", etag="session"),),
            cli="sessions memory",
            doc="""The working memory, or with ``at_seq`` the memory as it stood at that message
            seq (its ``version`` the one that write produced; an ``at_seq`` above the session's
            ``message_count`` is a 422). The ETag is the session's version at this read (not
            ``version``, the last memory write's): send it back as ``If-Match`` on PUT/PATCH for
            a read-modify-write without a lost update (RFC 9110 section 13.1.1).""",
        ),
        Operation(
            "list_memory_versions",
            "Page[MemoryVersion]",
            (Route("GET", _S + "/memory/versions"),),
            cli="sessions memory-versions",
            doc="""A page of the working memory's history, newest first: each version with
            ``seq``, the first message seq it was in effect at (``at_seq`` of any seq from it
            to the next version's reads it), its ``version``, ``updated_at`` and ``data``.
            ``before`` starts below a seq; ``next_cursor`` pages back to older versions.""",
        ),
        Operation(
            "update_working_memory",
            "WorkingMemory",
            (
                _write(
                    "PUT",
                    _S + "/memory",
                    if_match="required",
                    operation_id="replace_working_memory",
                ),
                _write(
                    "PATCH",
                    _S + "/memory",
                    if_match="required",
                    operation_id="patch_working_memory",
                ),
                _write("POST", _S + "/memory", 200, "UpdateWorkingMemory", if_match="required"),
            ),
            client_by_hand="PATCH content types: merge patch or JSON Patch ops by Content-Type; "
            "POST only with shared_memory_ops",
            route_by_hand="PATCH content types: merge patch or JSON Patch ops by Content-Type; "
            "POST only with shared_memory_ops",
        ),
        Operation(
            "modify_working_memory",
            "WorkingMemory",
            client_by_hand="the 412 loop: read, apply fn, write with If-Match, again on 412",
        ),
    ),
    *_section(
        "rewind",
        Operation(
            "rewind_session",
            "RewindResult",
            (_write("POST", _S + "/rewind", 200, "RewindBody", if_match="required"),),
            cli="sessions rewind",
            doc="""Move the session back to ``to_seq``: the messages above it leave the history
            (kept hidden, or deleted with ``remove``), the summaries past it go, and the
            working memory becomes the memory as of ``to_seq``; tool calls and runs stay.
            ``{"number", "to_seq", "count", "mode", "memory_version", "session_version"}``
            (``number`` null: nothing changed); the ETag is the session's version after it.
            ``If-Match`` is required when the service requires it for destructive requests; an
            ``Idempotency-Key`` makes a retry answer the first result.""",
        ),
        Operation(
            "list_rewinds",
            "Page[Rewind]",
            (Route("GET", _S + "/rewinds"),),
            cli="sessions rewinds",
            doc="A page of the session's rewinds, oldest first.",
        ),
        Operation(
            "get_rewound_messages",
            "Page[Message]",
            (Route("GET", _S + "/rewinds/{number}/messages"),),
            cli="sessions rewound",
            doc="""A page of the messages rewind ``number`` hid, oldest first (empty for a
            removing rewind); 404 for an unknown number.""",
        ),
    ),
    *_section(
        "shared memory",
        Operation(
            "get_shared_memory",
            "SharedMemory",
            (Route("GET", _SHARED, etag="document"),),
            route_by_hand=_SHARED_ETAG,
        ),
        Operation(
            "update_shared_memory",
            "SharedMemory",
            (Route("PATCH", _SHARED, etag="document", idempotency_key=True),),
            client_by_hand="over HTTP only ops, as a JSON Patch body, without expected_version",
            route_by_hand=_SHARED_ETAG,
        ),
        Operation(
            "delete_shared_memory",
            "bool",
            (Route("DELETE", _SHARED, if_match="required", answer_member="deleted"),),
            route_by_hand=_SHARED_ETAG,
        ),
        Operation(
            "shared_memory_audit_id",
            "str",
            client=False,
            route_by_hand="library only: a keyed hash naming a document in the audit log",
        ),
    ),
    *_section(
        "records",
        Operation(
            "put_records",
            "PutRecordsResult",
            (_write("PUT", _S + "/records", 200, "PutRecords"),),
            client_by_hand=_BASE64,
            route_by_hand=_BASE64,
        ),
        Operation(
            "list_records",
            "list[Record]",
            (Route("GET", _S + "/records"),),
            client_by_hand=_BASE64,
            route_by_hand=_BASE64,
        ),
        Operation(
            "get_record",
            "Record | None",
            (Route("GET", _S + "/records/one"),),
            client_by_hand=_BASE64,
            route_by_hand=_BASE64,
        ),
        Operation(
            "delete_records",
            "DeleteRecordsResult",
            (_write("DELETE", _S + "/records", if_match="required"),),
            doc="""Delete the records of ``namespace`` (absent = every namespace) whose key starts
            with ``prefix`` (absent = any): ``{"removed", "session_version"}``, one version
            step if anything went. ``If-Match`` is required when the service requires it for
            destructive requests; an ``Idempotency-Key`` makes a retry answer the first result.""",
        ),
    ),
    *_section(
        "context",
        Operation(
            "build_context",
            "Context",
            (Route("GET", _S + "/context"),),
            client_by_hand=_TOKENIZER,
            route_by_hand=_TOKENIZER,
        ),
        Operation(
            "add_summary",
            "Summary",
            (_write("POST", _S + "/summaries", 201, "AddSummary"),),
            client_by_hand=_TOKENIZER,
            route_by_hand=_TOKENIZER,
        ),
        Operation(
            "list_summaries",
            "list[Summary]",
            (Route("GET", _S + "/summaries"),),
            doc="""``{"items": [summary...]}`` oldest first, superseded ones included; page on with
            ``after=<last number>``.""",
        ),
    ),
    *_section(
        "tool calls",
        Operation(
            "record_tool_call",
            "ToolCall",
            (_write("POST", _S + "/tool-calls", 201, "RecordToolCall"),),
            doc="Record a tool call that really ran; the ETag is the session's new version.",
        ),
        Operation(
            "get_tool_history",
            "Page[ToolCall]",
            (Route("GET", _S + "/tool-calls"),),
            cli="sessions tools",
            doc="A page of tool calls, oldest first (a restore's cursor pages back to older ones).",
        ),
        Operation(
            "find_tool_call",
            "ToolCall | None",
            (
                Route(
                    "POST", _S + "/tool-calls/find", request="FindToolCall", answer_member="item"
                ),
                Route(
                    "GET",
                    _S + "/tool-calls/find",
                    operation_id="find_tool_call_by_query",
                    answer_member="item",
                ),
            ),
            route_by_hand="a read sent as POST (arguments in the body), also as a deprecated GET "
            'with the arguments as JSON text; the answer is {"item": ...}',
            post_reads=True,
        ),
    ),
    *_section(
        "runs",
        Operation(
            "start_run",
            "Run",
            (_write("POST", _S + "/runs", 201, "StartRun"),),
            doc="""Start a run (RUNNING); at most one RUNNING run per session (else 409). The ETag
            is the session's new version, as on every write below. A spent budget of the
            session or its owner: 409 `budget-exceeded` (audited as `run.refused`).""",
        ),
        Operation(
            "heartbeat_run",
            "Run",
            (
                _write(
                    "POST",
                    _RUN + "/heartbeat",
                    200,
                    "HeartbeatRun",
                    if_match="none",
                    generated_key=False,
                ),
            ),
            doc="""Extend a RUNNING run's lease to now + ``lease_seconds`` (default: the run's own).
            No version step (the ETag is the session's current version) and no ``If-Match``: a
            heartbeat never makes another writer's precondition stale. A run whose lease
            already lapsed is INTERRUPTED and this answers 409 ``run-lease-expired``.""",
        ),
        Operation(
            "list_runs",
            "Page[Run]",
            (Route("GET", _S + "/runs"),),
            cli="sessions runs",
            doc="""A page of runs, oldest first, without their steps (``step_count`` says how many);
            a restore's cursor pages back to older ones.""",
        ),
        Operation(
            "get_run",
            "Run",
            (Route("GET", _RUN),),
            doc="""One run with its first steps (``len(steps) < step_count``: page on with
            ``GET .../steps?after=<last index>``).""",
        ),
        Operation(
            "list_run_steps",
            "Page[RunStep]",
            (Route("GET", _RUN + "/steps"),),
            cli="sessions steps",
            doc="""A page of the run's steps, oldest first; ``next_cursor`` continues, null on the
            last page. Unlike the other listings, ``limit`` is at least 1 (the manager refuses
            an empty page of steps), so the schema states it.""",
        ),
        Operation(
            "add_run_step",
            "RunStep",
            (_write("POST", _RUN + "/steps", 201, "StepIn"),),
            doc="""Append a step to a RUNNING run; a spent budget of the session or its owner:
            409 `budget-exceeded` (audited as `run.refused`).""",
        ),
        Operation(
            "finish_run",
            "Run",
            (_write("POST", _RUN + "/finish", 200, "FinishRun"),),
            doc="""End a RUNNING run as SUCCEEDED, FAILED or CANCELLED; its `usage` (with
            `model`, or `usage_by_model`) enters the usage ledger in the same
            transaction.""",
        ),
    ),
    *_section(
        "usage",
        Operation(
            "get_usage",
            "list[UsageTotal]",
            (Route("GET", "/v1/usage", problems=(403,)),),
            cli="usage",
            doc="""The caller's usage, one total per `group_by` (session, agent, model or UTC
            day): the usage ledger's sums of the finished runs' normalised token counts,
            how many runs, and the cost by the operator's price table (null without a
            price for a model of the group). `since`/`until` bound the runs' finish
            time; `all_users` (admin keys) sums every user's.""",
        ),
        Operation(
            "get_budget",
            "Budget",
            (Route("GET", "/v1/budgets", problems=(403,)),),
            cli="budget show",
            doc="""The budget of the caller (another user's with `target_user_id`: admin
            keys) or of one of their sessions (`session_id`), and what is used of it;
            bounds null when none is set.""",
        ),
        Operation(
            "set_budget",
            "Budget",
            (Route("PUT", "/v1/budgets", request="SetBudget", problems=(403,)),),
            cli="budget set",
            doc="""Set a user's or a session's budget (admin keys): `max_tokens` and/or
            `max_cost`. Once used up, starting a run or adding a step there answers 409
            `budget-exceeded` (audited as `run.refused`; nothing else is written).""",
        ),
        Operation(
            "clear_budget",
            "Budget",
            (Route("DELETE", "/v1/budgets", problems=(403,)),),
            cli="budget clear",
            doc="Remove a user's or a session's budget (admin keys); answers it without bounds.",
        ),
    ),
    *_section(
        "audit",
        Operation(
            "get_audit_log",
            "Page[AuditEvent]",
            (Route("GET", _S + "/audit"),),
            cli="sessions audit",
            doc="A page of audit events, oldest first; no message content.",
        ),
        Operation(
            "changes",
            "ChangePage",
            (
                Route("GET", "/v1/changes", problems=(403,)),
                Route("GET", _S + "/changes", operation_id="session_changes", problems=(403,)),
            ),
            cli="changes",
            doc="""A page of the change feed: the content-free audit events of committed
            writes after the cursor ``after``, oldest first, in commit order; the caller's
            sessions (an admin's: ``all_users``), or one session's. ``next_cursor`` always
            says where to resume, ``has_more`` whether more are waiting. With ``Accept:
            text/event-stream`` the same routes answer Server-Sent Events instead (each
            event's id its cursor; ``Last-Event-ID`` resumes): docs/http.md, "Change feed".""",
        ),
        Operation(
            "verify_audit",
            "AuditReport",
            (Route("GET", "/v1/admin/audit/verify", problems=(403,)),),
            cli="audit verify",
            doc="""Admin only: walk the hash chain of every session's audit events (or of
            ``session_id``'s) and name the first broken link (``broken``: the session, the
            version, and whether an event was changed, removed or reordered); ``broken``
            is null when every chain is intact (docs/security.md, "Tamper-evident audit").
            404 for a ``session_id`` never seen (no row, event or session-chain link);
            403 without ``session_id`` for a key limited to agents.""",
        ),
    ),
    *_section(
        "users",
        Operation(
            "whoami",
            "dict[str, Any]",
            (Route("GET", "/v1/whoami"),),
            library=False,
            route_by_hand="the API key's user and role: no store call",
        ),
        Operation(
            "delete_user_data",
            "int",
            (Route("DELETE", "/v1/users/{user_id}/data", answer_member="deleted_sessions"),),
            client_by_hand="the path's user is target_user_id, else user_id; the answer a count",
            route_by_hand="the path's user is target_user_id, else user_id; the answer a count",
        ),
        Operation(
            "erase_user",
            "Erasure",
            cli="erase",
            client=False,
            route_by_hand="an operator's act on the store's files too, not over HTTP",
        ),
    ),
)


def operation_ids() -> dict[tuple[str, str], str]:
    """The OpenAPI ``operationId`` of every route of :data:`OPERATIONS`.

    Returns:
        ``{(method, path): operationId}``, ``path`` as OpenAPI writes it.
    """
    return {
        (route.method, route.path): route.operation_id or op.name
        for op in OPERATIONS
        for route in op.routes
    }
