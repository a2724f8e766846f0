"""``agentsession export`` and ``agentsession import ...``: sessions out to JSON Lines,
and in from such a file or from another framework's database (docs/export.md)."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..errors import ImportSourceError, ValidationError
from ..service import SessionManager
from ..transfer.jsonl import export_session, import_session, read_lines
from ..transfer.openai_agents import OpenAIAgentsSource, import_openai_agents
from ..transfer.signing import sign_export
from . import render
from .common import (
    AdminOpt,
    JsonOpt,
    Options,
    SessionArg,
    UrlOpt,
    UsageError,
    UserOpt,
    cli_errors,
    new_app,
    open_manager,
    resolve_options,
)

if TYPE_CHECKING:
    from ..transfer.adk import AdkImportReport

__all__ = ["export", "import_app"]

import_app = new_app("Import sessions: an export (jsonl) or another framework's database.")


@cli_errors
def export(
    ctx: typer.Context,
    session_id: SessionArg,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="The file to write.", show_default="stdout")
    ] = None,
    sign: Annotated[
        Path | None,
        typer.Option(
            "--sign",
            help="Sign the file with this Ed25519 private key (export-keygen makes one); "
            "the signature goes to <out>.sig. Needs --out.",
        ),
    ] = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
) -> None:
    """Export one session as JSON Lines: session, working memory, messages, tool calls,
    runs with their steps (docs/export.md).

    With --out, prints what was written where (the count of each kind, the file).
    """
    opts = resolve_options(ctx, url, user, admin, False)
    if sign is not None and out is None:
        raise UsageError("--sign needs --out: the signature is kept beside the file")
    with open_manager(opts) as sm:
        lines = export_session(sm, session_id=session_id, user_id=opts.principal, admin=opts.admin)
        first = next(lines)  # a missing session fails before the file is created
        if out is None:
            _write(sys.stdout, itertools.chain([first], lines))
            return
        try:
            with out.open("w", encoding="utf-8") as f:
                written = _write(f, itertools.chain([first], lines))
        except OSError as exc:
            message = f"cannot write {out}: {exc.strerror or exc}"
            raise ValidationError(message, field="out") from None
    # the end line is the file's, not content: not counted
    kinds = ", ".join(render.count(n, kind) for kind, n in written.items() if kind != "end")
    typer.echo(f"exported {session_id} to {out}: {kinds}")
    if sign is not None:
        typer.echo(f"signed: {sign_export(out, sign)}")


def _write(f: TextIO, lines: Iterator[dict[str, Any]]) -> Counter[str]:
    """One compact JSON object per line (UTF-8 as is).

    Returns:
        How many lines of each ``type`` were written, in the order first written.
    """
    written: Counter[str] = Counter()
    for line in lines:
        f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        written[str(line.get("type"))] += 1
    return written


@import_app.command("jsonl")
@cli_errors
def import_jsonl(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="An export of `agentsession export` (- = stdin).")],
    url: UrlOpt = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a new session from an export (new id; the same external key if it is
    free); prints the new session id."""
    opts = resolve_options(ctx, url, user, False, as_json)
    with open_manager(opts, create=True) as sm:
        name = "<stdin>" if str(file) == "-" else str(file)
        if str(file) == "-":
            lines = read_lines(sys.stdin.buffer, source=name)
            done = import_session(sm, lines, user_id=opts.principal, source=name)
        else:
            try:
                f = file.open("rb")
            except OSError as exc:
                message = f"cannot read {file}: {exc.strerror or exc}"
                raise ImportSourceError(message, source=name, field="file") from None
            with f:
                lines = read_lines(f, source=name)
                done = import_session(sm, lines, user_id=opts.principal, source=name)
    data = {
        "session_id": done.session.session_id,
        "external_key": done.session.external_key,
        "key_taken": done.key_taken,
        "imported": done.counts,
    }
    text = f"imported {done.session.session_id}: " + ", ".join(
        render.count(n, kind) for kind, n in done.counts.items()
    )
    if done.key_taken:
        text += " (its external key is in use: imported without one)"
    _report(opts, data, text)


