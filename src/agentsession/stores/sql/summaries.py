"""Summaries on the SQL store: the ``summaries`` table.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`SummaryOps` as a base, as it takes one class per aggregate. The
primary key ``(session_id, number)`` serves every read (a number range, oldest or newest
first) and refuses a duplicate number.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import Summary
from .dialect import translated
from .schema import summaries as t

__all__ = ["SummaryOps"]

_COLUMNS = [c.name for c in t.columns]


class SummaryOps:
    """The summary methods of the SQL transaction (see the store protocol). The host class
    provides the connection, whether it writes, the write check and the errors to
    translate."""

    _conn: Connection
    _write: bool
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def insert_summary(self, summary: Summary) -> None:
        """Insert one row (a duplicate number is an integrity error: StoreConflict)."""
        self._writing()
        self._conn.execute(sa.insert(t), [summary.model_dump(include=set(_COLUMNS))])

    @translated
    def list_summaries(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        before_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Summary]:
        """Summaries in a number range, oldest first (see the store protocol)."""
        if limit is not None and limit <= 0:
            return []
        stmt = sa.select(t).where(t.c.session_id == session_id)
        if after_number is not None:
            stmt = stmt.where(t.c.number > after_number)
        if before_number is not None:
            stmt = stmt.where(t.c.number < before_number)
        stmt = stmt.order_by(t.c.number.desc() if newest else t.c.number).limit(limit)
        rows = [Summary.model_validate(row._asdict()) for row in self._conn.execute(stmt)]
        return rows[::-1] if newest else rows

    @translated
    def delete_summaries(self, session_id: str, *, after_seq: int) -> int:
        """Delete the session's summaries with ``to_seq > after_seq``; return how many
        (a scan of the session's rows by the primary key's prefix)."""
        self._writing()
        stmt = sa.delete(t).where(t.c.session_id == session_id, t.c.to_seq > after_seq)
        return int(self._conn.execute(stmt).rowcount)
