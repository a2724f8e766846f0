"""Appending messages to a session's history inside a write: the state change that
append, replace and the answers to interrupted tool calls share."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...ids import new_id
from ...models import Message, Session
from ...stores.base import SessionRow, StoreTransaction

__all__ = ["insert_messages"]


def insert_messages(
    tx: StoreTransaction,
    s: Session | SessionRow,
    now: datetime,
    payloads: list[dict[str, Any]],
    texts: list[str] | None = None,
) -> list[Message]:
    """Insert checked payloads (their ``run_id`` runs of ``s``) as the next seqs of
    ``s``, created ``now``; return the stored messages. ``texts``: the payloads' JSON
    as checked, so no store encodes them again. The caller counts the messages into
    the session's ``message_count``."""
    # from_store validates as model_validate would, but keeps the values check_message
    # already checked as they are: the payload is not validated a second time.
    stored = [
        Message.from_store(
            payload,
            message_id=new_id("msg"),
            session_id=s.session_id,
            seq=s.message_count + 1 + i,
            created_at=now,
        )
        for i, payload in enumerate(payloads)
    ]
    tx.insert_messages(stored, payloads=texts)
    return stored
