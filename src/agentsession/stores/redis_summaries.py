"""Summaries on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.redis_store`)::

    as:{sid}:summaries    zset  score = number, member = the Summary as JSON

A number range is a score range (ZRANGEBYSCORE / ZREVRANGEBYSCORE with a limit), so a
read costs O(returned rows). Writes are buffered like every other write and applied by
the commit script, which refuses a number already stored (``ZFREE``); every summary
write also rewrites the session (its version), whose guard makes the transaction a
compare-and-set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..jsonvalues import dumps, loads
from ..models import Summary
from .base import StoreConflict

if TYPE_CHECKING:
    import redis

__all__ = ["SummaryOps"]


def _key(session_id: str) -> str:
    return f"as:{{{session_id}}}:summaries"


class SummaryOps:
    """The summary methods of the Redis transaction (see the store protocol). The host
    class provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    _check: Callable[..., None]

    @functools.cached_property
    def _new_summaries(self) -> dict[str, list[Summary]]:
        """Session id -> the summaries this transaction inserted, in order."""
        return {}

    def insert_summary(self, summary: Summary) -> None:
        """Buffer a ZADD, checked at commit to take a free number."""
        self._writing()
        sid = summary.session_id
        self._require_session(sid)
        mine = self._new_summaries.setdefault(sid, [])
        if any(s.number == summary.number for s in mine):
            raise StoreConflict(f"summary {summary.number} exists in {sid!r}")
        if self._stored(sid):
            self._check("ZFREE", _key(sid), str(summary.number))
        text = dumps(summary.model_dump(mode="json", exclude={"session_version"}))
        self._do("ZADD", _key(sid), summary.number, text)
        mine.append(summary.model_copy(deep=True))

    def list_summaries(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        before_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Summary]:
        """Stored summaries in the range, then this transaction's own (see the protocol)."""
        if limit is not None and limit <= 0:
            return []
        rows: list[Summary] = []
        if self._stored(session_id):
            low = "-inf" if after_number is None else f"({after_number}"
            high = "+inf" if before_number is None else f"({before_number}"
            key, start = _key(session_id), None if limit is None else 0
            if newest:
                reply = self._r.zrevrangebyscore(key, high, low, start=start, num=limit)
                raw = cast(list[str], reply)[::-1]
            else:
                raw = cast(list[str], self._r.zrangebyscore(key, low, high, start=start, num=limit))
            rows = [Summary.model_validate(loads(str(t))) for t in raw]
        rows += [
            s.model_copy(deep=True)
            for s in self._new_summaries.get(session_id, [])
            if (after_number is None or s.number > after_number)
            and (before_number is None or s.number < before_number)
        ]
        if limit is not None and len(rows) > limit:
            rows = rows[-limit:] if newest else rows[:limit]
        return rows
