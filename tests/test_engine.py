"""The agent engine with the ScriptedModel on a throw-away project (no network)."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agentsession import RunLeaseExpired, RunStatus, SessionManager
from agentsession.api import SessionAPI
from agentsession.engine import (
    AgentEngine,
    Decision,
    ModelContext,
    ModelError,
    ProjectTools,
    ScriptedModel,
    ToolRequest,
)
from agentsession.engine.heartbeat import Heartbeat
from agentsession.engine.model import default_install_command, missing_module
from agentsession.stores.memory.store import MemoryStore
from frozen_clock import FrozenClock
from inprocess import InProcess

MODULE = "some_missing_module_xyz"
START = shlex.join([sys.executable, "-c", f"import {MODULE}"])
#: The stub "installer": makes the module importable by creating it in the project.
INSTALL = shlex.join([sys.executable, "-c", f"open('{MODULE}.py', 'w').write('')"])
USER = "demo-user"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose start fails with ModuleNotFoundError until the module exists."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "requirements.txt").write_text("flask\n")
    return root


def _engine(sm: SessionAPI, project: Path, install: str = INSTALL) -> AgentEngine:
    model = ScriptedModel(START, install_command=install)
    return AgentEngine(sm, model, ProjectTools(project), user_id=USER)


def _start_calls(sm: SessionAPI, sid: str) -> list:
    history = sm.get_tool_history(session_id=sid, user_id=USER, tool="run_command").items
    return [c for c in history if c.arguments == {"command": START}]


def test_diagnosis_turn_records_memory_and_stops(project: Path) -> None:
    """Run 1 runs the command, fills working memory from the real traceback, changes nothing."""
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    reply = _engine(sm, project).handle(sid, "fix the start-up failure")
    memory = sm.get_working_memory(session_id=sid, user_id=USER)
    assert reply.ok and MODULE in reply.text
    assert memory.goal == "fix the start-up failure"
    assert memory.completed == [f"located: {MODULE} missing"]
    assert memory.errors == [f"ModuleNotFoundError: No module named '{MODULE}'"]
    assert memory.next_action == "check and fix requirements.txt"
    assert memory.facts == {"missing_module": MODULE}
    assert (project / "requirements.txt").read_text() == "flask\n"
    [run] = sm.list_runs(session_id=sid, user_id=USER).items
    assert run.status is RunStatus.SUCCEEDED and run.input == "diagnose the start-up failure"
    [call] = _start_calls(sm, sid)
    assert call.status.value == "error" and call.result["exit_code"] == 1


def test_continue_in_new_process_reuses_diagnosis_then_fixes_and_verifies(
    project: Path, tmp_path: Path
) -> None:
    """After restore, find_tool_call stops a repeated diagnosis; run 2 fixes, run 3 verifies."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        sid = sm.create_session(user_id=USER, agent="coding").session_id
        _engine(sm, project).handle(sid, "fix the start-up failure")
        diagnosis = _start_calls(sm, sid)[0]
        sm.close_session(session_id=sid, user_id=USER)
    with SessionManager.from_url(url) as sm:  # a fresh manager: nothing kept in memory
        restored = sm.restore_session(session_id=sid, user_id=USER)
        assert restored.working_memory.facts == {"missing_module": MODULE}
        reply = _engine(sm, project).handle(sid, "continue")
        runs = sm.list_runs(session_id=sid, user_id=USER).items
        fix = sm.get_run(session_id=sid, user_id=USER, run_id=runs[1].run_id)
        starts = _start_calls(sm, sid)
        memory = sm.get_working_memory(session_id=sid, user_id=USER)
    assert reply.ok and reply.reused_call_ids == [diagnosis.call_id]
    assert "Not repeated" in reply.text and "run 1" in reply.text
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3
    assert [r.input for r in runs][1:] == ["fix requirements.txt", "verify the app starts"]
    assert any(step.status == "reused" for step in fix.steps)
    # the diagnosis ran once; the only other start is the verification after the fix
    assert [c.run_id for c in starts] == [runs[0].run_id, runs[2].run_id]
    assert starts[-1].result["exit_code"] == 0
    assert (project / "requirements.txt").read_text() == f"flask\n{MODULE}\n"
    assert memory.facts["app_starts"] is True and memory.next_action is None


