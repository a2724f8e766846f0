"""How the CLI and the demo show sessions: rich tables for people, JSON for scripts.

Every ``*_table`` function takes snapshots from the SessionManager and returns a rich
renderable: the listings a :class:`~agentsession.cli.fit.FitTable` that keeps the
columns the terminal's width has room for (ids whole, never cut), one session or the
working memory a two-column table; :func:`to_json` turns the same snapshots into
JSON-ready data. Nothing here reads or writes a store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..ids import ID_PATTERN
from ..models import (
    AuditEvent,
    Budget,
    MemoryVersion,
    Message,
    Rewind,
    RewindResult,
    Run,
    RunStep,
    SearchHit,
    Session,
    ToolCall,
    UsageTotal,
    WorkingMemory,
)
from .fit import Cell, Column, FitTable

__all__ = [
    "audit_table",
    "budget_table",
    "count",
    "memory_table",
    "memory_versions_table",
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
    "usage_table",
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
    """One line of at most ``width`` characters (JSON for non-strings), cut with "…"
    before an id rather than inside it (a cut id could be copied as a wrong one)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = width - 1
    for found in ID_PATTERN.finditer(text):
        if found.start() < cut < found.end():
            cut = found.start()
    return text[:cut] + "…"


def _when(at: datetime | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return "" if at is None else at.strftime(fmt)


def _status(value: Any) -> str:
    text = getattr(value, "value", value)
    style = _STATUS_STYLE.get(str(text))
    return f"[{style}]{text}[/{style}]" if style else str(text)


def count(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless ``n`` is 1: ``count(2, "tool call")`` is
    ``"2 tool calls"``, ``count(1, "summary")`` ``"1 summary"``; ``_`` reads as a space."""
    words = noun.replace("_", " ")
    if n == 1:
        return f"{n} {words}"
    if words.endswith("y") and words[-2:-1] not in tuple("aeiou"):
        return f"{n} {words[:-1]}ies"
    return f"{n} {words}s"


def sessions_table(sessions: Iterable[Session]) -> FitTable:
    """A row per session: id, user, agent, external key, status, counts, last
    activity, title; narrow, the external key goes first, then user, counts, agent
    and last activity."""
    columns = [
        Column("session_id"),
        Column("user", drop=4),
        Column("agent", drop=2),
        Column("external key", drop=5, wrap=12),
        Column("status"),
        Column("msgs/runs/tools", drop=3),
        Column("last active (UTC)", drop=1, wrap=10),
        Column("title", wrap=12),
    ]
    rows: list[list[Cell]] = [
        [
            s.session_id,
            Text(s.user_id),
            Text(s.agent),
            Text(short(s.external_key or "", 30)),
            _status(s.status),
            f"{s.message_count}/{s.run_count}/{s.tool_call_count}",
            _when(s.last_active_at),
            Text(short(s.title or "", 30)),
        ]
        for s in sessions
    ]
    return FitTable("sessions", columns, rows, "no sessions")


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


def memory_versions_table(versions: Sequence[MemoryVersion]) -> FitTable:
    """The working memory's history, newest first: the first message seq each version
    was in effect at, its version, when it was written, and its document, shortened."""
    rows: list[list[Cell]] = [
        [str(v.seq), str(v.version), _when(v.updated_at), Text(short(v.data, 90))] for v in versions
    ]
    columns = [
        Column("seq", justify="right"),
        Column("version", justify="right"),
        Column("written", drop=1),
        Column("memory", wrap=20),
    ]
    return FitTable("memory versions", columns, rows, "no memory versions")


def tools_table(calls: Sequence[ToolCall], runs: Sequence[Run] = ()) -> FitTable:
    """Tool history: seq, run (its seq when ``runs`` holds it, else its id), tool,
    arguments, status, duration in ms; narrow, without the run (30 characters; ``sessions
    runs`` lists the runs), then the duration."""
    run_seq = {r.run_id: r.seq for r in runs}
    columns = [
        Column("#", justify="right"),
        Column("run", drop=2),
        Column("tool"),
        Column("args", wrap=12),
        Column("status", wrap=8),
        Column("ms", drop=1, justify="right"),
    ]
    rows: list[list[Cell]] = []
    for c in calls:
        args = (
            " ".join(str(v) for v in c.arguments.values())
            if c.tool != "update_memory"
            else ("patch " + ", ".join(sorted((c.arguments.get("patch") or {}).keys())))
        )
        status = _status(c.status) + (f" ({escape(c.error)})" if c.error else "")
        rows.append(
            [
                str(c.seq),
                str(run_seq.get(c.run_id or "", c.run_id or "")),
                Text(c.tool),
                Text(short(args, 58)),
                status,
                f"{c.duration_ms:.0f}",
            ]
        )
    return FitTable("tool history", columns, rows, "no tool calls")


def runs_table(runs: Sequence[Run]) -> FitTable:
    """Runs: seq, run id (what ``sessions steps`` takes), input, status (and error),
    step count, started, ended; narrow, without the ended, then the started time."""
    columns = [
        Column("seq"),
        Column("run_id"),
        Column("input", wrap=10),
        Column("status", wrap=11),
        Column("steps", drop=1),
        Column("started (UTC)", drop=2),
        Column("ended (UTC)", drop=3),
    ]
    rows: list[list[Cell]] = [
        [
            str(r.seq),
            r.run_id,
            Text(short(r.input, 40)),
            _status(r.status) + (f"\n{escape(short(r.error, 40))}" if r.error else ""),
            str(r.step_count),
            _when(r.started_at, "%m-%d %H:%M:%S"),
            _when(r.ended_at, "%m-%d %H:%M:%S"),
        ]
        for r in runs
    ]
    return FitTable("runs", columns, rows, "no runs")


def steps_table(steps: Sequence[RunStep]) -> FitTable:
    """Steps of a run: index, kind, name, status (and error), started, ended;
    narrow, without the ended, then the started time."""
    columns = [
        Column("#", justify="right"),
        Column("kind"),
        Column("name", wrap=10),
        Column("status", wrap=8),
        Column("started (UTC)", drop=1),
        Column("ended (UTC)", drop=2),
    ]
    rows: list[list[Cell]] = [
        [
            str(st.index),
            Text(st.kind),
            Text(st.name or ""),
            _status(st.status) + (f" ({escape(short(st.error, 40))})" if st.error else ""),
            _when(st.started_at, "%m-%d %H:%M:%S"),
            _when(st.ended_at, "%m-%d %H:%M:%S"),
        ]
        for st in steps
    ]
    return FitTable("steps", columns, rows, "no steps")


def messages_table(messages: Sequence[Message]) -> FitTable:
    """History in seq order: role, content (or the tool calls it makes)."""
    rows: list[list[Cell]] = []
    for m in messages:
        content: str | Text
        if m.tool_calls:
            calls = ", ".join(f"{(c.get('function') or {}).get('name')}()" for c in m.tool_calls)
            content = Text(f"{short(m.content or '', 60)} → {calls}".strip(" →"))
        elif m.role.value == "tool":
            content = _tool_message(m.content)
        else:
            content = Text(short(m.content if m.content is not None else "", 90))
        rows.append([str(m.seq), m.role.value, content])
    columns = [Column("seq"), Column("role"), Column("content", wrap=20)]
    return FitTable("messages", columns, rows, "no messages")


#: The narrowest a search hit's snippet column wraps to, in characters.
SNIPPET_WRAP = 26


def search_table(hits: Sequence[SearchHit]) -> FitTable:
    """Search hits: session, what matched (kind, seq, role), the snippet with the match
    in bold, the score. Narrow, the score goes, then the role, so the snippet keeps at
    least :data:`SNIPPET_WRAP` characters a line (at 80 columns: the id, the match, and
    the rest, 26 to 31 characters, for the snippet)."""
    rows: list[list[Cell]] = []
    for h in hits:
        flat = h.snippet.replace("\n", " ").replace("\t", " ")  # offsets kept
        snippet = Text(flat[: h.match_start])
        snippet.append(flat[h.match_start : h.match_end], style="bold")
        snippet.append(flat[h.match_end :])
        where = f"{h.kind} {h.seq}" if h.kind != "title" else "title"
        rows.append([h.session_id, where, h.role or "", snippet, str(h.score)])
    columns = [
        Column("session"),
        Column("match"),
        Column("role", drop=1),
        Column("snippet", wrap=SNIPPET_WRAP),
        Column("score", drop=2, justify="right"),
    ]
    return FitTable("search", columns, rows, "no matches")


def usage_table(group_by: str, totals: Sequence[UsageTotal]) -> FitTable:
    """Usage totals: the group, the token counts, runs, and cost (blank: no price)."""
    rows: list[list[Cell]] = [
        [
            Text(t.group if t.group is not None else "(none)"),
            str(t.input_tokens),
            str(t.output_tokens),
            str(t.cache_read_tokens),
            str(t.cache_write_tokens),
            str(t.reasoning_tokens),
            str(t.total_tokens),
            str(t.runs),
            "" if t.cost is None else f"{t.cost:.4f}",
        ]
        for t in totals
    ]
    columns = [
        Column(group_by),
        Column("input"),
        Column("output"),
        Column("cache read"),
        Column("cache write"),
        Column("reasoning"),
        Column("total"),
        Column("runs"),
        Column("cost"),
    ]
    return FitTable("usage", columns, rows, "no usage")


def budget_table(budget: Budget) -> Table:
    """One budget: whose, its bounds and what is used of them."""
    table = Table(title="budget", show_header=False)
    of = f"session {budget.session_id}" if budget.session_id else f"user {budget.user_id}"
    table.add_row("of", Text(of))
    table.add_row("max tokens", "none" if budget.max_tokens is None else str(budget.max_tokens))
    table.add_row("used tokens", str(budget.used_tokens))
    table.add_row("max cost", "none" if budget.max_cost is None else f"{budget.max_cost:.4f}")
    used = "no prices" if budget.used_cost is None else f"{budget.used_cost:.4f}"
    table.add_row("used cost", used)
    return table


def _tool_message(content: Any) -> str | Text:
    try:
        data = json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return Text(short(content, 90))
    if not isinstance(data, dict) or "status" not in data:
        return Text(short(content, 90))
    result = data.get("result")
    detail = ""
    if isinstance(result, dict) and "exit_code" in result:
        detail = f" exit {result['exit_code']}"
    reused = f" (reused {escape(str(data['reused_from']))})" if data.get("reused_from") else ""
    return _status(escape(str(data["status"]))) + escape(detail) + reused


def audit_table(events: Sequence[AuditEvent]) -> FitTable:
    """Audit events: seq, time, actor, action, version change (from which version to
    which: always shown), details (``key: value`` pairs, ids whole); narrow, the time
    folds onto two lines, the details wrap, then the details go, then the actor."""
    columns = [
        Column("seq"),
        Column("at (UTC)", wrap=10),
        Column("actor", drop=1),
        Column("action"),
        Column("version"),
        Column("details", drop=2, wrap=20),
    ]
    rows: list[list[Cell]] = [
        [
            str(e.seq),
            _when(e.at),
            Text(e.actor),
            Text(e.action),
            f"{e.version_before or '-'} → {e.version_after or '-'}",
            Text(", ".join(f"{key}: {short(value, 40)}" for key, value in e.details.items())),
        ]
        for e in events
    ]
    return FitTable("audit log", columns, rows, "no audit events")


def rewinds_table(rewinds: Sequence[Rewind]) -> FitTable:
    """Rewinds: number (what ``sessions rewound`` takes), the seq the history went
    back to, how many messages left it, mode (hide or remove), the memory version
    the rewind wrote, when (UTC)."""
    columns = [
        Column("#", justify="right"),
        Column("to seq", justify="right"),
        Column("messages", justify="right"),
        Column("mode"),
        Column("memory version", drop=1, justify="right"),
        Column("at (UTC)", wrap=10),
    ]
    rows: list[list[Cell]] = [
        [
            str(r.number),
            str(r.to_seq),
            str(r.count),
            r.mode,
            str(r.memory_version),
            _when(r.created_at),
        ]
        for r in rewinds
    ]
    return FitTable("rewinds", columns, rows, "no rewinds")


def rewind_text(result: RewindResult) -> str:
    """One line saying what ``rewind_session`` did (or that it changed nothing)."""
    if result.number is None:
        return (
            f"nothing to rewind: the history already ends at seq {result.to_seq} "
            f"(memory version {result.memory_version})"
        )
    return (
        f"rewind {result.number}: to seq {result.to_seq}, {count(result.count, 'message')}, "
        f"mode {result.mode}, memory version {result.memory_version}"
    )
