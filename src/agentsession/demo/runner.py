"""The restore experiment: one task, two OS processes, one SQLite file (or one service).

Process 1 (:func:`run_demo`) creates the session, lets the agent diagnose the broken
project (run 1), and closes the session. It then starts process 2 (:func:`continue_demo`,
``python -m agentsession demo-continue``), which restores the session from the file,
compacts process 1's history into a stored summary (the messages stay), continues from
working memory without repeating the diagnosis, fixes (run 2) and verifies (run 3).
Process 1 finally reads the file again and prints what is stored.

With ``--server URL`` both processes talk to a running ``agentsession serve`` through
:class:`~agentsession.client.SessionClient` instead of opening the file; the code is the
same, typed against :class:`~agentsession.api.SessionAPI`. The user is the API key's
(``/v1/whoami``). The token reaches process 2 in its environment, never on its command line.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console
from rich.panel import Panel

from ..api import SessionAPI
from ..cli import render
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
from ..models import RunStatus
from ..protocol import Unauthenticated
from ..service import SessionManager
from ..service.contextbuild import render_memory
from .workspace import DemoError, Workspace, prepare_workspace, use_project

__all__ = ["DemoOptions", "ModelConfig", "continue_demo", "run_demo"]

USER = "demo-user"
AGENT = "coding"
#: The environment variable that carries the service's API key (to process 2 as well).
API_KEY_ENV = "AGENTSESSION_API_KEY"

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
    server: str | None = None
    api_key: str | None = None


@dataclass(frozen=True, slots=True)
class _Backend:
    """Where the demo's state lives: an SQLite URL (no ``api_key``), or the base URL of
    an agentsession service and a token for it."""

    url: str
    api_key: str | None = None

    @property
    def remote(self) -> bool:
        return self.api_key is not None

    @property
    def where(self) -> str:
        return "the service" if self.remote else "SQLite"

    def open(self, *, migrate: bool = False) -> AbstractContextManager[SessionAPI]:
        """A SessionClient of the service, or a SessionManager over the SQLite file."""
        if self.api_key is not None:
            from ..client import SessionClient

            return SessionClient(self.url, self.api_key)
        return SessionManager.from_url(self.url, auto_migrate=migrate)

    def whoami(self) -> str:
        """The user the API key acts as (also checks the service is up and the key valid)."""
        from ..client import SessionClient

        assert self.api_key is not None
        with SessionClient(self.url, self.api_key, max_retries=1) as client:
            return str(client.whoami()["user_id"])

    def explain(self, exc: Exception) -> str:
        """One line for an error, with a hint when the service is at fault."""
        if isinstance(exc, httpx.TransportError):
            return (
                f"cannot reach the agentsession service at {self.url} "
                f"({type(exc).__name__}: {exc}); is `agentsession serve` running there?"
            )
        if isinstance(exc, Unauthenticated):
            return (
                f"the service at {self.url} refused the API key ({exc.message}); create one "
                f"with `agentsession keys create --user {USER}` where the service runs"
            )
        return str(exc.message if isinstance(exc, AgentSessionError) else exc)


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
    sm: SessionAPI,
    user: str,
    config: ModelConfig,
    project: Path,
    cmd: str,
    lang: str,
    console: Console,
) -> AgentEngine:
    return AgentEngine(
        sm,
        _model(config, cmd, lang),
        ProjectTools(project),
        user_id=user,
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
    """Process 1 of the demo; returns the exit code (0 only if the final verification passed).

    With ``options.server`` (and ``options.api_key``) the state lives in that service.
    """
    backend = _Backend(options.server, options.api_key) if options.server else None
    try:
        return _run(options, backend, console)
    except (DemoError, ModelError, ToolError, AgentSessionError, httpx.TransportError) as exc:
        message = backend.explain(exc) if backend is not None else str(exc)
        Console(stderr=True).print(f"error: {message}", highlight=False, soft_wrap=True)
        return 1


def _run(options: DemoOptions, remote: _Backend | None, console: Console) -> int:
    say = _SAY[options.lang]
    user = USER
    if remote is not None:
        user = remote.whoami()  # before the slow set-up: is the service up, the key valid?
    where = "one service" if remote is not None else "one SQLite file"
    console.rule(f"[bold]agentsession demo: one task, two processes, {where}")
    source = f"the service at {remote.url}" if remote is not None else "SQLite"
    console.print(
        "Process 1 asks the agent to fix a project that fails to start; the agent diagnoses "
        "it (run 1) and the session is closed. A [bold]separate OS process[/] then restores "
        f"the session from {source} and continues from working memory and tool history: it "
        "does not repeat the diagnosis, fixes requirements.txt (run 2) and verifies (run 3).\n"
    )
    keep_store = remote is not None  # the SQLite file of an earlier local run stays usable
    if options.project is not None and options.cmd is not None:
        ws = use_project(options.workdir, options.project, options.cmd, keep_store=keep_store)
    else:
        ws = prepare_workspace(options.workdir, console, keep_store=keep_store)
        if options.cmd is not None:
            ws = Workspace(ws.workdir, ws.project, ws.url, options.cmd)
    backend = remote or _Backend(ws.url)
    console.print(f"project: {ws.project}\nstart command: {ws.cmd}")
    if remote is not None:
        console.print(
            f"store: [bold]the agentsession service at {remote.url}[/] (user {user!r}, from "
            "the API key)\n       both processes talk to it over HTTP (SessionClient) and open "
            "no database file: the session's state lives in the service",
            highlight=False,
        )
    else:
        console.print(f"store: {ws.url}")

    pid1 = os.getpid()
    console.rule(f"[bold]process 1 · pid {pid1}")
    with backend.open(migrate=True) as sm:
        session = sm.create_session(user_id=user, agent=AGENT, title=say["title"])
        sid = session.session_id
        console.print(f"created session [bold]{sid}[/] (user {user}, agent {AGENT})")
        console.print(f"\n[bold blue]user ›[/] {say['ask']}")
        _engine(sm, user, options.model, ws.project, ws.cmd, options.lang, console).handle(
            sid, say["ask"]
        )
        memory = sm.get_working_memory(session_id=sid, user_id=user)
        console.print(render.memory_table(memory, "working memory after run 1"))
        closed = sm.close_session(session_id=sid, user_id=user, reason="process 1 finished")
    console.print(
        f"session {closed.status.value} at version {closed.version}; process 1 keeps nothing "
        "in memory and hands over to a new process.\n"
    )

    console.rule("[bold]starting process 2")
    sys.stdout.flush()
    env = dict(os.environ, COLUMNS=str(console.width))
    if console.is_terminal:
        env["FORCE_COLOR"] = "1"
    store_args = ["--url", ws.url]
    if remote is not None and remote.api_key is not None:
        store_args = ["--server", remote.url]
        env[API_KEY_ENV] = remote.api_key  # the token stays off the command line
    args = ["--session", sid, "--project", str(ws.project), "--cmd", ws.cmd, "--user", user]
    args += ["--lang", options.lang, "--model", options.model.kind]
    child = subprocess.Popen(
        [sys.executable, "-m", "agentsession", "demo-continue", *store_args, *args], env=env
    )
    child.wait()
    return _report(backend, ws, user, sid, pid1, child.pid, child.returncode, console)


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
    api_key: str | None = None,
) -> int:
    """Process 2 of the demo: restore from the store and continue; 0 if the task succeeded.

    With ``api_key``, ``url`` is the base URL of the agentsession service.
    """
    backend = _Backend(url, api_key)
    try:
        return _continue(backend, session_id, user_id, project, cmd, lang, model, console)
    except (ModelError, ToolError) as exc:
        Console(stderr=True).print(f"error: {exc}", highlight=False)
        return 1
    except httpx.TransportError as exc:
        Console(stderr=True).print(
            f"error: {backend.explain(exc)}", highlight=False, soft_wrap=True
        )
        return 1


def _continue(
    backend: _Backend,
    sid: str,
    user_id: str,
    project: Path,
    cmd: str,
    lang: str,
    model: ModelConfig,
    console: Console,
) -> int:
    console.rule(f"[bold]process 2 · pid {os.getpid()} (parent pid {os.getppid()})")
    if backend.remote:
        console.print(
            f"a fresh interpreter: connecting to the service at {backend.url} and restoring {sid}"
        )
    else:
        console.print(f"a fresh interpreter: opening {backend.url} and restoring {sid}")
    with backend.open() as sm:
        before = sm.get_session(session_id=sid, user_id=user_id).status.value
        restored = sm.restore_session(session_id=sid, user_id=user_id)
        memory = restored.working_memory
        console.print(
            f"restored: status {before} → {restored.session.status.value}; "
            f"{render.count(len(restored.messages), 'message')}, "
            f"{render.count(len(restored.tool_calls), 'tool call')}, "
            f"{render.count(len(restored.runs), 'run')} loaded from {backend.where}"
        )
        console.print(
            f"working memory says: goal={memory.goal!r}, facts={memory.facts}, "
            f"next_action={memory.next_action!r}",
            highlight=False,
        )
        _compact(sm, sid, user_id, restored.session.message_count, console)
        text = _SAY[lang]["continue"]
        console.print(f"\n[bold blue]user ›[/] {text}")
        reply = _engine(sm, user_id, model, project, cmd, lang, console).handle(sid, text)
    return 0 if reply.ok else 1


def _compact(sm: SessionAPI, sid: str, user_id: str, count: int, console: Console) -> None:
    """Compact process 1's history into a stored summary (its messages stay stored);
    the engine's context then sends the summary instead of them."""
    if count < 1:
        return
    memory = sm.get_working_memory(session_id=sid, user_id=user_id)
    text = "Earlier in this session:\n" + (render_memory(memory.data) or "nothing recorded")
    summary = sm.add_summary(
        session_id=sid, user_id=user_id, text=text, from_seq=1, to_seq=count, author="demo"
    )
    console.print(
        f"compacted messages 1-{count} into summary #{summary.number}: "
        f"{summary.replaced_tokens} tokens → {summary.summary_tokens} "
        f"({summary.tokenizer}); the messages stay stored, the model's context sends "
        "the summary instead",
        highlight=False,
    )


