"""Tool calls on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:calls          hash    call_id -> ToolCall JSON
    as:{sid}:calls:seq      zset    score = seq, member = call_id
    as:{sid}:calls:find     hash    "<tool>\\x1f<arguments_hash>" -> call_id of the newest
    as:{sid}:calls:provider hash    provider_call_id -> call_id of the newest
    as:{sid}:calls:tool:<tool>  zset  one tool's calls: score = seq, member = call_id
    as:{sid}:calls:tools    set     the tools with such a zset (to delete them)

Writes are buffered like every other write and read back with the stored rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...models import ToolCall
from ..base import StoreConflict
from .codec import copy, dec, enc, prefix
from .errors import translated
from .replies import maybe_texts as _maybe_texts
from .replies import text as _text
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["ToolCallOps"]


class ToolCallOps:
    """The tool-call methods of the Redis transaction (see the store protocol). The host
    class provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    _check: Callable[..., None]
    _calls: dict[str, list[ToolCall]]

    @translated
    def insert_tool_call(self, call: ToolCall) -> None:
        self._writing()
        sid = call.session_id
        self._require_session(sid)
        if self.get_tool_call(sid, call.call_id) is not None:
            raise StoreConflict(f"tool call {call.call_id!r} exists")
        p = prefix(sid)
        if self._stored(sid):
            self._check("HNX", p + "calls", call.call_id)
        self._do("HSET", p + "calls", call.call_id, enc(call))
        self._do("ZADD", p + "calls:seq", call.seq, call.call_id)
        self._do("HSET", p + "calls:find", f"{call.tool}\x1f{call.arguments_hash}", call.call_id)
        self._do("ZADD", f"{p}calls:tool:{call.tool}", call.seq, call.call_id)
        self._do("SADD", p + "calls:tools", call.tool)
        if call.provider_call_id is not None:
            self._do("HSET", p + "calls:provider", call.provider_call_id, call.call_id)
        self._calls.setdefault(sid, []).append(copy(call))

    @translated
    def get_tool_call(self, session_id: str, call_id: str) -> ToolCall | None:
        for call in self._calls.get(session_id, []):
            if call.call_id == call_id:
                return copy(call)
        if not self._stored(session_id):
            return None
        raw = _text(self._r.hget(prefix(session_id) + "calls", call_id))
        return None if raw is None else dec(ToolCall, raw)

    @translated
    def list_tool_calls(
        self,
        session_id: str,
        *,
        tool: str | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[ToolCall]:
        if limit is not None and limit <= 0:
            return []
        rows: list[ToolCall] = []
        if self._stored(session_id):
            p = prefix(session_id)
            index = p + ("calls:seq" if tool is None else f"calls:tool:{tool}")
            low = "-inf" if after_seq is None else f"({after_seq}"
            start = None if limit is None else 0
            ids = _texts(self._r.zrangebyscore(index, low, "+inf", start=start, num=limit))
            if ids:
                raws = _maybe_texts(self._r.hmget(p + "calls", ids))
                rows = [dec(ToolCall, raw) for raw in raws if raw]
        rows += [
            copy(c)
            for c in self._calls.get(session_id, [])
            if after_seq is None or c.seq > after_seq
        ]
        rows = [c for c in rows if tool is None or c.tool == tool]
        return rows if limit is None else rows[:limit]

    @translated
    def find_tool_call(self, session_id: str, *, tool: str, arguments_hash: str) -> ToolCall | None:
        return self._newest_call(
            session_id,
            "calls:find",
            f"{tool}\x1f{arguments_hash}",
            lambda c: c.tool == tool and c.arguments_hash == arguments_hash,
        )

    @translated
    def find_tool_call_by_provider_id(
        self, session_id: str, provider_call_id: str
    ) -> ToolCall | None:
        return self._newest_call(
            session_id,
            "calls:provider",
            provider_call_id,
            lambda c: c.provider_call_id == provider_call_id,
        )

    def _newest_call(
        self, session_id: str, index: str, field: str, match: Callable[[ToolCall], bool]
    ) -> ToolCall | None:
        """The newest call this transaction added that ``match`` accepts, else the one
        the session's hash ``index`` names under ``field`` (it maps to the newest)."""
        for call in reversed(self._calls.get(session_id, [])):
            if match(call):
                return copy(call)
        if not self._stored(session_id):
            return None
        p = prefix(session_id)
        call_id = _text(self._r.hget(p + index, field))
        raw = None if call_id is None else _text(self._r.hget(p + "calls", call_id))
        return None if raw is None else dec(ToolCall, raw)