def test_engine_over_session_client(project: Path) -> None:
    """The same engine with a SessionClient of the HTTP service (in-process app): two
    clients play the two processes; the state is in the service's store."""
    from fastapi.testclient import TestClient

    from agentsession.client import SessionClient
    from agentsession.http.app import create_app
    from agentsession.http.keys import MemoryKeyStore
    from agentsession.settings import Settings

    keys = MemoryKeyStore()
    token = keys.create(user_id=USER)[1]
    store = SessionManager(MemoryStore())
    app = create_app(store, Settings(url="memory://"), keys=keys)
    with SessionClient("http://service", token, transport=InProcess(TestClient(app))) as client:
        assert client.whoami() == {
            "user_id": USER,
            "admin": False,
            "scope": "write",
            "agents": None,
        }
        sid = client.create_session(user_id=USER, agent="coding").session_id
        first = _engine(client, project).handle(sid, "fix the start-up failure")
        client.close_session(session_id=sid, user_id=USER)
    with SessionClient("http://service", token, transport=InProcess(TestClient(app))) as client:
        client.restore_session(session_id=sid, user_id=USER)
        reply = _engine(client, project).handle(sid, "continue")
    diagnosis = _start_calls(store, sid)[0]
    assert first.ok and reply.ok and reply.reused_call_ids == [diagnosis.call_id]
    runs = store.list_runs(session_id=sid, user_id=USER).items
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3
    assert (project / "requirements.txt").read_text() == f"flask\n{MODULE}\n"


def test_history_is_chat_completions_shaped(project: Path) -> None:
    """Every assistant tool call is answered by a tool message with its tool_call_id."""
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    engine = _engine(sm, project)
    engine.handle(sid, "fix it")
    engine.handle(sid, "continue")
    messages = sm.get_messages(session_id=sid, user_id=USER).items
    asked = [c["id"] for m in messages for c in (m.tool_calls or [])]
    answered = [m.tool_call_id for m in messages if m.role.value == "tool"]
    assert asked == answered and len(asked) >= 7
    assert messages[-1].role.value == "assistant" and messages[-1].tool_calls is None
    recorded = {c.provider_call_id for c in sm.get_tool_history(session_id=sid, user_id=USER).items}
    assert recorded <= set(asked)


def test_failed_verification_fails_the_run(project: Path) -> None:
    """When the fix does not help, run 3 ends FAILED with the real error and reply.ok is False."""
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    useless = shlex.join([sys.executable, "-c", "pass"])
    engine = _engine(sm, project, install=useless)
    engine.handle(sid, "fix it")
    reply = engine.handle(sid, "continue")
    runs = sm.list_runs(session_id=sid, user_id=USER).items
    assert not reply.ok
    assert runs[-1].status is RunStatus.FAILED
    assert MODULE in (runs[-1].error or "")


class _Exploding:
    """A model that asks for one tool call, then fails."""

    name = "exploding"

    def decide(self, context: ModelContext) -> Decision:
        if not context.turn:
            return Decision(tool_calls=(ToolRequest("read_file", {"path": "requirements.txt"}),))
        raise ModelError("upstream model is down")


def test_model_error_marks_open_run_failed(project: Path) -> None:
    """An exception inside the loop finishes the open run as FAILED before propagating."""
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    engine = AgentEngine(sm, _Exploding(), ProjectTools(project), user_id=USER)
    with pytest.raises(ModelError):
        engine.handle(sid, "hello")
    [run] = sm.list_runs(session_id=sid, user_id=USER).items
    assert run.status is RunStatus.FAILED and "upstream model is down" in (run.error or "")


