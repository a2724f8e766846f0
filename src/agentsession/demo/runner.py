"""The restore experiment: one task, two OS processes, one SQLite file.

Process 1 (:func:`run_demo`) creates the session, lets the agent diagnose the broken
project (run 1), and closes the session. It then starts process 2 (:func:`continue_demo`,
``python -m agentsession demo-continue``), which restores the session from the file,
continues from working memory without repeating the diagnosis, fixes (run 2) and
verifies (run 3). Process 1 finally reads the file again and prints what is stored.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.panel import Panel

from .. import cli_render as render
from ..engine import (
    AgentEngine,
    EngineEvent,
    Model,
    ModelError,
    OpenAIChatModel,
    ProjectTools,
    ScriptedModel,
    ToolError,
)
from ..errors import AgentSessionError
from ..manager import SessionManager
from ..models import RunStatus
from .workspace import DemoError, Workspace, prepare_workspace, use_project

__all__ = ["DemoOptions", "ModelConfig", "continue_demo", "run_demo"]

USER = "demo-user"
AGENT = "coding"

_SAY = {
    "zh": {"title": "修复启动失败", "ask": "帮我修复启动失败", "continue": "继续刚才的任务"},
    "en": {
        "title": "fix the start-up failure",
        "ask": "Please fix the start-up failure.",
        "continue": "Continue the task from before.",
    },
}


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Which model the agent uses; the CLI fills it from options and the environment."""

    kind: str = "scripted"
    name: str | None = None
    base_url: str | None = None
    api_key: str | None = None


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Options of ``agentsession demo`` (see the CLI for their meaning)."""

    workdir: Path
    lang: str = "zh"
    project: Path | None = None
    cmd: str | None = None
    model: ModelConfig = ModelConfig()


def _model(config: ModelConfig, cmd: str, lang: str) -> Model:
    if config.kind == "openai":
        return OpenAIChatModel(
            base_url=config.base_url or "https://api.openai.com/v1",
            api_key=config.api_key,
            model=config.name or "gpt-4o-mini",
            start_command=cmd,
        )
    return ScriptedModel(cmd, lang=lang)


def _engine(
    sm: SessionManager, config: ModelConfig, project: Path, cmd: str, lang: str, console: Console
) -> AgentEngine:
    return AgentEngine(
        sm,
        _model(config, cmd, lang),
        ProjectTools(project),
        user_id=USER,
        lang=lang,
        observer=_printer(console),
    )


def _printer(console: Console) -> Callable[[EngineEvent], None]:
    def show(event: EngineEvent) -> None:
        data = event.data
        if event.kind == "run_started":
            console.print(f"\n[bold cyan]▶ run {data['seq']}[/] started: {event.text}")
        elif event.kind == "run_finished":
            style = "green" if data["status"] == RunStatus.SUCCEEDED.value else "red"
            console.print(f"[bold {style}]■ run {data['seq']} {data['status']}[/]")
        elif event.kind == "assistant":
            console.print(f"[bold magenta]agent ›[/] {event.text}")
        elif event.kind == "tool":
            status = data["status"]
            style = "green" if status == "ok" else "red"
            console.print(
                f"  [dim]⚙ {data['name']}[/] {_args(data['name'], data['arguments'])} → "
                f"[{style}]{status}[/] {_outcome(data.get('result'))} "
                f"[dim]({data['duration_ms']:.0f} ms)[/]",
                highlight=False,
            )
        elif event.kind == "tool_reused":
            console.print(
                f"  [cyan]↺ {data['name']}[/] {_args(data['name'], data['arguments'])} → "
                f"[bold cyan]NOT re-run[/]: already ran in run {data['run_seq']} "
                f"({data['call_id']}), result taken from tool history: "
                f"{_outcome(data.get('result'))}",
                highlight=False,
            )

    return show


def _args(name: str, arguments: dict[str, object]) -> str:
    if name == "update_memory":
        patch = arguments.get("patch")
        return "patch " + ", ".join(sorted(patch)) if isinstance(patch, dict) else ""
    return render.short(" ".join(str(v) for v in arguments.values()), 70)


def _outcome(result: object) -> str:
    if not isinstance(result, dict):
        return ""
    if "exit_code" in result:
        text = f"{result.get('stdout_tail') or ''}\n{result.get('stderr_tail') or ''}"
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("WARNING:")]  # pip's noise
        last = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "")
        return f"exit {result['exit_code']}" + (f": {render.short(last, 70)}" if last else "")
    if "content" in result:
        return render.short(result["content"], 50)
    return ""


def run_demo(options: DemoOptions, console: Console) -> int:
    """Process 1 of the demo; returns the exit code (0 only if the final verification passed)."""
    try:
        return _run(options, console)
    except (DemoError, ModelError, ToolError, AgentSessionError) as exc:
        Console(stderr=True).print(f"error: {exc}", highlight=False)
        return 1


def _run(options: DemoOptions, console: Console) -> int:
    say = _SAY[options.lang]
    console.rule("[bold]agentsession demo: one task, two processes, one SQLite file")
    console.print(
        "Process 1 asks the agent to fix a project that fails to start; the agent diagnoses "
        "it (run 1) and the session is closed. A [bold]separate OS process[/] then restores "
        "the session from SQLite and continues from working memory and tool history: it "
        "does not repeat the diagnosis, fixes requirements.txt (run 2) and verifies (run 3).\n"
    )
    if options.project is not None and options.cmd is not None:
        ws = use_project(options.workdir, options.project, options.cmd)
    else:
        ws = prepare_workspace(options.workdir, console)
        if options.cmd is not None:
            ws = Workspace(ws.workdir, ws.project, ws.url, options.cmd)
    console.print(f"project: {ws.project}\nstart command: {ws.cmd}\nstore: {ws.url}")

    pid1 = os.getpid()
    console.rule(f"[bold]process 1 · pid {pid1}")
    with SessionManager.from_url(ws.url, auto_migrate=True) as sm:
        session = sm.create_session(user_id=USER, agent=AGENT, title=say["title"])
        sid = session.session_id
        console.print(f"created session [bold]{sid}[/] (user {USER}, agent {AGENT})")
        console.print(f"\n[bold blue]user ›[/] {say['ask']}")
        _engine(sm, options.model, ws.project, ws.cmd, options.lang, console).handle(
            sid, say["ask"]
        )
        memory = sm.get_working_memory(session_id=sid, user_id=USER)
        console.print(render.memory_table(memory, "working memory after run 1"))
        closed = sm.close_session(session_id=sid, user_id=USER, reason="process 1 finished")
    console.print(
        f"session {closed.status.value} at version {closed.version}; process 1 keeps nothing "
        "in memory and hands over to a new process.\n"
    )

    console.rule("[bold]starting process 2")
    sys.stdout.flush()
    env = dict(os.environ, COLUMNS=str(console.width))
    if console.is_terminal:
        env["FORCE_COLOR"] = "1"
    child = subprocess.Popen(
        [
            sys.executable, "-m", "agentsession", "demo-continue",
            "--url", ws.url, "--session", sid, "--project", str(ws.project),
            "--cmd", ws.cmd, "--user", USER, "--lang", options.lang,
            "--model", options.model.kind,
        ],
        env=env,
    )  # fmt: skip
    child.wait()
    return _report(ws, sid, pid1, child.pid, child.returncode, console)


def continue_demo(
    *,
    url: str,
    session_id: str,
    user_id: str,
    project: Path,
    cmd: str,
    lang: str,
    model: ModelConfig,
    console: Console,
) -> int:
    """Process 2 of the demo: restore from the store and continue; 0 if the task succeeded."""
    try:
        return _continue(url, session_id, user_id, project, cmd, lang, model, console)
    except (ModelError, ToolError) as exc:
        Console(stderr=True).print(f"error: {exc}", highlight=False)
        return 1


def _continue(
    url: str,
    sid: str,
    user_id: str,
    project: Path,
    cmd: str,
    lang: str,
    model: ModelConfig,
    console: Console,
) -> int:
    console.rule(f"[bold]process 2 · pid {os.getpid()} (parent pid {os.getppid()})")
    console.print(f"a fresh interpreter: opening {url} and restoring {sid}")
    with SessionManager.from_url(url) as sm:
        before = sm.get_session(session_id=sid, user_id=user_id).status.value
        restored = sm.restore_session(session_id=sid, user_id=user_id)
        memory = restored.working_memory
        console.print(
            f"restored: status {before} → {restored.session.status.value}; "
            f"{len(restored.messages)} messages, {len(restored.tool_calls)} tool calls, "
            f"{len(restored.runs)} run(s) loaded from SQLite"
        )
        console.print(
            f"working memory says: goal={memory.goal!r}, facts={memory.facts}, "
            f"next_action={memory.next_action!r}",
            highlight=False,
        )
        text = _SAY[lang]["continue"]
        console.print(f"\n[bold blue]user ›[/] {text}")
        reply = _engine(sm, model, project, cmd, lang, console).handle(sid, text)
    return 0 if reply.ok else 1


def _report(ws: Workspace, sid: str, pid1: int, pid2: int, child_rc: int, console: Console) -> int:
    console.rule(f"[bold]back in process 1 · pid {pid1}: what the SQLite file holds")
    with SessionManager.from_url(ws.url) as sm:
        session = sm.get_session(session_id=sid, user_id=USER)
        messages = sm.get_messages(session_id=sid, user_id=USER)
        memory = sm.get_working_memory(session_id=sid, user_id=USER)
        calls = sm.get_tool_history(session_id=sid, user_id=USER)
        runs = sm.list_runs(session_id=sid, user_id=USER)
    console.print(render.messages_table(messages))
    console.print(render.memory_table(memory))
    console.print(render.tools_table(calls, runs))
    console.print(render.runs_table(runs))

    starts = [c for c in calls if c.tool == "run_command" and c.arguments == {"command": ws.cmd}]
    final = starts[-1] if starts else None
    verified = final is not None and final.status.value == "ok"
    all_ok = bool(runs) and all(r.status is RunStatus.SUCCEEDED for r in runs)
    ok = child_rc == 0 and verified and all_ok and len(runs) >= 3
    reused = [m for m in messages if m.role.value == "tool" and '"reused_from"' in str(m.content)]
    lines = [
        f"session {sid}: {session.status.value}, version {session.version}, "
        f"{session.message_count} messages, {session.tool_call_count} tool calls, "
        f"{session.run_count} runs",
        f"process 1 pid {pid1}: created the session, run 1 diagnosed, closed it",
        f"process 2 pid {pid2}: restored it from {ws.url}, ran 2 and 3 (exit code {child_rc})",
        f"restore crossed a process boundary: {'yes' if pid1 != pid2 else 'NO'} "
        f"(pid {pid1} → pid {pid2})",
        f"diagnosis repeated after restore: {'no' if reused else 'YES'} "
        f"(the start command ran {len(starts)} times: diagnose + verify)",
        "runs: " + ", ".join(f"{r.seq} {r.input} {r.status.value}" for r in runs),
        f"final verification: {'ok' if verified else 'FAILED'}"
        + (f" ({_outcome(final.result)})" if final is not None else ""),
        f"look again: agentsession --url {ws.url} sessions runs {sid} --user {USER}",
    ]
    console.print(
        Panel("\n".join(lines), title="summary", border_style="green" if ok else "red"),
        highlight=False,
    )
    return 0 if ok else 1
