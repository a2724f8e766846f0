"""The usage ledger and budgets on the SQL store: the ``usage_ledger``,
``user_budgets`` and ``session_budgets`` tables.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`UsageOps` as a base, as it takes one class per aggregate. Sums are
one ``GROUP BY`` over the ledger's index on ``(user_id, at)`` (or ``(session_id, at)``
for one session), reading the rows in scope and no other table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import Budget
from ...usage import KINDS
from ..base import UsageGroup, UsageRow, UsageSum
from .dialect import translated
from .schema import session_budgets, usage_ledger, user_budgets

__all__ = ["UsageOps"]

_L = usage_ledger
_GROUP_COLUMN = {
    "session": _L.c.session_id,
    "agent": _L.c.agent,
    "model": _L.c.model,
    "day": _L.c.day,
}


#: The condition of each filter of a sum, its value bound per call.
_FILTERS = {
    "user_id": _L.c.user_id == sa.bindparam("user_id"),
    "session_id": _L.c.session_id == sa.bindparam("session_id"),
    "agent": _L.c.agent == sa.bindparam("agent"),
    "since": _L.c.at >= sa.bindparam("since"),
    "until": _L.c.at < sa.bindparam("until"),
}


@functools.cache
def _sum_statement(group_by: UsageGroup, filters: tuple[str, ...]) -> sa.Select[Any]:
    """The sum of the ledger by ``group_by`` (and model) under ``filters`` (names of
    :data:`_FILTERS`), built once per shape: building it and its cache key costs
    several times what running it does on a small ledger."""
    group: Any = sa.null() if group_by is None else _GROUP_COLUMN[group_by]
    stmt = sa.select(
        group.label("grp"),
        _L.c.model,
        *(sa.func.coalesce(sa.func.sum(_L.c[kind]), 0) for kind in (*KINDS, "runs")),
        sa.func.count(),
    )
    keys = [_L.c.model] if group_by is None else [group, _L.c.model]
    return stmt.where(*(_FILTERS[name] for name in filters)).group_by(*keys)


class UsageOps:
    """The ledger and budget methods of the SQL transaction (see the store protocol).
    The host class provides the connection, the write check and the errors to
    translate."""

    _conn: Connection
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def insert_usage(self, rows: Sequence[UsageRow]) -> None:
        self._writing()
        if not rows:
            return
        values = [
            {
                "session_id": r.session_id,
                "user_id": r.user_id,
                "agent": r.agent,
                "run_id": r.run_id,
                "model": r.entry.model,
                "at": r.at,
                "day": r.day,
                **{kind: getattr(r.entry, kind) for kind in KINDS},
                "runs": r.runs,
            }
            for r in rows
        ]
        self._conn.execute(sa.insert(_L), values)

    @translated
    def sum_usage(
        self,
        *,
        user_id: str | None,
        session_id: str | None = None,
        agent: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        group_by: UsageGroup = None,
    ) -> list[UsageSum]:
        given = {
            "user_id": user_id,
            "session_id": session_id,
            "agent": agent,
            "since": since,
            "until": until,
        }
        values = {name: value for name, value in given.items() if value is not None}
        stmt = _sum_statement(group_by, tuple(values))
        found = [
            UsageSum(row[0], row[1], *(int(v) for v in row[2:]))
            for row in self._conn.execute(stmt, values)
        ]
        # Ordered here, not by SQL: NULL sorts first on SQLite and MariaDB, last on
        # PostgreSQL.
        return sorted(
            found,
            key=lambda s: (s.group is not None, s.group or "", s.model is not None, s.model or ""),
        )

    @translated
    def get_budget(self, user_id: str, session_id: str | None) -> Budget | None:
        if session_id is None:
            stmt = sa.select(user_budgets).where(user_budgets.c.user_id == user_id)
        else:
            stmt = sa.select(session_budgets).where(session_budgets.c.session_id == session_id)
        row = self._conn.execute(stmt).mappings().first()
        return None if row is None else Budget.model_validate(dict(row))

    @translated
    def put_budget(self, budget: Budget) -> None:
        self._writing()
        self._delete_budget(budget.user_id, budget.session_id)
        row = budget.model_dump(include={"user_id", "max_tokens", "max_cost", "updated_at"})
        if budget.session_id is None:
            self._conn.execute(sa.insert(user_budgets), row)
        else:
            self._conn.execute(sa.insert(session_budgets), {**row, "session_id": budget.session_id})

    @translated
    def delete_budget(self, user_id: str, session_id: str | None) -> bool:
        self._writing()
        return self._delete_budget(user_id, session_id)

    def _delete_budget(self, user_id: str, session_id: str | None) -> bool:
        if session_id is None:
            stmt = sa.delete(user_budgets).where(user_budgets.c.user_id == user_id)
        else:
            stmt = sa.delete(session_budgets).where(session_budgets.c.session_id == session_id)
        return bool(self._conn.execute(stmt).rowcount)
