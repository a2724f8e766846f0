"""``agentsession sessions ...``: read sessions and what is in them.

The two writes of the sub-app, ``rewind`` and ``fork``, live in
:mod:`agentsession.cli.history` and are registered here.
"""

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
    SessionArg,
    UrlOpt,
    UsageError,
    UserOpt,
    call,
    call_and_show,
    cli_errors,
    new_app,
    resolve_options,
    show,
    show_page,
)
from .history import fork, rewind

__all__ = ["sessions_app"]

sessions_app = new_app("Read sessions and what is in them; rewind or fork one.")


#: The filters of ``sessions list`` and ``sessions count``.
StatusOpt = Annotated[str | None, typer.Option(help="ACTIVE, CLOSED or EXPIRED.")]
ParentOpt = Annotated[
    str | None, typer.Option("--parent", help="Only the forks made from this session.")
]
MetaOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--meta",
        metavar="KEY=VALUE",
        help="Only sessions whose metadata has KEY with this VALUE, exactly (repeatable "
        "with other keys: all must match; 3 also matches a stored number 3, true a boolean).",
    ),
]


def _meta_filter(items: list[str] | None) -> dict[str, str] | None:
    """The ``--meta KEY=VALUE`` options as a metadata filter (None: none given).

    Raises:
        UsageError: an option without ``=``, or a key given twice.
    """
    if not items:
        return None
    wanted: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--meta takes KEY=VALUE, not {item!r}")
        if key in wanted:
            raise UsageError(f"--meta names the key {key!r} twice")
        wanted[key] = value
    return wanted


@sessions_app.command("list")
@cli_errors
def sessions_list(
    ctx: typer.Context,
    status: StatusOpt = None,
    agent: AgentOpt = None,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    all_users: AllUsersOpt = False,
    parent: ParentOpt = None,
    meta: MetaOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List sessions, most recently updated first."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts,
        SessionManager.list_sessions,
        status=status,
        agent=agent,
        limit=limit,
        cursor=cursor,
        all_users=all_users,
        parent_session_id=parent,
        metadata=_meta_filter(meta),
    )
    show_page(opts, page, render.sessions_table(page.items))


@sessions_app.command("count")
@cli_errors
def sessions_count(
    ctx: typer.Context,
    status: StatusOpt = None,
    agent: AgentOpt = None,
    all_users: AllUsersOpt = False,
    parent: ParentOpt = None,
    meta: MetaOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Count the sessions `sessions list` would list with the same filters (all pages);
    --json prints {"count": n}, as the HTTP API answers."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    count = call(
        opts,
        SessionManager.count_sessions,
        status=status,
        agent=agent,
        all_users=all_users,
        parent_session_id=parent,
        metadata=_meta_filter(meta),
    )
    show(opts, {"count": count}, str(count))


@sessions_app.command("show")
@cli_errors
def sessions_show(
    ctx: typer.Context,
    session_id: SessionArg,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show one session's fields."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    call_and_show(opts, SessionManager.get_session, render.session_table, session_id=session_id)


@sessions_app.command("messages")
@cli_errors
def sessions_messages(
    ctx: typer.Context,
    session_id: SessionArg,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show the newest page of the conversation history in seq order (--cursor: older)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts, SessionManager.get_messages, session_id=session_id, limit=limit, cursor=cursor
    )
    show_page(opts, page, render.messages_table(page.items))


@sessions_app.command("memory")
@cli_errors
def sessions_memory(
    ctx: typer.Context,
    session_id: SessionArg,
    at_seq: Annotated[
        int | None,
        typer.Option(
            "--at-seq",
            help="The memory as it stood at this message seq (0: before the first).",
            show_default="now",
        ),
    ] = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show the working memory, now or as of a message seq (--at-seq)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    title = "working memory" if at_seq is None else f"working memory at seq {at_seq}"
    call_and_show(
        opts,
        SessionManager.get_working_memory,
        lambda memory: render.memory_table(memory, title=title),
        session_id=session_id,
        at_seq=at_seq,
    )


@sessions_app.command("memory-versions")
@cli_errors
def sessions_memory_versions(
    ctx: typer.Context,
    session_id: SessionArg,
    before: Annotated[
        int | None,
        typer.Option("--before", help="Only versions in effect before this message seq."),
    ] = None,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a page of the working memory's history, newest first (each version with the
    first message seq it was in effect at; `sessions memory --at-seq` shows one whole)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts,
        SessionManager.list_memory_versions,
        session_id=session_id,
        before=before,
        limit=limit,
        cursor=cursor,
    )
    show_page(opts, page, render.memory_versions_table(page.items))


@sessions_app.command("tools")
@cli_errors
def sessions_tools(
    ctx: typer.Context,
    session_id: SessionArg,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a page of the tool history (what really ran), oldest first."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts, SessionManager.get_tool_history, session_id=session_id, limit=limit, cursor=cursor
    )
    show_page(opts, page, render.tools_table(page.items))


@sessions_app.command("runs")
@cli_errors
def sessions_runs(
    ctx: typer.Context,
    session_id: SessionArg,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a page of the runs, oldest first, with their status and step counts."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(opts, SessionManager.list_runs, session_id=session_id, limit=limit, cursor=cursor)
    show_page(opts, page, render.runs_table(page.items))


@sessions_app.command("steps")
@cli_errors
def sessions_steps(
    ctx: typer.Context,
    session_id: SessionArg,
    run_id: Annotated[str, typer.Argument(help="Run id (run_...).")],
    after: Annotated[int | None, typer.Option(help="Start after this step index.")] = None,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show one page of a run's steps, oldest first."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts,
        SessionManager.list_run_steps,
        session_id=session_id,
        run_id=run_id,
        after=after,
        limit=limit,
        cursor=cursor,
    )
    show_page(opts, page, render.steps_table(page.items))


@sessions_app.command("audit")
@cli_errors
def sessions_audit(
    ctx: typer.Context,
    session_id: SessionArg,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a page of the audit log (who changed what, when), oldest first."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts, SessionManager.get_audit_log, session_id=session_id, limit=limit, cursor=cursor
    )
    show_page(opts, page, render.audit_table(page.items))


@sessions_app.command("rewinds")
@cli_errors
def sessions_rewinds(
    ctx: typer.Context,
    session_id: SessionArg,
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a page of the rewinds, oldest first (sessions rewound: what one hid)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts, SessionManager.list_rewinds, session_id=session_id, limit=limit, cursor=cursor
    )
    show_page(opts, page, render.rewinds_table(page.items))


@sessions_app.command("rewound")
@cli_errors
def sessions_rewound(
    ctx: typer.Context,
    session_id: SessionArg,
    number: Annotated[int, typer.Argument(help="The rewind's number (sessions rewinds).")],
    limit: LimitOpt = None,
    cursor: CursorOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a page of the messages one rewind hid, oldest first, with their old seqs.

    A rewind made with --remove kept none: an empty page.
    """
    opts = resolve_options(ctx, url, user, admin, as_json)
    page = call(
        opts,
        SessionManager.get_rewound_messages,
        session_id=session_id,
        number=number,
        limit=limit,
        cursor=cursor,
    )
    show_page(opts, page, render.messages_table(page.items))


sessions_app.command("rewind")(rewind)
sessions_app.command("fork")(fork)
