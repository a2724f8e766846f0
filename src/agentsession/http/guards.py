"""Limits on abusive clients, as pure ASGI middleware.

* :class:`HeaderLimitMiddleware`: a header section over ``max_header_bytes`` or with
  more than ``max_header_count`` fields -> 431. ``agentsession serve`` enforces the same
  :class:`HeaderLimits` while it reads the header section (:mod:`.wire`), so an
  oversized one is never held in memory whole; this middleware keeps the limits for
  any other ASGI server.
* :class:`BodyTimeoutMiddleware`: the whole body must arrive within
  ``body_timeout_seconds`` of the request's start -> else 408, connection closed.
* :class:`RepeatedHeaderMiddleware`: a single-value header sent twice (two
  ``Authorization``, ``Content-Type``...) -> 400 naming it, rather than the first
  winning; repeated ``If-Match`` (a list field) are joined into one. A
  ``Content-Encoding`` other than ``identity`` -> 415: bodies are never decoded.
* :class:`ConcurrencyLimitMiddleware`: at most ``max_concurrent_requests`` requests in
  flight in this worker process -> else 503 with ``Retry-After``; a request counts
  once its body has arrived, and health, readiness and OpenAPI never count.

Every refusal is a problem+json answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..settings import Settings
from .middleware import send_problem
from .problems import BodyTimeout, Overloaded, overloaded, plain_body

__all__ = [
    "BodyTimeoutMiddleware",
    "ConcurrencyLimitMiddleware",
    "HeaderLimitMiddleware",
    "HeaderLimits",
    "RepeatedHeaderMiddleware",
]

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


_CLOSE = (b"connection", b"close")


class HeaderLimitMiddleware:
    """Answer 431 (and close) to a request whose header section breaks ``limits``."""

    def __init__(self, app: ASGIApp, *, limits: HeaderLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope.get("headers", ())
            target = scope.get("raw_path") or scope["path"].encode("utf-8")
            size = len(target) + len(scope.get("query_string", b""))
            size += sum(len(name) + len(value) for name, value in headers)
            if self.limits.over(len(headers), size):
                await send_problem(send, 431, self.limits.problem(), [_CLOSE])
                return
        await self.app(scope, receive, send)


class BodyTimeoutMiddleware:
    """Cut off a body that has not fully arrived ``seconds`` after the request started.

    The deadline runs from the moment the app is called (the header section read).
    Waiting for the body past it raises :class:`~.problems.BodyTimeout`, answered 408
    with ``Connection: close``, so the rest of a slow-drip body is never read. Once the
    body is complete, later ``receive`` calls (a wait for the disconnect) are not timed.
    """

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.seconds
        complete = False

        async def timed() -> Message:
            nonlocal complete
            if complete:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(self.seconds) from None
            complete = message["type"] != "http.request" or not message.get("more_body")
            return message

        await self.app(scope, timed, send)


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


class RepeatedHeaderMiddleware:
    """Refuse a repeated single-value field (400) and an encoded body (415); join
    repeated list fields into one so the app reads every value."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", ()))
        seen: dict[bytes, int] = {}
        for name, _ in headers:
            seen[name] = seen.get(name, 0) + 1
        repeated = sorted(n for n, count in seen.items() if count > 1 and n in SINGLE_VALUE_FIELDS)
        if repeated:
            field = repeated[0].decode("latin-1")
            body = plain_body(
                400,
                "repeated-header",
                "Bad Request",
                f"the {field} header is sent more than once; it takes one value",
                header=field,
            )
            await send_problem(send, 400, body)
            return
        encodings = {
            part.strip().lower()
            for name, value in headers
            if name == b"content-encoding"
            for part in value.split(b",")
        }
        if encodings - {b"identity", b""}:
            body = plain_body(
                415,
                "unsupported-media-type",
                "Unsupported Media Type",
                "the request body must not be encoded: send it without Content-Encoding",
                header="content-encoding",
            )
            await send_problem(send, 415, body)
            return
        if any(seen.get(name, 0) > 1 for name in _LIST_FIELDS):
            scope = {**scope, "headers": _joined(headers)}
        await self.app(scope, receive, send)


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


class ConcurrencyLimitMiddleware:
    """Answer 503 with ``Retry-After`` when ``limit`` requests are already in flight.

    Counts the requests of this app instance, that is of one worker process (uvicorn
    builds the app in each worker); every request runs on the worker's one event loop
    thread, so a plain counter suffices. A request counts from the moment its whole
    body has arrived (at once when it has none): a client dripping a body, or never
    sending it, holds no slot (the body timeout bounds how long it waits), so slow
    bodies cannot lock other clients out. One whose body completes while the worker is
    full is answered 503 then. :data:`UNLIMITED_PATHS` never count nor are refused.
    """

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        counted = False

        def count() -> None:
            nonlocal counted
            if self.active >= self.limit:
                raise Overloaded(self.limit)
            self.active += 1
            counted = True

        async def body_then_count() -> Message:
            message = await receive()
            complete = message["type"] == "http.request" and not message.get("more_body")
            if complete and not counted:
                count()
            return message

        has_body = _has_body(scope)
        if not has_body:
            if self.active >= self.limit:
                await overloaded(self.limit)(scope, receive, send)
                return
            count()
        try:
            await self.app(scope, body_then_count if has_body else receive, send)
        finally:
            if counted:
                self.active -= 1


#: Paths the concurrency limit never counts nor refuses: an orchestrator's health and
#: readiness probes (a refused probe gets a busy service restarted) and the API
#: description; all are cheap.
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs"})


def _has_body(scope: Scope) -> bool:
    """Whether the request announces a body (a non-zero ``Content-Length``, or a
    ``Transfer-Encoding``)."""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False
