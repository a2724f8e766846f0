"""The usage ledger and budgets on the in-memory store, as a part of its transaction
class: a session's ledger rows and budget in its :class:`~.state.SessionData` (so they
go with it), users' budgets in a dict. Sums scan the rows in scope
(:mod:`agentsession.stores.usagesums`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ...models import Budget
from ..base import UsageGroup, UsageRow, UsageSum
from ..usagesums import sum_rows
from .state import TransactionBase, copy

__all__ = ["UsageOps"]


class UsageOps(TransactionBase):
    """The ledger and budget methods of the in-memory transaction (see the store
    protocol)."""

    def insert_usage(self, rows: Sequence[UsageRow]) -> None:
        self._writing()
        for row in rows:
            self._append(self._data(row.session_id).usage, row._replace(entry=copy(row.entry)))

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
        if session_id is None:
            datas = list(self._s._sessions.values())
        else:
            one = self._s._sessions.get(session_id)
            datas = [] if one is None else [one]
        rows = [
            row
            for data in datas
            if user_id is None or data.session.user_id == user_id
            for row in data.usage
        ]
        return sum_rows(
            rows, session_id=None, agent=agent, since=since, until=until, group_by=group_by
        )

    def get_budget(self, user_id: str, session_id: str | None) -> Budget | None:
        if session_id is None:
            found = self._s._budgets.get(user_id)
        else:
            data = self._s._sessions.get(session_id)
            found = None if data is None else data.budget
        return None if found is None else copy(found)

    def put_budget(self, budget: Budget) -> None:
        self._writing()
        if budget.session_id is None:
            old = self._s._budgets.get(budget.user_id)
            self._s._budgets[budget.user_id] = copy(budget)
            self._undo.append(lambda: self._restore_budget(budget.user_id, old))
        else:
            self._set_attr(self._data(budget.session_id), "budget", copy(budget))

    def delete_budget(self, user_id: str, session_id: str | None) -> bool:
        self._writing()
        if session_id is None:
            old = self._s._budgets.pop(user_id, None)
            if old is not None:
                self._undo.append(lambda: self._restore_budget(user_id, old))
            return old is not None
        data = self._s._sessions.get(session_id)
        if data is None or data.budget is None:
            return False
        self._set_attr(data, "budget", None)
        return True

    def _restore_budget(self, user_id: str, budget: Budget | None) -> None:
        if budget is None:
            self._s._budgets.pop(user_id, None)
        else:
            self._s._budgets[user_id] = budget
