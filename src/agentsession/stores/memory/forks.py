"""Forks on the in-memory store, as a part of its transaction class: the copy of a
history prefix (messages, the summaries within it, the memory history) into a new
session."""

from __future__ import annotations

from .state import TransactionBase

__all__ = ["ForkOps"]


class ForkOps(TransactionBase):
    """The fork method of the in-memory transaction (see the store protocol)."""

    def copy_history(
        self, source_id: str, target_id: str, *, upto_seq: int, id_part: str
    ) -> tuple[int, int]:
        self._writing()
        source, target = self._data(source_id), self._data(target_id)
        # The target is new and empty: the undo log drops its rows whole.
        target.messages = [
            m.model_copy(
                update={
                    "message_id": "msg_" + id_part + m.message_id[17:30],
                    "session_id": target_id,
                },
                deep=True,
            )
            for m in source.messages[:upto_seq]
        ]
        target.summaries = [
            s.model_copy(update={"session_id": target_id}, deep=True)
            for s in source.summaries
            if s.to_seq <= upto_seq
        ]
        target.memory_history = [
            (at, m.model_copy(update={"session_id": target_id}, deep=True))
            for at, m in source.memory_history
            if at <= upto_seq
        ]
        target.search_texts = {
            (kind, seq): given
            for (kind, seq), given in source.search_texts.items()
            if kind == "message" and seq <= upto_seq
        }
        return len(target.messages), len(target.summaries)
