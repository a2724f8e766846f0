"""Use cases that remove messages from the end of the history: truncate, pop.

Only the newest messages are ever removed, so seqs stay gapless (1..``message_count``)
and a later append reuses the freed seqs: a seq names a position in the current history
(docs/architecture.md, "Removing messages"). Tool calls and runs stay: they record what
really ran, not the conversation. Once a removal has committed, the store's ``scrub``
gets the removed rows off its disk as after an erasure (docs/security.md, "Erasure").
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ..errors import StoreError, ValidationError
from ..models import Message, Session, TruncateResult
from ..principal import Principal
from ..stores.base import StoreTransaction
from .core import ServiceCore
from .pipeline import Change, Unchanged, WriteRequest
from .validation import check_cursor_seq

__all__ = ["RemovalUseCases"]

logger = logging.getLogger(__name__)

_TRUNCATED: TypeAdapter[TruncateResult] = TypeAdapter(TruncateResult)
_POPPED: TypeAdapter[Message | None] = TypeAdapter(Message | None)


class RemovalUseCases(ServiceCore):
    """Removing messages (part of :class:`SessionManager`)."""

    def truncate_messages(
        self,
        *,
        user_id: str,
        session_id: str,
        after_seq: int,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> TruncateResult:
        """Remove every message with ``seq > after_seq`` in one transaction
        (``after_seq=0`` clears the history; the session, its working memory, tool
        calls, runs and audit log stay).

        The next append gets seq ``after_seq + 1``. Removing something is one version
        step (``message_count``, ``updated_at`` and the TTL clock move as for an
        append) and one audit event ``message.truncated`` with counts and the seq range
        only. Removing nothing (``after_seq >= message_count``) changes nothing and
        answers ``removed=0`` at the current version. Once committed, the store's
        ``scrub`` gets the removed rows off its disk (on SQLite a WAL checkpoint; a
        failure there is logged, the removal stays). ``user_id`` names the caller.

        Returns:
            ``TruncateResult(removed, session_version)``; a retry with the same
            ``idempotency_key`` answers the first result again.

        Raises:
            ValidationError: ``after_seq`` not an integer from 0 to 2**53-1.
            SessionNotFound, SessionNotActive (a CLOSED or EXPIRED session),
            VersionConflict (a stale ``expected_version``), IdempotencyKeyReused.
        """
        after = check_cursor_seq(after_seq, "after_seq")
        if after is None:
            raise ValidationError("after_seq is required (0 clears the history)", field="after_seq")

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Unchanged:
            if after >= s.message_count:
                return Unchanged(TruncateResult(removed=0, session_version=s.version))
            result = TruncateResult(removed=s.message_count - after, session_version=s.version)
            return _removal(tx, s, after, "message.truncated", result)

        request = WriteRequest(
            scope="truncate_messages",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_TRUNCATED,
            request=(after,),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        written = self._pipeline.write(request)
        if written.value.removed and not written.replayed:
            self._scrub_removed()
        return written.value

    def pop_message(
        self,
        *,
        user_id: str,
        session_id: str,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Message | None:
        """Remove and return the newest message, as :meth:`truncate_messages` would
        with ``after_seq=message_count - 1`` (audit action ``message.popped``).

        Returns:
            The removed message as it was stored, its ``session_version`` the session's
            version after the removal; None when the history is empty (nothing
            changes). A retry with the same ``idempotency_key`` answers the first result
            again (the same message, or None) and removes nothing more.

        Raises:
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
        """

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Unchanged:
            if s.message_count == 0:
                return Unchanged(None)
            newest = tx.get_messages(s.session_id, after_seq=s.message_count - 1)
            return _removal(tx, s, s.message_count - 1, "message.popped", newest[-1])

        request = WriteRequest(
            scope="pop_message",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_POPPED,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        written = self._pipeline.write(request)
        if written.value is not None and not written.replayed:
            self._scrub_removed()
        return written.value

    def _scrub_removed(self) -> None:
        """The store's disk step after a committed removal; a failure is logged, never
        raised (the removal is done)."""
        try:
            self._uow.store.scrub(compact=False)
        except StoreError as exc:
            logger.warning("the store's disk step after removing messages failed: %s", exc.message)


def _removal(
    tx: StoreTransaction, s: Session, after_seq: int, action: str, result: Any
) -> Change:
    """Delete ``s``'s messages above ``after_seq`` (there is at least one) and describe
    the change: the new count, and an audit event of counts and seqs, never content.

    Raises:
        StoreError: the store held another number of messages than the session counts.
    """
    removed = tx.delete_messages(s.session_id, after_seq=after_seq)
    if removed != s.message_count - after_seq:
        raise StoreError(
            "the store's messages disagree with the session's message_count",
            session_id=s.session_id,
        )
    details = {"count": removed, "first_seq": after_seq + 1, "last_seq": s.message_count}
    new = s.model_copy(update={"message_count": after_seq})
    return Change(new, action, details, result)
