"""``agentsession erase --user USER``: erase a user's data, get it off the store's disk,
remove the user's API keys from the key file, and say what the operator must still do
(docs/security.md, "Erasure"). Declining the confirmation exits 1."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from ..http.keys import FileKeyStore, default_keys_file
from ..service import Erasure
from ..settings import Settings
from .common import (
    JsonOpt,
    UrlOpt,
    UsageError,
    cli_errors,
    open_manager,
    resolve_options,
    show,
)

__all__ = ["erase"]

TargetOpt = Annotated[
    str | None, typer.Option("--user", "-u", help="The user whose data to erase.")
]
CompactOpt = Annotated[
    bool,
    typer.Option(
        "--compact",
        help="Also rewrite the store's tables or files (PostgreSQL VACUUM FULL, MariaDB "
        "OPTIMIZE TABLE, SQLite VACUUM, Redis BGREWRITEAOF); blocks writers while it runs.",
    ),
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
KeysFileOpt = Annotated[
    str | None,
    typer.Option(
        "--keys-file",
        help="The API key file to remove the user's keys from (default: the one `serve` "
        "reads: AGENTSESSION_KEYS_FILE, else next to the SQLite database).",
    ),
]


@cli_errors
def erase(
    ctx: typer.Context, user: TargetOpt = None, compact: CompactOpt = False, yes: YesOpt = False,
    url: UrlOpt = None, keys_file: KeysFileOpt = None, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Erase every session of a user for good, then get it off the store's disk and
    remove the user's API keys; prints what was done and what the operator must still
    do (backups, replicas...). Exits 1 if the confirmation is declined."""
    opts = resolve_options(ctx, url, user, False, as_json)
    if opts.user is None:
        raise UsageError("--user is required: the user whose data to erase")
    if not yes and not _confirmed(f"erase every session of {opts.user}, for good?"):
        typer.echo("not confirmed (pass --yes): nothing erased", err=True)
        raise typer.Exit(1)
    # Checked before erasing: an untrusted key file stops the command, not half of it.
    keys = FileKeyStore(keys_file or default_keys_file(Settings(url=opts.url)))
    with open_manager(opts) as sm:
        erasure = sm.erase_user(
            user_id=opts.principal, target_user_id=opts.user, admin=opts.admin, compact=compact
        )
        store_url = sm.store.url
    removed = keys.remove_user(opts.user)
    show(
        opts,
        _as_data(opts.user, store_url, erasure, (removed, str(keys.path))),
        Text(_as_text(opts.user, store_url, erasure, (removed, str(keys.path)))),
    )


def _confirmed(question: str) -> bool:
    """Ask ``question``; no answer (end of input) is a no."""
    try:
        return typer.confirm(question)
    except typer.Abort:
        return False


def _as_data(
    user: str, store_url: str, erasure: Erasure, keys: tuple[int, str]
) -> dict[str, Any]:
    return {
        "user_id": user,
        "sessions_deleted": erasure.sessions_deleted,
        "idempotency_keys_purged": erasure.idempotency_keys_purged,
        "shared_memory_deleted": erasure.shared_memory_deleted,
        "api_keys_removed": {"count": keys[0], "keys_file": keys[1]},
        "store": {"url": store_url, "done": erasure.store.done, "pending": erasure.store.pending},
        "operator_steps": erasure.operator_steps,
    }


def _as_text(user: str, store_url: str, erasure: Erasure, keys: tuple[int, str]) -> str:
    lines = [
        f"erased {user}: {erasure.sessions_deleted} session(s) deleted, "
        f"{erasure.idempotency_keys_purged} idempotency key(s) purged, "
        f"{erasure.shared_memory_deleted} shared-memory document(s) deleted",
        f"{keys[0]} API key(s) of {user} removed from {keys[1]}",
        f"done by the store ({store_url}):",
        *(f"  - {step}" for step in erasure.store.done or ("nothing",)),
        "still to do by the operator:",
        *(f"  - {step}" for step in (*erasure.store.pending, *erasure.operator_steps)),
    ]
    return "\n".join(lines)
