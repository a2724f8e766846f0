"""``agentsession sessions rewind|fork``: move a session back to a seq, or branch it there.

Both are writes through the SessionManager as the acting user (``--user`` or
``--admin``), like the lifecycle commands; they are plain functions that
:mod:`agentsession.cli.sessions` registers on the ``sessions`` sub-app, next to the
reads of what they leave behind (``sessions rewinds``, ``sessions rewound``,
``sessions list --parent``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..service import SessionManager
from . import render
from .common import (
    AdminOpt,
    JsonOpt,
    SessionArg,
    UrlOpt,
    UserOpt,
    call,
    cli_errors,
    resolve_options,
    show,
)

__all__ = ["fork", "rewind"]


@cli_errors
def rewind(
    ctx: typer.Context,
    session_id: SessionArg,
    to_seq: Annotated[
        int,
        typer.Option(
            "--to-seq", help="The message seq to go back to (0: before the first message)."
        ),
    ],
    remove: Annotated[
        bool,
        typer.Option("--remove", help="Delete the messages above it (without it: kept, hidden)."),
    ] = False,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Move a session back to message --to-seq and print what the rewind did.

    The messages above it leave the history and the working memory becomes the memory
    as of that seq (one version step; only an ACTIVE session).
    """
    opts = resolve_options(ctx, url, user, admin, as_json)
    result = call(
        opts, SessionManager.rewind_session, session_id=session_id, to_seq=to_seq, remove=remove
    )
    show(opts, result, render.rewind_text(result))


@cli_errors
def fork(
    ctx: typer.Context,
    session_id: SessionArg,
    at_seq: Annotated[
        int | None,
        typer.Option(
            "--at-seq", help="Fork at this message seq.", show_default="the whole history"
        ),
    ] = None,
    title: Annotated[str | None, typer.Option(help="The fork's title.")] = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Fork a session as it stood at --at-seq and print the fork's id.

    The parent is not changed; sessions list --parent lists its forks.
    """
    opts = resolve_options(ctx, url, user, admin, as_json)
    forked = call(
        opts, SessionManager.fork_session, session_id=session_id, at_seq=at_seq, title=title
    )
    show(opts, forked, forked.session_id)
