"""The usage ledger's sums computed in Python, for the stores that keep the ledger as
rows without a query engine (memory, Redis): the same answer as the SQL store's
``GROUP BY`` (:meth:`~agentsession.stores.base.StoreTransaction.sum_usage`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..usage import KINDS
from .base import UsageGroup, UsageRow, UsageSum

__all__ = ["group_of", "sum_rows"]


def group_of(row: UsageRow, group_by: UsageGroup) -> str | None:
    """The group ``row`` falls in."""
    if group_by == "session":
        return row.session_id
    if group_by == "agent":
        return row.agent
    if group_by == "model":
        return row.entry.model
    if group_by == "day":
        return row.day
    return None


def sum_rows(
    rows: Iterable[UsageRow],
    *,
    session_id: str | None,
    agent: str | None,
    since: datetime | None,
    until: datetime | None,
    group_by: UsageGroup,
) -> list[UsageSum]:
    """The sums per ``(group, model)`` of the rows within the filters, ordered by group
    then model (None first)."""
    sums: dict[tuple[str | None, str | None], list[int]] = {}
    for row in rows:
        if (
            (session_id is not None and row.session_id != session_id)
            or (agent is not None and row.agent != agent)
            or (since is not None and row.at < since)
            or (until is not None and row.at >= until)
        ):
            continue
        key = (group_of(row, group_by), row.entry.model)
        counts = sums.setdefault(key, [0] * (len(KINDS) + 2))
        for i, kind in enumerate(KINDS):
            counts[i] += getattr(row.entry, kind)
        counts[-2] += row.runs
        counts[-1] += 1
    order = sorted(sums, key=lambda k: (k[0] is not None, k[0] or "", k[1] is not None, k[1] or ""))
    return [UsageSum(group, model, *sums[(group, model)]) for group, model in order]
