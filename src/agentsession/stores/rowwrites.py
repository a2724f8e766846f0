"""The lean write methods of the store port, built from its general ones: what a store
without a faster form of them (memory, Redis) answers
(:meth:`~.base.StoreTransaction.lock_session_row`,
:meth:`~.base.StoreTransaction.advance_session`).

The SQL store has its own (:mod:`.sql.hotwrite`): a few columns and one fixed UPDATE,
no :class:`~agentsession.models.Session` built. These read the whole session and store
it whole, so a store keeps one way of writing its session rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..models import Session
from .base import SessionRow, StoreConflict

__all__ = ["RowWriteDefaults"]


class RowWriteDefaults:
    """Mixin for a store transaction: the lean write methods by ``get_session`` and
    ``update_session`` (the host class's)."""

    get_session: Callable[[str], Session | None]
    update_session: Callable[..., None]

    def lock_session_row(self, session_id: str) -> SessionRow | None:
        """See :meth:`~.base.StoreTransaction.lock_session_row`."""
        session = self.get_session(session_id)
        return None if session is None else SessionRow.of(session)

    def advance_session(
        self,
        row: SessionRow,
        *,
        at: datetime,
        expires_at: datetime | None,
        message_count: int,
        audit_head: str | None,
    ) -> None:
        """See :meth:`~.base.StoreTransaction.advance_session`.

        Raises:
            StoreConflict: the session is gone or not at ``row.version``.
        """
        session = self.get_session(row.session_id)
        if session is None or session.version != row.version:
            raise StoreConflict(f"session {row.session_id!r} changed concurrently")
        update = {
            "version": row.version + 1,
            "updated_at": at,
            "last_active_at": at,
            "expires_at": expires_at,
            "message_count": message_count,
            "audit_head": audit_head,
        }
        self.update_session(session.model_copy(update=update), expected_version=row.version)
