"""Store metadata and the session chain on the Redis store, as a part of its transaction
class.

Key layout::

    as:meta:<name>          string  a store-wide value (the keyring mark, the session
                                    chain's head)
    as:meta:<name>:lock     string  its write lock, as ``as:{sid}:lock``
    as:chain                zset    score = seq, member = a session-chain link as JSON

A write transaction reading a value first takes its lock, then reads it as a guard, so
writers of the session chain's head take turns and a concurrent change of it makes the
commit a StoreConflict (a re-run), never a fork of the chain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..base import ChainLink
from .errors import translated
from .locks import SessionLock
from .replies import text as _text
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["MetaOps"]

_CHAIN = "as:chain"


def _key(name: str) -> str:
    return f"as:meta:{name}"


class MetaOps:
    """The store-metadata and session-chain methods of the Redis transaction (see the
    store protocol); the host class provides the client, the guarded reads, the write
    buffer and the locks."""

    _r: redis.Redis
    _write: bool
    _lock: SessionLock
    _meta: dict[str, str]
    _writing: Callable[[], None]
    _read: Callable[[str], str | None]
    _do: Callable[..., None]

    @translated
    def get_store_meta(self, name: str) -> str | None:
        if name in self._meta:
            return self._meta[name]
        key = _key(name)
        if not self._write:
            return _text(self._r.get(key))
        self._lock.take(key + ":lock", f"store value {name!r}")
        return self._read(key)

    @translated
    def put_store_meta(self, name: str, value: str) -> None:
        self._writing()
        self.get_store_meta(name)  # locked and guarded, as a compare-and-set
        self._meta[name] = value
        self._do("SET", _key(name), value)

    @translated
    def insert_chain_links(self, links: Sequence[ChainLink]) -> None:
        self._writing()
        for k in links:
            fields = [k.session_id, k.kind, k.event_hash, k.prev_hash, k.hash]
            self._do("ZADD", _CHAIN, k.seq, json.dumps([k.seq, *fields]))

    @translated
    def list_chain_links(self, *, after_seq: int, limit: int) -> list[ChainLink]:
        raw = _texts(self._r.zrangebyscore(_CHAIN, f"({after_seq}", "+inf", start=0, num=limit))
        links = []
        for text in raw:
            seq, session_id, kind, event_hash, prev_hash, digest = json.loads(text)
            links.append(ChainLink(seq, session_id, kind, event_hash, prev_hash, digest))
        return links
