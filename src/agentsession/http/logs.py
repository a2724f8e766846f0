"""What the service writes to its log, and nothing a client sent as content.

* :func:`log_access`: one line per request on ``agentsession.access``:
  client address, method, the route's template (``/v1/sessions/{session_id}``, never
  the path as sent, nor its query string), status (:data:`CLIENT_CLOSED` when nothing
  was answered: the client hung up first), duration and request id. No body,
  no header (but ``X-Request-ID``, which a client sends to be logged).
* :func:`log_failure`: an exception as its type and the code locations it passed
  through (chained causes too), never its message: a message may quote a value (a
  driver's "Key (x)=(...)", a JSON error's snippet).
* :func:`uvicorn_log_config`: the logging setup ``agentsession serve`` gives uvicorn
  (uvicorn's own access log is off: it prints the path and query string).
"""

from __future__ import annotations

import copy
import logging
import time
import traceback
from typing import Any

from starlette.types import Scope

__all__ = [
    "CLIENT_CLOSED",
    "failure_summary",
    "log_access",
    "log_failure",
    "method_of",
    "route_of",
    "uvicorn_log_config",
]

access_log = logging.getLogger("agentsession.access")

#: The status logged for a request never answered because the client closed its
#: connection first (nginx's "client closed request").
CLIENT_CLOSED = 499

#: Methods logged by name; any other is logged as OTHER (a method is client text too).
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_of(scope: Scope) -> str:
    """The template of the route that served the request, ``-`` when none matched."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "-"


def method_of(scope: Scope) -> str:
    """The request's method if it is a standard one, else ``OTHER``."""
    method = scope.get("method", "")
    return method if method in _METHODS else "OTHER"


def log_access(scope: Scope, status: int, started: float) -> None:
    """Log the access line of the request of ``scope`` (see the module docstring).

    Args:
        scope: the request's ASGI scope (its route, client and request id are read).
        status: the answer's status; 0 when nothing was answered (logged as 499).
        started: ``time.perf_counter()`` when the request reached the app.
    """
    client = scope.get("client")
    access_log.info(
        '%s - "%s %s" %d %.1fms %s',
        client[0] if client else "-",
        method_of(scope),
        route_of(scope),
        status or CLIENT_CLOSED,
        (time.perf_counter() - started) * 1000,
        scope.get("state", {}).get("request_id", "-"),
    )


def failure_summary(exc: BaseException) -> str:
    """``exc`` as its qualified type and its traceback frames (``file:line in
    function``), then the same for each chained cause; no message, no value."""
    lines: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = type(current)
        prefix = "caused by " if lines else ""
        lines.append(f"{prefix}{kind.__module__}.{kind.__qualname__}")
        for frame in traceback.extract_tb(current.__traceback__):
            lines.append(f"  {frame.filename}:{frame.lineno} in {frame.name}")
        chained = current.__cause__
        if chained is None and not current.__suppress_context__:
            chained = current.__context__
        current = chained
    return "\n".join(lines)


def log_failure(
    log: logging.Logger, what: str, exc: BaseException, *, level: int = logging.ERROR
) -> None:
    """Log ``what`` (fixed text of ours) and :func:`failure_summary` of ``exc``."""
    log.log(level, "%s: %s", what, failure_summary(exc))


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration, plus the ``agentsession`` loggers (the
    access lines, failures) on uvicorn's stderr handler at INFO."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["agentsession"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    return config