def _report(
    backend: _Backend,
    ws: Workspace,
    user: str,
    sid: str,
    pid1: int,
    pid2: int,
    child_rc: int,
    console: Console,
) -> int:
    holder = f"the service at {backend.url}" if backend.remote else "the SQLite file"
    console.rule(f"[bold]back in process 1 · pid {pid1}: what {holder} holds")
    with backend.open() as sm:
        session = sm.get_session(session_id=sid, user_id=user)
        # A demo session is far below one page of each (100 items).
        messages = sm.get_messages(session_id=sid, user_id=user).items
        memory = sm.get_working_memory(session_id=sid, user_id=user)
        calls = sm.get_tool_history(session_id=sid, user_id=user).items
        runs = sm.list_runs(session_id=sid, user_id=user).items
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
        f"{render.count(session.message_count, 'message')}, "
        f"{render.count(session.tool_call_count, 'tool call')}, "
        f"{render.count(session.run_count, 'run')}",
        f"process 1 pid {pid1}: created the session, run 1 diagnosed, closed it",
        f"process 2 pid {pid2}: restored it from {backend.url}, ran 2 and 3 (exit code {child_rc})",
        f"restore crossed a process boundary: {'yes' if pid1 != pid2 else 'NO'} "
        f"(pid {pid1} → pid {pid2})",
        f"diagnosis repeated after restore: {'no' if reused else 'YES'} "
        f"(the start command ran {render.count(len(starts), 'time')}: diagnose + verify)",
        "runs: " + ", ".join(f"{r.seq} {r.input} {r.status.value}" for r in runs),
        f"final verification: {'ok' if verified else 'FAILED'}"
        + (f" ({_outcome(final.result)})" if final is not None else ""),
    ]
    console.print(
        Panel("\n".join(lines), title="summary", border_style="green" if ok else "red"),
        highlight=False,
    )
    # Outside the panel and never wrapped by rich: the command must copy-paste as printed.
    for line in _look_again(backend, sid, user):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    return 0 if ok else 1


