"""Where users' data keys live, wrapped: never in the session database.

:class:`KeyStore` is the small protocol a keyring needs (so a KMS or Vault store can be
plugged in); two implementations:

* :class:`FileKeyStore`: a JSON file next to the keyring file (``<keyring>.datakeys``),
  mode 0600 and checked like the API key file (:mod:`agentsession.privatefiles`).
  Writes take an exclusive ``fcntl`` lock and replace the file atomically; every process
  re-reads it when it changes (checked at most once per ``reload_interval`` seconds), so
  a key destroyed by an erasure in one worker is gone from every worker within that time.
* :class:`MemoryKeyStore`: for tests and embedding.

A store is bound to one session store by its id (:meth:`KeyStore.bind`): a key store
of another store is refused, so its keys never seal this store's content.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError

from ..errors import KeyringError, StoreError
from ..privatefiles import check_directory, check_secret_file, locked_rewrite

__all__ = ["FileKeyStore", "KeyStore", "MemoryKeyStore", "WrappedKey"]


@dataclass(frozen=True, slots=True)
class WrappedKey:
    """A user's data key, encrypted by a key-encryption key.

    Attributes:
        key_id: the data key's id, hex (named by every envelope it sealed).
        kek_id: the id of the key-encryption key that wrapped it.
        wrapped: the wrapped key (an envelope, hex).
        created_at: ISO 8601 UTC; the newest key of a user seals new writes.
    """

    key_id: str
    kek_id: str
    wrapped: str
    created_at: str


#: An update of one user's keys: old keys in, new keys out (empty: the user is dropped).
Rewrap = Callable[[str, tuple[WrappedKey, ...]], tuple[WrappedKey, ...]]


class KeyStore(Protocol):
    """The storage of wrapped data keys. Implementations are safe to share between
    threads; writes by several processes must not lose each other's keys."""

    def bind(self, store_id: str) -> None:
        """Bind to the session store ``store_id`` (the first bind records it).

        Raises:
            KeyringError: the key store belongs to another store.
        """

    def get(self, user_id: str, *, fresh: bool = False) -> tuple[WrappedKey, ...]:
        """The wrapped keys of ``user_id``, oldest first (empty: none, or destroyed);
        ``fresh``: as stored now, not as cached (a key another process just added).

        While a user's keys are unchanged, answering with the very same tuple object
        lets the keyring use the keys it unwrapped without searching them again (a
        new tuple each time is correct, only slower); a change must give a new one."""

    def add(self, user_id: str, key: WrappedKey, *, if_none: bool) -> tuple[WrappedKey, ...]:
        """Add ``key`` for ``user_id`` (with ``if_none``, only if the user has no key:
        a concurrent writer's first key wins). Returns the user's keys after it."""

    def update(self, change: Rewrap) -> int:
        """Apply ``change`` to every user's keys at once (rewrapping, retiring old keys).
        Returns how many users' keys changed."""

    def destroy(self, user_id: str) -> bool:
        """Remove every key of ``user_id`` (crypto-shredding). Returns whether any was."""

    def users(self) -> list[str]:
        """The ids of the users holding keys, sorted."""


