"""Store metadata and the session chain on the SQL store: the ``store_meta`` and
``session_chain`` tables.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`MetaOps` as a base. In a write transaction a value is read with
``FOR UPDATE`` (SQLite's write transactions are serialised already), so a writer of the
session chain holds its head until it commits: session creations and deletions take
turns on it, appends to a session never touch it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..base import ChainLink, StoreConflict
from .dialect import insert_unless_present, translated
from .schema import session_chain, store_meta

__all__ = ["MetaOps"]

_C = session_chain


class MetaOps:
    """The store-metadata and session-chain methods of the SQL transaction (see the
    store protocol). The host class provides the connection, whether it writes, the
    write check and the errors to translate."""

    _conn: Connection
    _write: bool
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def get_store_meta(self, name: str) -> str | None:
        stmt = sa.select(store_meta.c.value).where(store_meta.c.name == name)
        if self._write:
            stmt = stmt.with_for_update()
        value = self._conn.execute(stmt).scalar_one_or_none()
        return None if value is None else str(value)

    @translated
    def put_store_meta(self, name: str, value: str) -> None:
        self._writing()
        t = store_meta
        changed = self._conn.execute(
            sa.update(t).where(t.c.name == name).values(value=value),
            execution_options={"preserve_rowcount": True},
        ).rowcount
        # An unchanged value counts as no row on MariaDB/MySQL: then the insert meets
        # the row and raises StoreConflict, so compare before deciding.
        if (
            changed == 0
            and self.get_store_meta(name) != value
            and not insert_unless_present(self._conn, t, {"name": name, "value": value})
        ):
            raise StoreConflict(f"store value {name!r} was set by a concurrent writer")

    @translated
    def insert_chain_links(self, links: Sequence[ChainLink]) -> None:
        self._writing()
        if links:
            rows = [
                {
                    "seq": k.seq,
                    "session_id": k.session_id,
                    "kind": k.kind,
                    "event_hash": k.event_hash,
                    "prev_hash": k.prev_hash,
                    "hash": k.hash,
                }
                for k in links
            ]
            self._conn.execute(sa.insert(_C), rows)

    @translated
    def list_chain_links(self, *, after_seq: int, limit: int) -> list[ChainLink]:
        stmt = sa.select(_C).where(_C.c.seq > after_seq).order_by(_C.c.seq).limit(limit)
        return [
            ChainLink(
                seq=int(r.seq),
                session_id=r.session_id,
                kind=r.kind,
                event_hash=r.event_hash,
                prev_hash=r.prev_hash,
                hash=r.hash,
            )
            for r in self._conn.execute(stmt)
        ]