def _look_again(backend: _Backend, sid: str, user: str) -> list[str]:
    """Shell commands that show the session's runs again, as the user can paste them,
    and how to open the session in the inspector."""
    if backend.remote:
        lines = []
        if os.environ.get(API_KEY_ENV) != backend.api_key:
            lines.append(f"look again (after: export {API_KEY_ENV}=<your API key>):")
        else:
            lines.append("look again:")
        base = backend.url.rstrip("/")
        lines.append(
            f'  curl -s -H "Authorization: Bearer ${API_KEY_ENV}" {base}/v1/sessions/{sid}/runs'
        )
        lines.append("open it in the inspector (log in with your API key):")
        lines.append(f"  {base}/ui/sessions/{sid}")
        return lines
    command = shlex.join([_cli_command(), "--url", backend.url, "sessions", "runs", sid])
    inspector = shlex.join([_cli_command(), "--url", backend.url, "ui", "--session", sid])
    return [
        "look again:",
        f"  {command} --user {shlex.quote(user)}",
        "open it in the inspector:",
        f"  {inspector}",
    ]


def _cli_command() -> str:
    """``agentsession`` if the shell finds this installation by that name, else the path
    of its script (``.venv/bin/agentsession`` after ``make demo``, which activates nothing)."""
    script = Path(sys.executable).parent / "agentsession"
    found = shutil.which("agentsession")
    if not script.exists() or (found is not None and Path(found).samefile(script)):
        return "agentsession"
    with contextlib.suppress(ValueError):
        return str(script.relative_to(Path.cwd()))
    return str(script)
