"""What the change feeds of the stores share: the cursor of a feed ordered by audit
``seq`` (memory, SQLite, PostgreSQL, MariaDB), and which events a read selects.

A seq cursor is the event's ``seq`` in decimal: the feed resumes after it. The Redis
store orders its feed by a stream instead and has its own cursors (``<ms>-<n>``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ValidationError
from ..models import AuditEvent

__all__ = ["NOT_ISSUED", "check_reached", "parse_seq_cursor", "selected"]

#: The message of a cursor that is not one of the store's feed.
NOT_ISSUED = "not a change feed cursor this store issued"

#: The longest seq cursor, in digits; a larger number stands for the largest seq.
_MAX_DIGITS = 20
#: The largest seq a store keeps (a signed 64-bit integer).
_MAX_SEQ = 2**63 - 1


def parse_seq_cursor(after: str | None) -> int:
    """The seq a feed read resumes after: 0 for None (from the first event); a number
    past every seq a store can hold reads as the largest (nothing after it).

    Raises:
        ValidationError: ``after`` is not a seq cursor (field ``after``).
    """
    if after is None:
        return 0
    if not (after.isascii() and after.isdigit() and len(after) <= _MAX_DIGITS):
        raise ValidationError(NOT_ISSUED, field="after")
    return min(int(after), _MAX_SEQ)


def check_reached(start: int, newest: int | None) -> None:
    """Refuse a seq cursor past the newest seq the store has handed out: no read ever
    issued it (e.g. the database was restored from an older backup), and a reader
    waiting there would silently miss every event until the seqs catch up. A cursor
    just issued is at most the newest committed seq, so it always passes.

    Args:
        start: the parsed cursor (:func:`parse_seq_cursor`).
        newest: the newest seq committed (None: the feed is empty), read after the page.

    Raises:
        ValidationError: ``start`` is past ``newest`` (field ``after``).
    """
    if start > (newest or 0):
        raise ValidationError(NOT_ISSUED, field="after")


def selected(event: AuditEvent, user_ids: Sequence[str] | None, session_id: str | None) -> bool:
    """Whether a feed read for ``user_ids`` (None: every user) and ``session_id`` (None:
    every session) returns ``event``."""
    if user_ids is not None and event.user_id not in user_ids:
        return False
    return session_id is None or event.session_id == session_id
