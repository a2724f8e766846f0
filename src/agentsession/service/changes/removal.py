"""Removing the newest messages inside a write: the state change that truncate, pop,
replace and rewind share."""

from __future__ import annotations

from typing import Any

from ...errors import StoreError
from ...models import Session
from ...stores.base import StoreTransaction
from ..pipeline import Change

__all__ = ["removal_change"]


def removal_change(
    tx: StoreTransaction, s: Session, after_seq: int, action: str, result: Any
) -> Change:
    """Delete ``s``'s messages above ``after_seq`` (there is at least one) and the
    summaries reaching past it, clamp the working-memory history to the new end (the
    memory does not change, so its versions were in effect there), and describe the
    change: the new count, and an audit event of counts and seqs, never content.

    Raises:
        StoreError: the store held another number of messages than the session counts.
    """
    removed = tx.delete_messages(s.session_id, after_seq=after_seq)
    if removed != s.message_count - after_seq:
        raise StoreError(
            "the store's messages disagree with the session's message_count",
            session_id=s.session_id,
        )
    summaries = tx.delete_summaries(s.session_id, after_seq=after_seq)
    tx.rebase_memory_history(s.session_id, after_seq=after_seq)
    details = {"count": removed, "first_seq": after_seq + 1, "last_seq": s.message_count}
    if summaries:  # only then, so a session without summaries is audited as before
        details["summaries_removed"] = summaries
    new = s.model_copy(update={"message_count": after_seq})
    return Change(new, action, details, result)
