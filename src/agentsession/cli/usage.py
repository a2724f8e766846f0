"""``agentsession usage``: the usage ledger's totals; ``agentsession budget``: budgets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from ..errors import ValidationError
from ..service import SessionManager
from . import render
from .common import (
    AdminOpt,
    AgentOpt,
    AllUsersOpt,
    JsonOpt,
    UrlOpt,
    UserOpt,
    call,
    cli_errors,
    new_app,
    resolve_options,
    show,
)

__all__ = ["budget_app", "usage"]

budget_app = new_app("Usage budgets of users and sessions (setting one: --admin).")

TimeOpt = Annotated[
    str | None, typer.Option(help="ISO 8601 date or time; without an offset, UTC (2026-03-01).")
]
SessionOpt = Annotated[str | None, typer.Option("--session", help="Only this session.")]
ForUserOpt = Annotated[
    str | None, typer.Option("--for-user", help="Whose user budget (default: yours).")
]


def _time(value: str | None, field: str) -> datetime | None:
    """The aware datetime an option names (naive: UTC)."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"--{field} is no ISO 8601 date or time", field=field) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@cli_errors
def usage(
    ctx: typer.Context,
    by: Annotated[
        str, typer.Option("--by", help="One total per session, agent, model or day (UTC).")
    ] = "session",
    since: TimeOpt = None,
    until: TimeOpt = None,
    session: SessionOpt = None,
    agent: AgentOpt = None,
    all_users: AllUsersOpt = False,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Token usage and cost of your finished runs, one total per session, agent, model
    or day (cost only with a price table: AGENTSESSION_PRICES_FILE)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    totals = call(
        opts,
        SessionManager.get_usage,
        group_by=by,
        since=_time(since, "since"),
        until=_time(until, "until"),
        session_id=session,
        agent=agent,
        all_users=all_users,
    )
    show(opts, totals, render.usage_table(by, totals))


@budget_app.command("show")
@cli_errors
def budget_show(
    ctx: typer.Context,
    session: SessionOpt = None,
    for_user: ForUserOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's or a session's budget and what is used of it."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    budget = call(opts, SessionManager.get_budget, target_user_id=for_user, session_id=session)
    show(opts, budget, render.budget_table(budget))


@budget_app.command("set")
@cli_errors
def budget_set(
    ctx: typer.Context,
    max_tokens: Annotated[int | None, typer.Option(help="Bound on total tokens.")] = None,
    max_cost: Annotated[
        float | None, typer.Option(help="Bound on cost (the price table's currency).")
    ] = None,
    session: SessionOpt = None,
    for_user: ForUserOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Set a user's or a session's budget (an operator's act: --admin)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    budget = call(
        opts,
        SessionManager.set_budget,
        target_user_id=for_user,
        session_id=session,
        max_tokens=max_tokens,
        max_cost=max_cost,
    )
    show(opts, budget, render.budget_table(budget))


@budget_app.command("clear")
@cli_errors
def budget_clear(
    ctx: typer.Context,
    session: SessionOpt = None,
    for_user: ForUserOpt = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove a user's or a session's budget (--admin)."""
    opts = resolve_options(ctx, url, user, admin, as_json)
    budget = call(opts, SessionManager.clear_budget, target_user_id=for_user, session_id=session)
    show(opts, budget, render.budget_table(budget))
