"""uvicorn's httptools HTTP protocol with our answers to what it refuses itself.

``agentsession serve`` runs uvicorn with ``http=`` :data:`PROTOCOL` (an import
string: each worker process imports it, and reads the limits from its
``AGENTSESSION_*`` environment, as it builds its app). It differs from uvicorn's
``HttpToolsProtocol`` (whose hooks it relies on: the pinned ``uvicorn>=0.30,<0.60``
has them) in two ways:

* invalid HTTP is answered with a problem+json 400 (uvicorn's is text/plain);
* the header section is limited while it is read (:class:`~.guards.HeaderLimits`).
  Its size (the request target plus the fields' names and values) and its number of
  fields are counted as each field is parsed, and the raw bytes of a section not yet
  complete after each read, so a client never makes it hold more than about
  ``max_header_bytes`` plus one read: over a limit -> problem+json 431. It must arrive
  within ``header_timeout_seconds`` of the connection (or of a request's first byte on
  a kept-alive one), else 408: a client dripping its headers holds no connection long.

A refused connection is answered, then read and discarded for at most
:data:`LINGER_SECONDS` before it is closed, so that a client still sending its
oversized request gets to read the answer instead of a connection reset.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ..protocol import PROBLEM_CONTENT_TYPE
from ..settings import Settings
from .guards import HeaderLimits
from .problems import plain_body

__all__ = ["LINGER_SECONDS", "PROTOCOL", "ProblemHttpProtocol"]

#: What ``serve`` passes as uvicorn's ``http``.
PROTOCOL = "agentsession.http.wire:ProblemHttpProtocol"

#: Seconds a refused connection is drained before it is closed.
LINGER_SECONDS = 2.0


class _HeaderSectionTooLarge(httptools.HttpParserError):
    """Raised from a parser callback to stop parsing an oversized header section."""


@functools.cache
def _process_limits() -> HeaderLimits:
    return HeaderLimits.of(Settings())


class ProblemHttpProtocol(HttpToolsProtocol):
    """See the module docstring. One instance per connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = _process_limits()
        self._fields = 0
        self._field_bytes = 0
        self._head_bytes = 0
        self._reading_head = True
        self._too_large = False
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection: its first header section is due within the timeout."""
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the header timer with the connection."""
        self._disarm_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser; refuse a header section that grows past the limit."""
        if self._refused:
            return  # draining a refused request until the linger ends
        super().data_received(data)
        if self._reading_head and not self._refused:
            # Counted after the parse: a read that also ended the header section
            # is not counted (the section's own size is counted field by field).
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_bytes:
                self._too_large = True
                self._answer_too_large()

    def on_message_begin(self) -> None:
        """A new request: its header section is counted from zero."""
        super().on_message_begin()
        self._fields = self._field_bytes = self._head_bytes = 0
        self._reading_head = True
        if self._head_timer is None:  # a new connection's timer runs from its start
            self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        """Count the request target's bytes."""
        self._count(0, len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count one field and its bytes."""
        self._count(1, len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """The header section is whole; the body is limited by the app."""
        self._reading_head = False
        self._disarm_head_timer()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        """Answer what the parser refused: 431 for a header section over the limit
        (:meth:`_count` stopped the parser), else a problem+json 400."""
        if self._too_large:
            self._answer_too_large()
            return
        self._refuse(
            400, plain_body(400, "invalid-http", "Bad Request", "the request is not valid HTTP/1.1")
        )

    def _answer_too_large(self) -> None:
        self.logger.warning("Request header section over the limit: answered 431.")
        self._refuse(431, self.limits.problem())

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.limits.timeout_seconds, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._reading_head and not self._refused:
            self.logger.warning("Request header section too slow: answered 408.")
            self._refuse(408, self.limits.timeout_problem())

    def _count(self, fields: int, size: int) -> None:
        self._fields += fields
        self._field_bytes += size
        if self.limits.over(self._fields, self._field_bytes):
            self._too_large = True
            # The parser wraps it in HttpParserCallbackError, and uvicorn's
            # data_received answers that with send_400_response.
            raise _HeaderSectionTooLarge

    def _refuse(self, status: int, body: dict[str, Any]) -> None:
        if self._refused:
            return
        self._refused = True
        data = json.dumps(body).encode("utf-8")
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: " + PROBLEM_CONTENT_TYPE.encode("ascii") + b"\r\n",
                b"content-length: " + str(len(data)).encode("ascii") + b"\r\n",
                b"connection: close\r\n\r\n",
                data,
            ]
        )
        self.transport.write(b"".join(content))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)
