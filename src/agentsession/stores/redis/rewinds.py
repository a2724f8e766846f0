"""Rewinds on the Redis store, as a part of its transaction class; and the message
codec the store's message keys share with them.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:rewinds      zset  score = number, member = the Rewind as JSON
    as:{sid}:rewound:<n>  zset  score = seq, member = a message as in ``as:{sid}:msgs``

Rewinds are numbered 1, 2, 3... and deleted only with their session, so the commit
script's ``PURGE`` deletes ``rewound:1`` .. ``rewound:<ZCARD rewinds>``. A hiding
rewind reads the messages above the seq (its own transaction's too) and buffers a ZADD
of each, in the commit script that also removes them from the history. Every rewind
also rewrites the session (its version), whose guard makes the transaction a
compare-and-set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...jsonvalues import dumps, loads
from ...models import Message, Rewind
from ..base import MessageBuilder
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["RewindOps", "dec_message", "enc_message"]


def enc_message(m: Message) -> str:
    """A message as its zset member: id, seq, time and the payload as appended."""
    return dumps(
        {"id": m.message_id, "seq": m.seq, "at": m.created_at.isoformat(), "p": m.payload()}
    )


def dec_message(sid: str, text: str, build: MessageBuilder = None) -> Message:
    """The message of a zset member of session ``sid`` (made by ``build`` if given)."""
    row = loads(text)
    make = Message.from_store if build is None else build
    return make(
        row["p"], message_id=row["id"], session_id=sid, seq=row["seq"], created_at=row["at"]
    )


def _keys(session_id: str) -> tuple[str, str]:
    p = f"as:{{{session_id}}}:"
    return p + "rewinds", p + "rewound:"


class RewindOps:
    """The rewind methods of the Redis transaction (see the store protocol). The host
    class provides the client, the write buffer, the session checks and the reads of
    messages through this transaction's own writes."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    _check: Callable[..., None]
    get_messages: Callable[..., list[Message]]

    @functools.cached_property
    def _new_rewinds(self) -> dict[str, list[Rewind]]:
        """Session id -> the rewinds this transaction inserted, in order."""
        return {}

    def insert_rewind(self, rewind: Rewind) -> None:
        """Buffer a ZADD, checked at commit to take a free number."""
        self._writing()
        sid = rewind.session_id
        self._require_session(sid)
        key = _keys(sid)[0]
        if self._stored(sid):
            self._check("ZFREE", key, str(rewind.number))
        self._do("ZADD", key, rewind.number, dumps(rewind.model_dump(mode="json")))
        self._new_rewinds.setdefault(sid, []).append(rewind.model_copy(deep=True))

    def list_rewinds(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Rewind]:
        """Stored rewinds in the range, then this transaction's own."""
        if limit is not None and limit <= 0:
            return []
        rows: list[Rewind] = []
        if self._stored(session_id):
            key, low = _keys(session_id)[0], "-inf" if after_number is None else f"({after_number}"
            start = None if limit is None else 0
            if newest:
                raw = _texts(self._r.zrevrangebyscore(key, "+inf", low, start=start, num=limit))
                raw.reverse()
            else:
                raw = _texts(self._r.zrangebyscore(key, low, "+inf", start=start, num=limit))
            rows = [Rewind.model_validate(loads(t)) for t in raw]
        rows += [
            r.model_copy(deep=True)
            for r in self._new_rewinds.get(session_id, [])
            if after_number is None or r.number > after_number
        ]
        if limit is not None and len(rows) > limit:
            rows = rows[-limit:] if newest else rows[:limit]
        return rows

    def hide_messages(self, session_id: str, *, after_seq: int, number: int) -> int:
        """Buffer a ZADD of each message above ``after_seq`` into the rewind's key,
        checked at commit to be a new key."""
        self._writing()
        self._require_session(session_id)
        key = _keys(session_id)[1] + str(number)
        if self._stored(session_id):
            self._check("NX", key)
        hidden = self.get_messages(session_id, after_seq=after_seq)
        for m in hidden:
            self._do("ZADD", key, m.seq, enc_message(m))
        return len(hidden)

    def get_rewound_messages(
        self,
        session_id: str,
        number: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """The committed messages of the rewind (a rewind is read after it commits)."""
        if (limit is not None and limit <= 0) or not self._stored(session_id):
            return []
        key = _keys(session_id)[1] + str(number)
        low = "-inf" if after_seq is None else f"({after_seq}"
        start = None if limit is None else 0
        raw = _texts(self._r.zrangebyscore(key, low, "+inf", start=start, num=limit))
        return [dec_message(session_id, t) for t in raw]