def test_step_limit_fails_the_run(project: Path) -> None:
    """A model that never stops is cut off after max_steps and the run FAILS."""

    class Looping:
        name = "looping"

        def decide(self, context: ModelContext) -> Decision:
            return Decision(
                tool_calls=(ToolRequest("edit_file", {"path": "x", "append_line": "a"}),)
            )

    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    reply = AgentEngine(sm, Looping(), ProjectTools(project), user_id=USER, max_steps=3).handle(
        sid, "loop"
    )
    assert not reply.ok and "3 model steps" in reply.text
    assert len(sm.get_tool_history(session_id=sid, user_id=USER).items) == 3


def test_model_sees_the_newest_tool_calls_and_runs_of_a_long_session(project: Path) -> None:
    """Past a page of tool calls and runs, the model's context holds the newest 100 of
    each (not the oldest), and the whole of this turn."""
    seen: list[ModelContext] = []

    class Recording:
        name = "recording"

        def decide(self, context: ModelContext) -> Decision:
            seen.append(context)
            if len(seen) == 1:
                return Decision(tool_calls=(ToolRequest("read_file", {"path": "x"}),))
            return Decision(text="done")

    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    for _ in range(130):
        run = sm.start_run(session_id=sid, user_id=USER)
        sm.record_tool_call(session_id=sid, user_id=USER, tool="t", run_id=run.run_id)
        sm.finish_run(session_id=sid, user_id=USER, run_id=run.run_id, status="SUCCEEDED")
    AgentEngine(sm, Recording(), ProjectTools(project), user_id=USER).handle(sid, "go")
    last = seen[-1]
    assert [c.seq for c in last.tool_history] == list(range(32, 132))
    assert [r.seq for r in last.runs] == list(range(32, 132))
    assert [(t.name, t.arguments) for t in last.turn] == [("read_file", {"path": "x"})]


def test_install_command_uses_the_start_commands_interpreter() -> None:
    """pip runs with the interpreter the start command names; other commands are refused."""
    assert default_install_command("/p/venv/bin/python app.py --check") == (
        "/p/venv/bin/python -m pip install -q -r requirements.txt"
    )
    with pytest.raises(ModelError):
        default_install_command("flask run")


def test_missing_module_reads_the_traceback() -> None:
    """The top-level module and the error line come from stderr."""
    result = {"stderr_tail": "Traceback...\nModuleNotFoundError: No module named 'a.b'\n"}
    assert missing_module(result) == ("a", "ModuleNotFoundError: No module named 'a.b'")
    assert missing_module({"stderr_tail": "SyntaxError: bad"}) is None


class _RepeatsCallZero:
    """A model whose provider answers ``call_0`` as the id of every tool call: one
    ``edit_file`` per turn (different arguments each turn), then a reply."""

    name = "repeats-call-0"

    def decide(self, context: ModelContext) -> Decision:
        if not context.turn:
            line = f"ran for: {context.user_text}"
            request = ToolRequest("edit_file", {"path": "log.txt", "append_line": line}, "call_0")
            return Decision(tool_calls=(request,))
        return Decision(text=f"done: {context.user_text}")


