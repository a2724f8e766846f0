"""What the session listings of every store share: their order, and a session's status
as of the moment of a read.

A listing by status applies the TTL at read time (``list_sessions(now=...)``): a session
stored ACTIVE whose ``expires_at`` has passed counts as EXPIRED, though its row is only
expired by the next access or sweep. Stores answer ``status=EXPIRED`` as two indexed
reads, the rows stored EXPIRED (a page, newest first) and the due ones (ACTIVE past
``expires_at``, few between sweeps), merged here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..models import Session, SessionStatus
from .base import SessionHead, SessionRow

__all__ = ["is_due", "listing_key", "merge_newest", "status_as_of"]


def is_due(s: Session | SessionHead | SessionRow, now: datetime) -> bool:
    """Whether ``s`` (a session, its head or its row) is ACTIVE and idle past its TTL at ``now``
    (due for expiry)."""
    return s.status == SessionStatus.ACTIVE and s.expires_at is not None and s.expires_at <= now


def status_as_of(s: Session, now: datetime) -> SessionStatus:
    """The status a read at ``now`` reports: EXPIRED for a due session, else the stored one."""
    return SessionStatus.EXPIRED if is_due(s, now) else s.status


def listing_key(s: Session) -> tuple[datetime, str]:
    """The listing order's key, ``(updated_at, session_id)``; listings are descending."""
    return (s.updated_at, s.session_id)


def merge_newest(
    *parts: Iterable[Session], after: tuple[datetime, str] | None, limit: int
) -> list[Session]:
    """The first ``limit`` sessions of ``parts`` in listing order (newest first), only
    those strictly after the keyset cursor ``after``. Each part may be unordered."""
    rows = [s for part in parts for s in part if after is None or listing_key(s) < after]
    rows.sort(key=listing_key, reverse=True)
    return rows[:limit]
