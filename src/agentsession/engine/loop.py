"""AgentEngine: the main loop. It talks to nothing but a :class:`SessionManager`, or
anything with its methods (:class:`~agentsession.api.SessionAPI`): the HTTP
:class:`~agentsession.client.SessionClient` runs the same loop against the service.

One call of :meth:`AgentEngine.handle` is one user turn:

1. append the user's message;
2. ask the model for a decision, built from what the store holds (the history is
   ``build_context``'s: the newest stored summary and the newest messages that fit
   ``context_budget_tokens``, whole tool exchanges);
3. the first decision (or one that declares ``new_run``) starts a run; a new phase
   finishes the previous run as SUCCEEDED first, so one task can span several runs
   (diagnose, fix, verify);
4. before a tool runs, ask :meth:`SessionManager.find_tool_call` whether an identical
   call already ran; if it did and nothing that changes the project ran since, its
   recorded result is given back instead (and the reply says so);
5. every tool that runs is recorded with ``record_tool_call`` (the model's call id as
   ``provider_call_id``: providers reuse ids, so a repeated one never fails the turn), as
   a run step, and as an ``assistant(tool_calls)`` + ``tool(tool_call_id)`` message group
   (chat-completions shape, appended atomically);
6. a decision without tool calls is the reply: it is appended and the run finishes
   (FAILED with the model's error if it reports failure, with token usage if known).

If anything raises, the open run is finished as FAILED before the error propagates.

Runs are started with a lease (``lease_seconds``); the engine heartbeats before each
model decision and, from a :class:`~.heartbeat.Heartbeat` thread, every third of the
lease while a model or tool call takes long. The thread stops when its run ends, so a
worker that dies stops heartbeating and its run is INTERRUPTED once the lease lapses
(docs/semantics.md, "Run leases").
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..api import SessionAPI
from ..errors import ValidationError
from ..fieldlimits import CALL_ID_CHARS, STEP_NAME_CHARS, TOOL_NAME_CHARS
from ..ids import is_label
from ..models import Page, Run, RunStatus, ToolCall
from ..usage import check_model
from .heartbeat import Heartbeat
from .model import Decision, Model, ModelContext, ToolRequest, TurnResult
from .tools import UPDATE_MEMORY, ProjectTools, ToolOutcome

__all__ = ["AgentEngine", "EngineEvent", "Reply"]

T = TypeVar("T")

#: How many of the newest tool calls and runs a model sees (one page each).
_RECENT = 100

#: The lease of the engine's runs, in seconds, unless it is given one.
DEFAULT_LEASE_SECONDS = 60.0

_NOTES = {
    "en": "(Not repeated: `{tool} {args}` already ran in run {run_seq} ({call_id}) and "
    "nothing has changed since; its result was taken from the tool history.)",
    "zh": "（没有重复执行：`{tool} {args}` 已在 run {run_seq}（{call_id}）中运行过，"
    "之后没有任何改动；结果直接取自工具历史。）",
}


@dataclass(frozen=True, slots=True)
class EngineEvent:
    """Something the engine just did, for live output.

    ``kind`` is ``run_started``, ``run_finished``, ``assistant``, ``tool`` or
    ``tool_reused``; ``data`` holds its details (ids, tool arguments, status...).
    """

    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reply:
    """The outcome of one user turn.

    Attributes:
        text: the final assistant reply, as stored.
        ok: False if the turn's last run FAILED.
        run_ids: the runs this turn started, in order.
        reused_call_ids: earlier tool calls whose results were reused instead of re-run.
    """

    text: str
    ok: bool
    run_ids: list[str]
    reused_call_ids: list[str]


@dataclass
class _Turn:
    user_seq: int
    run: Run | None = None
    heartbeat: Heartbeat | None = None
    # The open run's token counts by model (None: the model did not say which).
    usage: dict[str | None, dict[str, int]] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


def _model_name(model: str | None) -> str | None:
    """The model's name as the usage ledger takes it, or None when it has none that
    fits (``check_model``): the usage is then entered under no model."""
    try:
        return check_model(model)
    except ValidationError:
        return None


def _usage_arguments(usage: dict[str | None, dict[str, int]]) -> dict[str, Any]:
    """``finish_run``'s usage arguments for a run's counts by model: none, one model's
    ``usage`` and ``model``, or ``usage_by_model`` (counts of no model under
    ``"unknown"``)."""
    if not usage:
        return {}
    if len(usage) == 1:
        [(model, counts)] = usage.items()
        return {"usage": counts, "model": model}
    return {"usage_by_model": {m or "unknown": c for m, c in usage.items()}}


def _now() -> datetime:
    return datetime.now(UTC)


class AgentEngine:
    """Runs user turns of one user's sessions through a model and project tools.

    Args:
        manager: where every message, tool call, run and memory update goes: a
            SessionManager, or a SessionClient of the HTTP service.
        model: decides each step (:class:`ScriptedModel`, :class:`OpenAIChatModel`...).
        tools: the project's tools.
        user_id: the principal every SessionManager call is made as.
        max_steps: the most model decisions in one turn; past it the run FAILS.
        context_budget_tokens: the token budget of the history the model sees
            (``build_context``: the newest messages that fit, after the newest stored
            summary; the default estimate counts, ``agentsession.tokens``).
        lang: ``"en"`` or ``"zh"``, the language of the engine's own notes.
        observer: called with an :class:`EngineEvent` after each thing the engine does.
        lease_seconds: the lease of each run it starts (None: runs without a lease and
            no heartbeats); the heartbeat thread beats every third of it.
    """

    def __init__(
        self,
        manager: SessionAPI,
        model: Model,
        tools: ProjectTools,
        *,
        user_id: str,
        max_steps: int = 24,
        context_budget_tokens: int = 16_000,
        lang: str = "en",
        observer: Callable[[EngineEvent], None] | None = None,
        lease_seconds: float | None = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.manager = manager
        self.model = model
        self.tools = tools
        self.user_id = user_id
        self.max_steps = max_steps
        self.context_budget_tokens = context_budget_tokens
        self._note = _NOTES.get(lang, _NOTES["en"])
        self._observer = observer
        self.lease_seconds = lease_seconds

    def handle(self, session_id: str, user_text: str) -> Reply:
        """Run one user turn and return the reply (see the module docstring).

        Raises:
            SessionNotFound, SessionNotActive...: from the SessionManager.
            ModelError: the model failed (the open run is marked FAILED first).
        """
        message = self.manager.append_message(
            session_id=session_id,
            user_id=self.user_id,
            message={"role": "user", "content": user_text},
        )
        turn = _Turn(user_seq=message.seq)
        try:
            for _ in range(self.max_steps):
                self._heartbeat(session_id, turn)
                started = _now()
                decision = self.model.decide(self._context(session_id, user_text, turn))
                if decision.new_run is not None or turn.run is None:
                    self._begin_run(session_id, decision.new_run or user_text, turn)
                self._model_step(session_id, turn, decision, started)
                if decision.tool_calls:
                    self._act(session_id, turn, decision)
                    continue
                return self._finish(session_id, turn, decision.text or "", decision.failed)
            error = f"gave up after {self.max_steps} model steps"
            return self._finish(session_id, turn, error, error)
        except BaseException as exc:
            self._abort(session_id, turn, exc)
            raise
        finally:
            _stop(turn)  # whatever happened, no heartbeat outlives the turn

    # ------------------------------------------------------------------ context

    def _context(self, session_id: str, user_text: str, turn: _Turn) -> ModelContext:
        sm, uid = self.manager, self.user_id
        session = sm.get_session(session_id=session_id, user_id=uid)
        context = sm.build_context(
            session_id=session_id, user_id=uid, budget_tokens=self.context_budget_tokens
        )
        this_turn = _walk(
            lambda cursor: sm.get_messages(
                session_id=session_id,
                user_id=uid,
                after=None if cursor else turn.user_seq,
                cursor=cursor,
            )
        )
        # Seqs are gapless from 1, so the newest records start after count - N.
        calls = sm.get_tool_history(
            session_id=session_id,
            user_id=uid,
            after=max(0, session.tool_call_count - _RECENT),
            limit=_RECENT,
        )
        runs = sm.list_runs(
            session_id=session_id,
            user_id=uid,
            after=max(0, session.run_count - _RECENT),
            limit=_RECENT,
        )
        return ModelContext(
            session_id=session_id,
            user_text=user_text,
            working_memory=sm.get_working_memory(session_id=session_id, user_id=uid).data,
            messages=[m.payload() for m in context.messages],
            summary=None if context.summary is None else context.summary.text,
            tool_history=calls.items,
            turn=_turn_results([m.payload() for m in this_turn]),
            tools=list(self.tools.specs),
            runs=runs.items,
            run_input=turn.run.input if turn.run is not None else None,
        )

    # --------------------------------------------------------------------- runs

    def _begin_run(self, session_id: str, task: str, turn: _Turn) -> None:
        if turn.run is not None:
            self._end_run(session_id, turn, RunStatus.SUCCEEDED, None, None)
        run = self.manager.start_run(
            session_id=session_id,
            user_id=self.user_id,
            input=task,
            metadata={"model": self.model.name},
            lease_seconds=self.lease_seconds,
        )
        turn.run, turn.usage = run, {}
        turn.run_ids.append(run.run_id)
        if self.lease_seconds is not None:
            beat = self._beat_of(session_id, run.run_id)
            name = f"agentsession-heartbeat-{run.run_id}"
            turn.heartbeat = Heartbeat(beat, self.lease_seconds / 3, name=name).start()
        self._emit("run_started", task, run_id=run.run_id, seq=run.seq)

    def _beat_of(self, session_id: str, run_id: str) -> Callable[[], Run]:
        """One heartbeat of the run ``run_id``."""
        return lambda: self.manager.heartbeat_run(
            session_id=session_id, user_id=self.user_id, run_id=run_id
        )

    def _heartbeat(self, session_id: str, turn: _Turn) -> None:
        """Between steps: extend the open run's lease now (a refused beat raises, e.g.
        RunLeaseExpired: this worker lost the run)."""
        if turn.run is not None and turn.heartbeat is not None:
            self._beat_of(session_id, turn.run.run_id)()

    def _end_run(
        self, session_id: str, turn: _Turn, status: RunStatus, error: str | None, output: Any
    ) -> None:
        assert turn.run is not None
        _stop(turn)
        run = self.manager.finish_run(
            session_id=session_id,
            user_id=self.user_id,
            run_id=turn.run.run_id,
            status=status,
            error=error,
            output=output,
            **_usage_arguments(turn.usage),
        )
        turn.run = None
        self._emit(
            "run_finished",
            run.status.value,
            session_id=session_id,
            run_id=run.run_id,
            seq=run.seq,
            status=run.status.value,
            error=error,
        )

    def _model_step(
        self, session_id: str, turn: _Turn, decision: Decision, started: datetime
    ) -> None:
        assert turn.run is not None
        if decision.usage:
            counts = turn.usage.setdefault(_model_name(decision.model), {})
            for key, value in decision.usage.items():
                counts[key] = counts.get(key, 0) + value
        self.manager.add_run_step(
            session_id=session_id,
            user_id=self.user_id,
            run_id=turn.run.run_id,
            kind="model",
            name=self.model.name,
            output={
                "tool_calls": [c.name for c in decision.tool_calls],
                "reply": decision.tool_calls == () and decision.failed is None,
            },
            started_at=started,
            ended_at=_now(),
        )

    def _finish(self, session_id: str, turn: _Turn, text: str, failed: str | None) -> Reply:
        assert turn.run is not None
        text = "\n".join([text, *turn.notes]) if turn.notes else text
        self.manager.append_message(
            session_id=session_id,
            user_id=self.user_id,
            message={"role": "assistant", "content": text, "run_id": turn.run.run_id},
        )
        self._emit("assistant", text, final=True)
        status = RunStatus.FAILED if failed is not None else RunStatus.SUCCEEDED
        self._end_run(session_id, turn, status, failed, text)
        return Reply(text, failed is None, turn.run_ids, turn.reused)

    def _abort(self, session_id: str, turn: _Turn, exc: BaseException) -> None:
        if turn.run is None:
            return
        try:
            self._end_run(
                session_id, turn, RunStatus.FAILED, f"{type(exc).__name__}: {exc}"[:2000], None
            )
        except Exception:  # the original error matters more than this one
            turn.run = None

    # -------------------------------------------------------------------- tools

    def _act(self, session_id: str, turn: _Turn, decision: Decision) -> None:
        assert turn.run is not None
        run_id = turn.run.run_id
        if decision.text:
            self._emit("assistant", decision.text, final=False)
        group: list[dict[str, Any]] = [
            {
                "role": "assistant",
                "content": decision.text,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": json.dumps(call.arguments, ensure_ascii=False),
                        },
                    }
                    for call in decision.tool_calls
                ],
                "run_id": run_id,
            }
        ]
        for call in decision.tool_calls:
            earlier = self._earlier_result(session_id, call)
            if earlier is not None:
                content = self._reuse(session_id, turn, call, earlier)
            else:
                content = self._run_tool(session_id, turn, call)
            group.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": json.dumps(content, ensure_ascii=False),
                    "run_id": run_id,
                }
            )
        self.manager.append_messages(session_id=session_id, user_id=self.user_id, messages=group)

    def _earlier_result(self, session_id: str, call: ToolRequest) -> ToolCall | None:
        """An identical earlier call whose result still holds, or None."""
        spec = self.tools.spec(call.name)
        if spec is None or not spec.reusable:
            return None
        try:
            earlier = self.manager.find_tool_call(
                session_id=session_id,
                user_id=self.user_id,
                tool=call.name,
                arguments=call.arguments,
            )
        except ValidationError:
            return None  # arguments the store cannot look up: just run the tool
        if earlier is None:
            return None
        since = _walk(
            lambda cursor: self.manager.get_tool_history(
                session_id=session_id,
                user_id=self.user_id,
                after=None if cursor else earlier.seq,
                cursor=cursor,
            )
        )
        for later in since:
            later_spec = self.tools.spec(later.tool)
            if later_spec is None or later_spec.changes_project:
                return None
        return earlier

    def _reuse(
        self, session_id: str, turn: _Turn, call: ToolRequest, earlier: ToolCall
    ) -> dict[str, Any]:
        assert turn.run is not None
        run_seq: Any = "?"
        if earlier.run_id is not None:
            run_seq = self.manager.get_run(
                session_id=session_id, user_id=self.user_id, run_id=earlier.run_id
            ).seq
        self.manager.add_run_step(
            session_id=session_id,
            user_id=self.user_id,
            run_id=turn.run.run_id,
            kind="tool",
            name=call.name,
            input=call.arguments,
            output={"reused_from": earlier.call_id, "run_seq": run_seq},
            status="reused",
        )
        args = " ".join(str(v) for v in call.arguments.values())
        turn.notes.append(
            self._note.format(tool=call.name, args=args, run_seq=run_seq, call_id=earlier.call_id)
        )
        turn.reused.append(earlier.call_id)
        self._emit(
            "tool_reused",
            call.name,
            name=call.name,
            arguments=call.arguments,
            call_id=earlier.call_id,
            run_seq=run_seq,
            status=earlier.status.value,
            result=earlier.result,
        )
        return {
            "status": earlier.status.value,
            "result": earlier.result,
            "error": earlier.error,
            "reused_from": earlier.call_id,
        }

    def _run_tool(self, session_id: str, turn: _Turn, call: ToolRequest) -> dict[str, Any]:
        assert turn.run is not None
        started = _now()
        ran = call.name == UPDATE_MEMORY or self.tools.spec(call.name) is not None
        if call.name == UPDATE_MEMORY:
            outcome = self._update_memory(session_id, call.arguments)
        elif not ran:
            outcome = ToolOutcome(error=f"unknown tool {call.name[:TOOL_NAME_CHARS]!r}")
        else:
            outcome = self.tools.execute(call.name, call.arguments)
        ended = _now()
        status = "ok" if outcome.ok else "error"
        # Tool history holds the tools that really ran; a name the model made up is only
        # answered (its error goes back to the model) and noted as a step.
        recorded = None
        if ran:
            recorded = self.manager.record_tool_call(
                session_id=session_id,
                user_id=self.user_id,
                tool=call.name,
                arguments=call.arguments,
                result=outcome.result,
                status=status,
                error=outcome.error,
                started_at=started,
                ended_at=ended,
                run_id=turn.run.run_id,
                # The model's id may repeat (providers reuse them): never our call_id;
                # one the store cannot hold (empty, too long) stays in the messages only.
                provider_call_id=call.id if is_label(call.id, CALL_ID_CHARS) else None,
            )
        self.manager.add_run_step(
            session_id=session_id,
            user_id=self.user_id,
            run_id=turn.run.run_id,
            kind="tool",
            name=call.name[:STEP_NAME_CHARS],
            input=call.arguments,
            output={"call_id": recorded.call_id if recorded else None},
            status=status,
            error=outcome.error,
            started_at=started,
            ended_at=ended,
        )
        self._emit(
            "tool",
            call.name,
            name=call.name,
            arguments=call.arguments,
            status=status,
            error=outcome.error,
            result=outcome.result,
            duration_ms=recorded.duration_ms if recorded else None,
        )
        return {"status": status, "result": outcome.result, "error": outcome.error}

    def _update_memory(self, session_id: str, arguments: dict[str, Any]) -> ToolOutcome:
        patch = arguments.get("patch")
        if not isinstance(patch, dict):
            return ToolOutcome(error="update_memory needs a JSON object 'patch'")
        try:
            memory = self.manager.update_working_memory(
                session_id=session_id, user_id=self.user_id, patch=patch
            )
        except ValidationError as exc:
            return ToolOutcome(error=exc.message)
        return ToolOutcome({"version": memory.version, "keys": sorted(memory.data)})

    def _emit(self, kind: str, text: str, **data: Any) -> None:
        if self._observer is not None:
            self._observer(EngineEvent(kind, text, data))


def _stop(turn: _Turn) -> None:
    """Stop the turn's heartbeat thread, if any, and wait for it to end."""
    if turn.heartbeat is not None:
        turn.heartbeat.stop()
        turn.heartbeat = None


