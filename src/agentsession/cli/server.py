"""CLI commands of the HTTP service: ``agentsession serve`` and ``agentsession keys``.

Registered in :mod:`agentsession.cli.app` with::

    app.add_typer(keys_app, name="keys")
    app.command("serve")(serve)

Both read :class:`~agentsession.settings.Settings` (``AGENTSESSION_*``) for anything
not given as an option.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from ..settings import Settings
from .common import UrlOpt, UsageError, cli_errors, new_app, require_database, resolve_options

if TYPE_CHECKING:
    from ..http.keys import FileKeyStore

__all__ = ["keys_app", "serve"]

KeysFileOpt = Annotated[
    str | None,
    typer.Option(
        "--keys-file",
        help="The key file.",
        show_default="AGENTSESSION_KEYS_FILE, else <database>.keys.json next to an SQLite "
        "database, else agentsession-keys.json",
    ),
]

keys_app = new_app("Create, list and revoke API keys of the HTTP service.")


def _key_store(ctx: typer.Context, keys_file: str | None, url: str | None) -> FileKeyStore:
    """The key file: ``--keys-file``, else the one next to the store ``--url`` names
    (given after the command or before it, else ``AGENTSESSION_URL``), as ``serve
    --url`` reads it.

    Raises:
        UsageError: the key file would be the one next to an SQLite database that does
            not exist (a mistyped ``--url``): listing it would show nothing and
            creating a key would file it beside no database.
    """
    from ..http.keys import FileKeyStore, default_keys_file

    settings = Settings()
    settings = settings.model_copy(
        update={"url": resolve_options(ctx, url, None, False, False).url}
    )
    if keys_file is None and settings.keys_file is None:
        require_database(settings.url)
    return FileKeyStore(keys_file or default_keys_file(settings))


@contextlib.contextmanager
def _key_errors() -> Iterator[None]:
    """Print an error of the key file (an untrusted file, an OS error) and exit 2."""
    from ..errors import AgentSessionError

    try:
        yield
    except AgentSessionError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None


@keys_app.command("create")
@cli_errors
def keys_create(
    ctx: typer.Context,
    user: str = typer.Option(..., "--user", help="The user the key acts as."),
    admin: bool = typer.Option(False, "--admin", help="May act on every user's sessions."),
    name: str | None = typer.Option(None, "--name", help="A label, e.g. the machine."),
    keys_file: KeysFileOpt = None,
    url: UrlOpt = None,
) -> None:
    """Create a key and print its token once (only its SHA-256 hash is stored); exit 2
    if the key file could have been written by another user, or if it would go next
    to an SQLite database that does not exist (create the database first, or give
    --keys-file)."""
    with _key_errors():
        store = _key_store(ctx, keys_file, url)
        key, token = store.create(user_id=user, admin=admin, name=name)
    typer.echo(token)
    role = "admin" if admin else "user"
    typer.echo(
        f"key {key.key_id} for {user} ({role}) stored in {store.path}; "
        "the token above is shown only now",
        err=True,
    )


@keys_app.command("revoke")
@cli_errors
def keys_revoke(
    ctx: typer.Context,
    key_id: str = typer.Argument(..., help="The key id (the token's part before the dot)."),
    keys_file: KeysFileOpt = None,
    url: UrlOpt = None,
) -> None:
    """Revoke a key; requests with it are refused within about a second. Exit 1 if
    there is no such active key, 2 if the key file is not trusted or would be next to
    an SQLite database that does not exist."""
    with _key_errors():
        store = _key_store(ctx, keys_file, url)
        revoked = store.revoke(key_id.split(".", 1)[0])
    if not revoked:
        typer.echo(f"no active key {key_id!r} in {store.path}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {key_id.split('.', 1)[0]}")


@keys_app.command("list")
@cli_errors
def keys_list(ctx: typer.Context, keys_file: KeysFileOpt = None, url: UrlOpt = None) -> None:
    """List keys (ids, users, roles; never tokens), or one line naming the key file
    when it holds none; exit 2 if the key file is not trusted or would be next to an
    SQLite database that does not exist."""
    with _key_errors():
        store = _key_store(ctx, keys_file, url)
        keys = store.list()
    if not keys:
        typer.echo(f"no keys in {store.path}", err=True)
    for key in keys:
        state = f"revoked {key.revoked_at}" if key.revoked_at else "active"
        role = "admin" if key.admin else "user"
        typer.echo(f"{key.key_id}\t{key.user_id}\t{role}\t{key.created_at}\t{state}")


def _check_listen(host: str, port: int) -> None:
    """Bind ``host:port`` once and let it go, so that a port in use or a host that is no
    address of this machine is one ``error:`` line and exit 1 here, not uvicorn's log
    lines and its exit 3 (the code ``not found`` has here). A port taken between this
    check and uvicorn's bind still ends as uvicorn ends.

    Raises:
        typer.Exit: code 1, the address cannot be listened on.
    """
    try:
        socket.create_server((host, port)).close()
    except OSError as exc:  # socket.gaierror (a bad host) is an OSError too
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None


def _preflight(settings: Settings) -> None:
    """Open the store and the key file once, as each worker will, so that a bad setting
    (a short tombstone key, an unsafe database directory, a schema out of date) is one
    ``error:`` line and an exit code here, not a traceback from every worker; warn on
    stderr when the key file holds no active key (every request would be a 401).

    Raises:
        typer.Exit: code 2, the key file is not a key file or is not trusted.
        AgentSessionError: as :meth:`SessionManager.from_url` raises it.
    """
    from ..http.keys import open_key_store
    from ..service import SessionManager

    with _key_errors():  # a key file that is not one, or untrusted: exit 2
        keys = open_key_store(settings)
        active = any(key.revoked_at is None for key in keys.list())
    SessionManager.from_url(settings.url, **settings.manager_options()).close()
    if not active:
        path = shlex.quote(str(keys.path))
        typer.echo(
            f"warning: no API key in {keys.path}: every request will be answered 401. "
            f"Create one with: agentsession keys create --user USER --keys-file {path}",
            err=True,
        )


def _checked(value: int | None, name: str, low: int, high: int | None, settings: Settings) -> int:
    """The ``--NAME`` option, else the ``AGENTSESSION_NAME`` setting, checked to be at
    least ``low`` and at most ``high`` (None: no upper bound) before anything starts:
    uvicorn takes a port above 65535 modulo 65536 while printing the one it was given,
    and fails on a negative one only once started.

    Raises:
        UsageError: out of range; the message names where the value came from.
    """
    chosen = value if value is not None else getattr(settings, name)
    if chosen < low or (high is not None and chosen > high):
        source = f"--{name}" if value is not None else f"AGENTSESSION_{name.upper()}"
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise UsageError(f"{source} must be {bounds}, not {chosen}")
    return int(chosen)


def _setting_default(name: str) -> str:
    """``[default: ...]`` text of an option that falls back on a setting."""
    return f"AGENTSESSION_{name.upper()}, else {Settings.model_fields[name].default}"


@cli_errors
def serve(
    ctx: typer.Context,
    host: str | None = typer.Option(
        None, "--host", help="Address to listen on.", show_default=_setting_default("host")
    ),
    port: int | None = typer.Option(
        None,
        "--port",
        help="TCP port to listen on, 1 to 65535.",
        show_default=_setting_default("port"),
    ),
    workers: int | None = typer.Option(
        None, "--workers", help="Worker processes.", show_default=_setting_default("workers")
    ),
    url: UrlOpt = None,
) -> None:
    """Run the HTTP service (uvicorn; errors answered as problem+json, no request
    content in its log).

    Warns at start when the key file holds no API key, since every request needs one.
    """
    try:
        import uvicorn
    except ImportError:
        typer.echo("the HTTP service needs: pip install 'agentsession[server]'", err=True)
        raise typer.Exit(2) from None
    # Workers are separate processes that build their own Settings from the env; the
    # URL is --url, else the global --url, else AGENTSESSION_URL (resolved as such).
    os.environ["AGENTSESSION_URL"] = resolve_options(ctx, url, None, False, False).url
    from ..http.logs import uvicorn_log_config
    from ..http.wire import PROTOCOL

    settings = Settings()
    listen_port = _checked(port, "port", 1, 65535, settings)
    worker_count = _checked(workers, "workers", 1, None, settings)
    # With auto-migrate the service creates a missing database and its schema.
    require_database(settings.url, create=settings.auto_migrate)
    listen_host = host or settings.host
    _check_listen(listen_host, listen_port)
    _preflight(settings)
    uvicorn.run(
        "agentsession.http.app:create_app",
        factory=True,
        host=listen_host,
        port=listen_port,
        workers=worker_count,
        # The client address is the socket peer: the failed-auth limit counts per
        # address, and a forwarded-for header is the client's to forge.
        proxy_headers=False,
        # Invalid HTTP and oversized header sections answered as problem+json.
        http=PROTOCOL,
        # No WebSocket routes: an upgrade request is plain HTTP (a 404 problem), never
        # uvicorn's text/plain handshake refusal, which logs the path and query string.
        ws="none",
        # Our access log (agentsession.access) prints no path or query string.
        access_log=False,
        log_config=uvicorn_log_config(),
    )