@pytest.mark.parametrize("via", ["manager", "client"])
def test_c36_engine_model_repeats_call_id(project: Path, via: str) -> None:
    """C36: with a model that answers ``call_0`` every turn, 3 turns: every turn is
    stored, each tool ran exactly once per turn, no run FAILED; the calls carry
    ``call_0`` as their provider id and lookup by it gives the newest (directly, and
    through the HTTP client)."""
    from fastapi.testclient import TestClient

    from agentsession.client import SessionClient
    from agentsession.http.app import create_app
    from agentsession.http.keys import MemoryKeyStore
    from agentsession.settings import Settings

    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    api: SessionAPI = sm
    if via == "client":
        keys = MemoryKeyStore()
        app = create_app(sm, Settings(url="memory://"), keys=keys)
        token = keys.create(user_id=USER)[1]
        api = SessionClient("http://service", token, transport=InProcess(TestClient(app)))
    engine = AgentEngine(api, _RepeatsCallZero(), ProjectTools(project), user_id=USER)
    replies = [engine.handle(sid, f"turn {n}") for n in (1, 2, 3)]

    assert [r.ok for r in replies] == [True, True, True]
    runs = sm.list_runs(session_id=sid, user_id=USER).items
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3
    assert (project / "log.txt").read_text().splitlines() == [
        f"ran for: turn {n}" for n in (1, 2, 3)
    ]
    calls = sm.get_tool_history(session_id=sid, user_id=USER).items
    assert [c.provider_call_id for c in calls] == ["call_0"] * 3
    assert len({c.call_id for c in calls}) == 3
    assert [c.run_id for c in calls] == [r.run_id for r in runs]
    newest = api.find_tool_call(session_id=sid, user_id=USER, provider_call_id="call_0")
    assert newest == calls[-1]
    messages = sm.get_messages(session_id=sid, user_id=USER).items
    assert [m.role.value for m in messages] == ["user", "assistant", "tool", "assistant"] * 3
    assert [m.tool_call_id for m in messages if m.role.value == "tool"] == ["call_0"] * 3


class _OddCalls:
    """A model whose calls the store could not take as they are: a real tool with an
    id no store column holds (empty, then 200 characters) and a tool name it made up."""

    name = "odd-calls"

    def decide(self, context: ModelContext) -> Decision:
        if not context.turn:
            return Decision(
                tool_calls=(
                    ToolRequest("edit_file", {"path": "log.txt", "append_line": "one"}, "x" * 200),
                    ToolRequest("no such tool", {}, "call_1"),
                )
            )
        return Decision(text="done")


