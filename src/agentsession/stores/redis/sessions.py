"""Sessions on the Redis store, as a part of its transaction class: the session rows'
writes with their index entries (:mod:`.index`), the external key's owner, and the
listings over the index sets.

Reading a session (and taking its lock) and deleting one are the transaction's own
(:mod:`.store`): they touch what every part of it has buffered.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...metafilter import MetadataFilter, matches
from ...models import Session, SessionStatus
from ..base import StoreConflict
from ..listing import is_due, merge_newest, status_as_of
from .codec import copy, dec, enc, prefix
from .errors import translated
from .index import (
    DUE,
    cursor_member,
    filter_sets,
    index_for,
    index_writes,
    key_index,
    meta_sets,
    us,
    user_due,
    user_index,
)
from .replies import integer as _integer
from .replies import maybe_texts as _maybe_texts
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["SessionOps"]


def _sessions_of(r: redis.Redis, session_ids: Sequence[str]) -> list[Session]:
    """The sessions of these ids that exist, in that order (one MGET)."""
    if not session_ids:
        return []
    raws = _maybe_texts(r.mget([prefix(sid) + "session" for sid in session_ids]))
    return [dec(Session, raw) for raw in raws if raw is not None]


def _scan_index(
    r: redis.Redis,
    index: str,
    after: tuple[datetime, str] | None,
    limit: int,
    keep: Callable[[Session], bool],
) -> list[Session]:
    """Up to ``limit`` sessions of the lexicographic set ``index`` (:mod:`.index`),
    newest first, strictly after the cursor ``after``, that ``keep`` accepts. Reads the
    set in chunks, one MGET each, so the few rows ``keep`` refuses (due sessions in an
    ACTIVE listing, sessions changed since the set was read) cost no round trip each."""
    high = "+" if after is None else "(" + cursor_member(after)
    chunk = max(limit, 32)
    out: list[Session] = []
    while len(out) < limit:
        members = _texts(r.zrevrangebylex(index, high, "-", start=0, num=chunk))
        if not members:
            break
        out += [s for s in _sessions_of(r, [m.partition("|")[2] for m in members]) if keep(s)]
        if len(members) < chunk:
            break
        high = "(" + members[-1]
    return out[:limit]


def _list_sessions(
    r: redis.Redis,
    filters: tuple[str | None, SessionStatus | None, str | None, str | None],
    metadata: MetadataFilter | None,
    after: tuple[datetime, str] | None,
    limit: int,
    now: datetime,
) -> list[Session]:
    """``StoreTransaction.list_sessions`` on the index sets (:mod:`.index`);
    ``filters`` are its ``user_id``, ``status``, ``agent`` and ``parent_session_id``.
    A metadata filter reads the sessions of the intersection of its sets, all of them
    (they hold ids, not the listing order), and sorts those it keeps."""
    user_id, status, agent, parent = filters
    if limit <= 0:
        return []

    def keep(s: Session) -> bool:
        # The set may be a step behind the session (changed since it was read); the
        # forks set of a parent is not per user.
        wanted = status is None or status_as_of(s, now) == status
        mine = user_id in (None, s.user_id) and parent in (None, s.parent_session_id)
        return wanted and mine and agent in (None, s.agent) and matches(s.metadata, metadata)

    if metadata is not None:
        ids = sorted(_texts(r.sinter(meta_sets(user_id, metadata))))
        found: list[Session] = []
        for start in range(0, len(ids), 500):  # one MGET per chunk
            found += [s for s in _sessions_of(r, ids[start : start + 500]) if keep(s)]
        return merge_newest(found, after=after, limit=limit)
    rows = _scan_index(r, index_for(user_id, status, agent, parent), after, limit, keep)
    # The forks set holds a parent's forks in every status: their due ones are in rows.
    if status is not SessionStatus.EXPIRED or parent is not None:
        return rows
    due_key = DUE if user_id is None else user_due(user_id)
    due = [s for s in _sessions_of(r, _texts(r.zrangebyscore(due_key, "-inf", us(now)))) if keep(s)]
    return merge_newest(rows, due, after=after, limit=limit)


class SessionOps:
    """The session methods of the Redis transaction (see the store protocol). The host
    class provides the client, the write buffer, its guarded reads and the sessions this
    transaction wrote."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _read: Callable[[str], str | None]
    _do: Callable[..., None]
    _sessions: dict[str, Session | None]
    _session_known: Callable[[str], Session | None]

    @translated
    def insert_session(self, session: Session) -> None:
        self._writing()
        if self._session_known(session.session_id) is not None:
            raise StoreConflict(f"session {session.session_id!r} exists")
        key = session.external_key
        # The entry is read as a guard: the commit checks it is still what was read (absent,
        # or stale and then overwritten), so of two racing inserts of one key one commits.
        if key is not None and _key_owner(self, session.user_id, session.agent, key):
            raise StoreConflict("a session with this external key exists")
        self._put_session(None, session)

    @translated
    def find_session_by_key(self, user_id: str, agent: str, external_key: str) -> str | None:
        return _key_owner(self, user_id, agent, external_key)

    @translated
    def update_session(self, session: Session, *, expected_version: int) -> None:
        self._writing()
        old = self._session_known(session.session_id)
        if old is None or old.version != expected_version:
            raise StoreConflict(f"session {session.session_id!r} changed concurrently")
        self._put_session(old, session)

    def _put_session(self, old: Session | None, new: Session) -> None:
        sid = new.session_id
        self._sessions[sid] = copy(new)
        self._do("SET", prefix(sid) + "session", enc(new))
        for op, key, *args in index_writes(old, new):
            self._do(op, key, *args)

    @translated
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
        filters = (user_id, status, agent, parent_session_id)
        return _list_sessions(self._r, filters, metadata, after, limit, now)

    @translated
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
        """The sessions stored with these filters, counted on the index sets
        (:func:`.index.filter_sets`): ZCARD of one set (O(1)), or ZINTERCARD of the
        sets of two or three filters (Redis 7.0 or later; O(N*K), N the smallest set's
        size, K the number of sets), no session read. An ACTIVE or EXPIRED count also
        reads the due sessions (ACTIVE past their TTL, not yet swept: few between sweeps),
        as the listing does, and counts them as EXPIRED, not ACTIVE (nothing is
        written). Two commands, not a snapshot: a session that changes between them may
        be counted as before or after.

        A metadata filter alone is the cardinality of its sets' intersection (SCARD,
        or SINTERCARD of one set per entry, of the user's sessions): no session read.
        With another filter, the sessions of that intersection are read and checked,
        as the filtered listing does: the cost grows with the sessions matching the
        metadata, not with the user's others.
        """
        parent = parent_session_id
        if metadata is not None:
            if status is None and agent is None and parent is None:
                sets = meta_sets(user_id, metadata)
                if len(sets) == 1:
                    return _integer(self._r.scard(sets[0]))
                return _integer(self._r.sintercard(len(sets), list[Any](sets)))
            filters = (user_id, status, agent, parent)
            return len(_list_sessions(self._r, filters, metadata, None, sys.maxsize, now))
        keys = filter_sets(user_id, status, agent, parent)
        if len(keys) == 1:
            stored = _integer(self._r.zcard(keys[0]))
        else:
            stored = _integer(self._r.zintercard(len(keys), keys))
        if status not in (SessionStatus.ACTIVE, SessionStatus.EXPIRED):
            return stored
        due_key = DUE if user_id is None else user_due(user_id)
        due = sum(
            1
            for s in _sessions_of(self._r, _texts(self._r.zrangebyscore(due_key, "-inf", us(now))))
            if is_due(s, now)
            and agent in (None, s.agent)
            and parent in (None, s.parent_session_id)
            and matches(s.metadata, metadata)
        )
        return stored - due if status is SessionStatus.ACTIVE else stored + due

    @translated
    def list_due_sessions(self, *, now: datetime, limit: int) -> list[str]:
        if limit <= 0:
            return []
        return _texts(self._r.zrangebyscore(DUE, "-inf", us(now), start=0, num=limit))

    @translated
    def list_user_session_ids(self, user_id: str) -> list[str]:
        return [m.partition("|")[2] for m in _texts(self._r.zrange(user_index(user_id), 0, -1))]


def _key_owner(tx: SessionOps, user_id: str, agent: str, external_key: str) -> str | None:
    """The id in the key's entry if that session exists and has this key, else None.

    An entry naming a missing session, or one of another key (left by an interrupted
    or older writer), counts as absent: it must not block the key for good. The
    session row is read as a guard too, so the answer holds at commit.
    """
    sid = tx._read(key_index(user_id, agent, external_key))
    if sid is None:
        return None
    if sid in tx._sessions:
        owner = tx._sessions[sid]
    else:
        raw = tx._read(prefix(sid) + "session")
        owner = None if raw is None else dec(Session, raw)
    if owner is None or (owner.user_id, owner.agent, owner.external_key) != (
        user_id,
        agent,
        external_key,
    ):
        return None
    return sid
