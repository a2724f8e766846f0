"""``agentsession export-keygen`` and ``agentsession export-verify``: the Ed25519 key
pair that signs exports (``agentsession export --sign``), and checking a signed export
(docs/export.md, "Signed exports"). Separate commands, as ``export`` reads its first
argument as a session id."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import ValidationError
from ..transfer.signing import generate_key_pair, signature_path, verify_export
from .common import cli_errors

__all__ = ["export_keygen", "export_verify"]


@cli_errors
def export_keygen(
    key: Annotated[Path, typer.Argument(help="The private key file to create (0600).")],
) -> None:
    """Make an Ed25519 key pair for signing exports: the private key at KEY, the
    public key at KEY.pub (give that one to whoever checks the exports)."""
    public = generate_key_pair(key)
    typer.echo(f"private key: {key}\npublic key: {public}")


@cli_errors
def export_verify(
    file: Annotated[Path, typer.Argument(help="A signed export.")],
    key: Annotated[Path, typer.Option("--key", help="The signer's public key file.")],
    signature: Annotated[
        Path | None, typer.Option(help="The signature file.", show_default="FILE.sig")
    ] = None,
) -> None:
    """Check an export against its signature and the signer's public key; exit 1 when
    the file changed since it was signed or another key signed it."""
    try:
        verify_export(file, key, signature)
    except ValidationError as exc:
        typer.echo(f"not verified: {exc.message}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"verified: {file} ({signature or signature_path(file)})")
