"""What every use-case module of the SessionManager shares: the store, the clock, the
limits and policy, and the unit of work, write pipeline and read path built on them."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from ..errors import ValidationError
from ..stores.base import SessionStore
from .pipeline import WritePipeline
from .policy import Limits, Policy
from .reads import ReadPath
from .uow import UnitOfWork, utcnow
from .validation import check_limit

if TYPE_CHECKING:
    from ..crypto import Keyring

__all__ = ["MIN_TOMBSTONE_KEY_BYTES", "ServiceCore"]

#: The shortest ``Policy.tombstone_key`` accepted.
MIN_TOMBSTONE_KEY_BYTES = 16


class ServiceCore:
    """The state of a SessionManager; the use-case classes derive from it.

    Args:
        store: the storage adapter (``MemoryStore``, ``SQLStore``...). The manager
            closes it in :meth:`close` only if it opened it (see :meth:`from_url`).
        clock: returns the current time as an aware UTC datetime; tests pass a frozen one.
        limits: payload size limits (bytes).
        policy: lifecycle and retry policy.

    Raises:
        ValidationError: ``policy.tombstone_key`` shorter than 16 bytes.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        clock: Callable[[], datetime] | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.policy = policy or Policy()
        key = self.policy.tombstone_key
        if key is not None and len(key) < MIN_TOMBSTONE_KEY_BYTES:
            raise ValidationError(
                f"tombstone_key must be at least {MIN_TOMBSTONE_KEY_BYTES} bytes",
                field="tombstone_key",
            )
        # Unset: a key nobody knows, so tombstones cannot be linked to users at all.
        self._tombstone_key = key if key is not None else secrets.token_bytes(32)
        self._uow = UnitOfWork(store, clock or utcnow, self.policy)
        # Imported here: leases -> interrupted -> messages import this module.
        from .changes.leases import lapse_change

        self._pipeline = WritePipeline(self._uow, self.policy, lapse=lapse_change)
        self._reads = ReadPath(self._uow, self._pipeline)
        self._owns_store = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        auto_migrate: bool = False,
        clock: Callable[[], datetime] | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
        keyring: Keyring | str | os.PathLike[str] | None = None,
        search_with_keyring: bool = False,
        **store_options: Any,
    ) -> Self:
        """Open the store named by ``url`` and return a manager that owns it.

        Args:
            url: ``memory://``, ``sqlite:///path/to/file.db``,
                ``postgresql+psycopg://...``, ``mysql+pymysql://...``, ``redis://...``.
            auto_migrate: bring an SQL schema to the current revision at start; if False
                an out-of-date schema raises SchemaOutOfDate.
            keyring: a :class:`~agentsession.crypto.Keyring`, or the path of its file
                (``AGENTSESSION_KEYRING_FILE``): content is sealed with it
                (:class:`~agentsession.stores.sealed.SealedStore`; docs/security.md,
                "Encryption at rest"). None: stored as it is.
            search_with_keyring: with ``keyring``, turn search on
                (``AGENTSESSION_SEARCH_WITH_KEYRING``): the store's search index then
                holds the plaintext text of titles, messages and tool calls
                (docs/security.md, "Search with a keyring"). Ignored without a keyring.
            store_options: passed to the store (e.g. ``sqlite_synchronous="NORMAL"``,
                or ``require_durable=False`` for Redis).

        Raises:
            ValidationError: unknown URL scheme. SchemaOutOfDate, StoreError: see above.
            KeyringError: the keyring file is missing or invalid.
            KeyringMismatch: the store is marked as encrypted with a keyring, and
                ``keyring`` is None or another one (an unmarked store is marked with
                ``keyring``: :mod:`agentsession.stores.keyringmark`). Opened without a
                keyring, every later call of the manager raises it too once another
                process has marked the store (within ``RECHECK_SECONDS``, 1 s).
        """
        from ..stores.keyringmark import MarkWatch, check_keyring_mark
        from ..stores.registry import open_store

        store = open_store(url, auto_migrate=auto_migrate, **store_options)
        try:
            if keyring is None:
                check_keyring_mark(store, None)
            else:
                store = _sealed(store, keyring, search=search_with_keyring)
        except BaseException:
            store.close()
            raise
        manager = cls(store, clock=clock, limits=limits, policy=policy)
        if keyring is None:  # a mark made later by another process refuses its calls
            manager._uow.guard = MarkWatch(store)
        manager._owns_store = True
        return manager

    def _page_size(self, limit: Any) -> int:
        """A listing's page size: ``limit`` (0..``limits.max_page_size``), or
        ``limits.default_page_size`` for None.

        Raises:
            ValidationError: not an integer in that range.
        """
        size = check_limit(limit, "limit", allow_none=True, maximum=self.limits.max_page_size)
        return self.limits.default_page_size if size is None else size

    @property
    def store(self) -> SessionStore:
        """The storage adapter this manager writes through."""
        return self._uow.store

    def close(self) -> None:
        """Close the store if this manager opened it (:meth:`from_url`)."""
        if self._owns_store:
            self._uow.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _sealed(
    store: SessionStore, keyring: Keyring | str | os.PathLike[str], *, search: bool
) -> SessionStore:
    """``store`` wrapped in a SealedStore with ``keyring`` (a Keyring or its file) and
    ``search`` (plaintext search texts indexed), once its keyring mark is checked (an
    unmarked store is marked with it).

    Raises:
        KeyringError: the keyring file is missing or invalid. KeyringMismatch: the store
        is marked with another keyring.
    """
    from ..crypto import ContentCipher
    from ..crypto import Keyring as _Keyring
    from ..stores.keyringmark import check_keyring_mark
    from ..stores.sealed import SealedStore

    ring = keyring if isinstance(keyring, _Keyring) else _Keyring.open(keyring)
    check_keyring_mark(store, ring)
    return SealedStore(store, ContentCipher(ring), search=search)
