"""Use cases that remove messages from the end of the history: truncate, pop.

Only the newest messages are ever removed, so seqs stay gapless (1..``message_count``)
and a later append reuses the freed seqs: a seq names a position in the current history
(docs/semantics.md, "Removing messages"). Tool calls and runs stay: they record what
really ran, not the conversation. A removal edits the conversation; it is not an
erasure (docs/security.md, "Erasure"): the removed content can stay in idempotency
records and on the store's disk until their retention or a scrub.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import TypeAdapter

from ..errors import StoreError, ValidationError
from ..models import Message, Session, TruncateResult
from ..principal import Principal
from ..stores.base import StoreTransaction
from .changes.removal import removal_change
from .core import ServiceCore
from .pipeline import Change, Unchanged, WriteRequest
from .validation import check_cursor_seq

__all__ = ["RemovalUseCases"]

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
        calls, runs and audit log stay), and every summary with ``to_seq > after_seq``
        (it describes removed messages; the others keep their numbers).

        The next append gets seq ``after_seq + 1``. Removing something is one version
        step (``message_count``, ``updated_at`` and the TTL clock move as for an
        append) and one audit event ``message.truncated`` with counts (messages, and
        ``summaries_removed`` when some went) and the seq range only. Removing
        nothing (``after_seq >= message_count``) changes nothing and answers
        ``removed=0`` at the current version. Not an erasure: the removed
        content can remain in idempotency records (until ``purge_idempotency``
        retention) and in the store's free pages, WAL or AOF until a scrub; to erase it,
        delete the session or run the scrub. ``user_id`` names the caller.

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
            return removal_change(tx, s, after, "message.truncated", result)

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
        return self._pipeline.write(request).value

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
        with ``after_seq=message_count - 1`` (with the summaries covering it; audit
        action ``message.popped``).

        Returns:
            The removed message as it was stored, its ``session_version`` the session's
            version after the removal; None when the history is empty (nothing
            changes). A retry with the same ``idempotency_key`` answers the first result
            again (the same message, or None) and removes nothing more.

        Raises:
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
            StoreError: the store's messages disagree with the session's
                ``message_count`` (nothing is removed).
        """

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Unchanged:
            if s.message_count == 0:
                return Unchanged(None)
            count = s.message_count
            newest = tx.get_messages(s.session_id, after_seq=count - 1, before_seq=count + 1)
            if [m.seq for m in newest] != [count]:
                raise StoreError(
                    f"the store holds no message at seq {count} (the session's message_count)",
                    session_id=s.session_id,
                )
            return removal_change(tx, s, count - 1, "message.popped", newest[0])

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
        return self._pipeline.write(request).value
