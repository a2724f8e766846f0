"""``agentsession erase --user USER``: erase a user's data, get it off the store's disk,
and say what the operator must still do (docs/security.md, "Erasure")."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from ..service import Erasure
from .common import (
    AdminOpt,
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


@cli_errors
def erase(
    ctx: typer.Context, user: TargetOpt = None, compact: CompactOpt = False, yes: YesOpt = False,
    url: UrlOpt = None, admin: AdminOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Erase every session of a user for good, then get it off the store's disk; prints
    what was done and what the operator must still do (backups, replicas...)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    if opts.user is None:
        raise UsageError("--user is required: the user whose data to erase")
    if not yes and not typer.confirm(f"erase every session of {opts.user}, for good?"):
        raise UsageError("not confirmed (pass --yes)")
    with open_manager(opts) as sm:
        erasure = sm.erase_user(
            user_id=opts.principal, target_user_id=opts.user, admin=opts.admin, compact=compact
        )
        store_url = sm.store.url
    show(
        opts, _as_data(opts.user, store_url, erasure), Text(_as_text(opts.user, store_url, erasure))
    )


def _as_data(user: str, store_url: str, erasure: Erasure) -> dict[str, Any]:
    return {
        "user_id": user,
        "sessions_deleted": erasure.sessions_deleted,
        "idempotency_keys_purged": erasure.idempotency_keys_purged,
        "store": {"url": store_url, "done": erasure.store.done, "pending": erasure.store.pending},
        "operator_steps": erasure.operator_steps,
    }


def _as_text(user: str, store_url: str, erasure: Erasure) -> str:
    lines = [
        f"erased {user}: {erasure.sessions_deleted} session(s) deleted, "
        f"{erasure.idempotency_keys_purged} idempotency key(s) purged",
        f"done by the store ({store_url}):",
        *(f"  - {step}" for step in erasure.store.done or ("nothing",)),
        "still to do by the operator:",
        *(f"  - {step}" for step in (*erasure.store.pending, *erasure.operator_steps)),
    ]
    return "\n".join(lines)
