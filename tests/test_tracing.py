"""Traces of a demo run: the engine's scripted agent fixes a project in three runs; the
spans exported (to an in-memory exporter) match its runs, steps and tool calls one to
one, with their times and statuses, and carry no content unless asked."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.engine import AgentEngine, ProjectTools, ScriptedModel
from agentsession.stores.memory.store import MemoryStore

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from agentsession.tracing import export_session, live_exporter  # noqa: E402

MODULE = "some_missing_module_for_traces"
START = shlex.join([sys.executable, "-c", f"import {MODULE}"])
INSTALL = shlex.join([sys.executable, "-c", f"open('{MODULE}.py', 'w').write('')"])
USER = "demo-user"


def _demo(tmp_path: Path) -> tuple[SessionManager, str]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("flask\n")
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    engine = AgentEngine(
        sm, ScriptedModel(START, install_command=INSTALL), ProjectTools(project), user_id=USER
    )
    for _ in range(3):
        engine.handle(sid, "fix the start-up failure")
    return sm, sid


def _export(sm: SessionManager, sid: str, **options: bool) -> list:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    count = export_session(sm, session_id=sid, user_id=USER, tracer_provider=provider, **options)
    spans = list(exporter.get_finished_spans())
    assert count == len(spans)
    return spans


def test_spans_match_runs_steps_and_tool_calls_one_to_one(tmp_path: Path) -> None:
    sm, sid = _demo(tmp_path)
    runs = sm.list_runs(session_id=sid, user_id=USER, limit=100).items
    calls = sm.get_tool_history(session_id=sid, user_id=USER, limit=100).items
    assert len(runs) >= 2 and calls
    spans = _export(sm, sid)
    roots = {s.attributes["agentsession.run.id"]: s for s in spans if s.parent is None}
    assert sorted(roots) == sorted(r.run_id for r in runs)
    for run in runs:
        root = roots[run.run_id]
        assert root.name == "invoke_agent coding"
        assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert root.attributes["gen_ai.conversation.id"] == sid
        assert root.start_time == int(run.started_at.timestamp() * 1e9)
        assert root.status.is_ok == (run.status.value != "failed")
        children = [s for s in spans if s.parent and s.parent.span_id == root.context.span_id]
        steps = sm.list_run_steps(session_id=sid, user_id=USER, run_id=run.run_id, limit=100)
        step_spans = [s for s in children if s.name.startswith("step ")]
        assert sorted(s.attributes["agentsession.step.index"] for s in step_spans) == sorted(
            st.index for st in steps.items
        )
        mine = [c for c in calls if c.run_id == run.run_id]
        tool_spans = [s for s in children if s.name.startswith("execute_tool ")]
        assert sorted(s.attributes["gen_ai.tool.call.id"] for s in tool_spans) == sorted(
            c.provider_call_id or c.call_id for c in mine
        )
        for span in tool_spans:
            call = next(
                c
                for c in mine
                if span.attributes["gen_ai.tool.call.id"] in (c.call_id, c.provider_call_id)
            )
            assert span.name == f"execute_tool {call.tool}"
            assert span.status.is_ok == (call.status.value == "ok")
            assert span.end_time - span.start_time == pytest.approx(call.duration_ms * 1e6, abs=2e6)
        assert all(s.context.trace_id == root.context.trace_id for s in children)
    assert len(spans) == len(runs) + len(calls) + sum(r.step_count for r in runs)


def test_content_only_when_asked(tmp_path: Path) -> None:
    sm, sid = _demo(tmp_path)
    plain = _export(sm, sid)
    assert not any(
        "arguments" in key or "input" in key or "output" in key or "result" in key
        for span in plain
        for key in span.attributes
    )
    assert MODULE not in repr([dict(s.attributes) for s in plain])
    full = _export(sm, sid, include_content=True)
    assert any(MODULE in str(s.attributes.get("gen_ai.tool.call.arguments")) for s in full)


def test_trace_export_writes_one_json_span_a_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    project = tmp_path / "project"
    project.mkdir()
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        sid = sm.create_session(user_id=USER, agent="coding").session_id
        model = ScriptedModel(START, install_command=INSTALL)
        AgentEngine(sm, model, ProjectTools(project), user_id=USER).handle(sid, "go")
        want = len(_export(sm, sid))
    out = tmp_path / "spans.jsonl"
    args = ["trace", "export", sid, "--url", url, "--user", USER, "--out", str(out)]
    made = CliRunner().invoke(build_app(), args)
    assert made.exit_code == 0, made.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == want > 1
    assert {line["name"].split(" ")[0] for line in lines} == {
        "invoke_agent",
        "execute_tool",
        "step",
    }
    assert f"{want} spans of {sid} written to {out}" in made.stderr
    other = CliRunner().invoke(build_app(), [*args[:-2], "--user", "someone-else"])
    assert other.exit_code != 0 and "not found" in other.output.lower()


def test_the_engine_exports_each_run_live(tmp_path: Path) -> None:
    """With ``live_exporter`` as its observer, the engine emits each run's spans as it
    finishes it: the same spans an export of the session makes afterwards."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("flask\n")
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(START, install_command=INSTALL)
    observer = live_exporter(sm, user_id=USER, tracer_provider=provider)
    engine = AgentEngine(sm, model, ProjectTools(project), user_id=USER, observer=observer)
    engine.handle(sid, "fix the start-up failure")
    live = exporter.get_finished_spans()
    assert live and {s.attributes.get("agentsession.run.id") for s in live if not s.parent} == {
        r.run_id for r in sm.list_runs(session_id=sid, user_id=USER).items
    }
    later = _export(sm, sid)

    def shape(spans: Any) -> list[tuple[str, int, int]]:
        return sorted((s.name, s.start_time, s.end_time) for s in spans)

    assert shape(live) == shape(later)
