"""``agentsession db upgrade|current``: database schema migrations.

The store is reached only through :mod:`agentsession.stores.revisions`, which also
handles the stores without a schema (``memory://``, ``redis://``).
"""

from __future__ import annotations

import typer

from ..stores import revisions
from .common import JsonOpt, UrlOpt, cli_errors, new_app, require_database, resolve_options, show

__all__ = ["db_app"]

db_app = new_app("Database schema migrations.")

NO_SCHEMA = "this store has no schema to migrate"


@db_app.command("upgrade")
@cli_errors
def db_upgrade(ctx: typer.Context, url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """Create the database or bring its schema to the current revision.

    Redis and memory have no schema: the store is opened (URL, connection and Redis's
    durability check, as at start) and the command exits 0, so one deployment script
    fits every store. This is the command that creates a missing SQLite file.
    """
    opts = resolve_options(ctx, url, None, False, as_json)
    require_database(opts.url, create=True)  # a file that is not a database is refused
    schema = revisions.upgrade_store(opts.url)
    text = f"schema at revision {schema.current}" if schema.has_schema else NO_SCHEMA
    show(opts, {"url": schema.url, "revision": schema.current}, text)


@db_app.command("current")
@cli_errors
def db_current(ctx: typer.Context, url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """Show the database's schema revision and the one this code expects."""
    opts = resolve_options(ctx, url, None, False, as_json)
    require_database(opts.url)
    schema = revisions.inspect_store(opts.url)
    data = {"current": schema.current, "head": schema.head, "up_to_date": schema.up_to_date}
    text = (
        f"current {schema.current or '(none)'}, head {schema.head}"
        if schema.has_schema
        else NO_SCHEMA
    )
    show(opts, data, text)
