"""``agentsession changes``: print the change feed, and follow it with ``--follow``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ..models import Change
from .common import (
    AdminOpt,
    JsonOpt,
    LimitOpt,
    UrlOpt,
    UserOpt,
    cli_errors,
    open_manager,
    resolve_options,
)
from .render import short

__all__ = ["changes"]


def change_line(c: Change) -> str:
    """One change on one line: cursor, time (UTC), session, action, versions, details."""
    versions = f"{c.version_before or '-'} -> {c.version_after or '-'}"
    details = ", ".join(f"{key}: {short(value, 40)}" for key, value in c.details.items())
    at = c.at.strftime("%Y-%m-%d %H:%M:%S")
    return "  ".join(
        part for part in (c.cursor, at, c.session_id, c.action, versions, details) if part
    )


@cli_errors
def changes(
    ctx: typer.Context,
    session: Annotated[
        str | None, typer.Option("--session", help="Only this session's changes (ses_...).")
    ] = None,
    after: Annotated[
        str | None, typer.Option(help="Start after this cursor (a change's first column).")
    ] = None,
    all_users: Annotated[
        bool, typer.Option("--all-users", help="Every user's changes (with --admin).")
    ] = False,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing changes as they commit.")
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(help="With --follow: stop after this many seconds.")
    ] = None,
    limit: LimitOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the change feed: each committed write (no content), oldest first.

    One line per change (with --json, one JSON object per line). Without --follow, one
    page, then the --after that continues it; with --follow, every change after
    --after and then each new one as it commits, until Ctrl-C or --timeout.
    """
    opts = resolve_options(ctx, url, user, admin, as_json)

    def emit(change: Change) -> None:
        text = json.dumps(change.model_dump(mode="json"), ensure_ascii=False)
        typer.echo(text if opts.json else change_line(change))

    with open_manager(opts) as sm:
        if not follow:
            page = sm.changes(
                user_id=opts.principal,
                admin=opts.admin,
                session_id=session,
                all_users=all_users,
                after=after,
                limit=limit,
            )
            for change in page.items:
                emit(change)
            if not opts.json and page.next_cursor is not None:
                more = "more" if page.has_more else "next"
                typer.echo(f"{more}: --after {page.next_cursor}", err=True)
            return
        try:
            followed = sm.watch(
                user_id=opts.principal,
                admin=opts.admin,
                session_id=session,
                all_users=all_users,
                after=after,
                timeout=timeout,
            )
            for change in followed:
                emit(change)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
