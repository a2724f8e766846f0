"""Limits on abusive clients, as one pure ASGI layer: :class:`GuardMiddleware`.

One layer, one pass over the header fields and one wrapper around ``receive`` (not a
layer per limit: each costs a coroutine, and a wrapper, on every request). Checked in
this order, the first refusal answering:

* the header section: over ``max_header_bytes`` or more than ``max_header_count``
  fields -> 431, connection closed. ``agentsession serve`` enforces the same
  :class:`HeaderLimits` while it reads the header section (:mod:`.wire`), so an
  oversized one is never held in memory whole; the layer keeps the limits for any
  other ASGI server;
* repeated headers: a single-value header sent twice (two ``Authorization``,
  ``Content-Type``...) -> 400 naming it, rather than the first winning; repeated
  ``If-Match`` (a list field) are joined into one. A ``Content-Encoding`` other than
  ``identity`` -> 415: bodies are never decoded;
* requests in flight: at most ``max_concurrent_requests`` in this worker process ->
  else 503 with ``Retry-After``; a request counts once its body has arrived, and
  health, readiness, OpenAPI and Server-Sent Events streams never count (a stream
  idles on its connection; the change feed's hub caps streams itself);
* the body's size: a ``Content-Length`` that is not a number -> 400, one over
  ``max_body_bytes`` -> 413 before the body is read; a body without one (chunked) is
  counted as it streams and refused (413) once it passes the limit;
* the body's time: the whole body must arrive within ``body_timeout_seconds`` of the
  request's start -> else 408, connection closed.

Every refusal is a problem+json answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..protocol import PROBLEM_BASE
from ..settings import Settings
from .middleware import send_problem
from .problems import BodyTimeout, BodyTooLarge, Overloaded, overloaded, plain_body, too_large

__all__ = ["GuardMiddleware", "HeaderLimits"]


@dataclass(frozen=True, slots=True)
class HeaderLimits:
    """The limits of a request's header section.

    Attributes:
        max_bytes: the most bytes of the request target (path and query) plus every
            field's name and value.
        max_count: the most header fields.
        timeout_seconds: seconds from the connection (or the first byte of a request
            on a kept-alive connection) within which the whole header section must
            arrive; only the server's protocol (:mod:`.wire`) can enforce it.
    """

    max_bytes: int
    max_count: int
    timeout_seconds: float = 10.0

    @classmethod
    def of(cls, settings: Settings) -> HeaderLimits:
        """The limits ``settings`` name (``max_header_bytes``, ``max_header_count``,
        ``header_timeout_seconds``)."""
        return cls(
            settings.max_header_bytes, settings.max_header_count, settings.header_timeout_seconds
        )

    def over(self, count: int, size: int) -> bool:
        """Whether ``count`` fields totalling ``size`` bytes break a limit."""
        return count > self.max_count or size > self.max_bytes

    def timeout_problem(self) -> dict[str, Any]:
        """The 408 problem document of a header section that came too slowly."""
        return plain_body(
            408,
            "request-timeout",
            "Request Timeout",
            f"the request's header section did not arrive within {self.timeout_seconds:g} seconds",
            limit_seconds=self.timeout_seconds,
        )

    def problem(self) -> dict[str, Any]:
        """The 431 problem document; it names both limits, never the request's fields."""
        return plain_body(
            431,
            "header-fields-too-large",
            "Request Header Fields Too Large",
            f"the request's header section is over {self.max_bytes} bytes "
            f"or {self.max_count} fields",
            limit_bytes=self.max_bytes,
            limit_count=self.max_count,
        )


#: Fields the service reads that take one value: RFC 9110 5.3 lets only list-valued
#: fields repeat, and "the first wins" would let a proxy and the app disagree.
SINGLE_VALUE_FIELDS = frozenset(
    {
        b"authorization",
        b"content-length",
        b"content-type",
        b"host",
        b"idempotency-key",
        b"x-request-id",
    }
)
#: List-valued fields the service reads; repeats are joined with ", " (RFC 9110 5.3).
_LIST_FIELDS = frozenset({b"if-match"})

#: Paths the concurrency limit never counts nor refuses: an orchestrator's health and
#: readiness probes (a refused probe gets a busy service restarted) and the API
#: description; all are cheap.
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs"})

_CLOSE = (b"connection", b"close")


@dataclass(slots=True)
class _Fields:
    """What the guards read of a header section, gathered in one pass."""

    count: int = 0
    size: int = 0
    #: how often each field name occurs.
    seen: dict[bytes, int] = field(default_factory=dict)
    #: the first ``Content-Length`` value (None: none sent).
    length: bytes | None = None
    #: a ``Transfer-Encoding`` or a non-zero ``Content-Length`` announces a body.
    has_body: bool = False
    #: every coding a ``Content-Encoding`` field names, lowercased.
    encodings: set[bytes] = field(default_factory=set)

    @classmethod
    def of(cls, scope: Scope) -> _Fields:
        """The fields of ``scope``'s headers; ``size`` counts the request target too."""
        headers = scope.get("headers", ())
        target = scope.get("raw_path") or scope["path"].encode("utf-8")
        found = cls(len(headers), len(target) + len(scope.get("query_string", b"")))
        seen = found.seen
        for name, value in headers:
            found.size += len(name) + len(value)
            seen[name] = seen.get(name, 0) + 1
            if name == b"content-length":
                if found.length is None:
                    found.length = value
                found.has_body = found.has_body or value != b"0"
            elif name == b"transfer-encoding":
                found.has_body = True
            elif name == b"content-encoding":
                found.encodings.update(part.strip().lower() for part in value.split(b","))
        return found


