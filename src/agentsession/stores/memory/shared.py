"""Shared memory on the in-memory store, as a part of its transaction class: the
documents keyed ``(agent, user_id)``, ``""`` standing for the app scope."""

from __future__ import annotations

from ...models import SharedMemory
from ..base import StoreConflict
from .state import TransactionBase, copy

__all__ = ["SharedMemoryOps"]


class SharedMemoryOps(TransactionBase):
    """The shared-memory methods of the in-memory transaction (see the store protocol)."""

    def get_shared_memory(self, agent: str, user_id: str | None) -> SharedMemory | None:
        doc = self._s._shared.get((agent, user_id or ""))
        return None if doc is None else copy(doc)

    def put_shared_memory(self, doc: SharedMemory, *, expected_version: int) -> None:
        self._writing()
        key = (doc.agent, doc.user_id or "")
        old = self._s._shared.get(key)
        if (0 if old is None else old.version) != expected_version:
            raise StoreConflict(f"shared memory {key!r} changed during the transaction")
        self._s._shared[key] = copy(doc)
        self._undo.append(lambda: self._restore_shared(key, old))

    def delete_shared_memory(self, agent: str, user_id: str | None) -> bool:
        self._writing()
        key = (agent, user_id or "")
        old = self._s._shared.pop(key, None)
        if old is not None:
            self._undo.append(lambda: self._restore_shared(key, old))
        return old is not None

    def delete_user_shared_memory(self, user_id: str) -> int:
        self._writing()
        if not user_id:
            return 0
        keys = [k for k in self._s._shared if k[1] == user_id]
        for agent, _ in keys:
            self.delete_shared_memory(agent, user_id)
        return len(keys)

    def _restore_shared(self, key: tuple[str, str], doc: SharedMemory | None) -> None:
        if doc is None:
            self._s._shared.pop(key, None)
        else:
            self._s._shared[key] = doc
