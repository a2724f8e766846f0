"""Per-call context that follows a call into worker threads.

Two context variables: the request id that tags audit events, and the
:class:`WriteReport` the write pipeline fills. ``asyncio.to_thread`` runs the call in a
copy of the caller's context, and the copy holds the same report object, so what the
pipeline writes into it is visible to the caller afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import ValidationError
from ..fieldlimits import REQUEST_ID_CHARS

__all__ = [
    "WriteReport",
    "current_request_id",
    "report_write",
    "request_id_context",
    "write_report",
]

_request_id: ContextVar[str | None] = ContextVar("agentsession_request_id", default=None)
_report: ContextVar[WriteReport | None] = ContextVar("agentsession_write_report", default=None)


@contextmanager
def request_id_context(request_id: str | None) -> Iterator[None]:
    """Tag every audit event written inside the block with ``request_id``.

    The HTTP service sets it per request; it follows ``asyncio.to_thread`` calls.

    Raises:
        ValidationError: ``request_id`` is not None nor a string of 1-``REQUEST_ID_CHARS``
            (128) characters.
    """
    if request_id is not None and (
        type(request_id) is not str or not 1 <= len(request_id) <= REQUEST_ID_CHARS
    ):
        raise ValidationError(
            f"request_id must be a string of 1-{REQUEST_ID_CHARS} characters", field="request_id"
        )
    token = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(token)


def current_request_id() -> str | None:
    """The request id set by the innermost :func:`request_id_context`, or None."""
    return _request_id.get()


@dataclass(slots=True)
class WriteReport:
    """What the write pipeline did in a :func:`write_report` block.

    Attributes:
        replayed: the last write answered with the stored first result of its
            idempotency key (nothing was written), rather than writing.
        writes: how many pipeline writes finished in the block (replays included).
        session_version: the session's version when the last write finished: after its
            change, or the current one when it changed nothing or was a replay (None: a
            session creation, or no write yet).
    """

    replayed: bool = False
    writes: int = 0
    session_version: int | None = None


@contextmanager
def write_report() -> Iterator[WriteReport]:
    """Open a report that the write pipeline fills for every write inside the block.

    Example::

        with write_report() as report:
            memory = await manager.update_working_memory(..., idempotency_key=key)
        replayed = report.replayed
    """
    report = WriteReport()
    token = _report.set(report)
    try:
        yield report
    finally:
        _report.reset(token)


def report_write(*, replayed: bool, session_version: int | None = None) -> None:
    """Record one finished write in the open report, if any (the pipeline calls this)."""
    report = _report.get()
    if report is not None:
        report.replayed = replayed
        report.writes += 1
        report.session_version = session_version
