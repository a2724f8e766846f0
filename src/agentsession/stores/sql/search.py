"""The search index on the SQL store: ``search_texts`` kept with what it indexes, and
the search itself.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`SearchOps` as a base and calls its ``_index_*`` methods from the
writes that change an indexed text (a title, messages, a tool call, a fork's copy),
in the same transaction. A session's rows go with it by ``ON DELETE CASCADE``.

How each dialect finds a query (``q``, case ignored), newest indexed text first:

* SQLite: the FTS5 ``trigram`` table ``search_fts`` (made by the migration, kept by
  triggers): its ``LIKE '%q%'`` gives the texts holding every trigram of ``q`` (CJK
  without spaces and identifiers such as ``requirements.txt`` alike), and ``instr``
  keeps those holding ``q`` itself (case ignored for ASCII letters, as SQLite's
  ``LIKE``); a query under 3 characters has no trigram, so it is an ``instr`` over the
  caller's rows.
* PostgreSQL: ``text ILIKE '%q%'`` on the ``pg_trgm`` GIN index (3 characters or
  more; shorter: a scan of the caller's rows, as the index cannot answer it).
* MariaDB/MySQL: ``LOWER(text) LIKE '%q%'`` over the caller's rows (no index on the
  text: InnoDB FULLTEXT has no n-gram parser in MariaDB), read through the sessions'
  ``user_id`` index; the cost grows with the caller's indexed texts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...errors import ValidationError
from ...jsonvalues import loads
from ...models import Message, Session, ToolCall
from ...searchtext import MIN_INDEXED_CHARS, indexable, message_text, payload_text, tool_call_text
from ..base import JSONTexts, SearchRow, SearchText
from .dialect import translated
from .execute import CompiledStatement, StatementCache
from .schema import search_texts, sessions

__all__ = ["SearchOps"]

_ESCAPE = "\\"
#: The columns of an index row written by this module (the id is generated).
_COLUMNS = ("session_id", "kind", "seq", "role", "text")


def _like(query: str) -> str:
    """``%query%`` with LIKE's wildcards and the escape character escaped."""
    escaped = query.replace(_ESCAPE, _ESCAPE * 2).replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _index_insert() -> sa.Insert:
    """The INSERT of index rows (one per execution), compiled once: every message
    append runs it."""
    return sa.insert(search_texts).values({c: sa.bindparam(c) for c in _COLUMNS})


