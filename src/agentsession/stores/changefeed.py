"""What the change feeds of the stores share: the cursor of a feed ordered by audit
``seq`` (memory, SQLite, PostgreSQL, MariaDB), and which events a read selects.

A seq cursor is the event's ``seq`` in decimal: the feed resumes after it. The Redis
store orders its feed by a stream instead and has its own cursors (``<ms>-<n>``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ValidationError
from ..models import AuditEvent

__all__ = ["parse_seq_cursor", "selected"]

#: The longest seq cursor: a 64-bit seq has at most 19 digits.
_MAX_DIGITS = 19


def parse_seq_cursor(after: str | None) -> int:
    """The seq a feed read resumes after: 0 for None (from the first event).

    Raises:
        ValidationError: ``after`` is not a seq cursor (field ``after``).
    """
    if after is None:
        return 0
    if not (after.isascii() and after.isdigit() and len(after) <= _MAX_DIGITS):
        raise ValidationError("not a change feed cursor of this store", field="after")
    return int(after)


def selected(event: AuditEvent, user_ids: Sequence[str] | None, session_id: str | None) -> bool:
    """Whether a feed read for ``user_ids`` (None: every user) and ``session_id`` (None:
    every session) returns ``event``."""
    if user_ids is not None and event.user_id not in user_ids:
        return False
    return session_id is None or event.session_id == session_id
