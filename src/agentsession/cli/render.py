"""How the CLI and the demo show sessions: rich tables for people, JSON for scripts.

Every ``*_table`` function takes snapshots from the SessionManager and returns a
``rich.table.Table``; :func:`to_json` turns the same snapshots into JSON-ready data.
Nothing here reads or writes a store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.table import Table
from rich.text import Text

from ..models import (
    AuditEvent,
    Message,
    Rewind,
    RewindResult,
    Run,
    RunStep,
    Session,
    ToolCall,
    WorkingMemory,
)

__all__ = [
    "audit_table",
    "memory_table",
    "messages_table",
    "rewind_text",
    "rewinds_table",
    "runs_table",
    "session_table",
    "sessions_table",
    "short",
    "steps_table",
    "to_json",
    "tools_table",
]

_STATUS_STYLE = {
    "ACTIVE": "green",
    "CLOSED": "yellow",
    "EXPIRED": "magenta",
    "SUCCEEDED": "green",
    "FAILED": "red",
    "RUNNING": "cyan",
    "INTERRUPTED": "magenta",
    "CANCELLED": "yellow",
    "ok": "green",
    "error": "red",
    "reused": "cyan",
}


def to_json(value: Any) -> str:
    """Serialise snapshots (or lists/dicts of them) to indented JSON text."""
    return json.dumps(_plain(value), indent=2, ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def short(value: Any, width: int = 60) -> str:
    """One line of at most ``width`` characters (JSON for non-strings)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(at: datetime | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return "" if at is None else at.strftime(fmt)


def _status(value: Any) -> str:
    text = getattr(value, "value", value)
    style = _STATUS_STYLE.get(str(text))
    return f"[{style}]{text}[/{style}]" if style else str(text)


def sessions_table(sessions: Iterable[Session]) -> Table:
    """A row per session: id, user, agent, external key, status, counts, last
    activity, title."""
    table = Table(title="sessions")
    table.add_column("session_id", no_wrap=True)
    table.add_column("user")
    table.add_column("agent")
    table.add_column("external key")
    table.add_column("status", no_wrap=True)
    table.add_column("msgs/runs/tools")
    table.add_column("last active (UTC)")
    table.add_column("title")
    for s in sessions:
        counts = f"{s.message_count}/{s.run_count}/{s.tool_call_count}"
        table.add_row(
            s.session_id, s.user_id, s.agent, Text(short(s.external_key or "", 30)),
            _status(s.status), counts,
            _when(s.last_active_at), short(s.title or "", 30),
        )  # fmt: skip
    return table


def session_table(s: Session) -> Table:
    """Every field of one session, one per row."""
    table = Table(title=f"session {s.session_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for key, value in s.model_dump().items():
        shown: str | Text
        if key == "status":
            shown = _status(value)
        elif isinstance(value, datetime):
            shown = value.isoformat()
        elif value is None:
            shown = ""
        elif key == "external_key":  # any text: shown as it is, never as markup
            shown = Text(short(value, 80))
        else:
            shown = short(value, 80)
        table.add_row(key, shown)
    return table


def memory_table(memory: WorkingMemory, title: str = "working memory") -> Table:
    """The working-memory document: standard keys first, then free-form ones."""
    table = Table(title=f"{title} (version {memory.version})", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    order = ["goal", "completed", "errors", "next_action", "facts"]
    keys = [k for k in order if k in memory.data] + sorted(set(memory.data) - set(order))
    for key in keys:
        value = memory.data[key]
        if isinstance(value, list):
            shown = "\n".join(f"• {short(v, 90)}" for v in value) or "[]"
        elif isinstance(value, dict):
            shown = "\n".join(f"{k}: {short(v, 80)}" for k, v in value.items()) or "{}"
        else:
            shown = "" if value is None else short(value, 90)
        table.add_row(key, shown)
    return table


def tools_table(calls: Sequence[ToolCall], runs: Sequence[Run] = ()) -> Table:
    """Tool history: seq, run (its seq when ``runs`` holds it, else its id), tool,
    arguments, status, duration in ms."""
    run_seq = {r.run_id: r.seq for r in runs}
    table = Table(title="tool history")
    for column in ("#", "run", "tool", "args", "status", "ms"):
        table.add_column(column, justify="right" if column in ("#", "ms") else "left")
    for c in calls:
        args = (
            " ".join(str(v) for v in c.arguments.values())
            if c.tool != "update_memory"
            else ("patch " + ", ".join(sorted((c.arguments.get("patch") or {}).keys())))
        )
        status = _status(c.status) + (f" ({c.error})" if c.error else "")
        table.add_row(
            str(c.seq), str(run_seq.get(c.run_id or "", c.run_id or "")), c.tool, short(args, 58),
            status, f"{c.duration_ms:.0f}",
        )  # fmt: skip
    return table


def runs_table(runs: Sequence[Run]) -> Table:
    """Runs: seq, input, status (and error), started, ended, step count."""
    table = Table(title="runs")
    table.add_column("seq")
    table.add_column("input")
    table.add_column("status", no_wrap=True)
    table.add_column("started (UTC)", no_wrap=True)
    table.add_column("ended (UTC)", no_wrap=True)
    table.add_column("steps")
    for r in runs:
        status = _status(r.status) + (f"\n{short(r.error, 40)}" if r.error else "")
        table.add_row(
            str(r.seq), short(r.input, 40), status, _when(r.started_at, "%m-%d %H:%M:%S"),
            _when(r.ended_at, "%m-%d %H:%M:%S"),
            str(r.step_count),
        )  # fmt: skip
    return table


def steps_table(steps: Sequence[RunStep]) -> Table:
    """Steps of a run: index, kind, name, status (and error), started, ended."""
    table = Table(title="steps")
    for column in ("#", "kind", "name", "status", "started (UTC)", "ended (UTC)"):
        table.add_column(column, justify="right" if column == "#" else "left")
    for st in steps:
        status = _status(st.status) + (f" ({short(st.error, 40)})" if st.error else "")
        table.add_row(
            str(st.index), st.kind, st.name or "", status,
            _when(st.started_at, "%m-%d %H:%M:%S"), _when(st.ended_at, "%m-%d %H:%M:%S"),
        )  # fmt: skip
    return table


def messages_table(messages: Sequence[Message]) -> Table:
    """History in seq order: role, content (or the tool calls it makes)."""
    table = Table(title="messages")
    for column in ("seq", "role", "content"):
        table.add_column(column)
    for m in messages:
        if m.tool_calls:
            calls = ", ".join(f"{(c.get('function') or {}).get('name')}()" for c in m.tool_calls)
            content = f"{short(m.content or '', 60)} → {calls}".strip(" →")
        elif m.role.value == "tool":
            content = _tool_message(m.content)
        else:
            content = short(m.content if m.content is not None else "", 90)
        table.add_row(str(m.seq), m.role.value, content)
    return table


def _tool_message(content: Any) -> str:
    try:
        data = json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return short(content, 90)
    if not isinstance(data, dict) or "status" not in data:
        return short(content, 90)
    result = data.get("result")
    detail = ""
    if isinstance(result, dict) and "exit_code" in result:
        detail = f" exit {result['exit_code']}"
    reused = f" (reused {data['reused_from']})" if data.get("reused_from") else ""
    return _status(data["status"]) + detail + reused


def audit_table(events: Sequence[AuditEvent]) -> Table:
    """Audit events: seq, time, actor, action, version change, details."""
    table = Table(title="audit log")
    for column in ("seq", "at (UTC)", "actor", "action", "version", "details"):
        table.add_column(column)
    for e in events:
        version = f"{e.version_before or '-'} → {e.version_after or '-'}"
        table.add_row(str(e.seq), _when(e.at), e.actor, e.action, version, short(e.details, 50))
    return table


def rewinds_table(rewinds: Sequence[Rewind]) -> Table:
    """Rewinds: number, the seq the history went back to, how many messages left it,
    mode (hide or remove), the memory version the rewind wrote, when (UTC)."""
    table = Table(title="rewinds")
    for column in ("#", "to seq", "messages", "mode", "memory version", "at (UTC)"):
        table.add_column(column, justify="left" if column in ("mode", "at (UTC)") else "right")
    for r in rewinds:
        table.add_row(
            str(r.number), str(r.to_seq), str(r.count), r.mode, str(r.memory_version),
            _when(r.created_at),
        )  # fmt: skip
    return table


def rewind_text(result: RewindResult) -> str:
    """One line saying what ``rewind_session`` did (or that it changed nothing)."""
    if result.number is None:
        return (
            f"nothing to rewind: the history already ends at seq {result.to_seq} "
            f"(memory version {result.memory_version})"
        )
    return (
        f"rewind {result.number}: to seq {result.to_seq}, {result.count} message(s), "
        f"mode {result.mode}, memory version {result.memory_version}"
    )
