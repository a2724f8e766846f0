"""Shared memory on the SQL store: the ``shared_memory`` table.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`SharedMemoryOps` as a base, as it takes one class per aggregate. A
document is keyed by ``(agent, user_id)``, ``user_id`` '' for the app scope.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import SharedMemory
from ..base import StoreConflict
from .dialect import insert_unless_present, translated
from .schema import shared_memory as t

__all__ = ["SharedMemoryOps"]


def _key(agent: str, user_id: str | None) -> sa.ColumnElement[bool]:
    return sa.and_(t.c.agent == agent, t.c.user_id == (user_id or ""))


class SharedMemoryOps:
    """The shared-memory methods of the SQL transaction (see the store protocol). The host class
    provides the connection, whether it writes, the write check and the errors to
    translate."""

    _conn: Connection
    _write: bool
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def get_shared_memory(self, agent: str, user_id: str | None) -> SharedMemory | None:
        """One document, or None; read FOR UPDATE in a write transaction."""
        stmt = sa.select(t).where(_key(agent, user_id))
        if self._write:
            # Writers of one document queue on its row lock (as on a session's row):
            # a plain read would let N racing writers all fail the compare-and-set.
            stmt = stmt.with_for_update()
        row = self._conn.execute(stmt).mappings().first()
        return None if row is None else _document(dict(row))

    @translated
    def list_shared_memory(
        self, *, after: tuple[str, str] | None, limit: int
    ) -> list[SharedMemory]:
        """Documents by primary key ``(agent, user_id)`` above ``after``."""
        stmt = sa.select(t)
        if after is not None:
            stmt = stmt.where(sa.tuple_(t.c.agent, t.c.user_id) > sa.tuple_(*after))
        stmt = stmt.order_by(t.c.agent, t.c.user_id).limit(limit)
        return [_document(dict(row)) for row in self._conn.execute(stmt).mappings()]

    @translated
    def put_shared_memory(self, doc: SharedMemory, *, expected_version: int) -> None:
        """Insert (``expected_version`` 0) or compare-and-set a document.

        Raises:
            StoreConflict: the stored version is not ``expected_version``.
        """
        self._writing()
        key = {"agent": doc.agent, "user_id": doc.user_id or ""}
        values = {"version": doc.version, "updated_at": doc.updated_at, "data": doc.data}
        if expected_version == 0:
            # A concurrent first write won: StoreConflict, with no error in the server log.
            if not insert_unless_present(self._conn, t, {**key, **values}):
                raise StoreConflict(f"shared memory of {doc.agent!r} changed concurrently")
            return
        # Compare-and-set: a writer that committed since our read moved the version,
        # so nothing matches (the row self._write makes the second writer wait, then re-check).
        updated = self._conn.execute(
            sa.update(t)
            .where(_key(doc.agent, doc.user_id), t.c.version == expected_version)
            .values(values)
        )
        if updated.rowcount != 1:
            raise StoreConflict(f"shared memory of {doc.agent!r} changed concurrently")

    @translated
    def delete_shared_memory(self, agent: str, user_id: str | None) -> bool:
        """Delete one document; return whether it existed."""
        self._writing()
        return bool(self._conn.execute(sa.delete(t).where(_key(agent, user_id))).rowcount)

    @translated
    def delete_user_shared_memory(self, user_id: str) -> int:
        """Delete every user-scope document of ``user_id``; return how many."""
        self._writing()
        if not user_id:
            return 0
        return int(self._conn.execute(sa.delete(t).where(t.c.user_id == user_id)).rowcount)


def _document(row: Mapping[str, Any]) -> SharedMemory:
    """The document of a ``shared_memory`` row (``user_id`` "": the app scope)."""
    return SharedMemory(
        scope="user" if row["user_id"] else "app",
        agent=row["agent"],
        user_id=row["user_id"] or None,
        version=row["version"],
        updated_at=row["updated_at"],
        data=row["data"],
    )
