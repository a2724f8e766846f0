"""Sessions on the in-memory store, as a part of its transaction class: the rows, the
external key index and the listings (scans of every session: the store is for tests and
small agents)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from ...metafilter import MetadataFilter, matches
from ...models import Session, SessionStatus
from ..base import SessionHead, StoreConflict
from ..listing import status_as_of
from .state import SessionData, TransactionBase, copy

__all__ = ["SessionOps"]


def _key_of(session: Session) -> tuple[str, str, str] | None:
    """The session's entry in the external key index, or None without a key."""
    if session.external_key is None:
        return None
    return (session.user_id, session.agent, session.external_key)


class SessionOps(TransactionBase):
    """The session methods of the in-memory transaction (see the store protocol)."""

    def get_session(self, session_id: str) -> Session | None:
        data = self._s._sessions.get(session_id)
        return None if data is None else copy(data.session)

    def get_session_head(self, session_id: str) -> SessionHead | None:
        data = self._s._sessions.get(session_id)  # a head holds no mutable value: no copy
        return None if data is None else SessionHead.of(data.session)

    def insert_session(self, session: Session) -> None:
        self._writing()
        if session.session_id in self._s._sessions:
            raise StoreConflict(f"session {session.session_id!r} exists")
        key = _key_of(session)
        if key is not None:
            if key in self._s._keys:
                raise StoreConflict("a session with this external key exists")
            self._s._keys[key] = session.session_id
            self._undo.append(lambda: self._s._keys.pop(key))
        self._s._sessions[session.session_id] = SessionData(copy(session))
        self._undo.append(lambda: self._s._sessions.pop(session.session_id))

    def find_session_by_key(self, user_id: str, agent: str, external_key: str) -> str | None:
        return self._s._keys.get((user_id, agent, external_key))

    def update_session(self, session: Session, *, expected_version: int) -> None:
        self._writing()
        data = self._data(session.session_id)
        if data.session.version != expected_version:
            raise StoreConflict(f"session {session.session_id!r} changed concurrently")
        self._set_attr(data, "session", copy(session))

    def delete_session(self, session_id: str) -> None:
        self._writing()
        data = self._s._sessions.pop(session_id, None)
        if data is None:
            return
        self._undo.append(lambda: self._s._sessions.__setitem__(session_id, data))
        key = _key_of(data.session)
        if key is not None:
            del self._s._keys[key]
            self._undo.append(lambda: self._s._keys.__setitem__(key, session_id))
        doomed = {k: r for k, r in self._s._idempotency.items() if r.session_id == session_id}
        for k in doomed:
            del self._s._idempotency[k]
        self._undo.append(lambda: self._s._idempotency.update(doomed))

    def list_sessions(
        self,
        *,
        user_id: str | None,
        status: SessionStatus | None,
        agent: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
        now: datetime,
        parent_session_id: str | None = None,
        metadata: MetadataFilter | None = None,
    ) -> list[Session]:
        rows = [
            s
            for s in self._matching(user_id, status, agent, now, parent_session_id, metadata)
            if after is None or (s.updated_at, s.session_id) < after
        ]
        rows.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return [copy(s) for s in rows[:limit]]

    def count_sessions(
        self,
        *,
        user_id: str | None,
        status: SessionStatus | None,
        agent: str | None,
        now: datetime,
        parent_session_id: str | None = None,
        metadata: MetadataFilter | None = None,
    ) -> int:
        """The listing's sessions, counted: a scan of every session, as the listing."""
        found = self._matching(user_id, status, agent, now, parent_session_id, metadata)
        return sum(1 for _ in found)

    def _matching(
        self,
        user_id: str | None,
        status: SessionStatus | None,
        agent: str | None,
        now: datetime,
        parent_session_id: str | None,
        metadata: MetadataFilter | None,
    ) -> Iterator[Session]:
        """The stored sessions (not copies) that pass the listing's filters, unordered."""
        for d in self._s._sessions.values():
            s = d.session
            if (
                (user_id is None or s.user_id == user_id)
                and (parent_session_id is None or s.parent_session_id == parent_session_id)
                and (status is None or status_as_of(s, now) == status)
                and (agent is None or s.agent == agent)
                and matches(s.metadata, metadata)
            ):
                yield s

    def list_due_sessions(self, *, now: datetime, limit: int) -> list[str]:
        due = [
            d.session
            for d in self._s._sessions.values()
            if d.session.status == SessionStatus.ACTIVE
            and d.session.expires_at is not None
            and d.session.expires_at <= now
        ]
        due.sort(key=lambda s: (s.expires_at, s.session_id))
        return [s.session_id for s in due[:limit]]

    def list_lapsed_leases(self, *, now: datetime, limit: int) -> list[str]:
        lapsed = [
            (d.session.lease_expires_at, sid)
            for sid, d in self._s._sessions.items()
            if d.session.lease_expires_at is not None and d.session.lease_expires_at <= now
        ]
        return [sid for _, sid in sorted(lapsed)[: max(limit, 0)]]

    def list_user_session_ids(self, user_id: str) -> list[str]:
        return [sid for sid, d in self._s._sessions.items() if d.session.user_id == user_id]
