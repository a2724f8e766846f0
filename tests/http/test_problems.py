"""The one error table: every error class has a problem type, and the client maps each
type back to the same class."""

from __future__ import annotations

import inspect
import json

import pytest

from agentsession import errors
from agentsession.http.problems import PROBLEMS, problem_body, too_large
from agentsession.protocol import (
    PROBLEM_BASE,
    PreconditionRequired,
    RequestInvalid,
    ServerError,
    TooManyRequests,
    Unauthenticated,
    error_from_problem,
)

ERROR_CLASSES = [
    cls
    for name in errors.__all__
    if inspect.isclass(cls := getattr(errors, name)) and issubclass(cls, errors.AgentSessionError)
] + [Unauthenticated, TooManyRequests, PreconditionRequired, RequestInvalid, ServerError]


def _instance(cls: type[errors.AgentSessionError]) -> errors.AgentSessionError:
    samples = {
        errors.SessionNotFound: lambda: errors.SessionNotFound(session_id="ses_x"),
        errors.RunNotFound: lambda: errors.RunNotFound(session_id="ses_x", run_id="run_y"),
        errors.SessionNotActive: lambda: errors.SessionNotActive(
            session_id="ses_x", status="CLOSED"
        ),
        errors.IllegalTransition: lambda: errors.IllegalTransition(
            session_id="ses_x", status="EXPIRED", action="close"
        ),
        errors.RunAlreadyRunning: lambda: errors.RunAlreadyRunning(
            session_id="ses_x", run_id="run_y"
        ),
        errors.RunNotRunning: lambda: errors.RunNotRunning(
            session_id="ses_x", run_id="run_y", status="FAILED"
        ),
        errors.RunLeaseExpired: lambda: errors.RunLeaseExpired(
            session_id="ses_x", run_id="run_y", status="INTERRUPTED"
        ),
        errors.VersionConflict: lambda: errors.VersionConflict(
            session_id="ses_x", expected_version=1, current_version=2
        ),
        errors.ToolCallExists: lambda: errors.ToolCallExists(session_id="ses_x", call_id="c1"),
        errors.SessionExists: lambda: errors.SessionExists(session_id="ses_x"),
        errors.PatchConflict: lambda: errors.PatchConflict(field="ops[1]", op="test", path="/a"),
        errors.IdempotencyKeyReused: lambda: errors.IdempotencyKeyReused(
            idempotency_key="K", operation="append"
        ),
        errors.PayloadTooLarge: lambda: errors.PayloadTooLarge(
            "too big", field="f", limit_bytes=1, size_bytes=2
        ),
        errors.SchemaOutOfDate: lambda: errors.SchemaOutOfDate(expected_revision="0002"),
        errors.SearchNotSupported: lambda: errors.SearchNotSupported(store="redis"),
        errors.BudgetExceeded: lambda: errors.BudgetExceeded(
            scope="user", session_id="ses_x", limit="cost", maximum=2.5, used=2.75
        ),
        errors.RecordNotFound: lambda: errors.RecordNotFound(namespace="ns", key="k"),
        errors.RewindNotFound: lambda: errors.RewindNotFound(session_id="ses_x", number=3),
        errors.ContextBudgetTooSmall: lambda: errors.ContextBudgetTooSmall(
            needed_tokens=120, budget_tokens=100
        ),
        errors.ImportSourceError: lambda: errors.ImportSourceError(
            "a.db: t rowid 1: x is text", source="a.db", row="t rowid 1", field="x"
        ),
    }
    factory = samples.get(cls)
    return factory() if factory is not None else cls("msg")


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_class_has_a_problem_and_round_trips(cls: type) -> None:
    """Each class is in the table; its body is RFC 9457; the client rebuilds the class."""
    assert cls in PROBLEMS
    exc = _instance(cls)
    body = problem_body(exc)
    assert body["type"] == PROBLEM_BASE + cls.code
    assert body["status"] == cls.http_status
    assert set(body) >= {"type", "title", "status", "detail"}
    sid = None if cls is errors.NotFound else "ses_x"
    back = error_from_problem(body, body["status"], session_id=sid)
    assert type(back) is cls
    if cls is errors.SearchNotSupported:
        assert body["detail"] == exc.message  # ours: why this store has no search
    elif body["status"] >= 500:
        assert body["detail"] in (
            "internal error",
            "the store failed; nothing was written",
            "the store is busy; retry shortly",
            "the store is unreachable or full; retry after Retry-After seconds with the "
            "same Idempotency-Key",
        )
    if cls is errors.VersionConflict:
        assert back.current_version == 2  # type: ignore[attr-defined]
    if cls is errors.SessionNotActive:
        assert back.status == "CLOSED"  # type: ignore[attr-defined]
    if cls is errors.PatchConflict:
        assert (back.field, back.op, back.path) == ("ops[1]", "test", "/a")  # type: ignore[attr-defined]
    if cls is errors.RecordNotFound:
        assert (back.namespace, back.key) == ("ns", "k")  # type: ignore[attr-defined]
    if cls is errors.RewindNotFound:
        assert back.number == 3  # type: ignore[attr-defined]
    if cls is errors.ImportSourceError:
        assert (back.source, back.row, back.field) == ("a.db", "t rowid 1", "x")  # type: ignore[attr-defined]


def test_not_found_bodies_do_not_echo_the_id() -> None:
    """A missing and a hidden session give the same body whatever the id."""
    assert problem_body(errors.SessionNotFound(session_id="ses_a")) == problem_body(
        errors.SessionNotFound(session_id="ses_b")
    )


def test_a_body_limit_problem_without_its_size_is_payload_too_large() -> None:
    """The server cannot know a streamed body's size: its 413 has no ``size_bytes``,
    and the client still rebuilds a PayloadTooLarge (not a TypeError)."""
    body = json.loads(too_large(1000).body)
    assert "size_bytes" not in body
    exc = error_from_problem(body, 413)
    assert isinstance(exc, errors.PayloadTooLarge)
    assert (exc.limit_bytes, exc.size_bytes, exc.field) == (1000, None, "body")
    sized = error_from_problem(json.loads(too_large(1000, 1500).body), 413)
    assert isinstance(sized, errors.PayloadTooLarge) and sized.size_bytes == 1500
