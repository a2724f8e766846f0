"""The keyring mark: the store records which keyring its content is sealed with, so a
process that opens it without that keyring is refused rather than showing ciphertext
(``$as1...``) as values or writing plaintext beside it.

The mark is the keyring's store id (:attr:`agentsession.crypto.Keyring.store_id`, shown
by ``agentsession keyring status``; random, never key material), kept in the store's
metadata (:meth:`~.base.StoreTransaction.get_store_meta`, name :data:`MARK`: the
``store_meta`` table, the Redis key ``as:meta:keyring``, the memory store's tables). The
first time a keyring opens a store (``SessionManager.from_url(url, keyring=...)``: every
command, ``serve``, ``agentsession encrypt --declare``) the store is marked with it; from
then on opening it without a keyring, or with another keyring, raises
:class:`~agentsession.errors.KeyringMismatch` before anything is read or written
(docs/security.md, "Encryption at rest").

A process opened without a keyring keeps watching for a mark made later by another
process (:class:`MarkWatch`): at most :data:`RECHECK_SECONDS` after the store is marked,
every call of that process raises :class:`~agentsession.errors.KeyringMismatch`.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING

from ..errors import KeyringMismatch, StoreBusy
from .base import SessionStore

if TYPE_CHECKING:
    from ..crypto import Keyring

__all__ = ["MARK", "RECHECK_SECONDS", "MarkWatch", "check_keyring_mark"]

#: The store-metadata name of the keyring mark.
MARK = "keyring"

#: Seconds (monotonic clock) between two reads of the mark by a process opened without
#: a keyring: the longest it keeps working on a store another process has just marked
#: (as long as the key store's reload interval, :mod:`agentsession.crypto`).
RECHECK_SECONDS = 1.0

#: Attempts at marking a store that two processes open with a keyring at once.
_ATTEMPTS = 5


def check_keyring_mark(store: SessionStore, keyring: Keyring | None) -> None:
    """Check ``store``'s keyring mark against ``keyring`` (None: opened without one),
    and mark an unmarked store with ``keyring``.

    Args:
        store: the store as opened (below any SealedStore).
        keyring: the keyring the store is opened with, or None.

    Raises:
        KeyringMismatch: the store is marked and ``keyring`` is None or another one.
        StoreError: the store failed (StoreBusy: still contended after a few tries).
    """
    with store.transaction(write=False) as tx:
        mark = tx.get_store_meta(MARK)
    given = None if keyring is None else keyring.store_id
    if mark is None and given is not None:
        mark = _mark(store, given)
    if mark is not None and mark != given:
        raise KeyringMismatch(_mismatch(store.url, mark, given))


class MarkWatch:
    """Re-checks that a store opened without a keyring is still unmarked: called before
    each unit of work of such a manager (``SessionManager.from_url`` without a keyring),
    it reads the mark at most once per :data:`RECHECK_SECONDS`, so a call costs a clock
    read, not a store read. Once the store is marked (another process opened it with a
    keyring), every call raises until the mark is gone; nothing is read or written.

    Args:
        store: the store as opened (no SealedStore), already checked unmarked.

    Raises (on call):
        KeyringMismatch: the store was marked since (the mark last read).
        StoreError: reading the mark failed (ConnectionLost: run it again).
    """

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._mark: str | None = None
        self._due = monotonic() + RECHECK_SECONDS  # just checked by the open

    def __call__(self) -> None:
        if monotonic() >= self._due:
            with self._store.transaction(write=False) as tx:
                self._mark = tx.get_store_meta(MARK)
            self._due = monotonic() + RECHECK_SECONDS
        if self._mark is not None:
            raise KeyringMismatch(_mismatch(self._store.url, self._mark, None))


def _mark(store: SessionStore, store_id: str) -> str:
    """Mark ``store`` with ``store_id`` unless another process marked it first; return
    the mark it holds then."""
    for attempt in range(_ATTEMPTS):
        try:
            with store.transaction(write=True) as tx:
                mark = tx.get_store_meta(MARK)
                if mark is None:
                    tx.put_store_meta(MARK, store_id)
                    mark = store_id
            return mark
        except StoreBusy:  # a racing first mark (StoreConflict): read it again
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _mismatch(url: str, mark: str, given: str | None) -> str:
    if given is None:
        return (
            f"the store {url} is encrypted with the keyring of store id {mark}: open it with "
            "that keyring (AGENTSESSION_KEYRING_FILE, or keyring= in SessionManager.from_url)"
        )
    return (
        f"the store {url} is encrypted with the keyring of store id {mark}, not with the "
        f"keyring given (store id {given}): use the keyring file of this store"
    )
