"""Summaries on the in-memory store, as a part of its transaction class: one list per
session in ascending numbers (with gaps after a removal), so a number range is a
bisection."""

from __future__ import annotations

import functools
from bisect import bisect_left, bisect_right

from ...models import Summary
from ..base import StoreConflict
from .state import TransactionBase, copy

__all__ = ["SummaryOps"]


def _number(summary: Summary) -> int:
    return summary.number


class SummaryOps(TransactionBase):
    """The summary methods of the in-memory transaction (see the store protocol)."""

    def insert_summary(self, summary: Summary) -> None:
        self._writing()
        rows = self._data(summary.session_id).summaries
        if rows and summary.number <= rows[-1].number:
            raise StoreConflict(f"summary {summary.number} is not above the newest")
        rows.append(copy(summary))
        self._undo.append(rows.pop)

    def list_summaries(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        before_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Summary]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        rows = data.summaries
        lo = 0 if after_number is None else bisect_right(rows, after_number, key=_number)
        hi = len(rows) if before_number is None else bisect_left(rows, before_number, key=_number)
        if limit is not None and hi - lo > limit:
            lo, hi = (max(lo, hi - limit), hi) if newest else (lo, lo + max(limit, 0))
        return [copy(x) for x in rows[lo:hi]]

    def delete_summaries(self, session_id: str, *, after_seq: int) -> int:
        self._writing()
        rows = self._data(session_id).summaries
        kept = [s for s in rows if s.to_seq <= after_seq]
        if len(kept) == len(rows):
            return 0
        before = rows[:]
        rows[:] = kept
        self._undo.append(functools.partial(rows.__setitem__, slice(None), before))
        return len(before) - len(kept)
