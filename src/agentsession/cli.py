"""The ``agentsession`` command line: inspect and manage sessions, run the demo.

Each command parses its options, makes one SessionManager call and prints the result
(rich tables, or JSON on stdout with ``--json``). Errors are one line on stderr and an
exit code from :data:`EXIT_CODES`; never a traceback. Sub-apps are registered in one
place, :func:`build_app`, so adding ``serve`` or ``keys`` is one line each.

Settings (``AGENTSESSION_URL``...) and the model environment variables
(``AGENTSESSION_MODEL``, ``AGENTSESSION_MODEL_NAME``, ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``) are read here and passed down explicitly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from . import cli_render as render
from .errors import (
    AgentSessionError,
    Conflict,
    IdempotencyKeyReused,
    NotFound,
    ValidationError,
    VersionConflict,
)
from .manager import SessionManager
from .settings import Settings
from .stores.registry import has_schema, open_store
from .stores.sqldialect import masked_url, parse_url

__all__ = ["EXIT_CODES", "build_app", "exit_code_for", "main"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: Error class -> process exit code; the first matching row wins (most specific first).
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (ValidationError, 5),
    (NotFound, 3),
    (Conflict, 4),
    (VersionConflict, 4),
    (IdempotencyKeyReused, 4),
    (AgentSessionError, 1),
)
EXIT_USAGE = 2


class UsageError(Exception):
    """The command line is incomplete (e.g. no principal); exit code 2."""


def exit_code_for(exc: BaseException) -> int:
    """The exit code for an error, from :data:`EXIT_CODES` (1 if none matches)."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    return next((code for cls, code in EXIT_CODES if isinstance(exc, cls)), 1)


def cli_errors(fn: F) -> F:
    """Turn AgentSessionError and UsageError into ``error: ...`` on stderr plus an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (AgentSessionError, UsageError) as exc:
            message = exc.message if isinstance(exc, AgentSessionError) else str(exc)
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(exit_code_for(exc)) from None

    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------- common options

UrlOpt = Annotated[
    str | None,
    typer.Option("--url", help="Store URL (default: AGENTSESSION_URL, else sqlite file)."),
]
UserOpt = Annotated[str | None, typer.Option("--user", "-u", help="Principal the call is made as.")]
AdminOpt = Annotated[bool, typer.Option("--admin", help="Act as admin across users.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
SessionArg = Annotated[str, typer.Argument(help="Session id (ses_...).")]


@dataclass(frozen=True)
class Options:
    """Resolved global + per-command options of one invocation."""

    url: str
    user: str | None
    admin: bool
    json: bool

    @property
    def principal(self) -> str:
        """The user id every call is made as; admins default to ``admin``."""
        if self.user is not None:
            return self.user
        if self.admin:
            return "admin"
        raise UsageError("--user is required (the principal the call is made as), or --admin")


def _options(
    ctx: typer.Context, url: str | None, user: str | None, admin: bool, as_json: bool
) -> Options:
    base = ctx.find_root().obj
    if not isinstance(base, Options):
        base = Options(url=Settings().url, user=None, admin=False, json=False)
    return Options(
        url=url if url is not None else base.url,
        user=user if user is not None else base.user,
        admin=admin or base.admin,
        json=as_json or base.json,
    )


def _manager(opts: Options) -> SessionManager:
    settings = Settings(url=opts.url)
    return SessionManager.from_url(settings.url, **settings.manager_options())


def _show(opts: Options, value: Any, table: Any) -> None:
    if opts.json:
        typer.echo(render.to_json(value))
    else:
        Console().print(table)


def _call(opts: Options, method: Callable[..., T], **kwargs: Any) -> T:
    """Open the store and make one SessionManager call as the principal, e.g.
    ``_call(opts, SessionManager.get_session, session_id=sid)``."""
    with _manager(opts) as sm:
        return method(sm, user_id=opts.principal, admin=opts.admin, **kwargs)


def _call_and_show(
    opts: Options, method: Callable[..., T], table: Callable[[T], Any], **kwargs: Any
) -> None:
    """:func:`_call`, then print the result: JSON with ``--json``, else ``table(result)``."""
    result = _call(opts, method, **kwargs)
    _show(opts, result, table(result))


def _root(
    ctx: typer.Context, url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Durable sessions for AI agents: inspect, manage, and run the restore demo."""
    ctx.obj = Options(
        url=url if url is not None else Settings().url, user=user, admin=admin, json=as_json
    )


