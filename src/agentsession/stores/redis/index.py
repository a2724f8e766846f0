"""The Redis store's session indexes: their keys, and what a session change writes to them.

Every listing reads one sorted set, never every session of a user::

    as:sessions                   zset  every session; score 0, member "<updated_at us>|<sid>"
    as:user:{uid}:sessions        zset  one user's sessions, same members
    as:status:<status>            zset  the sessions stored with that status, same members
    as:user:{uid}:status:<status> zset  the same, of one user
    as:agent:<agent>              zset  the sessions of one agent, same members
    as:user:{uid}:agent:<agent>   zset  the same, of one user
    as:forks:{sid}                zset  the forks made from session sid, same members
                                  (kept with the forks when sid is deleted)
    as:due                        zset  ACTIVE sessions with a TTL; score = expires_at in us
    as:user:{uid}:due             zset  the same, of one user
    as:leases                     zset  sessions whose RUNNING run holds a lease; score =
                                  the session's lease_expires_at in us (the run sweep)
    as:user:{uid}:key:<hash>      string  session id of the session with an external key;
                                  <hash> = hex SHA-256 of "<agent>\x1f<external_key>"
    as:meta:<hash>                set   ids of the sessions with one metadata entry a
                                  filter can name (agentsession.metafilter); <hash> = hex
                                  SHA-256 of "<key>\x1f<match text>"
    as:user:{uid}:meta:<hash>     set   the same, of one user
    as:index_version              string  the layout above is complete (see below)

The metadata sets hold session ids, not listing members: they change only when a
session's metadata does (or it is deleted), so an append writes none of them. A count
filtered by metadata is the cardinality of their intersection with the other filters'
sets; a listing reads the sessions of the intersection of its metadata sets (its cost
grows with the sessions matching the filter).

Members of the lexicographic sets are fixed width, so their order is the listing order
``(updated_at, session_id)``. A listing by status reads the status set (ACTIVE: skipping
the due sessions); EXPIRED adds the due set (:mod:`.listing`). The store writes these
entries in the same Lua script as the session (:func:`index_writes`); the script's
check that an external key's entry is still absent makes the key unique; a store written by
a version without the status, agent and per-user due sets gets them built when it is
opened (``as:index_version`` below :data:`INDEX_VERSION`), from the sessions themselves.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from ...metafilter import MetadataFilter, indexed_entries
from ...models import Session, SessionStatus
from ..keyhash import external_key_hash
from .errors import translated

if TYPE_CHECKING:
    import redis

__all__ = [
    "ALL_SESSIONS",
    "DUE",
    "INDEX_VERSION",
    "INDEX_VERSION_KEY",
    "LEASES",
    "LeaseIndexOps",
    "cursor_member",
    "filter_sets",
    "forks_index",
    "index_for",
    "index_member",
    "index_writes",
    "key_index",
    "meta_sets",
    "us",
    "user_due",
    "user_index",
]

ALL_SESSIONS = "as:sessions"
DUE = "as:due"
LEASES = "as:leases"
INDEX_VERSION_KEY = "as:index_version"
#: 2: the status, agent and per-user due sets exist for every session; 3: the metadata
#: sets too.
INDEX_VERSION = "3"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Keeps pre-1970 times positive in the fixed-width members.
_MEMBER_OFFSET = 62_135_596_800_000_000

#: One index write: ("ZADD", key, score, member), ("ZREM", key, member), ("SET", key,
#: value) or ("DEL", key).
IndexWrite = tuple[str, ...]


def us(at: datetime) -> int:
    """Microseconds since the Unix epoch, exactly."""
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def index_member(session: Session) -> str:
    """The member of ``session`` in the lexicographic sets."""
    return f"{us(session.updated_at) + _MEMBER_OFFSET:020d}|{session.session_id}"


def cursor_member(after: tuple[datetime, str]) -> str:
    """The member a keyset cursor ``(updated_at, session_id)`` stands for."""
    at, sid = after
    return f"{us(at) + _MEMBER_OFFSET:020d}|{sid}"


def user_index(user_id: str) -> str:
    """The set of every session of ``user_id``."""
    return f"as:user:{{{user_id}}}:sessions"


def user_due(user_id: str) -> str:
    """The due set of ``user_id``'s sessions (score ``expires_at`` in us)."""
    return f"as:user:{{{user_id}}}:due"


def key_index(user_id: str, agent: str, external_key: str) -> str:
    """The string key holding the id of ``user_id``'s session of ``agent`` with this
    external key."""
    return f"as:user:{{{user_id}}}:key:{external_key_hash(agent, external_key)}"


def _key_entry(s: Session | None) -> dict[str, str]:
    if s is None or s.external_key is None:
        return {}
    return {key_index(s.user_id, s.agent, s.external_key): s.session_id}


def _by(field: str, value: str, user_id: str | None) -> str:
    if user_id is None:
        return f"as:{field}:{value}"
    return f"as:user:{{{user_id}}}:{field}:{value}"


def forks_index(parent_session_id: str) -> str:
    """The set of the forks made from ``parent_session_id``."""
    return f"as:forks:{{{parent_session_id}}}"


