"""The metadata index of the SQL store: ``session_metadata`` kept with the session row,
and the conditions of a listing or count filtered by metadata.

``session_metadata`` holds one row per metadata entry a filter can name
(:func:`agentsession.metafilter.indexed_entries`): ``(session_id, key, value,
user_id)``, its key ``(session_id, key)``, its index ``(key, value, user_id,
session_id)``. The session's writes keep it in their transaction (an insert, an update
whose metadata changed); it goes with the session by ``ON DELETE CASCADE`` (deletion,
erasure). A filtered count reads that index alone (``COUNT(*)`` of the matching
sessions of the user, never the user's other sessions), and joins the session rows only
for the other filters; a listing reads the sessions the matching entries name. With
several keys, the first is the rarest: each key's range is counted first (one
statement), up to :data:`PROBE` entries (:meth:`MetadataOps._rarest_first`), so a rare
key with a common one (``team=rare`` and ``env=prod``) reads the rare key's range, and
each other key is looked up by the primary key ``(session_id, key)`` for each entry of
that range (:func:`matching_sessions`).
The cost grows with the sessions matching the rarest key (at most :data:`PROBE` index
entries per key to find it), not with the user's or the store's sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...metafilter import MetadataFilter, indexed_entries
from ...models import Session
from .schema import session_metadata, sessions

__all__ = ["PROBE", "MetadataOps", "matching_sessions", "metadata_condition", "metadata_params"]

#: The most index entries read per key to find a filter's rarest key.
PROBE = 256


def matching_sessions(keys: int, user: bool) -> sa.Select[tuple[str]]:
    """The ids of the sessions with the ``keys`` metadata entries bound as
    ``meta_k<i>``/``meta_v<i>``, read from the first entry's index range (``user``: the
    range of the ``user_id`` bind's entries).

    Each other entry is a scalar subquery per entry of that range, the value stored
    under its key by the primary key ``(session_id, key)`` (at most one row). Not a join
    nor an ``EXISTS``: PostgreSQL flattens those into a join it may plan as a hash
    join over the other key's whole range, and does so in the generic plan of a
    prepared statement (psycopg prepares a statement run five times), which cannot
    see that the first range is the small one; a scalar subquery is never flattened,
    so every dialect reads the first range and probes each of its entries."""
    m = session_metadata
    first = sa.select(m.c.session_id).where(
        m.c.key == sa.bindparam("meta_k0"), m.c.value == sa.bindparam("meta_v0")
    )
    if user:
        first = first.where(m.c.user_id == sa.bindparam("user_id"))
    for i in range(1, keys):
        other = m.alias(f"meta{i}")
        value = (
            sa.select(other.c.value)
            .where(other.c.session_id == m.c.session_id, other.c.key == sa.bindparam(f"meta_k{i}"))
            .correlate(m)
            .scalar_subquery()
        )
        first = first.where(value == sa.bindparam(f"meta_v{i}"))
    return first


def metadata_condition(keys: int, user: bool) -> sa.ColumnElement[bool]:
    """The condition on ``sessions`` that a session is one of
    :func:`matching_sessions`."""
    return sessions.c.session_id.in_(matching_sessions(keys, user))


def metadata_params(entries: list[tuple[str, str]]) -> dict[str, str]:
    """The binds of :func:`matching_sessions` for a checked filter's entries, the
    first one read first (:meth:`MetadataOps._rarest_first`)."""
    params: dict[str, str] = {}
    for i, (key, value) in enumerate(entries):
        params[f"meta_k{i}"] = key
        params[f"meta_v{i}"] = value
    return params


class MetadataOps:
    """The metadata index writes and the filtered count of the SQL transaction. The
    host class provides the connection."""

    _conn: Connection
    _writing: Callable[[], None]
    #: Each session's indexed entries as this write transaction read or wrote them.
    _indexed: dict[str, list[tuple[str, str]]]

    def _metadata_read(self, session: Session) -> None:
        """Remember the entries of a session read for writing, so an update that leaves
        them as they were (every append writes the metadata column) writes no index row:
        taken now, as the metadata dict may later be changed in place."""
        self._indexed[session.session_id] = indexed_entries(session.metadata)

    def _index_metadata(self, session: Session, *, replace: bool) -> None:
        """Index the session's metadata (``replace``: drop its rows indexed before),
        unless its entries are those this transaction read or wrote."""
        m = session_metadata
        sid = session.session_id
        entries = indexed_entries(session.metadata)
        if replace and self._indexed.get(sid) == entries:
            return
        if replace:
            self._conn.execute(sa.delete(m).where(m.c.session_id == sid))
        rows = [
            {"session_id": sid, "user_id": session.user_id, "key": k, "value": v}
            for k, v in entries
        ]
        if rows:
            self._conn.execute(sa.insert(m), rows)
        self._indexed[sid] = entries

    def _rarest_first(
        self, metadata: MetadataFilter | None, user_id: str | None
    ) -> list[tuple[str, str]]:
        """The filter's entries, the one with the fewest index entries (counted up to
        :data:`PROBE`) first; one statement for them all, none for a single key."""
        entries = sorted((metadata or {}).items())
        if len(entries) < 2:
            return entries
        m = session_metadata
        probes = []
        for key, value in entries:
            probe = sa.select(sa.literal(1)).where(m.c.key == key, m.c.value == value)
            if user_id is not None:
                probe = probe.where(m.c.user_id == user_id)
            counted = sa.select(sa.func.count()).select_from(probe.limit(PROBE).subquery())
            probes.append(counted.scalar_subquery())
        sizes = self._conn.execute(sa.select(*probes)).one()
        ranked = sorted(zip(sizes, range(len(entries)), entries, strict=True))
        return [entry for _, _, entry in ranked]

    def _count_by_metadata(
        self, metadata: MetadataFilter, user_id: str | None, session_filters: list[Any]
    ) -> int:
        """``COUNT(*)`` of the sessions with every entry of ``metadata`` that pass
        ``session_filters`` (conditions on ``sessions``; none: the index alone), read
        from the rarest entry's index range."""
        entries = self._rarest_first(metadata, user_id)
        matching = matching_sessions(len(entries), user_id is not None)
        if session_filters:
            # The sessions looked up by id from the index range, the other filters
            # checked on their rows (a CASE, as a parent's forks are counted): in the
            # WHERE, the database could take the status index and count every session
            # of that status instead.
            counted = sa.func.count(sa.case((sa.and_(*session_filters), 1)))
            stmt = sa.select(counted).where(sessions.c.session_id.in_(matching))
        else:
            stmt = sa.select(sa.func.count()).select_from(matching.subquery())
        params = {**metadata_params(entries), "user_id": user_id}
        return int(self._conn.execute(stmt, params).scalar_one())
