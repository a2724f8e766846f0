"""``agentsession close|restore|expire|delete|sweep``: change where sessions are in their life.

The commands are plain functions; :func:`agentsession.cli.app.build_app` registers them
at the top level.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from ..service import SessionManager
from . import render
from .common import (
    AdminOpt,
    JsonOpt,
    SessionArg,
    UrlOpt,
    UserOpt,
    call,
    call_and_show,
    cli_errors,
    confirm,
    open_manager,
    require_database,
    resolve_options,
    show,
)

__all__ = ["close", "delete", "expire", "restore", "sweep"]

ReasonOpt = Annotated[
    str | None,
    typer.Option(help="Why (the status_reason; the audit log notes only that one was given)."),
]


@cli_errors
def close(
    ctx: typer.Context,
    session_id: SessionArg,
    reason: ReasonOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Close a session on purpose (history stays; restore re-opens it)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    call_and_show(
        opts,
        SessionManager.close_session,
        render.session_table,
        session_id=session_id,
        reason=reason,
    )


@cli_errors
def restore(
    ctx: typer.Context,
    session_id: SessionArg,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Re-open a CLOSED (or recently EXPIRED) session and show what was restored."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    restored = call(opts, SessionManager.restore_session, session_id=session_id)
    if opts.json:
        typer.echo(render.to_json(restored))
        return
    console = Console()
    console.print(render.session_table(restored.session))
    console.print(render.memory_table(restored.working_memory))
    console.print(render.runs_table(restored.runs))
    if restored.interrupted_run_ids:
        console.print(f"interrupted runs: {', '.join(restored.interrupted_run_ids)}")
    if restored.interrupted_call_ids:
        calls = ", ".join(restored.interrupted_call_ids)
        console.print(f"tool calls answered as interrupted: {calls}")


@cli_errors
def expire(
    ctx: typer.Context,
    session_id: SessionArg,
    reason: ReasonOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Expire a session now (policy ended it; distinct from close)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    call_and_show(
        opts,
        SessionManager.expire_session,
        render.session_table,
        session_id=session_id,
        reason=reason,
    )


@cli_errors
def delete(
    ctx: typer.Context,
    session_id: SessionArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session and all its content for good.

    Asks first; without a terminal to answer on, pass --yes (else exit 2). A no exits 1.
    """
    opts = resolve_options(ctx, url, user, admin, as_json)
    require_database(opts.url)  # before the question: a mistyped path is not asked about
    if not yes and not confirm(f"delete {session_id} and everything in it?", "delete"):
        typer.echo("not confirmed (pass --yes): nothing deleted", err=True)
        raise typer.Exit(1)
    call(opts, SessionManager.delete_session, session_id=session_id)
    show(opts, {"deleted": session_id}, f"deleted {session_id}")


@cli_errors
def sweep(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="At most this many sessions.")] = 1000,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Interrupt runs whose lease lapsed, expire idle sessions past their TTL and purge
    old idempotency keys."""
    opts = resolve_options(ctx, url, None, False, as_json)
    with open_manager(opts) as sm:
        result = sm.sweep_expired(limit=limit)
    data = {
        "interrupted_run_ids": result.interrupted_run_ids,
        "expired_session_ids": result.expired_session_ids,
        "failed_session_ids": result.failed_session_ids,
        "purged_idempotency_keys": result.purged_idempotency_keys,
    }
    text = (
        f"interrupted {render.count(len(result.interrupted_run_ids), 'run')} whose lease "
        f"lapsed, expired {render.count(len(result.expired_session_ids), 'session')}, "
        f"purged {render.count(result.purged_idempotency_keys, 'idempotency key')}"
    )
    if result.failed_session_ids:
        text += f"; {len(result.failed_session_ids)} failed (logged; the next sweep retries)"
    show(opts, data, text)
