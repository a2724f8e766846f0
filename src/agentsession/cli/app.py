"""The ``agentsession`` command: the typer app, its global options and every sub-app.

Commands and sub-apps are registered in one place, :func:`build_app`, so adding one is
one line here and a module of its own next to this one.
"""

from __future__ import annotations

import inspect

import typer

from ..settings import load_settings
from .audit import audit_app
from .changes import changes
from .common import EXIT_USAGE, AdminOpt, JsonOpt, Options, UrlOpt, UserOpt, new_app
from .db import db_app
from .demo import demo, demo_continue
from .erase import erase
from .keyring import encrypt, keyring_app
from .lifecycle import close, delete, expire, restore, sweep
from .search import search
from .server import keys_app, serve
from .sessions import sessions_app
from .signing import export_keygen, export_verify
from .trace import trace_app
from .transfer import export, import_app
from .ui import ui
from .usage import budget_app, usage

__all__ = ["build_app", "main"]


def _root(
    ctx: typer.Context,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Durable sessions for AI agents: inspect, manage, and run the restore demo."""
    # Every command (serve too) reads the settings: a bad AGENTSESSION_* value is
    # reported here once, as a usage error, before any command runs.
    try:
        settings = load_settings()
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    ctx.obj = Options(
        url=url if url is not None else settings.url, user=user, admin=admin, json=as_json
    )


def build_app() -> typer.Typer:
    """Build the ``agentsession`` app: every command and sub-app is registered here.

    Returns:
        A new typer app (call it to run the command line).
    """
    app = new_app(
        "Durable sessions for AI agents.", name="agentsession", pretty_exceptions_enable=False
    )
    app.callback()(_root)
    app.add_typer(sessions_app, name="sessions")
    app.add_typer(db_app, name="db")
    for command in (close, restore, expire, delete, erase, sweep, demo):
        app.command()(command)
    app.command("demo-continue", hidden=True)(demo_continue)
    app.command("changes")(changes)
    app.command("serve")(serve)
    app.command("ui")(ui)
    app.command("search")(search)
    app.command("usage")(usage)
    app.add_typer(budget_app, name="budget")
    app.command("encrypt")(encrypt)
    app.add_typer(keys_app, name="keys")
    app.add_typer(keyring_app, name="keyring")
    app.add_typer(audit_app, name="audit")
    app.command("export")(export)
    app.command("export-keygen")(export_keygen)
    app.command("export-verify")(export_verify)
    app.add_typer(import_app, name="import")
    app.add_typer(trace_app, name="trace")
    _whole_summaries(app)
    return app


def _whole_summaries(app: typer.Typer) -> None:
    """List every command under its docstring's whole first paragraph: click otherwise
    cuts the summary at the first sentence or about 45 characters, with "..."."""
    for info in app.registered_commands:
        doc = inspect.getdoc(info.callback) if info.callback is not None else None
        if info.short_help is None and doc:
            info.short_help = " ".join(doc.split("\n\n", 1)[0].split())
    for group in app.registered_groups:
        if group.typer_instance is not None:
            _whole_summaries(group.typer_instance)


def main() -> None:
    """Console-script entry point (``agentsession``, ``python -m agentsession``)."""
    build_app()()
