"""The change feed on the Redis store: a stream of pointers to audit events.

Key layout::

    as:changes  stream  one entry per committed audit event: s = session id, q = its seq

An audit seq is taken (INCR) while a transaction buffers its writes, long before its
commit script runs, so seq order is not commit order. The entry is added by the commit
script itself (``XADD as:changes *``), and Redis runs one script at a time, so the
stream's ids are in commit order: a reader that resumes after the last id it saw can
never miss an entry added later, and a transaction that does not commit adds none.

An entry holds no user id and no content, only where the event is kept: a read fetches
each event from its session's audit zset (or from the tombstones of a deleted session)
and keeps those of the users asked for. An event erased with its session is gone from
there, so the feed no longer returns it (only the pointer stays, a random session id
and a number). A read that selects few of the entries it passes over stops after
:data:`SCAN_FACTOR` times ``limit`` entries and says where to resume.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ...errors import ValidationError
from ...jsonvalues import loads
from ...models import AuditEvent
from ..base import FeedRead
from ..changefeed import NOT_ISSUED, selected
from .codec import dec, prefix
from .replies import text, texts

if TYPE_CHECKING:
    import redis

__all__ = ["CHANGES", "SCAN_FACTOR", "change_tail", "read_changes"]

#: The stream of the change feed.
CHANGES: Final = "as:changes"
#: A read passes over at most this many entries per change it may return.
SCAN_FACTOR: Final = 20

_CURSOR = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
_MAX_PART = 2**64 - 1


def read_changes(
    r: redis.Redis,
    *,
    after: str | None,
    user_ids: Sequence[str] | None,
    session_id: str | None,
    limit: int,
) -> FeedRead:
    """The feed after the stream id ``after`` (see
    :meth:`~agentsession.stores.base.SessionStore.read_changes` and the module docstring).

    Raises:
        ValidationError: ``after`` is not a stream id, or one past the stream's newest
            entry (no read issued it). redis.RedisError: Redis failed.
    """
    if after is not None and not _CURSOR.fullmatch(after):
        raise ValidationError(NOT_ISSUED, field="after")
    if after is not None:  # a part past 64 bits reads as the largest: past every entry
        after = "-".join(str(min(int(part), _MAX_PART)) for part in after.split("-"))
        if after == f"{_MAX_PART}-{_MAX_PART}":  # no exclusive range can start there
            raise ValidationError(NOT_ISSUED, field="after")
    start = "-" if after is None else f"({after}"
    budget = SCAN_FACTOR * limit
    found: list[tuple[str, AuditEvent]] = []
    resume: str | None = None
    while budget > 0:
        reply = r.xrange(CHANGES, start, "+", count=min(budget, max(2 * limit, 64)))
        entries: list[tuple[str, dict[str, str]]] = list(reply)  # type: ignore[arg-type]
        if not entries:
            if resume is None and after is not None:
                _check_reached(r, after)
            return FeedRead(found, resume, False)
        budget -= len(entries)
        wanted = [(i, f) for i, f in entries if session_id in (None, f["s"])]
        events = dict(zip((i for i, _ in wanted), _events(r, wanted), strict=True))
        for entry_id, _ in entries:
            event = events.get(entry_id)
            if event is not None and selected(event, user_ids, session_id):
                if len(found) == limit:
                    return FeedRead(found, resume, True)
                found.append((entry_id, event))
            resume = entry_id
        start = f"({entries[-1][0]}"
    return FeedRead(found, resume, True)


def change_tail(r: redis.Redis) -> str | None:
    """The id of the newest entry of the stream; None when it is empty."""
    newest: list[tuple[str, dict[str, str]]] = list(r.xrevrange(CHANGES, count=1))  # type: ignore[arg-type]
    return newest[0][0] if newest else None


def _check_reached(r: redis.Redis, after: str) -> None:
    """Refuse a stream id past the stream's newest entry: no read issued it (e.g. Redis
    was restored from an older snapshot), and a reader waiting there would miss every
    entry until the clock caught up. Entries are only ever added, so an id a read
    issued is never past the newest one.

    Raises:
        ValidationError: ``after`` is past the newest entry, or the stream is empty.
    """
    tail = change_tail(r)
    if tail is None or _id(after) > _id(tail):
        raise ValidationError(NOT_ISSUED, field="after")


def _id(stream_id: str) -> tuple[int, int]:
    """A stream id ``<ms>-<n>`` as a pair of numbers, ordered as Redis orders them."""
    ms, n = stream_id.split("-")
    return int(ms), int(n)


def _events(r: redis.Redis, entries: list[tuple[str, dict[str, str]]]) -> list[AuditEvent | None]:
    """The audit event each entry points to, None where it is gone: one pipeline."""
    pipe = r.pipeline(transaction=False)
    for _, fields in entries:
        pipe.zrangebyscore(prefix(fields["s"]) + "audit", fields["q"], fields["q"])
        pipe.hget("as:tombstones", fields["s"])
    replies: list[Any] = pipe.execute()
    events: list[AuditEvent | None] = []
    for n, (_, fields) in enumerate(entries):
        kept, tomb = texts(replies[2 * n]), text(replies[2 * n + 1])
        if kept:
            events.append(dec(AuditEvent, kept[0]))
            continue
        stones = [AuditEvent.model_validate(e) for e in loads(tomb)] if tomb else []
        events.append(next((e for e in stones if e.seq == int(fields["q"])), None))
    return events
