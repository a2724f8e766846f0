"""Shared memory on the SQL store: the ``shared_memory`` table.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction calls
these with its connection. A document is keyed by ``(agent, user_id)``, ``user_id`` ''
for the app scope.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import SharedMemory
from ..base import StoreConflict
from .dialect import insert_unless_present
from .schema import shared_memory as t

__all__ = ["delete_shared", "delete_user_shared", "get_shared", "put_shared"]


def _key(agent: str, user_id: str | None) -> sa.ColumnElement[bool]:
    return sa.and_(t.c.agent == agent, t.c.user_id == (user_id or ""))


def get_shared(
    conn: Connection, agent: str, user_id: str | None, *, lock: bool
) -> SharedMemory | None:
    """One document, or None; ``lock``: read it FOR UPDATE (a write transaction)."""
    stmt = sa.select(t).where(_key(agent, user_id))
    if lock:
        # Writers of one document queue on its row lock (as on a session's row):
        # a plain read would let N racing writers all fail the compare-and-set.
        stmt = stmt.with_for_update()
    row = conn.execute(stmt).mappings().first()
    if row is None:
        return None
    return SharedMemory(
        scope="user" if row["user_id"] else "app",
        agent=row["agent"],
        user_id=row["user_id"] or None,
        version=row["version"],
        updated_at=row["updated_at"],
        data=row["data"],
    )


def put_shared(conn: Connection, doc: SharedMemory, expected_version: int) -> None:
    """Insert (``expected_version`` 0) or compare-and-set a document.

    Raises:
        StoreConflict: the stored version is not ``expected_version``.
    """
    key = {"agent": doc.agent, "user_id": doc.user_id or ""}
    values = {"version": doc.version, "updated_at": doc.updated_at, "data": doc.data}
    if expected_version == 0:
        # A concurrent first write won: StoreConflict, with no error in the server log.
        if not insert_unless_present(conn, t, {**key, **values}):
            raise StoreConflict(f"shared memory of {doc.agent!r} changed concurrently")
        return
    # Compare-and-set: a writer that committed since our read moved the version,
    # so nothing matches (the row lock makes the second writer wait, then re-check).
    updated = conn.execute(
        sa.update(t)
        .where(_key(doc.agent, doc.user_id), t.c.version == expected_version)
        .values(values)
    )
    if updated.rowcount != 1:
        raise StoreConflict(f"shared memory of {doc.agent!r} changed concurrently")


def delete_shared(conn: Connection, agent: str, user_id: str | None) -> bool:
    """Delete one document; return whether it existed."""
    return bool(conn.execute(sa.delete(t).where(_key(agent, user_id))).rowcount)


def delete_user_shared(conn: Connection, user_id: str) -> int:
    """Delete every user-scope document of ``user_id``; return how many."""
    if not user_id:
        return 0
    return int(conn.execute(sa.delete(t).where(t.c.user_id == user_id)).rowcount)
