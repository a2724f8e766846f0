"""Errors as RFC 9457 ``application/problem+json``: the one table, and the handlers.

``PROBLEMS`` maps each error class to its problem title and to what of its context a
client may see. The status is the class's ``http_status`` and the ``type`` is
``https://agentsession.dev/problems/<code>`` (``code`` of the class). Rules:

* A session that is missing, deleted, not the caller's, or named by a malformed id is
  answered with the very same body (no id echoed), so nothing tells them apart.
* 5xx bodies never hold a stack trace, SQL or driver text; those go to the log.
* Precedence ``401 -> 404 -> 412 -> 422``: before a 400/422 about a session-scoped
  request is sent, :func:`~agentsession.http.deps.gate` checks that the session is
  visible (else 404) and that ``If-Match`` holds (else 412). This costs a read only
  on the error path.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from ..errors import (
    AgentSessionError,
    BudgetExceeded,
    Conflict,
    ContextBudgetTooSmall,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    ImportSourceError,
    KeyringError,
    KeyringMismatch,
    NotFound,
    PatchConflict,
    PayloadTooLarge,
    RecordNotFound,
    RewindNotFound,
    RunAlreadyRunning,
    RunLeaseExpired,
    RunNotFound,
    RunNotRunning,
    SchemaOutOfDate,
    SearchNotSupported,
    SessionExists,
    SessionNotActive,
    SessionNotFound,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    ToolCallExists,
    UnsupportedValue,
    ValidationError,
    VersionConflict,
)
from ..protocol import (
    PROBLEM_BASE,
    PROBLEM_CONTENT_TYPE,
    MalformedJson,
    PreconditionRequired,
    RequestInvalid,
    ServerError,
    TooManyRequests,
    Unauthenticated,
    UnsupportedMediaType,
    problem_fields,
)
from .logs import log_failure

__all__ = [
    "ERRORS",
    "PROBLEMS",
    "WRITE_ERRORS",
    "BodyTimeout",
    "BodyTooLarge",
    "Overloaded",
    "ProblemDetails",
    "install_handlers",
    "problem_response",
    "problem_responses",
]

log = logging.getLogger("agentsession.http")


@dataclass(frozen=True, slots=True)
class Problem:
    """How one error class is shown.

    Attributes:
        title: the short, fixed summary of the problem type.
        detail: a fixed ``detail`` replacing the error's message (None = the message).
        fields: context attributes shown (None = all of them).
    """

    title: str
    detail: str | None = None
    fields: tuple[str, ...] | None = None


_STORE_DETAIL = "the store failed; nothing was written"
_UNAVAILABLE_DETAIL = (
    "the store is unreachable or full; retry after Retry-After seconds with the "
    "same Idempotency-Key"
)

#: The ``Retry-After`` (seconds) of a 503 from the store: busy, unreachable or full.
STORE_RETRY_AFTER_SECONDS = 1

#: The one table: error class -> problem. A test checks every error class is here.
PROBLEMS: dict[type[AgentSessionError], Problem] = {
    AgentSessionError: Problem("Internal Server Error", "internal error", ()),
    ValidationError: Problem("Invalid Request"),
    Forbidden: Problem("Forbidden"),
    PayloadTooLarge: Problem("Content Too Large"),
    UnsupportedValue: Problem("Unsupported Value"),
    ContextBudgetTooSmall: Problem("Context Budget Too Small"),
    ImportSourceError: Problem("Import Source Error"),
    NotFound: Problem("Not Found", "not found", ()),
    SessionNotFound: Problem("Not Found", "session not found", ()),
    RunNotFound: Problem("Not Found", "run not found", ("run_id",)),
    RecordNotFound: Problem("Not Found", "record not found", ("namespace", "key")),
    RewindNotFound: Problem("Not Found", "rewind not found", ("number",)),
    Conflict: Problem("Conflict"),
    SessionNotActive: Problem("Session Not Active"),
    IllegalTransition: Problem("Illegal Transition"),
    RunAlreadyRunning: Problem("Run Already Running"),
    RunNotRunning: Problem("Run Not Running"),
    RunLeaseExpired: Problem("Run Lease Expired"),
    BudgetExceeded: Problem("Budget Exceeded"),
    ToolCallExists: Problem("Tool Call Exists"),
    SessionExists: Problem("Session Exists"),
    PatchConflict: Problem("Patch Conflict"),
    VersionConflict: Problem("Precondition Failed"),
    IdempotencyKeyReused: Problem("Idempotency Key Reused"),
    # The message is ours, naming why (no index, or a keyring) and never content.
    SearchNotSupported: Problem("Not Implemented", None, ("store",)),
    StoreError: Problem("Internal Server Error", _STORE_DETAIL, ()),
    StoreBusy: Problem("Service Unavailable", "the store is busy; retry shortly", ()),
    StoreUnavailable: Problem("Service Unavailable", _UNAVAILABLE_DETAIL, ()),
    # Never sent as it is: the handler answers a plain StoreUnavailable (see there).
    KeyringError: Problem("Service Unavailable", _UNAVAILABLE_DETAIL, ()),
    KeyringMismatch: Problem("Service Unavailable", _UNAVAILABLE_DETAIL, ()),
    SchemaOutOfDate: Problem("Internal Server Error", _STORE_DETAIL, ()),
    Unauthenticated: Problem("Unauthorized"),
    TooManyRequests: Problem("Too Many Requests"),
    PreconditionRequired: Problem("Precondition Required"),
    RequestInvalid: Problem("Unprocessable Content"),
    ServerError: Problem("Internal Server Error", "internal error", ()),
    MalformedJson: Problem("Malformed JSON"),
    UnsupportedMediaType: Problem("Unsupported Media Type"),
}


class ProblemDetails(BaseModel):
    """An RFC 9457 problem document, as the OpenAPI schema shows it. Context members
    of the error (``session_id``, ``current_version``, ``field``, ``limit_bytes``...)
    come on top of these."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="`https://agentsession.dev/problems/<code>`.")
    title: str
    status: int
    detail: str | None = None


