"""Summaries on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:summaries    zset  score = number, member = the Summary as JSON

A number range is a score range (ZRANGEBYSCORE / ZREVRANGEBYSCORE with a limit), so a
read costs O(returned rows). Writes are buffered like every other write and applied by
the commit script, which refuses a number already stored (``ZFREE``); a deletion by
``to_seq`` reads the session's summaries and buffers a ZREM of each; every summary
write also rewrites the session (its version), whose guard makes the transaction a
compare-and-set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ...jsonvalues import dumps, loads
from ...models import Summary
from ..base import StoreConflict
from .replies import texts as _texts

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

    @functools.cached_property
    def _gone_summaries(self) -> dict[str, set[int]]:
        """Session id -> the numbers of stored summaries this transaction deleted."""
        return {}

    def insert_summary(self, summary: Summary) -> None:
        """Buffer a ZADD, checked at commit to take a free number."""
        self._writing()
        sid = summary.session_id
        self._require_session(sid)
        mine = self._new_summaries.setdefault(sid, [])
        if any(s.number == summary.number for s in mine):
            raise StoreConflict(f"summary {summary.number} exists in {sid!r}")
        if self._stored(sid) and summary.number not in self._gone_summaries.get(sid, ()):
            self._check("ZFREE", _key(sid), str(summary.number))
        self._do("ZADD", _key(sid), summary.number, _member(summary))
        mine.append(summary.model_copy(deep=True))

    def delete_summaries(self, session_id: str, *, after_seq: int) -> int:
        """Buffer a ZREM of each summary with ``to_seq > after_seq``, stored (all read:
        O(the session's summaries)) or inserted here; return how many."""
        self._writing()
        self._require_session(session_id)
        gone = self._gone_summaries.setdefault(session_id, set())
        removed = 0
        if self._stored(session_id):
            for text in _texts(self._r.zrange(_key(session_id), 0, -1)):
                s = Summary.model_validate(loads(text))
                if s.to_seq > after_seq and s.number not in gone:
                    self._do("ZREM", _key(session_id), text)
                    gone.add(s.number)
                    removed += 1
        mine = self._new_summaries.get(session_id, [])
        for s in [s for s in mine if s.to_seq > after_seq]:
            self._do("ZREM", _key(session_id), _member(s))
            mine.remove(s)
            removed += 1
        return removed

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
            gone = self._gone_summaries.get(session_id, set())
            num = None if gone else limit  # deleted here: filtered below, then limited
            key, start = _key(session_id), None if num is None else 0
            if newest:
                reply = self._r.zrevrangebyscore(key, high, low, start=start, num=num)
                raw = cast(list[str], reply)[::-1]
            else:
                raw = cast(list[str], self._r.zrangebyscore(key, low, high, start=start, num=num))
            rows = [Summary.model_validate(loads(str(t))) for t in raw]
            rows = [s for s in rows if s.number not in gone]
        rows += [
            s.model_copy(deep=True)
            for s in self._new_summaries.get(session_id, [])
            if (after_number is None or s.number > after_number)
            and (before_number is None or s.number < before_number)
        ]
        if limit is not None and len(rows) > limit:
            rows = rows[-limit:] if newest else rows[:limit]
        return rows


def _member(summary: Summary) -> str:
    """The zset member of a summary: its JSON without the version it was written at."""
    return dumps(summary.model_dump(mode="json", exclude={"session_version"}))
