"""``agentsession ui``: the inspector on a store, served on this machine only.

Registered in :mod:`agentsession.cli.app` with ``app.command("ui")(ui)``.

The store URL is opened as every command opens it (:func:`.common.open_manager`: an
SQLite file must exist and be a database), and served by the service's own app
(:func:`agentsession.http.app.create_app`) on ``127.0.0.1``. Nobody else can log in:
the app's only key lives in this process (an admin key of the local user, who can read
the store's file anyway), and the URL printed first on stdout holds a one-time ticket
that the first visit trades for the key's cookie.
"""

from __future__ import annotations

import socket
import threading
import webbrowser
from urllib.parse import quote

import typer

from .common import UrlOpt, UsageError, cli_errors, open_manager, resolve_options

__all__ = ["ui"]

#: The only address the local inspector listens on.
HOST = "127.0.0.1"
#: The principal of the local inspector's key: an admin, so every user's sessions show.
LOCAL_USER = "local"


def _listen(port: int) -> socket.socket:
    """A socket listening on ``HOST:port`` (0: a free port).

    Raises:
        typer.Exit: code 1, the port cannot be listened on (one ``error:`` line).
    """
    try:
        return socket.create_server((HOST, port))
    except OSError as exc:
        typer.echo(f"error: cannot listen on {HOST}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None


@cli_errors
def ui(
    ctx: typer.Context,
    url: UrlOpt = None,
    port: int = typer.Option(
        0, "--port", min=0, max=65535, help="TCP port on 127.0.0.1; 0 picks a free one."
    ),
    no_browser: bool = typer.Option(False, "--no-browser", help="Do not open a browser."),
    session: str | None = typer.Option(
        None, "--session", help="Open this session's page (a session id) after login."
    ),
) -> None:
    """Open the inspector on a store: its pages served on 127.0.0.1 only, at the URL
    printed first on stdout (with a one-time login ticket; with --session it opens that
    session), opened in a browser unless --no-browser. Ctrl-C stops it."""
    try:
        import uvicorn

        from ..http.app import create_app
        from ..http.keys import MemoryKeyStore
        from ..http.logs import uvicorn_log_config
        from ..http.wire import PROTOCOL
        from ..settings import Settings
        from ..ui import local_tickets
    except ImportError:
        typer.echo("the inspector needs: pip install 'agentsession[server]'", err=True)
        raise typer.Exit(2) from None
    opts = resolve_options(ctx, url, None, False, False)
    if opts.url.startswith(("http://", "https://")):
        raise UsageError(
            f"{opts.url} is a service: it serves its own inspector at "
            f"{opts.url.rstrip('/')}/ui/ (log in with an API key)"
        )
    manager = open_manager(opts)
    try:
        keys = MemoryKeyStore()
        token = keys.create(user_id=LOCAL_USER, admin=True, name="agentsession ui")[1]
        app = create_app(manager, Settings(url=opts.url), keys=keys)
        ticket = local_tickets(app).issue(token)
        sock = _listen(port)
        address = f"http://{HOST}:{sock.getsockname()[1]}/ui/login?ticket={ticket}"
        if session is not None:
            address += f"&session={quote(session, safe='')}"
        typer.echo(address)
        typer.echo("the inspector is served on this machine only; Ctrl-C stops it", err=True)
        if not no_browser:
            threading.Timer(0.5, webbrowser.open, [address]).start()
        config = uvicorn.Config(
            app, http=PROTOCOL, ws="none", access_log=False, log_config=uvicorn_log_config()
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        manager.close()
