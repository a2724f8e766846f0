"""Deleting sessions and a user's data (right to erasure), and reading the audit log.

A deleted session leaves one content-free tombstone audit event (``session.deleted``);
everything else of it goes, idempotency records included.
"""

from __future__ import annotations

from datetime import timedelta

from ..errors import Forbidden, SessionNotFound
from ..ids import check_id, check_name
from ..models import AuditEvent, Page, Session
from ..principal import Principal
from ..stores.base import StoreTransaction
from .core import ServiceCore
from .paging import Listing, read_forward
from .pipeline import WritePipeline, check_version
from .validation import check_cursor_seq, check_expected_version

__all__ = ["ErasureUseCases"]

#: Purging a user's idempotency keys takes every record created before this far ahead.
_FOREVER = timedelta(days=36500)


class ErasureUseCases(ServiceCore):
    """Deletion and audit use cases (part of :class:`SessionManager`)."""

    def delete_session(
        self,
        *,
        session_id: str,
        user_id: str,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> None:
        """Delete the session and everything in it, for good, in any status.

        Messages, working memory, tool calls, runs, idempotency records and audit
        events go; one content-free tombstone audit event (``session.deleted``) stays.
        Afterwards every call on the id raises SessionNotFound, including a second delete.
        ``user_id`` names the caller (the principal).

        Raises:
            SessionNotFound, VersionConflict, ValidationError.
        """
        check_expected_version(expected_version)
        principal = Principal(user_id, admin)

        def body(tx: StoreTransaction) -> None:
            s = self._uow.load(tx, session_id, principal)
            check_version(s, expected_version)
            self._delete(tx, s, principal)

        self._uow.run(body, write=True)

    def delete_user_data(
        self, *, user_id: str, target_user_id: str | None = None, admin: bool = False
    ) -> int:
        """Erase every session of a user (right to erasure), and their idempotency keys.

        Args:
            user_id: the caller (the principal). target_user_id: the owner whose data to
                erase; defaults to the caller; another user's needs ``admin=True``.

        Returns:
            How many sessions were deleted.

        Raises:
            Forbidden: another user's data without admin.
        """
        check_name(user_id, field="user_id")
        target = user_id if target_user_id is None else target_user_id
        check_name(target, field="target_user_id")
        principal = Principal(user_id, admin)
        if not principal.may_act_for(target):
            raise Forbidden("erasing another user's data needs admin=True")

        def body(tx: StoreTransaction) -> int:
            ids = tx.list_user_session_ids(target)
            for sid in ids:
                s = tx.get_session(sid)
                if s is not None:
                    self._delete(tx, s, principal)
            tx.purge_idempotency(created_before=self._uow.now() + _FOREVER, user_id=target)
            return len(ids)

        return self._uow.run(body, write=True)

    def get_audit_log(
        self,
        *,
        session_id: str,
        user_id: str,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[AuditEvent]:
        """A page of the session's audit events, oldest first. ``user_id`` names the
        caller (the principal). An admin may also read the tombstone of a deleted session.

        Args:
            after: start after this event seq (exclusive); None = from the first event.
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this listing.

        Returns:
            A page; ``next_cursor`` is None when no more events lie beyond it.

        Raises:
            SessionNotFound, ValidationError (also: a cursor with ``after``, or a cursor
            not of this listing).
        """
        size = self._page_size(limit)
        check_id(session_id, field="session_id", prefix="ses")
        check_name(user_id, field="user_id")
        listing = Listing("audit", session_id, older_ok=False)
        start = listing.start(cursor, after=check_cursor_seq(after, "after"), newest_first=False)
        principal = Principal(user_id, admin)

        def body(tx: StoreTransaction) -> Page[AuditEvent]:
            s = tx.get_session(session_id)
            tombstone_only = s is None and admin and tx.list_audit(session_id, limit=1)
            if not tombstone_only and (s is None or not principal.may_act_for(s.user_id)):
                raise SessionNotFound(session_id=session_id)
            return read_forward(
                lambda after_seq, n: tx.list_audit(session_id, after_seq=after_seq, limit=n),
                start.seq,
                size,
                listing,
            )

        return self._uow.run(body, write=False)

    def _delete(self, tx: StoreTransaction, s: Session, principal: Principal) -> None:
        """Delete ``s`` and leave its tombstone audit event (actor: the principal)."""
        tx.delete_session(s.session_id)
        details = {
            "agent": s.agent,
            "message_count": s.message_count,
            "run_count": s.run_count,
            "tool_call_count": s.tool_call_count,
        }
        WritePipeline.audit(
            tx, s, principal, "session.deleted", (s.version, None), details, self._uow.now()
        )
