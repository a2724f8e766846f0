"""Session records on the SQL store: the ``session_records`` table.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`RecordOps` as a base, as it takes one class per aggregate. Rows are
keyed ``(session_id, namespace, key)``, and that primary key serves every lookup and
listing of one session in ``(namespace, key)`` order (code-point order on every dialect:
:func:`.columns.binary_text`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import Record
from ..recordkeys import prefix_end
from .dialect import translated
from .schema import session_records as t

__all__ = ["RecordOps"]


def _where(session_id: str, namespace: str | None, prefix: str | None) -> list[Any]:
    """Conditions of one session, an optional namespace and a key prefix. The prefix is
    a range of the index, ``prefix <= key < prefix_end(prefix)``: in code-point order
    exactly the keys starting with it, and the scan stops at the prefix's end (no LIKE:
    its wildcards would need escaping)."""
    where: list[Any] = [t.c.session_id == session_id]
    if namespace is not None:
        where.append(t.c.namespace == namespace)
    if prefix:
        where.append(t.c.key >= prefix)
        # No end: every key from an all-U+10FFFF prefix on starts with it.
        if (end := prefix_end(prefix)) is not None:
            where.append(t.c.key < end)
    return where


class RecordOps:
    """The session-record methods of the SQL transaction (see the store protocol). The host class
    provides the connection, whether it writes, the write check and the errors to
    translate."""

    _conn: Connection
    _write: bool
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def put_records(self, records: Sequence[Record]) -> None:
        """Insert or replace each record: delete the old rows of these keys, then insert,
        one executemany each (the manager holds the session row lock, so nobody races)."""
        self._writing()
        if not records:
            return
        keys = [
            {"b_session_id": r.session_id, "b_namespace": r.namespace, "b_key": r.key}
            for r in records
        ]
        self._conn.execute(
            sa.delete(t).where(
                t.c.session_id == sa.bindparam("b_session_id"),
                t.c.namespace == sa.bindparam("b_namespace"),
                t.c.key == sa.bindparam("b_key"),
            ),
            keys,
        )
        self._conn.execute(sa.insert(t), [r.model_dump() for r in records])

    @translated
    def get_record(self, session_id: str, namespace: str, key: str) -> Record | None:
        """The record, or None."""
        stmt = sa.select(t).where(
            t.c.session_id == session_id, t.c.namespace == namespace, t.c.key == key
        )
        row = self._conn.execute(stmt).first()
        return None if row is None else Record.model_validate(row._asdict())

    @translated
    def list_records(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        prefix: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[Record]:
        """Records in ``(namespace, key)`` order (see the store protocol)."""
        if limit is not None and limit <= 0:
            return []
        stmt = sa.select(t).where(*_where(session_id, namespace, prefix))
        if after is not None:
            stmt = stmt.where(t.c.key > after)
        if before is not None:
            stmt = stmt.where(t.c.key < before)
        order = (t.c.namespace.desc(), t.c.key.desc()) if descending else (t.c.namespace, t.c.key)
        stmt = stmt.order_by(*order).limit(limit)
        return [Record.model_validate(row._asdict()) for row in self._conn.execute(stmt)]

    @translated
    def delete_records(
        self, session_id: str, *, namespace: str | None = None, prefix: str | None = None
    ) -> int:
        """Delete the matching records; return how many went."""
        self._writing()
        stmt = sa.delete(t).where(*_where(session_id, namespace, prefix))
        return int(self._conn.execute(stmt).rowcount)
