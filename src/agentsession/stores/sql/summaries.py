"""Summaries on the SQL store: the ``summaries`` table.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction calls
these with its connection. The primary key ``(session_id, number)`` serves every read
(a number range, oldest or newest first) and refuses a duplicate number.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import Summary
from .schema import summaries as t

__all__ = ["delete_summaries", "insert_summary", "list_summaries"]

_COLUMNS = [c.name for c in t.columns]


def insert_summary(conn: Connection, summary: Summary) -> None:
    """Insert one row (a duplicate number is an integrity error: StoreConflict)."""
    conn.execute(sa.insert(t), [summary.model_dump(include=set(_COLUMNS))])


def list_summaries(
    conn: Connection,
    session_id: str,
    *,
    after_number: int | None,
    before_number: int | None,
    limit: int | None,
    newest: bool,
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
    rows = [Summary.model_validate(row._asdict()) for row in conn.execute(stmt)]
    return rows[::-1] if newest else rows


def delete_summaries(conn: Connection, session_id: str, *, after_seq: int) -> int:
    """Delete the session's summaries with ``to_seq > after_seq``; return how many
    (a scan of the session's rows by the primary key's prefix)."""
    stmt = sa.delete(t).where(t.c.session_id == session_id, t.c.to_seq > after_seq)
    return int(conn.execute(stmt).rowcount)