def test_engine_records_the_tool_that_ran_whatever_the_ids(project: Path) -> None:
    """The edit ran: it is recorded (its provider id, too long to store, left out) and
    its messages keep the model's id; the made-up tool is answered with an error and
    noted as a step, not recorded as a tool that ran; the turn succeeds."""
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    reply = AgentEngine(sm, _OddCalls(), ProjectTools(project), user_id=USER).handle(sid, "go")
    assert reply.ok
    assert (project / "log.txt").read_text().splitlines() == ["one"]
    [call] = sm.get_tool_history(session_id=sid, user_id=USER).items
    assert (call.tool, call.provider_call_id) == ("edit_file", None)
    messages = sm.get_messages(session_id=sid, user_id=USER).items
    tool_messages = [m for m in messages if m.role.value == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["x" * 200, "call_1"]
    assert "unknown tool" in str(tool_messages[1].content)
    [run] = sm.list_runs(session_id=sid, user_id=USER).items
    steps = sm.get_run(session_id=sid, user_id=USER, run_id=run.run_id).steps
    assert [(st.kind, st.name, st.status) for st in steps if st.kind == "tool"] == [
        ("tool", "edit_file", "ok"),
        ("tool", "no such tool", "error"),
    ]


def test_turn_results_pair_repeated_ids_in_order() -> None:
    """Two calls with one id in one assistant message: each tool message answers the
    oldest call still unanswered, so names and arguments stay with their results."""
    from agentsession.engine.loop import _turn_results

    def call(name: str, path: str) -> dict[str, object]:
        arguments = json.dumps({"path": path})
        return {
            "id": "call_0",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    messages = [
        {"role": "assistant", "tool_calls": [call("read_file", "a"), call("edit_file", "b")]},
        {"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"result": 1})},
        {"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"result": 2})},
    ]
    results = _turn_results(messages)
    assert [(r.name, r.arguments, r.result) for r in results] == [
        ("read_file", {"path": "a"}, 1),
        ("edit_file", {"path": "b"}, 2),
    ]


class _Counting:
    """A SessionManager that counts heartbeats; ``fail`` names methods that raise, as a
    worker that dies in them would leave the store."""

    def __init__(self, sm: SessionManager, fail: tuple[str, ...] = ()) -> None:
        self._sm = sm
        self._fail = fail
        self.beats: list[str] = []

    def heartbeat_run(self, **kw: Any) -> Any:
        self.beats.append(kw["run_id"])
        return self._sm.heartbeat_run(**kw)

    def __getattr__(self, name: str) -> Any:
        if name in self._fail:
            raise _Died(name)
        return getattr(self._sm, name)


class _Died(BaseException):
    """The worker process dying (not an Exception: nothing may catch it)."""


def _heartbeat_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("agentsession-heartbeat-")]


def test_engine_runs_hold_a_lease_and_heartbeat_between_steps(project: Path) -> None:
    """Every run the engine starts holds its lease; the engine heartbeats it before each
    later model step, and no heartbeat thread outlives the turn."""
    sm = _Counting(SessionManager(MemoryStore()))
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    model = ScriptedModel(START, install_command=INSTALL)
    engine = AgentEngine(sm, model, ProjectTools(project), user_id=USER, lease_seconds=600)
    reply = engine.handle(sid, "fix the start-up failure")
    runs = sm.list_runs(session_id=sid, user_id=USER).items
    assert [r.run_id for r in runs] == reply.run_ids
    assert {r.lease_seconds for r in runs} == {600}
    assert sm.beats and set(sm.beats) <= set(reply.run_ids)
    assert _heartbeat_threads() == []
    plain = AgentEngine(sm, model, ProjectTools(project), user_id=USER, lease_seconds=None)
    before = len(sm.beats)
    plain.handle(sid, "fix the start-up failure")
    assert len(sm.beats) == before
    assert sm.list_runs(session_id=sid, user_id=USER).items[-1].lease_seconds is None


def test_a_dead_workers_run_is_interrupted_on_the_next_access(project: Path) -> None:
    """A worker that dies mid-run (no finish, no more heartbeats) leaves its run
    RUNNING; once the lease lapses, the next access marks it INTERRUPTED."""
    clock = FrozenClock()
    sm = SessionManager(MemoryStore(), clock=clock)
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    dying = _Counting(sm, fail=("append_messages", "finish_run"))
    model = ScriptedModel(START, install_command=INSTALL)
    engine = AgentEngine(dying, model, ProjectTools(project), user_id=USER, lease_seconds=60)
    with pytest.raises(_Died):
        engine.handle(sid, "fix the start-up failure")
    assert _heartbeat_threads() == []
    [run] = sm.list_runs(session_id=sid, user_id=USER).items
    assert run.status is RunStatus.RUNNING
    clock.advance(61)
    after = sm.get_run(session_id=sid, user_id=USER, run_id=run.run_id)
    assert after.status is RunStatus.INTERRUPTED
    actions = [e.action for e in sm.get_audit_log(session_id=sid, user_id=USER).items]
    assert actions[-1] == "run.lease_expired"


def test_heartbeat_thread_beats_until_stopped_and_ends_on_a_refusal() -> None:
    """The thread beats until stop() (which joins it), and ends by itself at the first
    refusal no later beat can change, keeping it."""
    enough = threading.Event()
    beats: list[int] = []

    def beat() -> None:
        beats.append(1)
        if len(beats) == 3:
            enough.set()

    heartbeat = Heartbeat(beat, 0.001, name="agentsession-heartbeat-test").start()
    assert enough.wait(30)
    heartbeat.stop()
    assert not heartbeat.alive and heartbeat.error is None
    stopped_at = len(beats)
    heartbeat.stop()  # idempotent
    assert len(beats) == stopped_at
    refused = RunLeaseExpired(session_id="ses_x", run_id="run_x", status="INTERRUPTED")

    def lost() -> None:
        raise refused

    ended = Heartbeat(lost, 0.001, name="agentsession-heartbeat-test")
    ended.start()._thread.join(30)
    assert not ended.alive and ended.error is refused
    with pytest.raises(ValueError):
        Heartbeat(beat, 0, name="x")
