"""``agentsession keyring create|rotate|status|reencrypt`` and ``agentsession
encrypt``: the keyring that seals stored content, and the passes that seal a store.

Registered in :mod:`agentsession.cli.app` with ``app.add_typer(keyring_app,
name="keyring")`` and ``app.command("encrypt")(encrypt)``. The file is ``--file``,
else ``AGENTSESSION_KEYRING_FILE`` (docs/security.md, "Encryption at rest").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

import typer

from ..crypto.marker import PassKind
from ..settings import Settings
from .common import UrlOpt, UsageError, cli_errors, new_app, require_database, resolve_options

__all__ = ["encrypt", "keyring_app"]

KeyringFileOpt = Annotated[
    str | None,
    typer.Option("--file", help="The keyring file.", show_default="AGENTSESSION_KEYRING_FILE"),
]

BatchOpt = Annotated[
    int, typer.Option("--batch", min=1, help="Sessions (or documents, records) per batch.")
]

keyring_app = new_app("Create, rotate and show the keyring that seals stored content.")


def _path(file: str | None) -> str:
    """The keyring file: ``--file``, else the setting.

    Raises:
        UsageError: neither is given.
    """
    path = file or Settings().keyring_file
    if not path:
        raise UsageError("no keyring file: give --file or set AGENTSESSION_KEYRING_FILE")
    return path


@contextlib.contextmanager
def _keyring_errors() -> Iterator[None]:
    """Print a keyring error (missing, invalid, untrusted file) and exit 2."""
    from ..errors import AgentSessionError

    try:
        yield
    except AgentSessionError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None


@keyring_app.command("create")
@cli_errors
def keyring_create(file: KeyringFileOpt = None) -> None:
    """Create a keyring file (mode 0600) and its data key file (<file>.datakeys);
    exit 2 if the file exists (a keyring is never overwritten) or its directory could
    be written by another user. Back both files up apart from the database."""
    from ..crypto import Keyring

    path = _path(file)
    with _keyring_errors():
        ring = Keyring.create(path)
    typer.echo(f"created keyring {ring.path} for store {ring.store_id}")


@keyring_app.command("rotate")
@cli_errors
def keyring_rotate(
    file: KeyringFileOpt = None,
    data_keys: bool = typer.Option(
        False, "--data-keys", help="Give every user a new data key instead (lazily)."
    ),
) -> None:
    """Make a new key-encryption key and re-wrap every user's data key with it (the
    stored content is not rewritten); the old one is then dropped. Safe to run again
    after an interruption. With --data-keys, give every user a new data key instead:
    new writes use it, what is stored stays readable with the old ones. Exit 2 if the
    keyring cannot be opened."""
    from ..crypto import Keyring

    with _keyring_errors():
        ring = Keyring.open(_path(file))
        if data_keys:
            typer.echo(f"{ring.rotate_data_keys()} users got a new data key")
            return
        kek = ring.rotate()
        status = ring.status()
    typer.echo(f"active key-encryption key {kek}; {status.data_keys} data keys re-wrapped")


@keyring_app.command("status")
@cli_errors
def keyring_status(file: KeyringFileOpt = None) -> None:
    """Show the keyring's store id and key counts (never key material); exit 2 if it
    cannot be opened."""
    from ..crypto import Keyring

    with _keyring_errors():
        status = Keyring.open(_path(file)).status()
    typer.echo(f"store\t{status.store_id}")
    typer.echo(f"active key-encryption key\t{status.active_kek}")
    typer.echo(f"key-encryption keys\t{status.keks}")
    typer.echo(f"users with data keys\t{status.users}")
    typer.echo(f"data keys\t{status.data_keys}")
    typer.echo(f"data keys wrapped by an old key-encryption key\t{status.wrapped_by_old_kek}")
    typer.echo(f"old data keys (kept until a reencrypt pass)\t{status.data_keys - status.users}")
    typer.echo(f"sealing pass in progress\t{status.sealing_pass or 'none'}")


@keyring_app.command("reencrypt")
@cli_errors
def keyring_reencrypt(
    ctx: typer.Context, file: KeyringFileOpt = None, url: UrlOpt = None, batch: BatchOpt = 100
) -> None:
    """Rewrite every value sealed with an old data key (after `keyring rotate
    --data-keys`) under its user's newest key, online, in batches; then drop the old
    data keys. Stopped anywhere, run it again: it resumes after the last batch done.
    Exit 2 if the keyring cannot be opened or a value does not open."""
    _sealing_pass(ctx, file, url, batch, "reencrypt", declare_only=False)


@cli_errors
def encrypt(
    ctx: typer.Context,
    file: KeyringFileOpt = None,
    url: UrlOpt = None,
    batch: BatchOpt = 100,
    declare: bool = typer.Option(
        False,
        "--declare",
        help="Only declare the pass (reads accept plaintext from now on); run it later.",
    ),
    compact: bool = typer.Option(
        False,
        "--compact",
        help="Once the pass is complete, rewrite the store's tables or files so the old "
        "plaintext leaves them (as erase --compact); blocks writers while it runs.",
    ),
) -> None:
    """Encrypt a plaintext store with the keyring, online, in batches: every content
    value is read and written back sealed. From the start of the pass until it
    completes, every process with this keyring also reads plaintext values; then reads
    fail closed again. Stopped anywhere, run it again: it resumes after the last batch
    done. Exit 2 if the keyring cannot be opened or a value does not open."""
    _sealing_pass(ctx, file, url, batch, "encrypt", declare_only=declare, compact=compact)


def _sealing_pass(
    ctx: typer.Context,
    file: str | None,
    url: str | None,
    batch: int,
    kind: PassKind,
    *,
    declare_only: bool,
    compact: bool = False,
) -> None:
    """Run (or resume, or only declare) a sealing pass over the store at ``url``;
    ``compact``: then rewrite the store's files (:meth:`SessionStore.scrub`)."""
    from .. import SessionManager
    from ..stores.sealed import SealedStore
    from ..stores.sealpass import declare, run_pass

    opts = resolve_options(ctx, url, None, False, False)
    settings = Settings(url=opts.url)
    require_database(opts.url)
    with _keyring_errors():
        options = {**settings.manager_options(), "keyring": _path(file)}
        with SessionManager.from_url(settings.url, **options) as sm:
            store = sm.store
            assert isinstance(store, SealedStore)
            if declare_only:
                marker = declare(store, kind)
                typer.echo(f"{marker.kind} pass declared at {marker.started_at}")
                return
            report = run_pass(
                store,
                kind,
                batch=batch,
                on_batch=lambda m: typer.echo(f"{m.phase}: {m.done} done", err=True),
            )
            if compact:
                for step in store.scrub(compact=True).done:
                    typer.echo(step)
    retired = (
        f"; old data keys of {report.retired_users} users dropped" if kind == "reencrypt" else ""
    )
    typer.echo(f"{kind} pass complete: {report.rewritten} items rewritten by this run{retired}")