# -------------------------------------------------------------------- sessions

sessions_app = typer.Typer(help="Read sessions and what is in them.", no_args_is_help=True)


@sessions_app.command("list")
@cli_errors
def sessions_list(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help="ACTIVE, CLOSED or EXPIRED.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent's sessions.")] = None,
    limit: Annotated[int, typer.Option(help="Page size.")] = 50,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the last page.")] = None,
    all_users: Annotated[bool, typer.Option("--all-users", help="Every user (admin).")] = False,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """List sessions, most recently updated first."""
    opts = _options(ctx, url, user, admin, as_json)
    page = _call(
        opts, SessionManager.list_sessions, status=status, agent=agent, limit=limit,
        cursor=cursor, all_users=all_users,
    )  # fmt: skip
    _show(opts, {"items": page.items, "next_cursor": page.next_cursor},
          render.sessions_table(page.items))  # fmt: skip
    if not opts.json and page.next_cursor is not None:
        typer.echo(f"more: --cursor {page.next_cursor}")


@sessions_app.command("show")
@cli_errors
def sessions_show(
    ctx: typer.Context, session_id: SessionArg,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Show one session's fields."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(opts, SessionManager.get_session, render.session_table, session_id=session_id)


@sessions_app.command("messages")
@cli_errors
def sessions_messages(
    ctx: typer.Context, session_id: SessionArg,
    limit: Annotated[int | None, typer.Option(help="Newest N messages.")] = None,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Show the conversation history in seq order."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(
        opts, SessionManager.get_messages, render.messages_table, session_id=session_id,
        limit=limit,
    )  # fmt: skip


@sessions_app.command("memory")
@cli_errors
def sessions_memory(
    ctx: typer.Context, session_id: SessionArg,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Show the working memory."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(
        opts, SessionManager.get_working_memory, render.memory_table, session_id=session_id
    )


@sessions_app.command("tools")
@cli_errors
def sessions_tools(
    ctx: typer.Context, session_id: SessionArg,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Show the tool history (what really ran)."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(opts, SessionManager.get_tool_history, render.tools_table, session_id=session_id)


@sessions_app.command("runs")
@cli_errors
def sessions_runs(
    ctx: typer.Context, session_id: SessionArg,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Show the runs with their status and step counts."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(opts, SessionManager.list_runs, render.runs_table, session_id=session_id)


@sessions_app.command("audit")
@cli_errors
def sessions_audit(
    ctx: typer.Context, session_id: SessionArg,
    limit: Annotated[int | None, typer.Option(help="At most N events.")] = None,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Show the audit log (who changed what, when)."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(
        opts, SessionManager.get_audit_log, render.audit_table, session_id=session_id, limit=limit
    )


# ------------------------------------------------------------------- lifecycle

ReasonOpt = Annotated[str | None, typer.Option(help="Why (kept in the audit log).")]


@cli_errors
def close(
    ctx: typer.Context, session_id: SessionArg, reason: ReasonOpt = None,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Close a session on purpose (history stays; restore re-opens it)."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(
        opts, SessionManager.close_session, render.session_table, session_id=session_id,
        reason=reason,
    )  # fmt: skip


@cli_errors
def restore(
    ctx: typer.Context, session_id: SessionArg,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Re-open a CLOSED (or recently EXPIRED) session and show what was restored."""
    opts = _options(ctx, url, user, admin, as_json)
    restored = _call(opts, SessionManager.restore_session, session_id=session_id)
    if opts.json:
        typer.echo(render.to_json(restored))
        return
    console = Console()
    console.print(render.session_table(restored.session))
    console.print(render.memory_table(restored.working_memory))
    console.print(render.runs_table(restored.runs))
    if restored.interrupted_run_ids:
        console.print(f"interrupted runs: {', '.join(restored.interrupted_run_ids)}")


@cli_errors
def expire(
    ctx: typer.Context, session_id: SessionArg, reason: ReasonOpt = None,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Expire a session now (policy ended it; distinct from close)."""
    opts = _options(ctx, url, user, admin, as_json)
    _call_and_show(
        opts, SessionManager.expire_session, render.session_table, session_id=session_id,
        reason=reason,
    )  # fmt: skip


@cli_errors
def delete(
    ctx: typer.Context, session_id: SessionArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: UrlOpt = None, user: UserOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Delete a session and all its content for good."""
    opts = _options(ctx, url, user, admin, as_json)
    if not yes and not typer.confirm(f"delete {session_id} and everything in it?"):
        raise UsageError("not confirmed (pass --yes)")
    _call(opts, SessionManager.delete_session, session_id=session_id)
    _show(opts, {"deleted": session_id}, f"deleted {session_id}")


@cli_errors
def sweep(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="At most this many sessions.")] = 1000,
    url: UrlOpt = None, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Expire idle sessions past their TTL and purge old idempotency keys."""
    opts = _options(ctx, url, None, False, as_json)
    with _manager(opts) as sm:
        result = sm.sweep_expired(limit=limit)
    data = {
        "expired_session_ids": result.expired_session_ids,
        "purged_idempotency_keys": result.purged_idempotency_keys,
    }
    text = (
        f"expired {len(result.expired_session_ids)} session(s), "
        f"purged {result.purged_idempotency_keys} idempotency key(s)"
    )
    _show(opts, data, text)


# -------------------------------------------------------------------------- db

db_app = typer.Typer(help="Database schema migrations.", no_args_is_help=True)


@db_app.command("upgrade")
@cli_errors
def db_upgrade(ctx: typer.Context, url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """Bring the database schema to the current revision. Redis and memory have none:
    the store is opened (URL, connection and Redis's durability check, as at start) and
    the command exits 0, so one deployment script fits every store."""
    from .stores import migrate

    opts = _options(ctx, url, None, False, as_json)
    if not has_schema(opts.url):
        shown = _check_schemaless(opts.url)
        _show(opts, {"url": shown, "revision": None}, "this store has no schema to migrate")
        return
    revision = migrate.upgrade(opts.url)
    shown = masked_url(parse_url(opts.url))
    _show(opts, {"url": shown, "revision": revision}, f"schema at revision {revision}")


def _check_schemaless(url: str) -> str:
    """Open and close a store without a schema (raising what its start would raise);
    return its URL with any password masked."""
    store = open_store(url)
    try:
        return str(store.url)
    finally:
        store.close()


@db_app.command("current")
@cli_errors
def db_current(ctx: typer.Context, url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """Show the database's schema revision and the one this code expects."""
    from .stores import migrate

    opts = _options(ctx, url, None, False, as_json)
    if not has_schema(opts.url):
        _check_schemaless(opts.url)
        data = {"current": None, "head": None, "up_to_date": True}
        _show(opts, data, "this store has no schema to migrate")
        return
    current, head = migrate.current_revision(opts.url), migrate.head_revision()
    data = {"current": current, "head": head, "up_to_date": current == head}
    _show(opts, data, f"current {current or '(none)'}, head {head}")


# ------------------------------------------------------------------ assembly


def build_app() -> typer.Typer:
    """Build the ``agentsession`` app: every command and sub-app is registered here."""
    app = typer.Typer(
        name="agentsession",
        help="Durable sessions for AI agents.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    app.add_typer(sessions_app, name="sessions")
    app.add_typer(db_app, name="db")
    from .cli_demo import demo, demo_continue

    for command in (close, restore, expire, delete, sweep, demo):
        app.command()(command)
    app.command("demo-continue", hidden=True)(demo_continue)
    from .cli_server import keys_app, serve

    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")
    return app


def main() -> None:
    """Console-script entry point (``agentsession``)."""
    build_app()()


if __name__ == "__main__":
    main()
