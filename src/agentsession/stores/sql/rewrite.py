"""Content rewrites on the SQL store: what ``agentsession encrypt`` and ``keyring
reencrypt`` write back (see the store protocol, "content rewrite").

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`RewriteOps` as a base. Each rewrite is an ``UPDATE`` of the content
columns by primary key (a row that is gone matches nothing); the search index rows of a
rewritten message or tool call are replaced with it, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import MemoryVersion, Message, RunStep, Summary, ToolCall, WorkingMemory
from .dialect import translated
from .schema import (
    memory_history,
    messages,
    rewound_messages,
    run_steps,
    search_texts,
    sessions,
    summaries,
    tool_calls,
    working_memory,
)

__all__ = ["RewriteOps"]


class RewriteOps:
    """The content-rewrite methods of the SQL transaction (see the store protocol). The
    host class provides the connection, the write check, the errors to translate and
    the search index's writers."""

    _conn: Connection
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]
    _index_messages: Callable[..., None]
    _index_tool_call: Callable[[ToolCall], None]

    @translated
    def list_session_ids(self, *, after: str | None, limit: int) -> list[str]:
        stmt = sa.select(sessions.c.session_id)
        if after is not None:
            stmt = stmt.where(sessions.c.session_id > after)
        stmt = stmt.order_by(sessions.c.session_id).limit(limit)
        return list(self._conn.scalars(stmt))

    @translated
    def rewrite_messages(self, messages_: Sequence[Message]) -> None:
        self._writing()
        t = messages
        for m in messages_:
            key = (t.c.session_id == m.session_id, t.c.seq == m.seq)
            self._conn.execute(sa.update(t).where(*key).values(payload=m.payload()))
            s = search_texts
            at = (s.c.session_id == m.session_id, s.c.kind == "message", s.c.seq == m.seq)
            self._conn.execute(sa.delete(s).where(*at))
        self._index_messages(messages_)

    @translated
    def rewrite_rewound_messages(
        self, session_id: str, number: int, messages_: Sequence[Message]
    ) -> None:
        self._writing()
        t = rewound_messages
        for m in messages_:
            key = (t.c.session_id == session_id, t.c.rewind_number == number, t.c.seq == m.seq)
            self._conn.execute(sa.update(t).where(*key).values(payload=m.payload()))

    @translated
    def rewrite_working_memory(self, memory: WorkingMemory) -> None:
        self._writing()
        t = working_memory
        key = (t.c.session_id == memory.session_id, t.c.version == memory.version)
        self._conn.execute(sa.update(t).where(*key).values(data=memory.data))

    @translated
    def rewrite_memory_history(self, session_id: str, versions: Sequence[MemoryVersion]) -> None:
        self._writing()
        t = memory_history
        for v in versions:
            key = (t.c.session_id == session_id, t.c.version == v.version)
            self._conn.execute(sa.update(t).where(*key).values(data=v.data))

    @translated
    def rewrite_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        self._writing()
        t, s = tool_calls, search_texts
        for c in calls:
            key = (t.c.session_id == c.session_id, t.c.call_id == c.call_id)
            values = {"arguments": c.arguments, "result": c.result, "error": c.error}
            self._conn.execute(sa.update(t).where(*key).values(**values))
            at = (s.c.session_id == c.session_id, s.c.kind == "tool_call", s.c.seq == c.seq)
            self._conn.execute(sa.delete(s).where(*at))
            self._index_tool_call(c)

    @translated
    def rewrite_run_steps(self, session_id: str, steps: Sequence[RunStep]) -> None:
        self._writing()
        t = run_steps
        for step in steps:
            key = (
                t.c.session_id == session_id,
                t.c.run_id == step.run_id,
                t.c.step_index == step.index,
            )
            values: dict[str, Any] = {"input": step.input, "output": step.output}
            self._conn.execute(sa.update(t).where(*key).values(error=step.error, **values))

    @translated
    def rewrite_summaries(self, summaries_: Sequence[Summary]) -> None:
        self._writing()
        t = summaries
        for s in summaries_:
            key = (t.c.session_id == s.session_id, t.c.number == s.number)
            self._conn.execute(sa.update(t).where(*key).values(text=s.text))
