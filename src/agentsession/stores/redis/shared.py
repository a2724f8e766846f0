"""Shared memory on the Redis store, as a part of its transaction class.

Key layout::

    as:shared:app:<agent>         string  the app-scope SharedMemory of an agent as JSON
    as:shared:user:{uid}:<agent>  string  a user-scope SharedMemory as JSON
    as:shared:user:{uid}          set     the agents with a user-scope document of the user
    <shared key>:lock             string  a document's write lock, as ``as:{sid}:lock``

A write transaction takes the document's lock before its guarded read, so writers of
one document queue; the read is a guard of the commit script, so a concurrent change
still turns the commit into a StoreConflict. Writes are buffered like every other
write of the transaction and applied by the commit script.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ...jsonvalues import dumps, loads
from ...models import SharedMemory
from ..base import StoreConflict
from .errors import translated

if TYPE_CHECKING:
    import redis

    from .locks import SessionLock


__all__ = ["SharedMemoryOps"]


def _shared_key(agent: str, user_id: str | None) -> str:
    if user_id is None:
        return f"as:shared:app:{agent}"
    return f"{_shared_index(user_id)}:{agent}"


def _shared_index(user_id: str) -> str:
    return f"as:shared:user:{{{user_id}}}"


class SharedMemoryOps:
    """The shared-memory methods of the Redis transaction (see the store protocol); the
    host class provides the client, the guarded reads, the write buffer and the locks."""

    _shared: dict[str, SharedMemory | None]
    _r: redis.Redis
    _write: bool
    _lock: SessionLock
    _writing: Callable[[], None]
    _read: Callable[[str], str | None]
    _do: Callable[..., None]

    @translated
    def get_shared_memory(self, agent: str, user_id: str | None) -> SharedMemory | None:
        """The document as this transaction sees it; a writer first takes its lock."""
        key = _shared_key(agent, user_id)
        if key in self._shared:
            doc = self._shared[key]
            return None if doc is None else doc.model_copy(deep=True)
        if self._write:
            # Writers of one document queue here, as writers of one session do: the
            # guard alone would make all but one of N racing writers re-run.
            self._lock.take(key + ":lock", f"shared memory of {agent!r}")
        # Guarded: a commit requires the document unchanged, so a concurrent writer of
        # it turns this transaction's write into StoreConflict and a re-run.
        raw = self._read(key)
        return None if raw is None else SharedMemory.model_validate(loads(raw))

    @translated
    def put_shared_memory(self, doc: SharedMemory, *, expected_version: int) -> None:
        """Buffer a SET (and the user's index entry), compare-and-set on the version."""
        self._writing()
        current = self.get_shared_memory(doc.agent, doc.user_id)
        if (0 if current is None else current.version) != expected_version:
            raise StoreConflict(f"shared memory of {doc.agent!r} changed concurrently")
        key = _shared_key(doc.agent, doc.user_id)
        self._shared[key] = doc.model_copy(deep=True)
        self._do("SET", key, dumps(doc.model_dump(mode="json")))
        if doc.user_id is not None:
            self._do("SADD", _shared_index(doc.user_id), doc.agent)

    @translated
    def delete_shared_memory(self, agent: str, user_id: str | None) -> bool:
        """Buffer the document's DEL (and its index entry); whether it existed."""
        self._writing()
        if self.get_shared_memory(agent, user_id) is None:
            return False
        key = _shared_key(agent, user_id)
        self._shared[key] = None
        self._do("DEL", key)
        if user_id is not None:
            self._do("SREM", _shared_index(user_id), agent)
        return True

    @translated
    def delete_user_shared_memory(self, user_id: str) -> int:
        """Delete every user-scope document of ``user_id``; how many there were."""
        self._writing()
        # SMEMBERS of the sync client made with decode_responses=True: a set of str.
        agents = sorted(cast(set[str], self._r.smembers(_shared_index(user_id))))
        return sum(self.delete_shared_memory(agent, user_id) for agent in agents)
