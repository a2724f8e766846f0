"""The lean write methods of the SQL transaction: the session row of an append or a
working-memory update read as a plain :class:`~..base.SessionRow` and stored one
version up by one fixed compare-and-set UPDATE.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`HotWriteOps` as a base. Both statements are compiled once per
store and run on the DBAPI cursor (:mod:`.execute`): the row's ten columns are
decoded by their column types' processors and no :class:`~agentsession.models.Session`
is built; the UPDATE sets the columns such a write changes (``version``,
``updated_at``, ``last_active_at``, ``expires_at``, ``message_count``, ``audit_head``),
the values the general ``update_session`` writes for them, and leaves the others as
stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ...models import SessionStatus
from ..base import SessionRow, StoreConflict
from .dialect import translated
from .execute import CompiledStatement, StatementCache
from .schema import sessions

__all__ = ["HotWriteOps"]

#: The columns a lean write reads, in :class:`SessionRow`'s order.
_ROW = tuple(f.name for f in fields(SessionRow))
#: The columns its UPDATE sets, in table order (as the general update's statements).
_SETS = tuple(
    c.key
    for c in sessions.c
    if c.key
    in {"version", "updated_at", "last_active_at", "expires_at", "message_count", "audit_head"}
)


def _select_row() -> sa.Select[Any]:
    where = sessions.c.session_id == sa.bindparam("session_id")
    return sa.select(*(sessions.c[name] for name in _ROW)).where(where).with_for_update()


def _update_row() -> sa.Update:
    return (
        sa.update(sessions)
        .where(
            sessions.c.session_id == sa.bindparam("b_session_id"),
            sessions.c.version == sa.bindparam("b_expected_version"),
        )
        .values({c: sa.bindparam(c) for c in _SETS})
    )


class HotWriteOps:
    """The lean write methods (see the module docstring). The host class provides its
    compiled statements and the way to run them, the write check, the rows it keeps
    for the general update, and the errors to translate."""

    _sql: StatementCache
    _execute: Callable[[CompiledStatement, dict[str, Any]], Any]
    _writing: Callable[[], None]
    _stored: dict[str, Any]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def lock_session_row(self, session_id: str) -> SessionRow | None:
        """See :meth:`~..base.StoreTransaction.lock_session_row` (``SELECT ... FOR
        UPDATE`` of ten columns where the dialect locks rows)."""
        stmt = self._sql.cached("hot_session_row", _select_row)
        rows = stmt.rows(self._execute(stmt, {"session_id": session_id}))
        if not rows:
            return None
        sid, user, agent, status, *rest = rows[0]
        return SessionRow(sid, user, agent, SessionStatus(status), *rest)

    @translated
    def advance_session(
        self,
        row: SessionRow,
        *,
        at: datetime,
        expires_at: datetime | None,
        message_count: int,
        audit_head: str | None,
    ) -> None:
        """See :meth:`~..base.StoreTransaction.advance_session`.

        Raises:
            StoreConflict: the row is gone or not at ``row.version``.
        """
        self._writing()
        values = {
            "version": row.version + 1,
            "updated_at": at,
            "last_active_at": at,
            "expires_at": expires_at,
            "message_count": message_count,
            "audit_head": audit_head,
            "b_session_id": row.session_id,
            "b_expected_version": row.version,
        }
        stmt = self._sql.cached("hot_session_update", _update_row)
        if self._execute(stmt, values).rowcount != 1:
            raise StoreConflict(f"session {row.session_id!r} changed concurrently")
        # A general update later in this transaction writes every column again.
        self._stored.pop(row.session_id, None)