_STATUS_TEXT = {
    400: "Invalid request (a field, a header or the body)",
    401: "No valid API key",
    403: "Needs an admin key",
    404: "Not found, or not yours",
    409: "Session not ACTIVE, run already running, illegal transition",
    412: "`If-Match` does not match the session's current ETag",
    408: "The body did not arrive within the body timeout; the connection is closed",
    413: "The body, or a value in it, is larger than the limit named",
    415: "The body is not `application/json` in UTF-8",
    422: "The request does not fit the schema, or the Idempotency-Key was used for another request",
    428: "`If-Match` is required and missing",
    429: "Too many failed authentications from this address or for this key id; "
    "retry after `Retry-After` seconds",
    431: "The request's header section is larger, or has more fields, than the limit",
    500: "Internal error (no details)",
    501: "The store cannot do this (`search-not-supported`: it keeps no search index)",
    503: "The store is busy (`store-busy`), unreachable or out of disk space "
    "(`store-unavailable`), or the worker serves its most requests at once; retry after "
    "`Retry-After` seconds, a write with the same `Idempotency-Key`",
}


def problem_responses(
    *statuses: int, descriptions: Mapping[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` declaring ``statuses`` as problem+json answers, each with
    the shared description of its status unless ``descriptions`` gives the route's own."""
    schema = ProblemDetails.model_json_schema()
    own = descriptions or {}
    return {
        status: {
            "description": own.get(status, _STATUS_TEXT[status]),
            "content": {PROBLEM_CONTENT_TYPE: {"schema": schema}},
        }
        for status in statuses
    }


#: What any authenticated operation may answer besides success.
ERRORS = problem_responses(400, 401, 404, 408, 413, 422, 429, 431, 500, 503)
#: What a write on an existing session may answer on top of :data:`ERRORS`.
WRITE_ERRORS = problem_responses(409, 412, 428)


class BodyTooLarge(StarletteHTTPException):
    """The request body is over ``max_body_bytes`` (raised while it streams in)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413)
        self.limit = limit


class BodyTimeout(StarletteHTTPException):
    """The request body did not arrive within ``seconds`` of the request's start
    (raised while it streams in)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(status_code=408)
        self.seconds = seconds


class Overloaded(StarletteHTTPException):
    """The worker already serves its ``limit`` requests (raised once a request's body
    has arrived, when it would start to count)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=503)
        self.limit = limit


def _problem_of(cls: type[AgentSessionError]) -> Problem:
    for klass in cls.__mro__:
        if klass in PROBLEMS:
            return PROBLEMS[klass]
    raise AssertionError("AgentSessionError is in PROBLEMS")  # pragma: no cover


def problem_body(exc: AgentSessionError) -> dict[str, Any]:
    """The problem+json document of ``exc`` (see the module docstring)."""
    spec = _problem_of(type(exc))
    context = exc.context
    if spec.fields is not None:
        context = {k: v for k, v in context.items() if k in spec.fields}
    return {
        "type": PROBLEM_BASE + exc.code,
        "title": spec.title,
        "status": exc.http_status,
        "detail": spec.detail if spec.detail is not None else exc.message,
        **problem_fields(context),
    }


def problem_response(exc: AgentSessionError) -> Response:
    """``exc`` as an ``application/problem+json`` response with its headers."""
    headers = {}
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="agentsession"'
    if isinstance(exc, StoreBusy | StoreUnavailable):
        headers["Retry-After"] = str(STORE_RETRY_AFTER_SECONDS)
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
    return JSONResponse(
        problem_body(exc),
        status_code=exc.http_status,
        headers=headers,
        media_type=PROBLEM_CONTENT_TYPE,
    )


def plain_body(status: int, code: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The problem document of an HTTP-level condition (``type`` from ``code``)."""
    body = {"type": PROBLEM_BASE + code, "title": title, "status": status, "detail": detail}
    return {**body, **extra}


def plain_problem(status: int, code: str, title: str, detail: str, **extra: Any) -> Response:
    """A problem response for HTTP-level conditions (unknown route, 405, 408, 413)."""
    body = plain_body(status, code, title, detail, **extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_CONTENT_TYPE)


async def _on_agentsession_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AgentSessionError)
    if isinstance(exc, ValidationError | IdempotencyKeyReused):
        from .deps import gate

        blocked = await gate(request)
        if blocked is not None:
            return problem_response(blocked)
    if isinstance(exc, SearchNotSupported):
        # An answer about what this store offers, not a fault of the service.
        log.info("request refused (%s): the store offers no search", exc.code)
    elif exc.http_status >= 500:
        log_failure(log, f"request failed ({exc.code})", exc)
    if isinstance(exc, KeyringError):
        # The server's own data cannot be opened: the client learns only that the store
        # is unavailable; the log has the error's type and frames, never content.
        return problem_response(StoreUnavailable())
    return problem_response(exc)


async def _on_request_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    from .deps import gate

    blocked = await gate(request)
    if blocked is not None:
        return problem_response(blocked)
    found = exc.errors()
    errors = [
        {
            "field": _clip(".".join(str(p) for p in e.get("loc", ()))),
            "message": _clip(str(e.get("msg", ""))),
        }
        for e in found[:MAX_VALIDATION_ERRORS]
    ]
    first = errors[0] if errors else {"field": "", "message": "invalid request"}
    detail = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
    invalid = RequestInvalid(detail, errors=errors)
    if len(found) == len(errors):
        return problem_response(invalid)
    body = {**problem_body(invalid), "errors_omitted": len(found) - len(errors)}
    return JSONResponse(body, status_code=422, media_type=PROBLEM_CONTENT_TYPE)


#: The most entries a 422 ``request-validation`` answer lists; ``errors_omitted``
#: counts the rest (100,000 unknown fields must not make a 6 MB answer).
MAX_VALIDATION_ERRORS = 20
#: The most characters of a field path or message quoted back (a 1 MB unknown key).
MAX_ECHO_CHARS = 200


def _clip(text: str) -> str:
    """``text`` cut to :data:`MAX_ECHO_CHARS`, ending in ``...`` when cut."""
    return text if len(text) <= MAX_ECHO_CHARS else text[: MAX_ECHO_CHARS - 3] + "..."


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc, BodyTooLarge):
        return too_large(exc.limit)
    if isinstance(exc, BodyTimeout):
        return body_timeout(exc.seconds)
    if isinstance(exc, Overloaded):
        return overloaded(exc.limit)
    if exc.status_code == 404:
        return problem_response(NotFound("not found"))
    if exc.status_code == 405:
        from .routing import allowed_methods

        allow = allowed_methods(request.app.router.routes, request.scope)
        response = plain_problem(
            405,
            "method-not-allowed",
            "Method Not Allowed",
            f"{request.method} is not allowed here; allowed: {', '.join(allow)}",
        )
        response.headers["Allow"] = ", ".join(allow)
        return response
    detail = exc.detail if isinstance(exc.detail, str) else "request failed"
    return plain_problem(exc.status_code, "http-error", "HTTP Error", detail)


def too_large(limit: int, size: int | None = None) -> Response:
    """The 413 answer for a body over ``limit`` bytes; ``size``: its ``Content-Length``
    when it had one (``size_bytes``; a streamed body's size is not known)."""
    known = {} if size is None else {"size_bytes": size}
    return plain_problem(
        413,
        "payload-too-large",
        "Content Too Large",
        f"the request body is larger than {limit} bytes",
        field="body",
        limit_bytes=limit,
        **known,
    )


def body_timeout(seconds: float) -> Response:
    """The 408 answer for a body that did not arrive within ``seconds``; it closes the
    connection (the rest of a slow body is never read)."""
    response = plain_problem(
        408,
        "request-timeout",
        "Request Timeout",
        f"the request body did not arrive within {seconds:g} seconds",
        limit_seconds=seconds,
    )
    response.headers["Connection"] = "close"
    return response


#: Seconds a client refused for concurrency is told to wait.
BUSY_RETRY_AFTER_SECONDS = 1


def overloaded(limit: int) -> Response:
    """The 503 answer (with ``Retry-After``) when the worker serves ``limit`` requests."""
    response = plain_problem(
        503,
        "overloaded",
        "Service Unavailable",
        f"this worker is serving its limit of {limit} requests; retry shortly",
        limit_requests=limit,
    )
    response.headers["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
    return response


def install_handlers(app: FastAPI) -> None:
    """Register the problem+json exception handlers on ``app``."""
    app.add_exception_handler(AgentSessionError, _on_agentsession_error)
    app.add_exception_handler(RequestValidationError, _on_request_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)


def internal_error_body() -> dict[str, Any]:
    """The body of an unexpected failure: no trace, no SQL, no driver text."""
    return problem_body(ServerError("internal error"))
