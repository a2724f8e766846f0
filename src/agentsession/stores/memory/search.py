"""Search on the in-memory store, as a part of its transaction class: a scan of the
texts of the sessions in scope (:mod:`agentsession.searchtext`), no index to keep, so
what was removed, hidden, deleted or erased is never found. The order of hits is
``(session_id, seq, kind)`` descending; a position is that key as text.

A sealed value is never searched. The plaintext texts a sealed store with search on
gives (:meth:`SearchOps.index_search_texts`) are kept beside the session's rows, each
with the text the store holds at its place: it stands for that row only while the row
is the same one (a removed message's text is never found under a new message's seq).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence

from ...errors import ValidationError
from ...searchtext import indexable, message_text, occurrences, tool_call_text
from ..base import SearchRow, SearchText
from .state import SessionData, TransactionBase

__all__ = ["SearchOps"]

_Key = tuple[str, int, str]
_Slot = tuple[str, int]


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
            if indexable(row.text)
            and occurrences(row.text, query)
            and (bound is None or (row.session_id, row.seq, row.kind) < bound)
        ]
        found.sort(key=lambda r: (r.session_id, r.seq, r.kind), reverse=True)
        return found[:limit]

    def index_search_texts(self, texts: Sequence[SearchText]) -> None:
        self._writing()
        for x in texts:
            data = self._data(x.session_id)
            stored = next(
                (r.text for r in _stored(data) if (r.kind, r.seq) == (x.kind, x.seq)), None
            )
            if stored is None:
                continue
            kept, slot = data.search_texts, (x.kind, x.seq)
            self._undo.append(functools.partial(_put, kept, slot, kept.get(slot)))
            _put(kept, slot, (stored, x.text))


def _put(kept: dict[_Slot, tuple[str, str]], slot: _Slot, value: tuple[str, str] | None) -> None:
    """Set (None: remove) one plaintext text; an undo puts the old one back."""
    if value is None:
        kept.pop(slot, None)
    else:
        kept[slot] = value


def _texts(data: SessionData) -> Iterator[SearchRow]:
    """Every searchable text of one session (empty texts included): the plaintext a
    sealed store gave for a row, while the row holds the same text, else the row's own."""
    for row in _stored(data):
        given = data.search_texts.get((row.kind, row.seq))
        yield row if given is None or given[0] != row.text else row._replace(text=given[1])


def _stored(data: SessionData) -> Iterator[SearchRow]:
    """The text of every row of one session that search reads, as stored."""
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
