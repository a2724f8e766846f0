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
import tempfile
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from ..settings import Settings
from .common import UrlOpt, UsageError, cli_errors, new_app, require_database, resolve_options

if TYPE_CHECKING:
    from ..apikeys import KeyStore

__all__ = ["keys_app", "opened_keys", "serve"]

KeysFileOpt = Annotated[
    str | None,
    typer.Option(
        "--keys-file",
        help="The key file.",
        show_default="AGENTSESSION_KEYS_FILE, else <database>.keys.json next to an SQLite "
        "database, else agentsession-keys.json",
    ),
]

#: prometheus-client's multiprocess directory (agentsession.http.metrics.MULTIPROC_ENV).
_MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

keys_app = new_app("Create, list and revoke API keys of the HTTP service.")


@contextlib.contextmanager
def opened_keys(url: str, keys_file: str | None) -> Iterator[tuple[KeyStore, str]]:
    """The key store ``serve --url URL`` uses, and where it is (for messages): the key
    file ``keys_file`` (else ``AGENTSESSION_KEYS_FILE``), else the session store's key
    table when keys are kept in the store (:func:`~agentsession.http.keys.keys_in_store`),
    else the key file next to the store. The store is closed when the block ends.

    Raises:
        UsageError: the key file would be the one next to an SQLite database that does
            not exist (a mistyped ``--url``), or the store is such a database.
        AgentSessionError: the store cannot be opened (its schema out of date...).
    """
    from ..http.keys import FileKeyStore, default_keys_file, keys_in_store, open_key_store
    from ..service import SessionManager

    settings = Settings().model_copy(update={"url": url})
    if keys_file is not None or not keys_in_store(settings):
        if keys_file is None and settings.keys_file is None:
            require_database(settings.url)
        store = FileKeyStore(keys_file or default_keys_file(settings))
        yield store, str(store.path)
        return
    require_database(settings.url)
    manager = SessionManager.from_url(settings.url, **settings.manager_options())
    try:
        yield open_key_store(settings, manager.store), f"the store {manager.store.url}"
    finally:
        manager.close()


@contextlib.contextmanager
def _keys(
    ctx: typer.Context, keys_file: str | None, url: str | None
) -> Iterator[tuple[KeyStore, str]]:
    """:func:`opened_keys` for ``--url`` (given after the command or before it, else
    ``AGENTSESSION_URL``, as ``serve --url`` reads it), its errors printed (exit 2)."""
    with (
        _key_errors(),
        opened_keys(resolve_options(ctx, url, None, False, False).url, keys_file) as found,
    ):
        yield found


