"""Search on the Redis store: not supported. Redis has no full-text engine without a
server module (RediSearch), and an index of every trigram kept in sets would cost each
append a write per three characters of text; the store declares it and answers
:class:`~agentsession.errors.SearchNotSupported` (HTTP 501) without reading anything."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import SearchNotSupported
from ..base import SearchRow, SearchText

__all__ = ["SearchOps"]


class SearchOps:
    """The search method of the Redis transaction (see the store protocol)."""

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
        """Raises SearchNotSupported: this store keeps no search index."""
        raise SearchNotSupported(store="redis")

    def index_search_texts(self, texts: Sequence[SearchText]) -> None:
        """Nothing to index: this store keeps no search index (texts are dropped)."""
