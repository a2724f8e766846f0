"""Search on the in-memory store, as a part of its transaction class: a scan of the
texts of the sessions in scope (:mod:`agentsession.searchtext`), no index to keep, so
what was removed, hidden, deleted or erased is never found. The order of hits is
``(session_id, seq, kind)`` descending; a position is that key as text."""

from __future__ import annotations

import json
from collections.abc import Iterator

from ...errors import ValidationError
from ...searchtext import message_text, occurrences, tool_call_text
from ..base import SearchRow
from .state import SessionData, TransactionBase

__all__ = ["SearchOps"]

_Key = tuple[str, int, str]


class SearchOps(TransactionBase):
    """The search method of the in-memory transaction (see the store protocol)."""

    def search(
        self,
        *,
        user_id: str | None,
        query: str,
        agent: str | None,
        session_id: str | None,
        after: str | None,
        limit: int,
    ) -> list[SearchRow]:
        bound = None if after is None else _key(after)
        found = [
            row
            for data in self._s._sessions.values()
            if (user_id is None or data.session.user_id == user_id)
            and (agent is None or data.session.agent == agent)
            and (session_id is None or data.session.session_id == session_id)
            for row in _texts(data)
            if row.text
            and occurrences(row.text, query)
            and (bound is None or (row.session_id, row.seq, row.kind) < bound)
        ]
        found.sort(key=lambda r: (r.session_id, r.seq, r.kind), reverse=True)
        return found[:limit]


def _texts(data: SessionData) -> Iterator[SearchRow]:
    """Every indexed text of one session (empty texts included)."""
    sid = data.session.session_id

    def row(kind: str, seq: int, role: str | None, text: str) -> SearchRow:
        return SearchRow(json.dumps([sid, seq, kind]), sid, kind, seq, role, text)

    yield row("title", 0, None, (data.session.title or "").replace("\x00", " "))
    for m in data.messages:
        yield row("message", m.seq, m.role.value, message_text(m))
    for call in data.tool_calls:
        yield row(
            "tool_call", call.seq, None, tool_call_text(call.tool, call.arguments, call.result)
        )


def _key(position: str) -> _Key:
    """The key a position names, or ValidationError."""
    try:
        sid, seq, kind = json.loads(position)
        if isinstance(sid, str) and type(seq) is int and isinstance(kind, str):
            return sid, seq, kind
    except (ValueError, TypeError):
        pass
    raise ValidationError("cursor is not one this service issued", field="cursor")