@contextlib.contextmanager
def _key_errors() -> Iterator[None]:
    """Print an error of the key store (an untrusted file, an OS error, a store that
    cannot be opened, a bad option) and exit 2."""
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
    scope: str = typer.Option(
        "write", "--scope", help="read (reads only) or write (reads and writes)."
    ),
    expires_at: datetime | None = typer.Option(
        None,
        "--expires-at",
        formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z"],
        help="When the key stops working (ISO 8601 with a zone, e.g. 2027-01-01T00:00:00Z).",
    ),
    agents: list[str] | None = typer.Option(
        None,
        "--agent",
        help="Limit the key to this agent's sessions (repeat for several; default: every agent).",
    ),
    keys_file: KeysFileOpt = None,
    url: UrlOpt = None,
) -> None:
    """Create a key and print its token once (only its SHA-256 hash is stored); exit 2
    if the key store cannot be used (a key file another user could have written, a
    store that cannot be opened) or an option is invalid, or if the key would go next
    to an SQLite database that does not exist (create the database first, or give
    --keys-file)."""
    with _keys(ctx, keys_file, url) as (store, where), _key_errors():
        key, token = store.create(
            user_id=user,
            admin=admin,
            name=name,
            scope=scope,
            expires_at=expires_at,
            agents=agents or None,
        )
    typer.echo(token)
    role = "admin" if admin else "user"
    limit = "" if key.agents is None else f", agents {','.join(key.agents)}"
    typer.echo(
        f"key {key.key_id} for {user} ({role}, {key.scope}{limit}) stored in {where}; "
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
    """Revoke a key; requests with it are refused within about a second (a key file)
    or AGENTSESSION_KEYS_CACHE_SECONDS (the store, 5 s by default) on every instance.
    Exit 1 if there is no such active key, 2 if the key store cannot be used or would
    be next to an SQLite database that does not exist."""
    with _keys(ctx, keys_file, url) as (store, where), _key_errors():
        revoked = store.revoke(key_id.split(".", 1)[0])
    if not revoked:
        typer.echo(f"no active key {key_id!r} in {where}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {key_id.split('.', 1)[0]}")


@keys_app.command("list")
@cli_errors
def keys_list(ctx: typer.Context, keys_file: KeysFileOpt = None, url: UrlOpt = None) -> None:
    """List keys, one a line, tab-separated: id, user, role, created, state (active,
    expired or revoked), scope, name, last used, agents (comma-separated; "*": every
    agent) (never
    tokens); or one line naming the key store when it holds none; exit 2 if the key
    store cannot be used or would be next to an SQLite database that does not exist."""
    with _keys(ctx, keys_file, url) as (store, where), _key_errors():
        keys = store.list()
    if not keys:
        typer.echo(f"no keys in {where}", err=True)
    for key in keys:
        if key.revoked_at:
            state = f"revoked {key.revoked_at}"
        else:
            state = "active" if key.usable() else f"expired {key.expires_at}"
        role = "admin" if key.admin else "user"
        fields = [key.key_id, key.user_id, role, key.created_at, state, key.scope]
        fields += [key.name or "-", key.last_used_at or "-", ",".join(key.agents or ("*",))]
        typer.echo("\t".join(fields))


@keys_app.command("import")
@cli_errors
def keys_import(
    ctx: typer.Context,
    path: str = typer.Argument(..., help="The key file to import (FileKeyStore's JSON)."),
    keys_file: KeysFileOpt = None,
    url: UrlOpt = None,
) -> None:
    """Copy every key of a key file (revoked ones too, hashes only) into the key store
    that `serve` uses, keeping ids, users, scopes and times; keys already there are
    left as they are. Prints how many were imported and skipped; exit 2 if the file is
    not a trusted key file or the key store cannot be used."""
    from ..http.keys import FileKeyStore

    with _key_errors():
        found = FileKeyStore(path).list()
    with _keys(ctx, keys_file, url) as (store, where), _key_errors():
        added = sum(store.add(key) for key in found)
    typer.echo(f"imported {added} keys into {where}; {len(found) - added} were there already")


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
    """Open the store and the key store once, as each worker will, so that a bad
    setting (a short tombstone key, an unsafe database directory, a schema out of date)
    is one ``error:`` line and an exit code here, not a traceback from every worker;
    warn on stderr when the key store holds no active key (every request would be a
    401), naming the command that makes one.

    Raises:
        typer.Exit: code 2, the key file is not a key file or is not trusted.
        AgentSessionError: as :meth:`SessionManager.from_url` raises it.
    """
    from ..http.keys import keys_in_store
    from ..service import SessionManager

    with _key_errors(), opened_keys(settings.url, None) as (keys, where):  # bad key file: exit 2
        active = any(key.usable() for key in keys.list())
    SessionManager.from_url(settings.url, **settings.manager_options()).close()
    if not active:
        make = "agentsession keys create --user USER"
        if not keys_in_store(settings):
            make += f" --keys-file {shlex.quote(where)}"
        typer.echo(
            f"warning: no API key in {where}: every request will be answered 401. "
            f"Create one with: {make}",
            err=True,
        )


def _metrics_dir(settings: Settings, workers: int) -> tempfile.TemporaryDirectory[str] | None:
    """With ``/metrics`` on and several workers, a fresh directory for
    prometheus-client's multiprocess mode, named in ``PROMETHEUS_MULTIPROC_DIR`` for the
    workers (one the operator set is kept: None); removed when ``serve`` ends."""
    if settings.metrics_token is None or workers == 1 or os.environ.get(_MULTIPROC_ENV):
        return None
    made = tempfile.TemporaryDirectory(prefix="agentsession-metrics-")
    os.environ[_MULTIPROC_ENV] = made.name
    return made


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
    # Each worker reads it: with several, failed authentications are counted in the store.
    os.environ["AGENTSESSION_WORKERS"] = str(worker_count)
    metrics_dir = _metrics_dir(settings, worker_count)
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
    if metrics_dir is not None:
        metrics_dir.cleanup()
