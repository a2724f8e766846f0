"""Messages on the in-memory store, as a part of its transaction class: one list per
session, ``messages[i].seq == i + 1``, so a seq range is a slice."""

from __future__ import annotations

from collections.abc import Sequence

from ...models import Message
from ..base import JSONTexts, MessageBuilder, StoreConflict, rebuilt
from .state import TransactionBase, copy

__all__ = ["MessageOps"]


class MessageOps(TransactionBase):
    """The message methods of the in-memory transaction (see the store protocol)."""

    def insert_messages(self, messages: Sequence[Message], *, payloads: JSONTexts = None) -> None:
        self._writing()
        for message in messages:
            rows = self._data(message.session_id).messages
            if message.seq != len(rows) + 1:
                raise StoreConflict(f"message seq {message.seq} is not next in its session")
            self._append(rows, copy(message))

    def get_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest: bool = True,
        build: MessageBuilder = None,
    ) -> list[Message]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        rows = data.messages
        # rows[i].seq == i + 1, so a seq range is a slice: O(returned rows).
        lo = 0 if after_seq is None else max(0, min(after_seq, len(rows)))
        hi = len(rows) if before_seq is None else max(0, min(before_seq - 1, len(rows)))
        if limit is not None and hi - lo > limit:
            if newest:
                lo = hi - limit
            else:
                hi = lo + limit
        return [copy(m) for m in rows[lo:hi]] if build is None else rebuilt(rows[lo:hi], build)

    def delete_messages(self, session_id: str, *, after_seq: int) -> int:
        self._writing()
        rows = self._data(session_id).messages
        removed = rows[after_seq:]
        if not removed:
            return 0
        del rows[after_seq:]
        self._undo.append(lambda: rows.extend(removed))
        return len(removed)
