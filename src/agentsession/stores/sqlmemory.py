"""Working-memory history on the SQL store: the ``memory_history`` table.

Kept apart from :mod:`.sql` so each module stays one job; the store's transaction calls
these with its connection. The memory as of a seq is the newest version whose
``at_seq`` is at or below it, and ``at_seq`` never decreases with the version
(docs/architecture.md, "Working-memory history"), so it is also the row with the
highest ``(at_seq, version)`` at or below it: one seek in the index
``(session_id, at_seq, version)``, which also finds the rows a removal clamps, so
neither costs more as the history grows.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..models import WorkingMemory
from .schema import memory_history as t

__all__ = ["insert_history", "memory_at", "rebase_history"]


def insert_history(conn: Connection, memory: WorkingMemory, at_seq: int) -> None:
    """Append the history row of a memory write (a duplicate version is an integrity
    error: StoreConflict)."""
    row = {"session_id": memory.session_id, "version": memory.version, "at_seq": at_seq}
    conn.execute(sa.insert(t), [{**row, "updated_at": memory.updated_at, "data": memory.data}])


def memory_at(conn: Connection, session_id: str, seq: int) -> WorkingMemory | None:
    """The history row with the highest version among those with ``at_seq <= seq``,
    as a WorkingMemory; None if there is none."""
    stmt = (
        sa.select(t.c.session_id, t.c.version, t.c.updated_at, t.c.data)
        .where(t.c.session_id == session_id, t.c.at_seq <= seq)
        .order_by(t.c.at_seq.desc(), t.c.version.desc())
        .limit(1)
    )
    row = conn.execute(stmt).mappings().first()
    return None if row is None else WorkingMemory.model_validate(dict(row))


def rebase_history(conn: Connection, session_id: str, after_seq: int) -> None:
    """Set ``at_seq = after_seq`` where it is above (one UPDATE)."""
    stmt = (
        sa.update(t)
        .where(t.c.session_id == session_id, t.c.at_seq > after_seq)
        .values(at_seq=after_seq)
    )
    conn.execute(stmt)