def index_for(
    user_id: str | None,
    status: SessionStatus | None,
    agent: str | None,
    parent_session_id: str | None = None,
) -> str:
    """The set a listing reads: the forks of a parent if filtered by parent, else by
    status if filtered by status, else by agent, else all (the other filters then apply
    row by row); of one user or of every user."""
    if parent_session_id is not None:
        return forks_index(parent_session_id)
    if status is not None:
        return _by("status", status.value, user_id)
    if agent is not None:
        return _by("agent", agent, user_id)
    return ALL_SESSIONS if user_id is None else user_index(user_id)


def filter_sets(
    user_id: str | None,
    status: SessionStatus | None,
    agent: str | None,
    parent_session_id: str | None = None,
) -> list[str]:
    """The sets whose intersection is exactly the sessions stored with these filters
    (``status`` as stored): one set per filter given (the per-user ones for a user),
    the user's or the store's set when no other one names the user."""
    keys = [] if parent_session_id is None else [forks_index(parent_session_id)]
    if status is not None:
        keys.append(_by("status", status.value, user_id))
    if agent is not None:
        keys.append(_by("agent", agent, user_id))
    if user_id is not None and status is None and agent is None:
        keys.append(user_index(user_id))
    return keys or [ALL_SESSIONS]


def meta_sets(user_id: str | None, metadata: MetadataFilter) -> list[str]:
    """The metadata sets (of ``user_id``'s sessions, or of every user's) whose
    intersection is the sessions with every entry of the checked filter."""
    return [_by("meta", _entry_hash(k, v), user_id) for k, v in sorted(metadata.items())]


def _entry_hash(key: str, text: str) -> str:
    return hashlib.sha256(f"{key}\x1f{text}".encode()).hexdigest()


def _meta_entries(s: Session | None) -> set[str]:
    if s is None:
        return set()
    hashes = [_entry_hash(k, v) for k, v in indexed_entries(s.metadata)]
    return {_by("meta", h, user) for h in hashes for user in (None, s.user_id)}


def _lex_entries(s: Session | None) -> set[tuple[str, str]]:
    if s is None:
        return set()
    member = index_member(s)
    keys = [ALL_SESSIONS, user_index(s.user_id)]
    for user in (None, s.user_id):
        keys += [_by("status", s.status.value, user), _by("agent", s.agent, user)]
    if s.parent_session_id is not None:
        keys.append(forks_index(s.parent_session_id))
    return {(key, member) for key in keys}


def _due_entries(s: Session | None) -> dict[str, int]:
    if s is None or s.status != SessionStatus.ACTIVE or s.expires_at is None:
        return {}
    return dict.fromkeys((DUE, user_due(s.user_id)), us(s.expires_at))


def _lease_entries(s: Session | None) -> dict[str, int]:
    if s is None or s.lease_expires_at is None:
        return {}
    return {LEASES: us(s.lease_expires_at)}


def index_writes(old: Session | None, new: Session | None) -> list[IndexWrite]:
    """The index writes that move a session from ``old`` to ``new`` (None: absent,
    i.e. inserted or deleted): removals first, then additions. ``("SET", key, sid)``
    and ``("DEL", key)`` write an external key's entry, ``("SREM"|"SADD", key, sid)``
    the metadata sets."""
    subject = new or old
    if subject is None:
        return []
    sid = subject.session_id
    old_lex, new_lex = _lex_entries(old), _lex_entries(new)
    writes: list[IndexWrite] = [("ZREM", k, m) for k, m in sorted(old_lex - new_lex)]
    old_due = _due_entries(old) | _lease_entries(old)
    new_due = _due_entries(new) | _lease_entries(new)
    writes += [("ZREM", k, sid) for k in sorted(old_due.keys() - new_due.keys())]
    writes += [("ZADD", k, "0", m) for k, m in sorted(new_lex - old_lex)]
    writes += [("ZADD", k, str(score), sid) for k, score in sorted(new_due.items())]
    old_meta, new_meta = _meta_entries(old), _meta_entries(new)
    writes += [("SREM", k, sid) for k in sorted(old_meta - new_meta)]
    writes += [("SADD", k, sid) for k in sorted(new_meta - old_meta)]
    old_key, new_key = _key_entry(old), _key_entry(new)
    writes[:0] = [("DEL", k) for k in sorted(old_key.keys() - new_key.keys())]
    writes += [("SET", k, v) for k, v in sorted(new_key.items()) if k not in old_key]
    return writes


class LeaseIndexOps:
    """The lapsed-lease read of the Redis transaction (see the store protocol), over
    the :data:`LEASES` set; the host class provides the client."""

    _r: redis.Redis

    @translated
    def list_lapsed_leases(self, *, now: datetime, limit: int) -> list[str]:
        """Ids of sessions whose run's lease lapsed at or before ``now``, oldest first."""
        if limit <= 0:
            return []
        found = self._r.zrangebyscore(LEASES, "-inf", us(now), start=0, num=limit)
        return cast(list[str], found)
