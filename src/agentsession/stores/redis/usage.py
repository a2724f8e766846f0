"""The usage ledger and budgets on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:usage          list    the session's ledger rows as JSON, oldest first
    as:{sid}:budget         string  the session's budget as JSON
    as:budget:{uid}         string  the user's budget as JSON

A session's keys go with it (the commit script's purge deletes them). Sums read the
ledger lists of the sessions in scope in one round trip (a user's sessions from the
user's index; every session's for an admin) and add them up in Python
(:mod:`agentsession.stores.usagesums`): the cost follows the rows in scope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...jsonvalues import dumps, loads
from ...models import Budget, UsageEntry
from ..base import UsageGroup, UsageRow, UsageSum
from ..usagesums import sum_rows
from .codec import dec, enc, prefix
from .errors import translated
from .index import ALL_SESSIONS
from .replies import text as _text
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["UsageOps"]


def _user_budget_key(user_id: str) -> str:
    return f"as:budget:{{{user_id}}}"


def _enc_row(row: UsageRow) -> str:
    return dumps([*row[:4], row.at.isoformat(), row.day, row.entry.model_dump(), row.runs])


def _dec_row(text: str) -> UsageRow:
    user_id, agent, session_id, run_id, at, day, entry, runs = loads(text)
    return UsageRow(
        user_id,
        agent,
        session_id,
        run_id,
        datetime.fromisoformat(at),
        day,
        UsageEntry.model_validate(entry),
        runs,
    )


class UsageOps:
    """The ledger and budget methods of the Redis transaction (see the store protocol).
    The host class provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    list_user_session_ids: Callable[[str], list[str]]

    @translated
    def insert_usage(self, rows: Sequence[UsageRow]) -> None:
        self._writing()
        for row in rows:
            self._require_session(row.session_id)
            self._do("RPUSH", prefix(row.session_id) + "usage", _enc_row(row))

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
        if session_id is not None:
            ids = [session_id]
        elif user_id is not None:
            ids = self.list_user_session_ids(user_id)
        else:
            ids = [m.rpartition("|")[2] for m in _texts(self._r.zrange(ALL_SESSIONS, 0, -1))]
        pipe = self._r.pipeline(transaction=False)
        for sid in ids:
            pipe.lrange(prefix(sid) + "usage", 0, -1)
        lists: list[Any] = pipe.execute() if ids else []
        rows = [
            row
            for sid, texts in zip(ids, lists, strict=True)
            if self._stored(sid)
            for row in map(_dec_row, _texts(texts))
            if user_id is None or row.user_id == user_id
        ]
        return sum_rows(
            rows, session_id=None, agent=agent, since=since, until=until, group_by=group_by
        )

    @translated
    def get_budget(self, user_id: str, session_id: str | None) -> Budget | None:
        key = _user_budget_key(user_id) if session_id is None else prefix(session_id) + "budget"
        raw = _text(self._r.get(key))
        return None if raw is None else dec(Budget, raw)

    @translated
    def put_budget(self, budget: Budget) -> None:
        self._writing()
        if budget.session_id is None:
            self._do("SET", _user_budget_key(budget.user_id), enc(budget))
        else:
            self._require_session(budget.session_id)
            self._do("SET", prefix(budget.session_id) + "budget", enc(budget))

    @translated
    def delete_budget(self, user_id: str, session_id: str | None) -> bool:
        self._writing()
        key = _user_budget_key(user_id) if session_id is None else prefix(session_id) + "budget"
        there = bool(self._r.exists(key))
        self._do("DEL", key)
        return there
