"""``agentsession keyring create|rotate|status``: the keyring that seals stored content.

Registered in :mod:`agentsession.cli.app` with ``app.add_typer(keyring_app,
name="keyring")``. The file is ``--file``, else ``AGENTSESSION_KEYRING_FILE``
(docs/security.md, "Encryption at rest").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

import typer

from ..settings import Settings
from .common import UsageError, cli_errors, new_app

__all__ = ["keyring_app"]

KeyringFileOpt = Annotated[
    str | None,
    typer.Option("--file", help="The keyring file.", show_default="AGENTSESSION_KEYRING_FILE"),
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