@import_app.command("openai-agents")
@cli_errors
def import_openai(
    ctx: typer.Context,
    db_path: Annotated[Path, typer.Argument(help="The SQLiteSession database file.")],
    agent: Annotated[str, typer.Option(help="Agent the sessions are filed under.")] = (
        "openai-agents"
    ),
    sessions_table: Annotated[str, typer.Option(help="Its sessions table.")] = "agent_sessions",
    messages_table: Annotated[str, typer.Option(help="Its messages table.")] = "agent_messages",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    url: UrlOpt = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import every session of an openai-agents SQLiteSession database (read-only),
    keyed by its session_id; re-running adds nothing (docs/export.md)."""
    opts = resolve_options(ctx, url, user, False, as_json)
    try:
        source = OpenAIAgentsSource(
            db_path, sessions_table=sessions_table, messages_table=messages_table
        )
    except ValidationError as exc:  # the source named on the command line: usage
        raise UsageError(exc.message) from None
    progress = _progress("items", quiet)
    try:
        with open_manager(opts, create=True) as sm, progress:
            task = progress.add_task("import", total=source.item_count())
            report = import_openai_agents(
                sm,
                source,
                user_id=opts.principal,
                agent=agent,
                advance=lambda n: progress.advance(task, n),
            )
    finally:
        source.close()
    data = {
        "sessions": report.sessions,
        "created": report.created,
        "messages": report.messages,
        "tool_calls": report.tool_calls,
        "bad_rows": report.bad_rows,
        "skipped_calls": report.skipped_calls,
        "failed": [{"session_id": s, "reason": r} for s, r in report.failed],
    }
    text = (
        f"{render.count(report.sessions, 'session')} ({report.created} new): "
        f"{render.count(report.messages, 'message')} and "
        f"{render.count(report.tool_calls, 'tool call')} imported"
    )
    if report.bad_rows or report.skipped_calls:
        text += (
            f"; skipped {render.count(report.bad_rows, 'row')} that are not JSON objects and "
            f"{render.count(report.skipped_calls, 'call')} with a tool name the tool history "
            "cannot take"
        )
    for session_id, reason in report.failed:
        text += f"\nnot imported: {session_id!r}: {reason}"
    _report(opts, data, text)
    if report.failed:
        raise typer.Exit(1)


@import_app.command("langgraph")
@cli_errors
def import_langgraph(
    ctx: typer.Context,
    db_path: Annotated[Path, typer.Argument(help="The SqliteSaver database file.", readable=False)],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    url: UrlOpt = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import every thread of a LangGraph SqliteSaver database (read-only) into the
    sessions AgentSessionSaver(user_id=--user) reads; re-running adds nothing
    (docs/export.md)."""
    opts = resolve_options(ctx, url, user, False, as_json)
    try:
        from ..transfer.langgraph import LangGraphSource, import_langgraph
    except ImportError as exc:
        raise UsageError(
            f"import langgraph needs: pip install 'agentsession[langgraph-import]' ({exc})"
        ) from None
    try:
        source = LangGraphSource(db_path)
    except ValidationError as exc:  # the file named on the command line: a usage error
        raise UsageError(exc.message) from None
    progress = _progress("checkpoints", quiet)
    try:
        with open_manager(opts, create=True) as sm, progress:
            task = progress.add_task("import", total=source.checkpoint_count())
            report = import_langgraph(
                sm, source, user_id=opts.principal, advance=lambda n: progress.advance(task, n)
            )
    finally:
        source.close()
    data = {
        "threads": report.threads,
        "created": report.created,
        "checkpoints": report.checkpoints,
        "records": report.records,
        "messages": report.messages,
        "failed": [{"thread_id": t, "reason": r} for t, r in report.failed],
        "warnings": [{"thread_id": t, "reason": r} for t, r in report.warnings],
    }
    text = (
        f"{render.count(report.threads, 'thread')} ({report.created} new): "
        f"{render.count(report.checkpoints, 'checkpoint')} seen, "
        f"{render.count(report.records, 'record')} written, "
        f"{render.count(report.messages, 'message')} imported"
    )
    for thread_id, reason in report.failed:
        text += f"\nnot imported: {thread_id!r}: {reason}"
    for thread_id, reason in report.warnings:  # imported: no exit 1 for these
        text += f"\nwarning: {thread_id!r}: {reason}"
    _report(opts, data, text)
    if report.failed:
        raise typer.Exit(1)


def _progress(unit: str, quiet: bool) -> Progress:
    """An import's progress bar ("importing [bar] 3/10 <unit>") on stderr; off with
    ``--quiet`` or when stderr is not a terminal."""
    return Progress(
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        console=Console(stderr=True),
        disable=quiet or not sys.stderr.isatty(),
        transient=True,
    )


def _report(opts: Options, data: dict[str, Any], text: str) -> None:
    """``data`` as JSON with ``--json``, else ``text`` as it is (no rich markup: a
    session id or a reason may hold brackets)."""
    typer.echo(render.to_json(data) if opts.json else text)


@import_app.command("google-adk")
@cli_errors
def import_adk(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            help="A SqliteSessionService file, or a DatabaseSessionService SQLAlchemy URL."
        ),
    ],
    app: Annotated[list[str], typer.Option("--app", help="An app name to import (repeat).")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import every session of the apps from a Google ADK database, read through ADK's
    own services (read-only), keeping app, user and session ids; re-running adds
    nothing (docs/export.md). Exit 2 for a source that cannot be read (missing, not an
    ADK database, unreachable) and without google-adk installed."""
    try:
        from ..transfer import adk
    except ImportError:
        typer.echo("error: import google-adk needs: pip install 'agentsession[adk]'", err=True)
        raise typer.Exit(2) from None
    opts = resolve_options(ctx, url, None, False, as_json)
    shown = adk.shown_source(source)
    try:
        service = adk.open_source(source)
    except ValidationError as exc:  # the source named on the command line: a usage error
        raise UsageError(exc.message) from None
    progress = _progress("sessions", quiet)

    async def run(sm: SessionManager) -> AdkImportReport:
        try:
            sessions = await adk.list_source(service, app, name=shown)
            for name in dict.fromkeys(app):  # a mistyped app name imports nothing: say so
                if not any(s.app_name == name for s in sessions):
                    typer.echo(f"warning: no sessions of app {name!r}", err=True)
            task = progress.add_task("import", total=len(sessions))
            return await adk.import_google_adk(
                sm, service, sessions, name=shown, advance=lambda n: progress.advance(task, n)
            )
        finally:
            await service.close()

    with open_manager(opts, create=True) as sm, progress:
        report = asyncio.run(run(sm))
    data = {
        "sessions": report.sessions,
        "created": report.created,
        "events": report.events,
        "states": report.states,
        "failed": [
            {"app_name": a, "user_id": u, "session_id": s, "reason": r}
            for a, u, s, r in report.failed
        ],
    }
    text = (
        f"{render.count(report.sessions, 'session')} ({report.created} new): "
        f"{render.count(report.events, 'event')} imported, "
        f"{render.count(report.states, 'state')} written"
    )
    for a, u, s, r in report.failed:
        text += f"\nnot imported: {a!r}/{u!r}/{s!r}: {r}"
    _report(opts, data, text)
    if report.failed:
        raise typer.Exit(1)
