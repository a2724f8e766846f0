"""A session's runs as OpenTelemetry traces (extra ``otel``).

:func:`export_session` turns what a session stored into spans, with the times it
stored: each run a root span (GenAI semantic conventions: ``invoke_agent <agent>``,
``gen_ai.operation.name``, ``gen_ai.agent.name``, ``gen_ai.conversation.id``), its
steps and its tool calls child spans (a tool call: ``execute_tool <tool>``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``), each with its status (ERROR with the
stored error for a failed run, step or tool call). A tool call recorded outside any run
is a root span of its own. Content (run input and output, step input and output, tool
arguments and results) is left out unless ``include_content``.

``agentsession trace export SESSION_ID`` writes them as JSON lines (one span each).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from .engine import EngineEvent
from .models import Run, RunStatus, RunStep, ToolCall, ToolCallStatus
from .service import SessionManager

__all__ = ["export_session", "live_exporter"]

_TRACER = "agentsession"
_PAGE = 200


def _ns(at: datetime | None) -> int:
    return int((at or datetime.now(UTC)).timestamp() * 1_000_000_000)


def _content(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _pages(fetch: Any, **kwargs: Any) -> Iterator[Any]:
    cursor = None
    while True:
        page = fetch(**kwargs, limit=_PAGE, cursor=cursor)
        yield from page.items
        cursor = page.next_cursor
        if not cursor:
            return


def export_session(
    api: SessionManager,
    *,
    session_id: str,
    user_id: str,
    admin: bool = False,
    tracer_provider: TracerProvider | None = None,
    include_content: bool = False,
    run_id: str | None = None,
) -> int:
    """Emit the spans of ``session_id``'s runs, steps and tool calls (see the module
    docstring) through ``tracer_provider`` (default: the global one), whose span
    processors export them.

    Args:
        api: the manager of the session's store.
        session_id, user_id, admin: the session, and who reads it.
        tracer_provider: where the spans go.
        include_content: also put inputs, outputs, tool arguments and results on the
            spans (as JSON text); off by default.
        run_id: only this run's spans (and no tool call outside runs).

    Returns:
        How many spans were emitted.

    Raises:
        SessionNotFound: no such session visible to ``user_id``.
    """
    who: dict[str, Any] = {"session_id": session_id, "user_id": user_id, "admin": admin}
    session = api.get_session(**who)
    tracer = trace.get_tracer(_TRACER, tracer_provider=tracer_provider)
    calls = list(_pages(api.get_tool_history, **who))
    base = {"gen_ai.agent.name": session.agent, "gen_ai.conversation.id": session_id}
    emitted = 0
    runs = [api.get_run(**who, run_id=run_id)] if run_id else _pages(api.list_runs, **who)
    for run in runs:
        attributes: dict[str, Any] = {
            **base,
            "gen_ai.operation.name": "invoke_agent",
            "agentsession.run.id": run.run_id,
            "agentsession.run.status": run.status.value,
        }
        for name, count in run.usage.items():
            attributes[f"gen_ai.usage.{name}"] = count
        if include_content:
            attributes["agentsession.run.input"] = _content(run.input)
            attributes["agentsession.run.output"] = _content(run.output)
        span = tracer.start_span(
            f"invoke_agent {session.agent}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(run.started_at or run.created_at),
        )
        context = trace.set_span_in_context(span)
        for step in _pages(api.list_run_steps, **who, run_id=run.run_id):
            _step_span(tracer, context, run, step, include_content)
            emitted += 1
        for call in (c for c in calls if c.run_id == run.run_id):
            _tool_span(tracer, context, base, call, include_content)
            emitted += 1
        _finish(span, run.status is RunStatus.FAILED, run.error, run.ended_at)
        emitted += 1
    for call in (c for c in calls if c.run_id is None and run_id is None):
        _tool_span(tracer, None, base, call, include_content)
        emitted += 1
    return emitted


def live_exporter(
    api: SessionManager,
    *,
    user_id: str,
    tracer_provider: TracerProvider | None = None,
    include_content: bool = False,
) -> Callable[[EngineEvent], None]:
    """An ``observer`` for :class:`~agentsession.engine.AgentEngine` that emits each
    run's spans (:func:`export_session` of that run) as soon as the engine finishes it.

    Args:
        api: the manager the engine writes through; user_id: the engine's user.
        tracer_provider, include_content: as :func:`export_session`.
    """

    def observe(event: EngineEvent) -> None:
        if event.kind == "run_finished":
            export_session(
                api,
                session_id=event.data["session_id"],
                user_id=user_id,
                run_id=event.data["run_id"],
                tracer_provider=tracer_provider,
                include_content=include_content,
            )

    return observe


def _finish(span: Span, failed: bool, error: str | None, ended: datetime | None) -> None:
    span.set_status(Status(StatusCode.ERROR, error) if failed else Status(StatusCode.OK))
    span.end(end_time=_ns(ended))


def _step_span(
    tracer: trace.Tracer, context: Any, run: Run, step: RunStep, include_content: bool
) -> None:
    attributes: dict[str, Any] = {
        "agentsession.run.id": run.run_id,
        "agentsession.step.index": step.index,
        "agentsession.step.kind": step.kind,
        "agentsession.step.status": step.status,
    }
    if step.name is not None:
        attributes["agentsession.step.name"] = step.name
    if include_content:
        attributes["agentsession.step.input"] = _content(step.input)
        attributes["agentsession.step.output"] = _content(step.output)
    span = tracer.start_span(
        f"step {step.kind}", context=context, attributes=attributes, start_time=_ns(step.started_at)
    )
    _finish(span, step.status == "error", step.error, step.ended_at or step.started_at)


def _tool_span(
    tracer: trace.Tracer, context: Any, base: dict[str, Any], call: ToolCall, include_content: bool
) -> None:
    attributes: dict[str, Any] = {
        **base,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.provider_call_id or call.call_id,
        "agentsession.tool_call.status": call.status.value,
    }
    if include_content:
        attributes["gen_ai.tool.call.arguments"] = _content(call.arguments)
        attributes["gen_ai.tool.call.result"] = _content(call.result)
    span = tracer.start_span(
        f"execute_tool {call.tool}",
        context=context,
        attributes=attributes,
        start_time=_ns(call.started_at),
    )
    _finish(span, call.status is not ToolCallStatus.OK, call.error, call.ended_at)