def _walk(read: Callable[[str | None], Page[T]]) -> Iterator[T]:
    """Every item of a listing, oldest first: ``read(cursor)`` gives a page (the first
    with ``cursor=None``); pages are read only as far as the caller iterates."""
    cursor: str | None = None
    while True:
        page = read(cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _turn_results(messages: list[dict[str, Any]]) -> list[TurnResult]:
    """Pair this turn's assistant tool calls with their tool messages, in order: a
    tool message answers the oldest unanswered call with its id (ids may repeat)."""
    calls: dict[str, deque[tuple[str, dict[str, Any]]]] = defaultdict(deque)
    results: list[TurnResult] = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = {}
            calls[call.get("id")].append((function.get("name", ""), arguments))
        answered = message.get("tool_call_id")
        if message.get("role") == "tool" and isinstance(answered, str) and calls[answered]:
            name, arguments = calls[answered].popleft()
            try:
                content = json.loads(message.get("content") or "{}")
            except json.JSONDecodeError:
                content = {"status": "ok", "result": message.get("content")}
            results.append(
                TurnResult(
                    call_id=answered,
                    name=name,
                    arguments=arguments,
                    status=content.get("status", "ok"),
                    result=content.get("result"),
                    error=content.get("error"),
                    reused_from=content.get("reused_from"),
                )
            )
    return results
