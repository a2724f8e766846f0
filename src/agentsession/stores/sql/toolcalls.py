"""Tool calls on the SQL store: the ``tool_calls`` table.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`ToolCallOps` as a base, as it takes one class per aggregate. A
session's calls are read by ``(session_id, seq)``; the lookups by arguments and by the
provider's call id take the newest match (``ORDER BY seq DESC LIMIT 1``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import ToolCall
from .dialect import translated
from .execute import CompiledStatement, StatementCache
from .schema import tool_calls

__all__ = ["ToolCallOps"]


def _calls_select(tool: bool, after: bool, limit: bool) -> sa.Select[Any]:
    """A session's tool calls in seq order, with the bounds named (bound per call)."""
    stmt = sa.select(tool_calls).where(tool_calls.c.session_id == sa.bindparam("session_id"))
    if tool:
        stmt = stmt.where(tool_calls.c.tool == sa.bindparam("tool"))
    if after:
        stmt = stmt.where(tool_calls.c.seq > sa.bindparam("after_seq"))
    stmt = stmt.order_by(tool_calls.c.seq)
    return stmt.limit(sa.bindparam("limit")) if limit else stmt


class ToolCallOps:
    """The tool-call methods of the SQL transaction (see the store protocol). The host
    class provides the connection, its compiled statements and the way to run them,
    the write check and the errors to translate. A listing (every restore reads one)
    runs a compiled statement (:mod:`.execute`)."""

    _conn: Connection
    _sql: StatementCache
    _execute: Callable[[CompiledStatement, dict[str, Any]], Any]
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]
    _index_tool_call: Callable[[ToolCall], None]

    @translated
    def insert_tool_call(self, call: ToolCall) -> None:
        self._writing()
        row = call.model_dump(exclude={"session_version"})  # a write answer's, not stored
        row["status"] = call.status.value
        self._conn.execute(sa.insert(tool_calls), row)
        self._index_tool_call(call)

    @translated
    def get_tool_call(self, session_id: str, call_id: str) -> ToolCall | None:
        stmt = sa.select(tool_calls).where(
            tool_calls.c.session_id == session_id, tool_calls.c.call_id == call_id
        )
        row = self._conn.execute(stmt).first()
        return None if row is None else ToolCall.model_validate(row._asdict())

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
        bounds = (tool is not None, after_seq is not None, limit is not None)
        stmt = self._sql.cached(("list_tool_calls", *bounds), lambda: _calls_select(*bounds))
        params = {"session_id": session_id, "tool": tool, "after_seq": after_seq, "limit": limit}
        rows = stmt.rows(self._execute(stmt, params))
        return [ToolCall.model_validate(stmt.record(row)) for row in rows]

    @translated
    def find_tool_call(self, session_id: str, *, tool: str, arguments_hash: str) -> ToolCall | None:
        stmt = (
            sa.select(tool_calls)
            .where(
                tool_calls.c.session_id == session_id,
                tool_calls.c.tool == tool,
                tool_calls.c.arguments_hash == arguments_hash,
            )
            .order_by(tool_calls.c.seq.desc())
            .limit(1)
        )
        row = self._conn.execute(stmt).first()
        return None if row is None else ToolCall.model_validate(row._asdict())

    @translated
    def find_tool_call_by_provider_id(
        self, session_id: str, provider_call_id: str
    ) -> ToolCall | None:
        stmt = (
            sa.select(tool_calls)
            .where(
                tool_calls.c.session_id == session_id,
                tool_calls.c.provider_call_id == provider_call_id,
            )
            .order_by(tool_calls.c.seq.desc())
            .limit(1)
        )
        row = self._conn.execute(stmt).first()
        return None if row is None else ToolCall.model_validate(row._asdict())
