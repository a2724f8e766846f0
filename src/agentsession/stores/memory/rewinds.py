"""Rewinds on the in-memory store, as a part of its transaction class: the rewinds of a
session (``rewinds[i].number == i + 1``) and, by rewind number, copies of the messages
each one hid."""

from __future__ import annotations

import functools

from ...models import Message, Rewind
from ..base import StoreConflict
from .state import TransactionBase, copy

__all__ = ["RewindOps"]


class RewindOps(TransactionBase):
    """The rewind methods of the in-memory transaction (see the store protocol)."""

    def insert_rewind(self, rewind: Rewind) -> None:
        self._writing()
        rows = self._data(rewind.session_id).rewinds
        if rewind.number != len(rows) + 1:
            raise StoreConflict(f"rewind {rewind.number} is not next in its session")
        self._append(rows, copy(rewind))

    def list_rewinds(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Rewind]:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.rewinds[after_number or 0 :]
        if limit is not None and len(rows) > limit:
            rows = rows[len(rows) - limit :] if newest else rows[:limit]
        return [copy(r) for r in rows]

    def hide_messages(self, session_id: str, *, after_seq: int, number: int) -> int:
        self._writing()
        data = self._data(session_id)
        if number in data.rewound:
            raise StoreConflict(f"rewind {number} already hid messages")
        data.rewound[number] = [copy(m) for m in data.messages[after_seq:]]
        self._undo.append(functools.partial(data.rewound.pop, number))
        return len(data.rewound[number])

    def get_rewound_messages(
        self,
        session_id: str,
        number: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.rewound.get(number, [])
        rows = [m for m in rows if after_seq is None or m.seq > after_seq]
        return [copy(m) for m in rows[:limit]]
