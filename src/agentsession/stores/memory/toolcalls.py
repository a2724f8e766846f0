"""Tool calls on the in-memory store, as a part of its transaction class: one list per
session in ``seq`` order, searched newest first for the lookups by arguments and by the
provider's call id."""

from __future__ import annotations

from bisect import bisect_right

from ...models import ToolCall
from ..base import StoreConflict
from .state import TransactionBase, copy, seq_of

__all__ = ["ToolCallOps"]


class ToolCallOps(TransactionBase):
    """The tool-call methods of the in-memory transaction (see the store protocol)."""

    def insert_tool_call(self, call: ToolCall) -> None:
        self._writing()
        rows = self._data(call.session_id).tool_calls
        if any(c.call_id == call.call_id for c in rows):
            raise StoreConflict(f"tool call {call.call_id!r} exists")
        self._append(rows, copy(call))

    def get_tool_call(self, session_id: str, call_id: str) -> ToolCall | None:
        data = self._s._sessions.get(session_id)
        if data is None:
            return None
        for call in data.tool_calls:
            if call.call_id == call_id:
                return copy(call)
        return None

    def list_tool_calls(
        self,
        session_id: str,
        *,
        tool: str | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[ToolCall]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        start = 0 if after_seq is None else bisect_right(data.tool_calls, after_seq, key=seq_of)
        rows = [c for c in data.tool_calls[start:] if tool is None or c.tool == tool]
        return [copy(c) for c in rows[:limit]]

    def find_tool_call(self, session_id: str, *, tool: str, arguments_hash: str) -> ToolCall | None:
        data = self._s._sessions.get(session_id)
        if data is None:
            return None
        for call in reversed(data.tool_calls):
            if call.tool == tool and call.arguments_hash == arguments_hash:
                return copy(call)
        return None

    def find_tool_call_by_provider_id(
        self, session_id: str, provider_call_id: str
    ) -> ToolCall | None:
        data = self._s._sessions.get(session_id)
        if data is None:
            return None
        for call in reversed(data.tool_calls):
            if call.provider_call_id == provider_call_id:
                return copy(call)
        return None
