"""Working memory and its history on the in-memory store, as a part of its transaction
class: the current document and, per session, the rows ``(at_seq, memory)`` in ascending
versions (``at_seq`` never decreases with the version), so the memory as of a seq is a
bisection."""

from __future__ import annotations

import functools
from bisect import bisect_left, bisect_right

from ...models import MemoryVersion, WorkingMemory
from ..base import StoreConflict
from .state import TransactionBase, copy

__all__ = ["WorkingMemoryOps"]

_Row = tuple[int, WorkingMemory]


def _at_seq(row: _Row) -> int:
    return row[0]


def _version(at_seq: int, memory: WorkingMemory) -> MemoryVersion:
    m = copy(memory)
    return MemoryVersion(seq=at_seq, version=m.version, updated_at=m.updated_at, data=m.data)


class WorkingMemoryOps(TransactionBase):
    """The working-memory methods of the in-memory transaction (see the store protocol)."""

    def get_working_memory(self, session_id: str) -> WorkingMemory | None:
        data = self._s._sessions.get(session_id)
        if data is None or data.memory is None:
            return None
        return copy(data.memory)

    def put_working_memory(self, memory: WorkingMemory, *, at_seq: int) -> None:
        self._writing()
        data = self._data(memory.session_id)
        if data.memory_history and memory.version <= data.memory_history[-1][1].version:
            raise StoreConflict(f"memory version {memory.version} is not above the newest")
        self._set_attr(data, "memory", copy(memory))
        rows = data.memory_history
        i = bisect_left(rows, at_seq, key=_at_seq)
        if i == len(rows):
            self._append(rows, (at_seq, copy(memory)))
        else:  # the rows at at_seq can never be read again: replace them
            self._splice(rows, i, (at_seq, copy(memory)))

    def get_working_memory_at(self, session_id: str, seq: int) -> WorkingMemory | None:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.memory_history
        # at_seq never decreases with the version: the last row at or below seq.
        i = bisect_right(rows, seq, key=_at_seq)
        return copy(rows[i - 1][1]) if i else None

    def list_memory_history(
        self, session_id: str, *, before_seq: int | None, limit: int
    ) -> list[MemoryVersion]:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.memory_history
        end = len(rows) if before_seq is None else bisect_left(rows, before_seq, key=_at_seq)
        return [_version(at, m) for at, m in reversed(rows[max(0, end - limit) : end])]

    def rebase_memory_history(self, session_id: str, *, after_seq: int) -> None:
        self._writing()
        rows = self._data(session_id).memory_history
        i = bisect_left(rows, after_seq, key=_at_seq)
        if i == len(rows) or (i == len(rows) - 1 and rows[i][0] == after_seq):
            return
        # Only the newest row at or above after_seq can be read again: keep it, there.
        self._splice(rows, i, (after_seq, rows[-1][1]))

    def _splice(self, rows: list[_Row], i: int, row: _Row) -> None:
        """Replace ``rows[i:]`` by ``row``, undone on rollback."""
        before = rows[:]
        rows[i:] = [row]
        self._undo.append(functools.partial(rows.__setitem__, slice(None), before))
