"""Store metadata (the keyring mark, the session chain's head) and the session chain on
the in-memory store, as a part of its transaction class. Transactions are serialised,
so a read of a value is already locked until the transaction ends."""

from __future__ import annotations

from collections.abc import Sequence

from ..base import ChainLink
from .state import TransactionBase

__all__ = ["MetaOps"]


class MetaOps(TransactionBase):
    """The store-metadata and session-chain methods (see the store protocol)."""

    def get_store_meta(self, name: str) -> str | None:
        return self._s._meta.get(name)

    def put_store_meta(self, name: str, value: str) -> None:
        self._writing()
        meta = self._s._meta
        if name in meta:
            old = meta[name]
            self._undo.append(lambda: meta.__setitem__(name, old))
        else:
            self._undo.append(lambda: meta.pop(name, None))
        meta[name] = value

    def insert_chain_links(self, links: Sequence[ChainLink]) -> None:
        self._writing()
        for link in links:
            self._append(self._s._chain, link)  # frozen: nothing to copy

    def list_chain_links(self, *, after_seq: int, limit: int) -> list[ChainLink]:
        return [link for link in self._s._chain if link.seq > after_seq][:limit]
