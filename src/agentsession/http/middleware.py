"""Pure ASGI middleware: the edge (request ids, access lines, unexpected errors).
The limits on a request are one more layer, :mod:`.guards`.

Pure ASGI (not ``BaseHTTPMiddleware``) so the request id set here is the one the
endpoint, its worker threads and so the audit log see (``request_id_context``).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..fieldlimits import REQUEST_ID_CHARS
from ..protocol import PROBLEM_CONTENT_TYPE
from ..service import request_id_context
from .logs import log_access, log_failure, method_of, route_of
from .problems import internal_error_body

__all__ = ["EdgeMiddleware", "new_request_id", "send_problem"]

log = logging.getLogger("agentsession.http")

_REQUEST_ID = re.compile(rf"[A-Za-z0-9._:@+\-/=]{{1,{REQUEST_ID_CHARS}}}")

# Request ids are labels, not secrets: a generator seeded from os.urandom (again in a
# forked child) makes them unique without a getrandom() call per request, which
# releases the GIL and leaves the event loop waiting to take it back.
_ids = random.Random()
os.register_at_fork(after_in_child=_ids.seed)


def new_request_id() -> str:
    """A fresh request id: 32 lowercase hex characters (128 random bits)."""
    return f"{_ids.getrandbits(128):032x}"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class EdgeMiddleware:
    """The outermost layer: request id, access line, and the catch-all 500, in one
    pure-ASGI layer (one wrapper around ``send``, not three).

    * Request id: the client's ``X-Request-ID`` (if well formed) or
      :func:`new_request_id`, echoed on the answer; it is in
      ``scope["state"]["request_id"]`` and in ``request_id_context`` while the request
      runs, so every audit event written for the request carries it.
    * Access line: :func:`.logs.log_access` once the request is over, whatever happened.
    * Catch-all: any exception no handler took is answered with a bare 500 problem; the
      log gets its type and code locations, never its message
      (:func:`.logs.log_failure`). A client that hung up before its body was read
      (``ClientDisconnect``) is not an error: no answer, no log line but the access line.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = _header(scope, b"x-request-id")
        request_id = given if given is not None and _REQUEST_ID.fullmatch(given) else None
        request_id = request_id or new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        id_field = (b"x-request-id", request_id.encode("latin-1"))
        status = 0

        async def edge_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [h for h in message.get("headers", []) if h[0] != b"x-request-id"]
                headers.append(id_field)
                message = {**message, "headers": headers}
            await send(message)

        try:
            with request_id_context(request_id):
                await self._answer(scope, receive, edge_send, lambda: status != 0)
        finally:
            log_access(scope, status, started)

    async def _answer(
        self, scope: Scope, receive: Receive, send: Send, started: Callable[[], bool]
    ) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            # The client hung up mid-body: no one to answer, nothing failed on our side;
            # the access line shows it as 499 (an answer never sent).
            return
        except Exception as exc:
            log_failure(log, f"unhandled error in {method_of(scope)} {route_of(scope)}", exc)
            # Once the answer has started, returning (not re-raising) lets the server
            # close the connection without logging the exception's message itself.
            if not started():
                await send_problem(send, 500, internal_error_body())


async def send_problem(
    send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Send ``body`` as a whole ``application/problem+json`` answer, ``headers`` added."""
    data = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
