"""Forks on the Redis store: the copy of a session's history into a new session, as a
part of its transaction class.

The copy never passes through the client: the transaction buffers one ``FORK`` op,
and the commit script (``_APPLY_LUA`` of :mod:`.store`, :data:`FORK_LUA` here)
copies the rows server-side in the same atomic run as the rest of the transaction:
the messages with score (seq) ``<= N`` with their ids rewritten, the memory-history
rows with ``at_seq <= N`` and the summaries with ``to_seq <= N`` with their
``session_id`` rewritten. A member's JSON starts with its id (``{"id":"msg_<26>"``) or
its session id (``{"session_id":"ses_<26>"``) at a fixed width (the store's own
encoders write them so; ``tests/test_redis_store.py`` checks it), so the script
rewrites that prefix and keeps the rest byte for byte (a JSON re-encode would reorder
a payload's keys). The counts are read before the commit; the guard on the parent's
session row (read in this transaction) makes the commit a conflict, and the
transaction re-run, if the parent changed in between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ...jsonvalues import loads
from .codec import prefix
from .errors import translated

if TYPE_CHECKING:
    import redis

__all__ = ["FORK_LUA", "ForkOps"]

#: The commit script's ``FORK`` op: operands source prefix, target prefix, N, the
#: 13-character id part, the target session id (``arg()`` reads the next one).
FORK_LUA = r"""
    local src = arg()
    local dst = arg()
    local upto = tonumber(arg())
    local part = arg()
    local sid = arg()
    local rows = redis.call('ZRANGEBYSCORE', src .. 'msgs', '-inf', upto, 'WITHSCORES')
    for j = 1, #rows, 2 do
      redis.call('ZADD', dst .. 'msgs', rows[j + 1], '{"id":"msg_' .. part ..
        string.sub(rows[j], 25))
    end
    local function own(m)
      return '{"session_id":"' .. sid .. string.sub(m, 16 + string.len(sid))
    end
    rows = redis.call('ZRANGEBYSCORE', src .. 'memhist:at', '-inf', upto, 'WITHSCORES')
    for j = 1, #rows, 2 do
      local version = string.gsub(rows[j], '^0+(%d)', '%1')
      local row = redis.call('HGET', src .. 'memhist', version)
      redis.call('HSET', dst .. 'memhist', version, own(row))
      redis.call('ZADD', dst .. 'memhist:at', rows[j + 1], rows[j])
    end
    rows = redis.call('ZRANGE', src .. 'summaries', 0, -1, 'WITHSCORES')
    for j = 1, #rows, 2 do
      local m = rows[j]
      if cjson.decode(m)['to_seq'] <= upto then
        redis.call('ZADD', dst .. 'summaries', rows[j + 1], own(m))
      end
    end
"""


class ForkOps:
    """The fork method of the Redis transaction (see the store protocol). The host class
    provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _writes: list[str]

    @translated
    def copy_history(
        self, source_id: str, target_id: str, *, upto_seq: int, id_part: str
    ) -> tuple[int, int]:
        """Buffer one server-side copy (see the module docstring); return the counts
        the source holds now (a summary scan: O(the source's summaries))."""
        self._writing()
        self._require_session(source_id)
        self._require_session(target_id)
        src, dst = prefix(source_id), prefix(target_id)
        count = int(cast(int, self._r.zcount(src + "msgs", "-inf", upto_seq)))
        texts = cast(list[str], self._r.zrange(src + "summaries", 0, -1))
        summaries = sum(1 for t in texts if loads(t)["to_seq"] <= upto_seq)
        self._writes += ["FORK", src, dst, str(upto_seq), id_part, target_id]
        return count, summaries
