"""Messages on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:msgs  zset  score = seq, member = {"id","seq","at","p": payload} JSON
                         (:func:`.rewinds.enc_message`); removing messages cuts the top
                         (ZREMRANGEBYSCORE)

A transaction's appends are buffered and read back with the stored rows; a removal
(``delete_messages``) records a *cut*: stored rows above it are hidden from reads here
and removed at commit, after the buffered appends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...models import Message
from ..base import JSONTexts, MessageBuilder, StoreConflict, rebuilt
from .codec import copy, prefix
from .errors import translated
from .replies import integer as _integer
from .replies import texts as _texts
from .rewinds import dec_message, enc_message

if TYPE_CHECKING:
    import redis

__all__ = ["MessageOps"]


def _stored_messages(
    client: redis.Redis,
    sid: str,
    after_seq: int | None,
    before_seq: int | None,
    limit: int | None,
    newest: bool,
    build: MessageBuilder,
) -> list[Message]:
    """The committed messages of ``sid`` with ``after_seq < seq < before_seq``, oldest
    first; with ``limit``, the newest or the first ``limit`` of them."""
    key = prefix(sid) + "msgs"
    low = "-inf" if after_seq is None else f"({after_seq}"
    high = "+inf" if before_seq is None else f"({before_seq}"
    if limit is None:
        raw = _texts(client.zrangebyscore(key, low, high))
    elif newest:
        raw = _texts(client.zrevrangebyscore(key, high, low, start=0, num=limit))[::-1]
    else:
        raw = _texts(client.zrangebyscore(key, low, high, start=0, num=limit))
    return [dec_message(sid, text, build) for text in raw]


class MessageOps:
    """The message methods of the Redis transaction (see the store protocol). The host
    class provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    _check: Callable[..., None]
    _messages: dict[str, list[Message]]
    _cut: dict[str, int]

    @translated
    def insert_messages(self, messages: Sequence[Message], *, payloads: JSONTexts = None) -> None:
        self._writing()
        for m in messages:
            sid = m.session_id
            self._require_session(sid)
            pending = self._messages.setdefault(sid, [])
            if any(p.seq == m.seq for p in pending):
                raise StoreConflict(f"message seq {m.seq} exists in {sid!r}")
            key = prefix(sid) + "msgs"
            if self._stored(sid) and m.seq <= self._cut.get(sid, m.seq):
                self._check("ZFREE", key, str(m.seq))
            self._do("ZADD", key, m.seq, enc_message(m))
            pending.append(copy(m))

    @translated
    def get_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest: bool = True,
        build: MessageBuilder = None,
    ) -> list[Message]:
        if limit is not None and limit <= 0:
            return []
        rows: list[Message] = []
        if self._stored(session_id):
            top, cut = before_seq, self._cut.get(session_id)
            if cut is not None:  # stored messages above the cut go at commit
                top = cut + 1 if top is None else min(top, cut + 1)
            rows = _stored_messages(self._r, session_id, after_seq, top, limit, newest, build)
        pending = [
            m
            for m in self._messages.get(session_id, [])
            if (after_seq is None or m.seq > after_seq)
            and (before_seq is None or m.seq < before_seq)
        ]
        rows += [copy(m) for m in pending] if build is None else rebuilt(pending, build)
        if limit is not None and len(rows) > limit:
            rows = rows[-limit:] if newest else rows[:limit]
        return rows

    @translated
    def delete_messages(self, session_id: str, *, after_seq: int) -> int:
        self._writing()
        self._require_session(session_id)
        pending = self._messages.pop(session_id, [])
        self._messages[session_id] = [m for m in pending if m.seq <= after_seq]
        removed = len(pending) - len(self._messages[session_id])
        cut, key = self._cut.get(session_id), prefix(session_id) + "msgs"
        if self._stored(session_id) and (cut is None or after_seq < cut):
            stored = _integer(self._r.zcount(key, f"({after_seq}", cut or "+inf"))
            if stored:  # a cut hides stored rows above it and skips their seq checks
                removed, self._cut[session_id] = removed + stored, after_seq
        if removed:  # after the buffered ZADDs too, so it also drops those above the cut
            self._do("ZCUT", key, after_seq)
        return removed
