"""Limits on abusive clients, as pure ASGI middleware.

* :class:`HeaderLimitMiddleware`: a header section over ``max_header_bytes`` or with
  more than ``max_header_count`` fields -> 431. ``agentsession serve`` enforces the same
  :class:`HeaderLimits` while it reads the header section (:mod:`.wire`), so an
  oversized one is never held in memory whole; this middleware keeps the limits for
  any other ASGI server.
* :class:`BodyTimeoutMiddleware`: the whole body must arrive within
  ``body_timeout_seconds`` of the request's start -> else 408, connection closed.
* :class:`ConcurrencyLimitMiddleware`: at most ``max_concurrent_requests`` requests in
  flight in this worker process -> else 503 with ``Retry-After``.

Every refusal is a problem+json answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..settings import Settings
from .middleware import send_problem
from .problems import BodyTimeout, plain_body

__all__ = [
    "BodyTimeoutMiddleware",
    "ConcurrencyLimitMiddleware",
    "HeaderLimitMiddleware",
    "HeaderLimits",
]

#: Seconds a client refused for concurrency is told to wait.
BUSY_RETRY_AFTER_SECONDS = 1


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
            f"the request's header section did not arrive within {self.timeout_seconds:g} "
            "seconds",
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


class ConcurrencyLimitMiddleware:
    """Answer 503 with ``Retry-After`` when ``limit`` requests are already in flight.

    Counts the requests of this app instance, that is of one worker process (uvicorn
    builds the app in each worker); every request runs on the worker's one event loop
    thread, so a plain counter suffices.
    """

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            body = plain_body(
                503,
                "overloaded",
                "Service Unavailable",
                f"this worker is serving its limit of {self.limit} requests; retry shortly",
                limit_requests=self.limit,
            )
            retry = (b"retry-after", str(BUSY_RETRY_AFTER_SECONDS).encode())
            await send_problem(send, 503, body, [retry])
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
