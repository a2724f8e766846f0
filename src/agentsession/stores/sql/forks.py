"""Forks on the SQL store: the copy of a session's history into a new session.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`ForkOps` as a base. Each table is copied by one
``INSERT INTO ... SELECT ...`` (``insert().from_select``), so a fork costs the same
number of statements whatever the parent holds; the rows never travel to the client.

A copied message gets a new id computed in SQL: ``'msg_' || <13 characters of a fresh
id's random part> || substr(<original id>, 18, 13)`` (``CONCAT`` on MySQL), so it keeps
the shape ``msg_[a-z2-7]{26}`` with the original's canonical last character.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .dialect import translated
from .schema import memory_history, messages, summaries

__all__ = ["ForkOps"]


class ForkOps:
    """The fork method of the SQL transaction (see the store protocol). The host class
    provides the connection, the write check and the errors to translate."""

    _conn: Connection
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]
    _copy_index: Callable[..., None]

    @translated
    def copy_history(
        self, source_id: str, target_id: str, *, upto_seq: int, id_part: str
    ) -> tuple[int, int]:
        """One ``INSERT ... SELECT`` per table (messages, memory history, summaries, the
        messages' search index rows);
        returns ``(messages, summaries)`` copied."""
        self._writing()
        m = messages
        fresh = sa.literal("msg_" + id_part, sa.String) + sa.func.substr(m.c.message_id, 18, 13)
        copied = self._copy(m, source_id, target_id, m.c.seq <= upto_seq, {"message_id": fresh})
        s, h = summaries, memory_history
        self._copy(h, source_id, target_id, h.c.at_seq <= upto_seq, {})
        self._copy_index(source_id, target_id, upto_seq=upto_seq)
        return copied, self._copy(s, source_id, target_id, s.c.to_seq <= upto_seq, {})

    def _copy(
        self,
        table: sa.Table,
        source_id: str,
        target_id: str,
        where: sa.ColumnElement[bool],
        computed: dict[str, sa.ColumnElement[str]],
    ) -> int:
        """Copy ``table``'s rows of ``source_id`` that ``where`` keeps to ``target_id``
        in one statement, every column as it is but the ``computed`` ones; return how
        many rows were copied."""
        target = sa.literal(target_id, sa.String)
        columns = [
            computed.get(c.key, target if c.key == "session_id" else c).label(c.key)
            for c in table.c
        ]
        pick = sa.select(*columns).where(table.c.session_id == source_id, where)
        stmt = sa.insert(table).from_select([c.key for c in table.c], pick)
        # An INSERT's rowcount is kept only on request (psycopg answers -1 otherwise).
        return int(self._conn.execute(stmt.execution_options(preserve_rowcount=True)).rowcount)
