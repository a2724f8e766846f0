"""The operations of agentsession, declared once: one :class:`Operation` row each.

A row names an operation (the :class:`~agentsession.service.SessionManager` method,
the OpenAPI ``operationId`` and the client method all carry that name), the text of
its result annotation, its HTTP routes, its CLI command and, when its client flow or
its routes are more than a mapping of arguments to a request, why
(``client_by_hand``, ``route_by_hand``).

The table is data, not behaviour: the manager holds the rules, the routes
(:mod:`agentsession.http.routes`) are written by hand, the clients' methods are
generated from it (:mod:`agentsession.clientgen`); the HTTP service takes each
route's ``operationId`` from here, and
``tests/test_operations.py`` checks every surface against every row. It imports no
web framework (the client is usable without the ``server`` extra), so a request body
is named by its class name in :mod:`agentsession.http.schemas`, where its field
limits are declared.

Adding an operation: docs/architecture.md, "The table of operations".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OPERATIONS", "ETagKind", "IfMatch", "Operation", "Route", "operation_ids"]

#: What the success answer's ``ETag`` names: the session's version after the call
#: (``"<session_id>@<version>"``), a shared-memory document's own version
#: (``"<version>"``), or nothing.
ETagKind = Literal["none", "session", "document"]

#: ``If-Match`` on the route: not read; read when sent; read, and demanded (428) when
#: the service runs with ``require_if_match``.
IfMatch = Literal["none", "optional", "required"]


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
    generated_key: bool = True
    answer_member: str | None = None


@dataclass(frozen=True, slots=True)
class Operation:
    """One public operation.

    Attributes:
        name: the manager method, the client method and the first route's
            ``operationId``.
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
    """

    name: str
    result: str
    routes: tuple[Route, ...] = ()
    cli: str | None = None
    client_by_hand: str | None = None
    route_by_hand: str | None = None
    library: bool = True
    client: bool = True


_S = "/v1/sessions/{session_id}"
_SHARED = "/v1/shared-memory/{scope}/{agent}"
_RUN = _S + "/runs/{run_id}"


def _write(
    method: str,
    path: str,
    status: int = 200,
    request: str | None = None,
    *,
    if_match: IfMatch = "optional",
    idempotency_key: bool = True,
    operation_id: str | None = None,
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
        generated_key=generated_key,
        answer_member=answer_member,
    )


_BASE64 = "records' base64: binary values travel as base64 text"
_TOKENIZER = "over HTTP only the default tokenizer counts"
_SHARED_ETAG = "shared-memory ETags: the document's own version, not a session's"

#: Every public operation, in the order of the OpenAPI document's tags.
OPERATIONS: tuple[Operation, ...] = (
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
    # Sessions
    Operation(
        "create_session",
        "Session",
        (Route("POST", "/v1/sessions", 201, "CreateSession", "session", idempotency_key=True),),
    ),
    Operation(
        "list_sessions", "Page[Session]", (Route("GET", "/v1/sessions"),), cli="sessions list"
    ),
    Operation(
        "get_session_by_key",
        "Session",
        (Route("GET", "/v1/sessions-by-key", etag="session"),),
        route_by_hand="its 404 is SessionNotFound though the request names no session id",
    ),
    Operation(
        "open_session",
        "tuple[Session, bool]",
        (Route("PUT", "/v1/sessions-by-key", 200, "OpenSession", "session", idempotency_key=True),),
        client_by_hand="open-or-create: 200 when found, 201 when this request created it",
        route_by_hand="open-or-create: 200 when found, 201 when this request created it",
    ),
    Operation("get_session", "Session", (Route("GET", _S, etag="session"),), cli="sessions show"),
    Operation(
        "fork_session",
        "Session",
        (Route("POST", _S + "/fork", 201, "ForkSession", "session", idempotency_key=True),),
        cli="sessions fork",
    ),
    Operation(
        "update_session",
        "Session",
        (_write("PATCH", _S, 200, "UpdateSession", if_match="required"),),
    ),
    Operation(
        "delete_session",
        "None",
        (_write("DELETE", _S, 204, if_match="required", idempotency_key=False),),
        cli="delete",
    ),
    Operation(
        "close_session",
        "Session",
        (_write("POST", _S + "/close", 200, "Reason", if_match="required"),),
        cli="close",
    ),
    Operation(
        "expire_session",
        "Session",
        (
            _write(
                "POST", _S + "/expire", 200, "Reason", if_match="required", idempotency_key=False
            ),
        ),
        cli="expire",
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
                idempotency_key=False,
            ),
        ),
        cli="restore",
    ),
    # Messages
    Operation(
        "append_message",
        "Message",
        client_by_hand="one message through append_messages' route (POST .../messages)",
    ),
    Operation(
        "append_messages",
        "list[Message]",
        (_write("POST", _S + "/messages", 201, "AppendMessages"),),
    ),
    Operation(
        "get_messages", "Page[Message]", (Route("GET", _S + "/messages"),), cli="sessions messages"
    ),
    Operation(
        "replace_messages",
        "list[Message]",
        (_write("PUT", _S + "/messages", 200, "ReplaceMessages", if_match="required"),),
    ),
    Operation(
        "truncate_messages",
        "TruncateResult",
        (_write("DELETE", _S + "/messages", if_match="required"),),
    ),
    Operation(
        "pop_message",
        "Message | None",
        (_write("POST", _S + "/messages/pop", if_match="required", answer_member="message"),),
        route_by_hand='the answer is {"message": ...}, null when the history was empty',
    ),
    # Working memory
    Operation(
        "get_working_memory",
        "WorkingMemory",
        (Route("GET", _S + "/memory", etag="session"),),
        cli="sessions memory",
    ),
    Operation(
        "update_working_memory",
        "WorkingMemory",
        (
            _write("POST", _S + "/memory", 200, "UpdateWorkingMemory", if_match="required"),
            _write(
                "PUT", _S + "/memory", if_match="required", operation_id="replace_working_memory"
            ),
            _write(
                "PATCH", _S + "/memory", if_match="required", operation_id="patch_working_memory"
            ),
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
    # Rewinds
    Operation(
        "rewind_session",
        "RewindResult",
        (_write("POST", _S + "/rewind", 200, "RewindBody", if_match="required"),),
        cli="sessions rewind",
    ),
    Operation(
        "list_rewinds", "Page[Rewind]", (Route("GET", _S + "/rewinds"),), cli="sessions rewinds"
    ),
    Operation(
        "get_rewound_messages",
        "Page[Message]",
        (Route("GET", _S + "/rewinds/{number}/messages"),),
        cli="sessions rewound",
    ),
    # Shared memory
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
    # Records
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
    ),
    # Context and summaries
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
    Operation("list_summaries", "list[Summary]", (Route("GET", _S + "/summaries"),)),
    # Tool calls
    Operation(
        "record_tool_call", "ToolCall", (_write("POST", _S + "/tool-calls", 201, "RecordToolCall"),)
    ),
    Operation(
        "get_tool_history",
        "Page[ToolCall]",
        (Route("GET", _S + "/tool-calls"),),
        cli="sessions tools",
    ),
    Operation(
        "find_tool_call",
        "ToolCall | None",
        (
            Route("POST", _S + "/tool-calls/find", request="FindToolCall", answer_member="item"),
            Route(
                "GET",
                _S + "/tool-calls/find",
                operation_id="find_tool_call_by_query",
                answer_member="item",
            ),
        ),
        route_by_hand="a read sent as POST (arguments in the body), also as GET",
    ),
    # Runs
    Operation("start_run", "Run", (_write("POST", _S + "/runs", 201, "StartRun"),)),
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
        route_by_hand="no generated Idempotency-Key: a retried beat only extends the lease again",
    ),
    Operation("list_runs", "Page[Run]", (Route("GET", _S + "/runs"),), cli="sessions runs"),
    Operation("get_run", "Run", (Route("GET", _RUN),)),
    Operation(
        "list_run_steps", "Page[RunStep]", (Route("GET", _RUN + "/steps"),), cli="sessions steps"
    ),
    Operation("add_run_step", "RunStep", (_write("POST", _RUN + "/steps", 201, "StepIn"),)),
    Operation("finish_run", "Run", (_write("POST", _RUN + "/finish", 200, "FinishRun"),)),
    # Lifecycle, audit, users
    Operation(
        "sweep_expired",
        "SweepResult",
        cli="sweep",
        client=False,
        route_by_hand="an operator's task (CLI or scheduler), not a user's request",
    ),
    Operation(
        "get_audit_log", "Page[AuditEvent]", (Route("GET", _S + "/audit"),), cli="sessions audit"
    ),
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
