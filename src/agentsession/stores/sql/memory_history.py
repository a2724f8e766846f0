"""Working-memory history on the SQL store: the ``memory_history`` table.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`MemoryHistoryOps` as a base, as it takes one class per aggregate (a
memory write's own history row goes through the store's compiled statements instead: it
is on every memory write's path). The memory as of a seq is the newest version whose
``at_seq`` is at or below it, and ``at_seq`` never decreases with the version (writes
and removals keep at most one row per ``at_seq``, the newest; docs/semantics.md,
"Working-memory history"), so it is also the row with the highest ``(at_seq, version)``
at or below it: one seek in the index ``(session_id, at_seq, version)``, which also
finds the rows a removal clamps, so neither costs more as the history grows.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import MemoryVersion, WorkingMemory
from .dialect import translated
from .schema import memory_history as t

__all__ = ["MemoryHistoryOps"]


class MemoryHistoryOps:
    """The working-memory history methods of the SQL transaction (see the store
    protocol). The host class provides the connection, whether it writes, the write
    check and the errors to translate."""

    _conn: Connection
    _write: bool
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def get_working_memory_at(self, session_id: str, seq: int) -> WorkingMemory | None:
        """The history row with the highest version among those with ``at_seq <= seq``,
        as a WorkingMemory; None if there is none."""
        stmt = (
            sa.select(t.c.session_id, t.c.version, t.c.updated_at, t.c.data)
            .where(t.c.session_id == session_id, t.c.at_seq <= seq)
            .order_by(t.c.at_seq.desc(), t.c.version.desc())
            .limit(1)
        )
        row = self._conn.execute(stmt).mappings().first()
        return None if row is None else WorkingMemory.model_validate(dict(row))

    @translated
    def list_memory_history(
        self, session_id: str, *, before_seq: int | None, limit: int
    ) -> list[MemoryVersion]:
        """The rows below ``before_seq``, newest first: one range read of the index
        ``(session_id, at_seq, version)`` backwards (one row per ``at_seq``)."""
        stmt = sa.select(t.c.at_seq, t.c.version, t.c.updated_at, t.c.data).where(
            t.c.session_id == session_id
        )
        if before_seq is not None:
            stmt = stmt.where(t.c.at_seq < before_seq)
        stmt = stmt.order_by(t.c.at_seq.desc(), t.c.version.desc()).limit(limit)
        return [
            MemoryVersion(seq=r.at_seq, version=r.version, updated_at=r.updated_at, data=r.data)
            for r in self._conn.execute(stmt)
        ]

    @translated
    def rebase_memory_history(self, session_id: str, *, after_seq: int) -> None:
        """Of the rows with ``at_seq >= after_seq`` keep the newest version only, at
        ``after_seq`` (it is the memory as of ``after_seq`` from now on; the others can
        never be read again): one SELECT of the newest, one DELETE, one UPDATE."""
        self._writing()
        above = (t.c.session_id == session_id, t.c.at_seq >= after_seq)
        newest = self._conn.execute(sa.select(sa.func.max(t.c.version)).where(*above)).scalar()
        if newest is None:
            return
        self._conn.execute(sa.delete(t).where(*above, t.c.version < newest))
        self._conn.execute(sa.update(t).where(*above).values(at_seq=after_seq))
