"""Content rewrites on the in-memory store, as a part of its transaction class: what
``agentsession encrypt`` and ``keyring reencrypt`` write back (see the store protocol,
"content rewrite"). Each replaces a stored row by a copy with new content fields,
undone on rollback; a row that is gone is skipped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...models import (
    MemoryVersion,
    Message,
    RunStep,
    SharedMemory,
    Summary,
    ToolCall,
    WorkingMemory,
)
from ..base import IdempotencyRecord
from .state import TransactionBase, copy

__all__ = ["RewriteOps"]


class RewriteOps(TransactionBase):
    """The content-rewrite methods of the in-memory transaction (see the store protocol)."""

    def list_session_ids(self, *, after: str | None, limit: int) -> list[str]:
        ids = sorted(s for s in self._s._sessions if after is None or s > after)
        return ids[:limit]

    def rewrite_messages(self, messages: Sequence[Message]) -> None:
        for m in messages:
            data = self._s._sessions.get(m.session_id)
            if data is not None and 0 < m.seq <= len(data.messages):
                self._put(data.messages, m.seq - 1, copy(m))

    def rewrite_rewound_messages(
        self, session_id: str, number: int, messages: Sequence[Message]
    ) -> None:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.rewound.get(number, [])
        by_seq = {m.seq: m for m in messages}
        for i, row in enumerate(rows):
            if row.seq in by_seq:
                self._put(rows, i, copy(by_seq[row.seq]))

    def rewrite_working_memory(self, memory: WorkingMemory) -> None:
        data = self._s._sessions.get(memory.session_id)
        current = None if data is None else data.memory
        if data is not None and current is not None and current.version == memory.version:
            self._set_attr(data, "memory", copy(memory))

    def rewrite_memory_history(self, session_id: str, versions: Sequence[MemoryVersion]) -> None:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.memory_history
        by_version = {v.version: v for v in versions}
        for i, (at_seq, memory) in enumerate(rows):
            new = by_version.get(memory.version)
            if new is not None:
                self._put(
                    rows, i, (at_seq, memory.model_copy(update={"data": new.data}, deep=True))
                )

    def rewrite_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        for call in calls:
            data = self._s._sessions.get(call.session_id)
            rows = [] if data is None else data.tool_calls
            for i, row in enumerate(rows):
                if row.call_id == call.call_id:
                    self._put(rows, i, _content_of(row, call, ("arguments", "result", "error")))

    def rewrite_run_steps(self, session_id: str, steps: Sequence[RunStep]) -> None:
        data = self._s._sessions.get(session_id)
        for step in steps:
            rows = [] if data is None else data.steps.get(step.run_id, [])
            if step.index < len(rows):
                fields = ("input", "output", "error")
                self._put(rows, step.index, _content_of(rows[step.index], step, fields))

    def rewrite_summaries(self, summaries: Sequence[Summary]) -> None:
        for summary in summaries:
            data = self._s._sessions.get(summary.session_id)
            rows = [] if data is None else data.summaries
            for i, row in enumerate(rows):
                if row.number == summary.number:
                    self._put(rows, i, _content_of(row, summary, ("text",)))

    def list_shared_memory(
        self, *, after: tuple[str, str] | None, limit: int
    ) -> list[SharedMemory]:
        keys = sorted(k for k in self._s._shared if after is None or k > after)
        return [copy(self._s._shared[k]) for k in keys[:limit]]

    def list_idempotency(
        self, *, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        keys = sorted(k for k in self._s._idempotency if after is None or k > after)
        return [self._s._idempotency[k] for k in keys[:limit]]

    def rewrite_idempotency(self, record: IdempotencyRecord) -> None:
        self._writing()
        k = (record.user_id, record.scope, record.key)
        old = self._s._idempotency.get(k)
        if old is not None:
            self._s._idempotency[k] = replace(old, result=record.result)
            self._undo.append(lambda: self._s._idempotency.__setitem__(k, old))

    def _put(self, rows: list[Any], i: int, row: Any) -> None:
        """``rows[i] = row``, undone on rollback."""
        self._writing()
        old = rows[i]
        rows[i] = row
        self._undo.append(lambda: rows.__setitem__(i, old))


def _content_of(row: Any, new: Any, fields: tuple[str, ...]) -> Any:
    """A copy of the stored ``row`` with ``fields`` taken from ``new``."""
    return row.model_copy(update={f: getattr(new, f) for f in fields}, deep=True)
