"""Audit events on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:audit  zset    score = audit seq, member = AuditEvent JSON
    as:audit_seq    string  INCR counter of audit seqs, store-wide
    as:tombstones   hash    sid -> JSON list of the audit events of a deleted session
                            (or of a deleted shared document's ``shm_`` audit id)

A seq is taken (INCR) when the event is buffered, so seqs increase across the store; a
transaction that does not commit leaves a gap. A session's events go with it; its
tombstone events stay in ``as:tombstones``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...jsonvalues import loads
from ...models import AuditEvent, Session
from .changes import CHANGES
from .codec import copy, dec, enc, prefix
from .errors import translated
from .replies import integer as _integer
from .replies import text as _text
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["AuditOps"]

_AUDIT_SEQ = "as:audit_seq"
_TOMBSTONES = "as:tombstones"


def _stored_audit(
    r: redis.Redis, session_id: str, after_seq: int | None, limit: int | None
) -> list[AuditEvent]:
    """The committed audit events of a stored session after ``after_seq``, oldest first,
    at most ``limit`` (None = all)."""
    low = "-inf" if after_seq is None else f"({after_seq}"
    start = None if limit is None else 0
    raw = _texts(r.zrangebyscore(prefix(session_id) + "audit", low, "+inf", start=start, num=limit))
    return [dec(AuditEvent, text) for text in raw]


def _tombstone_audit(r: redis.Redis, session_id: str) -> list[AuditEvent]:
    """The audit trail kept in a deleted session's tombstone ([] when there is none)."""
    text = _text(r.hget(_TOMBSTONES, session_id))
    return [AuditEvent.model_validate(e) for e in loads(text)] if text else []


class AuditOps:
    """The audit methods of the Redis transaction (see the store protocol). The host
    class provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _write: bool
    _writing: Callable[[], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    _session_known: Callable[[str], Session | None]
    _audit: dict[str, list[AuditEvent]]

    @translated
    def insert_audit(self, event: AuditEvent) -> int:
        self._writing()
        sid = event.session_id
        seq = _integer(self._r.incr(_AUDIT_SEQ))
        stored = event.model_copy(update={"seq": seq}, deep=True)
        if self._session_known(sid) is None:
            # A deleted session's tombstone outlives every key of the session.
            self._do("TOMB", _TOMBSTONES, sid, enc(stored))
        else:
            self._do("ZADD", prefix(sid) + "audit", seq, enc(stored))
            self._audit.setdefault(sid, []).append(stored)
        self._do("XADD", CHANGES, sid, seq)  # by the commit script: in commit order
        return seq

    @translated
    def list_audit(
        self, session_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[AuditEvent]:
        if limit is not None and limit <= 0:
            return []
        if self._write:
            exists = self._session_known(session_id) is not None
        else:
            exists = bool(self._r.exists(prefix(session_id) + "session"))
        if not exists:
            rows = _tombstone_audit(self._r, session_id)
        else:
            stored = self._stored(session_id)
            rows = _stored_audit(self._r, session_id, after_seq, limit) if stored else []
            rows += [copy(e) for e in self._audit.get(session_id, [])]
        rows = [e for e in rows if after_seq is None or e.seq > after_seq]
        return rows if limit is None else rows[:limit]
