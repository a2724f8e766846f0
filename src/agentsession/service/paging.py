"""Pages of the seq-ordered listings (messages, tool calls, runs, audit events) and the
opaque cursors that continue them.

A cursor names its listing (which list, of which session, called with which filter), a
direction and an exclusive seq bound. Only the same listing accepts it, so a cursor can
never silently page a different list. It is base64url JSON and holds nothing secret:
no more than the seqs of the page it came from.

Every page says whether it left items out (``next_cursor``), and a cursor is only
issued when more items exist, so paging never ends on an empty page with a cursor.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..errors import ValidationError
from ..models import Page
from .validation import MAX_COUNT

__all__ = ["CURSOR_MAX_CHARS", "Listing", "Position", "read_forward", "read_gapless"]

#: The longest cursor accepted (the ones issued are about 100 characters).
CURSOR_MAX_CHARS = 200


class _Sequenced(Protocol):
    @property
    def seq(self) -> int: ...


S = TypeVar("S", bound=_Sequenced)

#: ``fetch(after_seq, limit)``: at most ``limit`` rows with seq above ``after_seq``
#: (None = from the first), oldest first.
Fetch = Callable[[int | None, int], list[S]]


@dataclass(frozen=True, slots=True)
class Position:
    """Where a page starts.

    Attributes:
        older: the page is the newest items below ``seq`` and the next one goes further
            back; else the oldest items above ``seq`` and the next one goes forward.
        seq: the exclusive bound; None = from the newest (older) or the first (forward).
        anchor: ``(seq, message_id)`` of a message the page before this one held,
            for message listings: a cursor is stale once that message is gone (the
            history was cut back past it), because its seq bound may then name other
            messages. None for other listings and for caller-given bounds.
    """

    older: bool
    seq: int | None
    anchor: tuple[int, str] | None = None


class Listing:
    """One listing of one session: issues its cursors and reads them back.

    Args:
        kind: which list, e.g. ``"messages"``.
        session_id: the session listed, as the caller named it.
        scope: the filter the listing was called with (a tool name, a status,
            alignment: a hashable JSON value); a cursor is accepted only with the
            same one.
        older_ok: the listing can page backwards (seqs gapless from 1, or a store
            query for the newest rows below a seq).
    """

    def __init__(
        self, kind: str, session_id: str, scope: Any = None, *, older_ok: bool = True
    ) -> None:
        digest = None if scope is None else _scope_digest(scope)
        self._head: list[Any] = [kind, session_id, digest]
        self._older_ok = older_ok

    def cursor(self, position: Position) -> str:
        """The opaque cursor of ``position`` in this listing."""
        parts = [*self._head, position.older, position.seq]
        if position.anchor is not None:  # without one, the five parts older versions read
            parts.append(list(position.anchor))
        raw = _COMPACT.encode(parts)
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def start(
        self, cursor: Any, *, after: int | None, before: int | None = None, newest_first: bool
    ) -> Position:
        """Where a call starts: its ``cursor``, else its seq bound, else the default end.

        Args:
            cursor: a ``next_cursor`` of this listing, or None.
            after, before: checked seq bounds (``after`` pages forward, ``before`` back).
            newest_first: without a cursor or bound, start at the newest items.

        Raises:
            ValidationError: a cursor together with a seq bound, both bounds, or a
                cursor that is malformed or of another listing.
        """
        if cursor is not None:
            if after is not None or before is not None:
                raise ValidationError("pass cursor or a seq bound, not both", field="cursor")
            return self._decode(cursor)
        if after is not None and before is not None:
            raise ValidationError("pass before or after, not both", field="before")
        if after is not None:
            return Position(older=False, seq=after)
        if before is not None:
            return Position(older=True, seq=before)
        return Position(older=newest_first, seq=None)

    def _decode(self, cursor: Any) -> Position:
        try:
            if type(cursor) is not str or not 0 < len(cursor) <= CURSOR_MAX_CHARS:
                raise ValueError
            value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            if not isinstance(value, list) or len(value) not in (5, 6):
                raise ValueError
        except (ValueError, binascii.Error):
            raise ValidationError("cursor is not one this service issued", field="cursor") from None
        if len(value) == 5:  # no anchor: another listing, or issued before anchors
            value.append(None)
        *head, older, seq, anchor = value
        if (
            head != self._head
            or type(older) is not bool
            or (older and not self._older_ok)
            or type(seq) is not int
            or not 0 <= seq <= MAX_COUNT
            or not (anchor is None or _is_anchor(anchor))
        ):
            raise ValidationError(
                "cursor belongs to another listing (session, list or filter)", field="cursor"
            )
        return Position(older=older, seq=seq, anchor=None if anchor is None else tuple(anchor))


#: ``json.dumps(..., separators=(",", ":"))`` with the encoder built once (``dumps``
#: with any keyword argument builds one per call, which costs more than the cursor).
_COMPACT = json.JSONEncoder(separators=(",", ":"))


@functools.lru_cache(maxsize=256, typed=True)
def _scope_digest(scope: Any) -> str:
    """The part of a cursor naming a listing's filter: a hash of its JSON (kept for
    the few filters a process lists with; ``typed``: ``True`` is not ``1``)."""
    return hashlib.sha256(json.dumps(scope).encode()).hexdigest()[:12]


def _is_anchor(value: Any) -> bool:
    """Whether a decoded cursor part is a ``[seq, message_id]`` pair."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and type(value[0]) is int
        and 0 < value[0] <= MAX_COUNT
        and type(value[1]) is str
    )


def read_forward(fetch: Fetch[S], after: int | None, size: int, listing: Listing) -> Page[S]:
    """The oldest ``size`` rows above ``after``; one extra row is read only to tell
    whether more exist."""
    if size == 0:
        return Page(items=[])
    rows = fetch(after, size + 1)
    items = rows[:size]
    more = len(rows) > size
    cursor = listing.cursor(Position(older=False, seq=items[-1].seq)) if more else None
    return Page(items=items, next_cursor=cursor)


def read_gapless(
    fetch: Fetch[S], start: Position, size: int, count: int, listing: Listing
) -> Page[S]:
    """The page at ``start`` of a listing whose seqs are gapless from 1 to ``count``
    (tool calls, runs). Backwards it is a seq range read forwards in one query."""
    if not start.older:
        return read_forward(fetch, start.seq, size, listing)
    return _read_older(fetch, start.seq, size, count, listing)


def _read_older(
    fetch: Fetch[S], before: int | None, size: int, count: int, listing: Listing
) -> Page[S]:
    """The newest ``size`` rows below ``before`` (None = all), oldest first."""
    end = count + 1 if before is None else min(before, count + 1)
    first = max(1, end - size)
    rows = fetch(first - 1, end - first) if size and end > 1 else []
    more = bool(rows) and first > 1
    cursor = listing.cursor(Position(older=True, seq=first)) if more else None
    return Page(items=rows, next_cursor=cursor)
