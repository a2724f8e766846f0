"""Rewinds on the SQL store: the ``rewinds`` and ``rewound_messages`` tables.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`RewindOps` as a base, as it takes one class per aggregate. The
primary keys serve every read: ``(session_id, number)`` a range of rewinds,
``(session_id, rewind_number, seq)`` one rewind's messages in seq order. A hiding rewind
copies its messages with one ``INSERT ... SELECT``.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import Message, Rewind
from .dialect import translated
from .schema import messages as m
from .schema import rewinds as t
from .schema import rewound_messages as h

__all__ = ["RewindOps"]

_COLUMNS = [c.name for c in t.columns]


class RewindOps:
    """The rewind methods of the SQL transaction (see the store protocol). The host class
    provides the connection, whether it writes, the write check and the errors to
    translate."""

    _conn: Connection
    _write: bool
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def insert_rewind(self, rewind: Rewind) -> None:
        """Insert one row (a duplicate number is an integrity error: StoreConflict)."""
        self._writing()
        self._conn.execute(sa.insert(t), [rewind.model_dump(include=set(_COLUMNS))])

    @translated
    def list_rewinds(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Rewind]:
        """Rewinds above ``after_number``, oldest first (see the store protocol)."""
        if limit is not None and limit <= 0:
            return []
        stmt = sa.select(t).where(t.c.session_id == session_id)
        if after_number is not None:
            stmt = stmt.where(t.c.number > after_number)
        stmt = stmt.order_by(t.c.number.desc() if newest else t.c.number).limit(limit)
        rows = [Rewind.model_validate(row._asdict()) for row in self._conn.execute(stmt)]
        return rows[::-1] if newest else rows

    @translated
    def hide_messages(self, session_id: str, *, after_seq: int, number: int) -> int:
        """Copy the messages above ``after_seq`` to rewind ``number``; return how many."""
        self._writing()
        columns = ("session_id", "seq", "message_id", "created_at", "role", "run_id", "payload")
        source = sa.select(
            m.c.session_id,
            m.c.seq,
            m.c.message_id,
            m.c.created_at,
            m.c.role,
            m.c.run_id,
            m.c.payload,
            sa.literal(number, sa.Integer).label("rewind_number"),
        ).where(m.c.session_id == session_id, m.c.seq > after_seq)
        stmt = sa.insert(h).from_select([*columns, "rewind_number"], source)
        # PostgreSQL's driver answers -1 for an INSERT ... SELECT unless told to keep it.
        return int(self._conn.execute(stmt.execution_options(preserve_rowcount=True)).rowcount)

    @translated
    def get_rewound_messages(
        self,
        session_id: str,
        number: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """One rewind's messages above ``after_seq``, oldest first, at most ``limit``."""
        if limit is not None and limit <= 0:
            return []
        stmt = sa.select(h.c.message_id, h.c.seq, h.c.created_at, h.c.payload).where(
            h.c.session_id == session_id, h.c.rewind_number == number
        )
        if after_seq is not None:
            stmt = stmt.where(h.c.seq > after_seq)
        stmt = stmt.order_by(h.c.seq).limit(limit)
        return [
            Message.from_store(
                row.payload,
                message_id=row.message_id,
                session_id=session_id,
                seq=row.seq,
                created_at=row.created_at,
            )
            for row in self._conn.execute(stmt)
        ]
