"""Search across sessions: the use case over each store's search index.

What is indexed, and how a text matches, is :mod:`agentsession.searchtext`; how each
store finds it, its ``search`` (the SQL store's :mod:`agentsession.stores.sql.search`).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..errors import Forbidden, ValidationError
from ..fieldlimits import SEARCH_QUERY_CHARS
from ..ids import check_id, check_name
from ..models import Page, SearchHit
from ..principal import Principal
from ..searchtext import occurrences, snippet
from ..stores.base import SearchRow
from .core import ServiceCore
from .paging import CURSOR_MAX_CHARS
from .validation import scope_digest

__all__ = ["SearchUseCases"]


class SearchUseCases(ServiceCore):
    """The search of :class:`~agentsession.service.SessionManager`."""

    def search(
        self,
        *,
        user_id: str,
        query: str,
        agent: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        all_users: bool = False,
        admin: bool = False,
    ) -> Page[SearchHit]:
        """Find ``query`` in the caller's sessions: their titles, the text of the
        messages in their histories (text parts of every format, tool-call arguments,
        tool outputs) and their recorded tool calls (name, arguments, result).

        A text matches when it contains ``query`` as a substring, case ignored: words
        of any language, text without spaces (``修复启动`` in ``帮我修复启动失败``),
        identifiers (``requirements.txt``). Messages removed, truncated, hidden by a
        rewind, in deleted sessions or of erased users are never found (the index
        loses them in the transaction that removes them); hidden messages are not
        searchable. Hits come newest indexed text first on SQL stores.

        Cost: SQLite and PostgreSQL find a query of 3 characters or more on a trigram
        index (FTS5 ``trigram``, ``pg_trgm``), so the cost follows the matches, not the
        caller's history; a shorter query, and every query on MariaDB, reads the
        caller's indexed texts. The memory store scans. Redis keeps no index.

        Args:
            user_id: the caller, whose sessions are searched.
            query: the text to find, 1..200 characters, no NUL, not only spaces, tabs
                and line breaks.
            agent: only the sessions of this agent; session_id: only this session.
            limit: page size (default ``limits.default_page_size``); cursor: the
                ``next_cursor`` of the page before.
            all_users: search every user's sessions; needs ``admin=True``.

        Returns:
            A page of :class:`~agentsession.models.SearchHit`, each with a snippet and
            the match's offsets in it, and its score (occurrences of the query).

        Raises:
            ValidationError: a bad query, user id, agent, session id, limit or cursor
                (a cursor of another search, user or filter included).
            Forbidden: ``all_users`` without admin.
            SearchNotSupported: the store keeps no search index (Redis; HTTP 501).
        """
        check_name(user_id, field="user_id")
        if all_users and not admin:
            raise Forbidden("searching every user's sessions needs admin=True")
        if (
            not isinstance(query, str)
            or not query.strip(" \t\n\r")
            or len(query) > SEARCH_QUERY_CHARS
            or "\x00" in query
        ):
            raise ValidationError(
                f"query must be 1..{SEARCH_QUERY_CHARS} characters, no NUL, not only spaces "
                "and line breaks",
                field="query",
            )
        if agent is not None:
            check_name(agent, field="agent")
        agent = Principal(user_id, admin).agent_filter(agent)  # a key limited to agents
        if session_id is not None:
            check_id(session_id, field="session_id", prefix="ses")
        size = self._page_size(limit)
        owner = None if all_users else user_id
        scope = ["search", owner, query, agent, session_id]
        after = _decode(cursor, scope)
        rows: list[SearchRow] = self._uow.run(
            lambda tx: tx.search(
                user_id=owner,
                query=query,
                agent=agent,
                session_id=session_id,
                after=after,
                limit=size + 1,
            ),
            write=False,
        )
        more = len(rows) > size
        rows = rows[:size]
        next_cursor = _encode(rows[-1].position, scope) if more and rows else None
        return Page[SearchHit](items=[_hit(r, query) for r in rows], next_cursor=next_cursor)


def _hit(row: SearchRow, query: str) -> SearchHit:
    text, start, end = snippet(row.text, query)
    return SearchHit(
        session_id=row.session_id,
        kind=row.kind,  # type: ignore[arg-type]  # the stores write only the three kinds
        seq=row.seq,
        role=row.role,
        snippet=text,
        match_start=start,
        match_end=end,
        score=max(1, occurrences(row.text, query)),
    )


def _encode(position: str, scope: Any) -> str:
    raw = json.dumps([position, scope_digest(scope)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: Any, scope: Any) -> str | None:
    """The store position a cursor of this search names; None passes through.

    Raises:
        ValidationError: malformed, or issued by another search (query, filters, user).
    """
    if cursor is None:
        return None
    try:
        if type(cursor) is not str or len(cursor) > CURSOR_MAX_CHARS:
            raise ValueError
        position, digest = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise ValidationError("cursor is not one this service issued", field="cursor") from None
    if digest != scope_digest(scope) or not isinstance(position, str):
        raise ValidationError(
            "cursor belongs to another search (query, filters or user)", field="cursor"
        )
    return position
