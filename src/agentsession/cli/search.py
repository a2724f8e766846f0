"""``agentsession search QUERY``: find text across the caller's sessions."""

from __future__ import annotations

from typing import Annotated

import typer

from ..service import SessionManager
from . import render
from .common import (
    AdminOpt,
    AgentOpt,
    AllUsersOpt,
    CursorOpt,
    JsonOpt,
    LimitOpt,
    UrlOpt,
    UserOpt,
    call,
    cli_errors,
    resolve_options,
    show_page,
)

__all__ = ["search"]


@cli_errors
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The text to find (case ignored).")],
    agent: AgentOpt = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    all_users: AllUsersOpt = False,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Find text in your sessions: titles, messages of every format, tool calls (newest
    first; the match in bold). Not on a Redis store, which keeps no search index."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts,
        SessionManager.search,
        query=query,
        agent=agent,
        session_id=session,
        limit=limit,
        cursor=cursor,
        all_users=all_users,
    )
    show_page(opts, page, render.search_table(page.items))