class MemoryKeyStore:
    """A :class:`KeyStore` in this process's memory (tests, embedding)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._store_id: str | None = None
        self._keys: dict[str, tuple[WrappedKey, ...]] = {}

    def bind(self, store_id: str) -> None:
        """See :meth:`KeyStore.bind`."""
        with self._lock:
            self._store_id = _bound(self._store_id, store_id, "the memory key store")

    def get(self, user_id: str, *, fresh: bool = False) -> tuple[WrappedKey, ...]:
        """See :meth:`KeyStore.get` (always as stored: memory is not cached)."""
        return self._keys.get(user_id, ())

    def add(self, user_id: str, key: WrappedKey, *, if_none: bool) -> tuple[WrappedKey, ...]:
        """See :meth:`KeyStore.add`."""
        with self._lock:
            keys = _added(self._keys, user_id, key, if_none)
        return keys

    def update(self, change: Rewrap) -> int:
        """See :meth:`KeyStore.update`."""
        with self._lock:
            return _updated(self._keys, change)

    def destroy(self, user_id: str) -> bool:
        """See :meth:`KeyStore.destroy`."""
        with self._lock:
            return self._keys.pop(user_id, None) is not None

    def users(self) -> list[str]:
        """See :meth:`KeyStore.users`."""
        return sorted(self._keys)


class _KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str
    version: int
    store_id: str | None = None
    users: dict[str, list[WrappedKey]] = {}


_FORMAT = "agentsession-datakeys"


class FileKeyStore:
    """A :class:`KeyStore` in a private JSON file (see the module docstring).

    Args:
        path: the file; created (mode 0600) by the first write.
        reload_interval: seconds between checks whether another process changed it.

    Raises:
        StoreError: (here and from every method) the file, its lock or its directory
            could have been written by another user.
        KeyringError: the file is not a data key file.
    """

    def __init__(self, path: str | Path, *, reload_interval: float = 1.0) -> None:
        self.path = Path(path)
        self._interval = reload_interval
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._checked = float("-inf")
        self._keys: dict[str, tuple[WrappedKey, ...]] = {}
        self._file = self._read()

    @property
    def _file(self) -> _KeyFile:
        return self._current

    @_file.setter
    def _file(self, file: _KeyFile) -> None:
        # The users' keys as tuples too: what every get returns, built once per read.
        self._current = file
        self._keys = {u: tuple(k) for u, k in file.users.items()}

    def bind(self, store_id: str) -> None:
        """See :meth:`KeyStore.bind`."""
        if self._file.store_id == store_id:
            return
        with self._rewrite() as file:
            file.store_id = _bound(file.store_id, store_id, str(self.path))

    def get(self, user_id: str, *, fresh: bool = False) -> tuple[WrappedKey, ...]:
        """See :meth:`KeyStore.get`. Stats the file at most once per ``reload_interval``
        (every time with ``fresh``)."""
        if fresh or time.monotonic() - self._checked >= self._interval:
            with self._lock:
                self._reload()
        return self._keys.get(user_id, ())

    def add(self, user_id: str, key: WrappedKey, *, if_none: bool) -> tuple[WrappedKey, ...]:
        """See :meth:`KeyStore.add`."""
        with self._rewrite() as file:
            keys = {u: tuple(k) for u, k in file.users.items()}
            added = _added(keys, user_id, key, if_none)
            file.users[user_id] = list(added)
        return added

    def update(self, change: Rewrap) -> int:
        """See :meth:`KeyStore.update`."""
        with self._rewrite() as file:
            keys = {u: tuple(k) for u, k in file.users.items()}
            changed = _updated(keys, change)
            file.users = {u: list(k) for u, k in keys.items()}
        return changed

    def destroy(self, user_id: str) -> bool:
        """See :meth:`KeyStore.destroy`."""
        if not self.path.exists():
            return False
        with self._rewrite() as file:
            return file.users.pop(user_id, None) is not None

    def users(self) -> list[str]:
        """See :meth:`KeyStore.users` (read from the file now)."""
        return sorted(self._read().users)

    # ------------------------------------------------------------------ internals

    def _reload(self) -> None:
        self._checked = time.monotonic()
        try:
            st = self.path.stat()
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            self._file = self._read()

    def _read(self) -> _KeyFile:
        """The file's content (an empty one if absent), after checking who could write it.

        Raises:
            StoreError: see the class; KeyringError: not a data key file.
        """
        try:
            check_directory(self.path.parent, (self.path,))
            check_secret_file(self.path)
            st = self.path.stat()
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._stamp = None
            return _KeyFile(format=_FORMAT, version=1)
        except OSError as exc:
            raise StoreError(f"cannot read the data key file {self.path}: {exc}") from exc
        try:
            file = _KeyFile.model_validate_json(raw)
        except PydanticError:
            raise KeyringError(f"{self.path} is not a data key file") from None
        if file.format != _FORMAT or file.version != 1:
            raise KeyringError(f"{self.path} is not a data key file of version 1")
        self._stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        return file

    @contextlib.contextmanager
    def _rewrite(self) -> Iterator[_KeyFile]:
        """The file's content read under its lock, written back atomically when the
        block ends without an error (nothing written otherwise)."""
        with locked_rewrite(self.path) as write:
            file = self._read()
            yield file
            write(file.model_dump_json(indent=1).encode())
            with self._lock:
                self._file = self._read()


def _bound(current: str | None, store_id: str, where: str) -> str:
    if current is not None and current != store_id:
        raise KeyringError(
            f"{where} holds the data keys of another store: use the keyring made for this store"
        )
    return store_id


def _added(
    keys: dict[str, tuple[WrappedKey, ...]], user_id: str, key: WrappedKey, if_none: bool
) -> tuple[WrappedKey, ...]:
    current = keys.get(user_id, ())
    if not (if_none and current):
        current = (*current, key)
        keys[user_id] = current
    return current


def _updated(keys: dict[str, tuple[WrappedKey, ...]], change: Rewrap) -> int:
    changed = 0
    for user_id, old in list(keys.items()):
        new = change(user_id, old)
        if new != old:
            changed += 1
            if new:
                keys[user_id] = new
            else:
                del keys[user_id]
    return changed