class GuardMiddleware:
    """Every limit on a request in one pure ASGI layer (see the module docstring).

    Args:
        app: the app it guards.
        limits: the header section's limits (431).
        max_body_bytes: the largest body accepted (413).
        body_timeout_seconds: seconds from the request's start (the header section
            read) within which the whole body must arrive (408).
        max_concurrent_requests: the most requests in flight in this app instance,
            that is in one worker process (503).

    Requests in flight are counted on the worker's one event loop thread, so a plain
    counter suffices. A request counts from the moment its whole body has arrived (at
    once when it has none): a client dripping a body, or never sending it, holds no
    slot (the body timeout bounds how long it waits), so slow bodies cannot lock other
    clients out; one whose body completes while the worker is full is answered 503
    then. Waiting for the body past its deadline raises
    :class:`~.problems.BodyTimeout` (408, ``Connection: close``: the rest of a
    slow-drip body is never read); once the body is complete, later ``receive`` calls
    (a wait for the disconnect) are not timed.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        limits: HeaderLimits,
        max_body_bytes: int,
        body_timeout_seconds: float,
        max_concurrent_requests: int,
    ) -> None:
        self.app = app
        self.limits = limits
        self.max_body_bytes = max_body_bytes
        self.body_timeout_seconds = body_timeout_seconds
        self.limit = max_concurrent_requests
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        fields = _Fields.of(scope)
        refusal = self._header_refusal(fields)
        if refusal is not None:
            status, body, extra = refusal
            await send_problem(send, status, body, extra)
            return
        if any(fields.seen.get(name, 0) > 1 for name in _LIST_FIELDS):
            scope = {**scope, "headers": _joined(list(scope.get("headers", ())))}
        counts = scope["path"] not in UNLIMITED_PATHS and not is_event_stream(scope)
        if counts and not fields.has_body and self.active >= self.limit:
            await overloaded(self.limit)(scope, receive, send)
            return
        if fields.length is not None:
            if not fields.length.isdigit():
                await send_problem(send, 400, _bad_length())
                return
            if int(fields.length) > self.max_body_bytes:
                await too_large(self.max_body_bytes, int(fields.length))(scope, receive, send)
                return
        await self._guarded(scope, receive, send, counts and fields.has_body, counts)

    def _header_refusal(
        self, fields: _Fields
    ) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]] | None:
        """The status, problem body and extra header fields of a refused header
        section (431, then 400 for a repeated single-value field, then 415), or None."""
        if self.limits.over(fields.count, fields.size):
            return 431, self.limits.problem(), [_CLOSE]
        repeated = sorted(
            n for n, count in fields.seen.items() if count > 1 and n in SINGLE_VALUE_FIELDS
        )
        if repeated:
            name = repeated[0].decode("latin-1")
            body = plain_body(
                400,
                "repeated-header",
                "Bad Request",
                f"the {name} header is sent more than once; it takes one value",
                header=name,
            )
            return 400, body, []
        if fields.encodings - {b"identity", b""}:
            body = plain_body(
                415,
                "unsupported-media-type",
                "Unsupported Media Type",
                "the request body must not be encoded: send it without Content-Encoding",
                header="content-encoding",
            )
            return 415, body, []
        return None

    async def _guarded(
        self, scope: Scope, receive: Receive, send: Send, count_on_body: bool, counts: bool
    ) -> None:
        """Run the app with ``receive`` timed and its bytes counted; count the request
        in flight now (``counts`` without a body) or once its body is complete
        (``count_on_body``)."""
        deadline = asyncio.get_running_loop().time() + self.body_timeout_seconds
        complete = False
        counted = False
        seen = 0

        def count() -> None:
            nonlocal counted
            if self.active >= self.limit:
                raise Overloaded(self.limit)
            self.active += 1
            counted = True

        async def guarded() -> Message:
            nonlocal complete, seen
            if complete:
                message = await receive()
            else:
                try:
                    async with asyncio.timeout_at(deadline):
                        message = await receive()
                        whole = message["type"] == "http.request" and not message.get("more_body")
                        if whole and count_on_body and not counted:
                            count()
                except TimeoutError:
                    raise BodyTimeout(self.body_timeout_seconds) from None
                complete = message["type"] != "http.request" or not message.get("more_body")
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        if counts and not count_on_body:
            count()
        try:
            await self.app(scope, guarded, send)
        finally:
            if counted:
                self.active -= 1


def is_event_stream(scope: Scope) -> bool:
    """Whether the request is a GET that accepts ``text/event-stream`` (a Server-Sent
    Events stream of the change feed)."""
    if scope.get("method") != "GET":
        return False
    return any(
        name == b"accept" and b"text/event-stream" in value
        for name, value in scope.get("headers", ())
    )


def _bad_length() -> dict[str, Any]:
    """The 400 problem document of a ``Content-Length`` that is not a number."""
    return {
        "type": PROBLEM_BASE + "http-error",
        "title": "Bad Request",
        "status": 400,
        "detail": "Content-Length is not a number",
    }


def _joined(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with the values of each repeated list field joined into its first."""
    out: list[tuple[bytes, bytes]] = []
    where: dict[bytes, int] = {}
    for name, value in headers:
        if name in _LIST_FIELDS and name in where:
            first = where[name]
            out[first] = (name, out[first][1] + b", " + value)
            continue
        where[name] = len(out)
        out.append((name, value))
    return out
