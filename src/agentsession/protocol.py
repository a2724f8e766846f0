"""What the HTTP service and its client agree on; imports no web framework.

* Problem types: every error body is RFC 9457 ``application/problem+json`` whose
  ``type`` is ``PROBLEM_BASE + code`` (``code`` of the error class, see
  :mod:`agentsession.errors`), plus the HTTP-only errors defined here.
* ETags: ``"<session_id>@<version>"``, strong, bound to one session. ``If-Match`` with
  an ETag of another session, a weak one (``W/``) or a stale one never matches (412).
  The version alone is not enough: two sessions are both at version 1 after creation.
* Context field names: an error's ``status`` attribute (a session or run status) is
  sent as ``current_status``, because ``status`` is the HTTP status in a problem body.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from .errors import AgentSessionError, Forbidden, ValidationError
from .ids import ID_PATTERN

__all__ = [
    "PROBLEM_BASE",
    "PROBLEM_CONTENT_TYPE",
    "InsufficientScope",
    "MalformedJson",
    "PreconditionRequired",
    "RequestInvalid",
    "ServerError",
    "TooManyRequests",
    "Unauthenticated",
    "UnsupportedMediaType",
    "error_from_problem",
    "format_document_etag",
    "format_etag",
    "parse_document_if_match",
    "parse_etag",
    "parse_if_match",
]

PROBLEM_BASE = "https://agentsession.dev/problems/"
PROBLEM_CONTENT_TYPE = "application/problem+json"

#: Context attributes renamed in problem bodies (they clash with RFC 9457 members).
RENAMED_FIELDS = {"status": "current_status", "type": "value_type", "title": "value_title"}


class Unauthenticated(AgentSessionError):
    """No API key, or one that is unknown or revoked (HTTP 401)."""

    http_status = 401
    code = "unauthenticated"


class InsufficientScope(Forbidden):
    """The API key's scope does not allow the operation: a ``read`` key asked for a
    write (HTTP 403, docs/security.md, "Scopes")."""

    code = "insufficient-scope"


class TooManyRequests(AgentSessionError):
    """Too many failed authentications from this client address or for this key id
    (HTTP 429); the answer's ``Retry-After`` says when to try again.

    Attributes:
        retry_after: seconds (a whole number, at least 1) until the limit has room.
    """

    http_status = 429
    code = "too-many-requests"

    def __init__(self, message: str | None = None, *, retry_after: int = 1) -> None:
        self.retry_after = retry_after
        super().__init__(message, retry_after=retry_after)


class PreconditionRequired(AgentSessionError):
    """The service requires ``If-Match`` on this request and it was missing (HTTP 428)."""

    http_status = 428
    code = "precondition-required"


class RequestInvalid(ValidationError):
    """The request does not fit the API schema: a missing or mistyped field (HTTP 422).

    A :class:`~agentsession.errors.ValidationError`, so code written against the
    library's errors (``except ValidationError``) catches what a client gets when the
    service's schema refuses an argument before the manager sees it.

    Attributes:
        errors: a list of ``{"field": "body.title", "message": ...}``.
        field: the first error's field, if any.
    """

    http_status = 422
    code = "request-validation"

    def __init__(
        self, message: str | None = None, *, errors: list[dict[str, Any]] | None = None
    ) -> None:
        self.errors = errors or []
        first = self.errors[0].get("field") if self.errors else None
        super().__init__(message, field=first or None, errors=self.errors)


class MalformedJson(ValidationError):
    """A body or JSON query parameter that is not one unambiguous JSON text in UTF-8:
    a BOM, another encoding, bad syntax, a duplicate key, nesting past the limit
    (HTTP 400). ``field`` names where (``body``, ``body.message``, ``query.arguments``).
    """

    code = "malformed-json"


class UnsupportedMediaType(AgentSessionError):
    """A body whose ``Content-Type`` is not JSON in UTF-8 (HTTP 415)."""

    http_status = 415
    code = "unsupported-media-type"


class ServerError(AgentSessionError):
    """An unexpected server failure; the body holds no internals (HTTP 500)."""

    http_status = 500
    code = "internal-error"


def format_etag(session_id: str, version: int) -> str:
    """Return the strong ETag (quotes included) of ``session_id`` at ``version``."""
    return f'"{session_id}@{version}"'


_ETAG = re.compile(rf'^"(?P<sid>{ID_PATTERN.pattern})@(?P<version>[1-9][0-9]{{0,17}})"$')


def parse_etag(value: str) -> tuple[str, int] | None:
    """Return ``(session_id, version)`` of a strong ETag, or None (weak, malformed)."""
    match = _ETAG.match(value.strip())
    if match is None:
        return None
    return match["sid"], int(match["version"])


def parse_if_match(header: str, session_id: str) -> tuple[bool, set[int]]:
    """Read an ``If-Match`` header for ``session_id``.

    Returns:
        ``(any, versions)``: ``any`` is True for ``*``; ``versions`` are the versions of
        the strong ETags of this session in the list (empty: nothing can match).
    """
    if header.strip() == "*":
        return True, set()
    versions: set[int] = set()
    for part in _split_etags(header):
        parsed = parse_etag(part)
        if parsed is not None and parsed[0] == session_id:
            versions.add(parsed[1])
    return False, versions


_DOCUMENT_ETAG = re.compile(r'^"(?P<version>0|[1-9][0-9]{0,17})"$')


def format_document_etag(version: int) -> str:
    """Return the strong ETag (quotes included) of a shared-memory document at
    ``version``: ``"<version>"`` (a document has no id of its own; its URL names it)."""
    return f'"{version}"'


def parse_document_if_match(header: str) -> tuple[bool, set[int]]:
    """Read an ``If-Match`` header for a shared-memory document.

    Returns:
        ``(any, versions)`` as :func:`parse_if_match`: the versions of the document
        ETags in the list (empty: nothing can match, e.g. a session's ETag).
    """
    if header.strip() == "*":
        return True, set()
    found = (_DOCUMENT_ETAG.match(part) for part in _split_etags(header))
    return False, {int(m["version"]) for m in found if m is not None}


def _split_etags(header: str) -> list[str]:
    # ETags hold no commas in our format; a quoted comma elsewhere just never matches.
    return [p.strip() for p in header.split(",") if p.strip()]


def problem_fields(context: dict[str, Any]) -> dict[str, Any]:
    """Context attributes as problem members: renamed where they clash, None dropped."""
    return {RENAMED_FIELDS.get(k, k): v for k, v in context.items() if v is not None}


def _error_classes() -> dict[str, list[type[AgentSessionError]]]:
    from . import errors

    found: dict[str, list[type[AgentSessionError]]] = {}
    classes = [getattr(errors, name) for name in errors.__all__]
    classes += [Unauthenticated, InsufficientScope, TooManyRequests, PreconditionRequired]
    classes += [RequestInvalid]
    classes += [ServerError, MalformedJson, UnsupportedMediaType]
    for cls in classes:
        found.setdefault(cls.code, []).append(cls)
    return found


def error_from_problem(
    body: dict[str, Any], status: int, *, session_id: str | None = None
) -> AgentSessionError:
    """Rebuild the typed error a problem+json body stands for (the client's half).

    The class is chosen by the ``type`` suffix (the error ``code``); ``not-found`` is a
    RunNotFound when the body names a ``run_id``, a RecordNotFound when it names a
    ``namespace`` and ``key``, a RewindNotFound when it names a ``number``, else a
    SessionNotFound when the request named a session.
    Context members become constructor keywords again.
    """
    code = str(body.get("type", "")).removeprefix(PROBLEM_BASE)
    detail = str(body.get("detail") or body.get("title") or f"HTTP {status}")
    reserved = {"type", "title", "status", "detail", "instance"}
    back = {v: k for k, v in RENAMED_FIELDS.items()}
    context = {back.get(k, k): v for k, v in body.items() if k not in reserved}
    candidates = _error_classes().get(code, [])
    from .errors import NotFound, RecordNotFound, RewindNotFound, RunNotFound, SessionNotFound

    cls: type[AgentSessionError]
    if code == "not-found":
        if "run_id" in context and session_id is not None:
            cls = RunNotFound
        elif "key" in context and "namespace" in context:
            cls = RecordNotFound
        elif "number" in context and session_id is not None:
            cls = RewindNotFound
        elif session_id is not None:
            cls = SessionNotFound
        else:
            cls = NotFound
    elif candidates:
        cls = candidates[0]
    elif status >= 500:
        cls = ServerError
    elif status == 404:
        cls = NotFound
    else:
        cls = ValidationError
    if issubclass(cls, SessionNotFound | RunNotFound | RewindNotFound) and session_id is not None:
        context.setdefault("session_id", session_id)
    return cls(detail, **_accepted(cls, context))


def _accepted(cls: type[AgentSessionError], context: dict[str, Any]) -> dict[str, Any]:
    """The members of ``context`` the constructor of ``cls`` takes as keywords (all of
    them if it takes ``**context``); members a newer server added are left out."""
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return context
    names = {p.name for p in params if p.kind is p.KEYWORD_ONLY}
    return {k: v for k, v in context.items() if k in names}