class SearchOps:
    """The search method of the SQL transaction and the index writes of its other
    methods. The host class provides the connection, its compiled statements and the
    way to run them, the write check and the errors to translate."""

    _conn: Connection
    _sql: StatementCache
    _execute_rows: Callable[[CompiledStatement, Sequence[dict[str, Any]]], None]
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    def _index(self, rows: Iterable[dict[str, Any]]) -> None:
        """Insert the index rows that have text, by the compiled statement on the
        DBAPI cursor (:mod:`.execute`): an append's one row costs a fifth of a Core
        ``execute``."""
        kept = [r for r in rows if indexable(r["text"])]
        if kept:
            self._execute_rows(self._sql.cached("index_insert", _index_insert), kept)

    def _index_title(self, session: Session, *, replace: bool) -> None:
        """Index the session's title (``replace``: drop the one indexed before)."""
        t = search_texts
        if replace:
            where = (t.c.session_id == session.session_id, t.c.kind == "title")
            self._conn.execute(sa.delete(t).where(*where))
        text = (session.title or "").replace("\x00", " ")
        self._index([_row(session.session_id, "title", 0, None, text)])

    def _index_messages(self, messages: Sequence[Message], texts: JSONTexts = None) -> None:
        """Index the messages' text; ``texts``: their payloads' JSON, as the insert
        bound them (decoded here rather than each payload dumped from its model)."""
        if texts is None:
            found = [message_text(m) for m in messages]
        else:
            found = [payload_text(loads(t)) for t in texts]
        self._index(
            _row(m.session_id, "message", m.seq, m.role.value, text)
            for m, text in zip(messages, found, strict=True)
        )

    def _unindex_messages(self, session_id: str, *, after_seq: int) -> None:
        """Drop the index rows of the session's messages above ``after_seq``."""
        t = search_texts
        where = (t.c.session_id == session_id, t.c.kind == "message", t.c.seq > after_seq)
        self._conn.execute(sa.delete(t).where(*where))

    def _index_tool_call(self, call: ToolCall) -> None:
        self._index(
            [
                _row(
                    call.session_id,
                    "tool_call",
                    call.seq,
                    None,
                    tool_call_text(call.tool, call.arguments, call.result),
                )
            ]
        )

    @translated
    def index_search_texts(self, texts: Sequence[SearchText]) -> None:
        """Index texts given in plaintext (a sealed store's, search turned on), each
        replacing what is indexed at its ``(session_id, kind, seq)``."""
        self._writing()
        t = search_texts
        for x in texts:
            at = (t.c.session_id == x.session_id, t.c.kind == x.kind, t.c.seq == x.seq)
            self._conn.execute(sa.delete(t).where(*at))
        self._index(_row(*x) for x in texts if x.text)

    def _copy_index(self, source_id: str, target_id: str, *, upto_seq: int) -> None:
        """A fork's copy of its parent's message rows up to ``upto_seq``."""
        t = search_texts
        pick = sa.select(
            sa.literal(target_id, sa.String), t.c.kind, t.c.seq, t.c.role, t.c.text
        ).where(t.c.session_id == source_id, t.c.kind == "message", t.c.seq <= upto_seq)
        self._conn.execute(sa.insert(t).from_select(list(_COLUMNS), pick.order_by(t.c.seq)))

    @translated
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
        """See the module docstring for how each dialect finds ``query``."""
        t, s = search_texts, sessions
        dialect = self._conn.dialect.name
        source: Any = t.join(s, s.c.session_id == t.c.session_id)
        where: list[Any] = []
        if dialect == "postgresql" and len(query) >= MIN_INDEXED_CHARS:
            # The matches first, from the trigram index, whatever the plan's estimates: a
            # prepared (generic) plan cannot estimate an ILIKE parameter and would read
            # the caller's every text instead.
            hits = sa.select(t.c.id).where(_matches(dialect, query)).cte("hits")
            hits = hits.prefix_with("MATERIALIZED")
            source = hits.join(t, t.c.id == hits.c.id).join(s, s.c.session_id == t.c.session_id)
        else:
            where.append(_matches(dialect, query))
        if after is not None:
            if not after.isdigit() or len(after) > 19:
                raise ValidationError("cursor is not one this service issued", field="cursor")
            where.append(t.c.id < int(after))
        if session_id is not None:
            where.append(t.c.session_id == session_id)
        if user_id is not None:
            where.append(s.c.user_id == user_id)
        if agent is not None:
            where.append(s.c.agent == agent)
        stmt = (
            sa.select(t.c.id, t.c.session_id, t.c.kind, t.c.seq, t.c.role, t.c.text)
            .select_from(source)
            .where(*where)
            .order_by(t.c.id.desc())
            .limit(limit)
        )
        return [
            SearchRow(str(i), sid, kind, seq, role, text)
            for i, sid, kind, seq, role, text in self._conn.execute(stmt)
        ]


def _matches(dialect: str, query: str) -> sa.ColumnElement[bool]:
    """The condition that ``search_texts.text`` holds ``query``, case ignored."""
    text = search_texts.c.text
    if dialect == "sqlite":
        # instr is the exact test (lower(): ASCII, as LIKE's case rule); the FTS5 LIKE
        # gives the candidates. FTS5 takes no ESCAPE, so a % or _ of the query is a
        # wildcard there: more candidates, never fewer.
        exact = sa.func.instr(sa.func.lower(text), sa.func.lower(query)) > 0
        if len(query) < MIN_INDEXED_CHARS:
            return exact
        fts = sa.text("SELECT rowid FROM search_fts WHERE search_fts.text LIKE :pattern")
        return sa.and_(search_texts.c.id.in_(fts.bindparams(pattern=f"%{query}%")), exact)
    if dialect == "postgresql":
        return text.ilike(_like(query), escape=_ESCAPE)
    return sa.func.lower(text).like(sa.func.lower(_like(query)), escape=_ESCAPE)


def _row(session_id: str, kind: str, seq: int, role: str | None, text: str) -> dict[str, Any]:
    return {"session_id": session_id, "kind": kind, "seq": seq, "role": role, "text": text}
