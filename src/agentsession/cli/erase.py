"""``agentsession erase --user USER``: erase a user's data, get it off the store's disk,
remove the user's API keys from the key store, and say what the operator must still do
(docs/security.md, "Erasure"). Declining the confirmation exits 1; no terminal to
answer on without ``--yes`` exits 2."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from ..service import Erasure
from .common import (
    JsonOpt,
    UrlOpt,
    UsageError,
    cli_errors,
    confirm,
    open_manager,
    require_database,
    resolve_options,
    show,
)
from .render import count
from .server import opened_keys

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
        help="The API key file to remove the user's keys from.",
        show_default="the key store `serve` reads: AGENTSESSION_KEYS_FILE, else the "
        "store's keys (AGENTSESSION_KEYS=store), else the file next to the SQLite database",
    ),
]


@cli_errors
def erase(
    ctx: typer.Context,
    user: TargetOpt = None,
    compact: CompactOpt = False,
    yes: YesOpt = False,
    url: UrlOpt = None,
    keys_file: KeysFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Erase every session of a user for good, then get it off the store's disk and
    remove the user's API keys; prints what was done and what the operator must still
    do (backups, replicas...).

    Asks first; without a terminal to answer on, pass --yes (else exit 2). A no exits 1.
    """
    opts = resolve_options(ctx, url, user, False, as_json)
    if opts.user is None:
        raise UsageError("--user is required: the user whose data to erase")
    require_database(opts.url)  # before the question: a mistyped path is not asked about
    if not yes and not confirm(f"erase every session of {opts.user}, for good?", "erase"):
        typer.echo("not confirmed (pass --yes): nothing erased", err=True)
        raise typer.Exit(1)
    # Opened before erasing: an untrusted key file stops the command, not half of it.
    with opened_keys(opts.url, keys_file) as (keys, where):
        with open_manager(opts) as sm:
            erasure = sm.erase_user(
                user_id=opts.principal, target_user_id=opts.user, admin=opts.admin, compact=compact
            )
            store_url = sm.store.url
        removed = keys.remove_user(opts.user)
    show(
        opts,
        _as_data(opts.user, store_url, erasure, (removed, where)),
        Text(_as_text(opts.user, store_url, erasure, (removed, where))),
    )


def _as_data(user: str, store_url: str, erasure: Erasure, keys: tuple[int, str]) -> dict[str, Any]:
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
        f"erased {user}: {count(erasure.sessions_deleted, 'session')} deleted, "
        f"{count(erasure.idempotency_keys_purged, 'idempotency key')} purged, "
        f"{count(erasure.shared_memory_deleted, 'shared-memory document')} deleted",
        f"{count(keys[0], 'API key')} of {user} removed from {keys[1]}",
        f"done by the store ({store_url}):",
        *(f"  - {step}" for step in erasure.store.done or ("nothing",)),
        "still to do by the operator:",
        *(f"  - {step}" for step in (*erasure.store.pending, *erasure.operator_steps)),
    ]
    return "\n".join(lines)
