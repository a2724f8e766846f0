"""API key stores of the HTTP service: the session store's key table, or a key file.

Tokens, hashes and the store's key table: :mod:`agentsession.apikeys`. Which store a
service uses (:func:`open_key_store`): the key file ``AGENTSESSION_KEYS_FILE`` when set;
else, with ``AGENTSESSION_KEYS=store`` (the default on PostgreSQL, MySQL/MariaDB and
Redis), the session store's key table, shared by every instance on every machine; else
(the default on SQLite and ``memory://``) a key file next to an SQLite database
(``<db>.keys.json``), or ``agentsession-keys.json`` in the working directory.

:class:`FileKeyStore`: a JSON file and its ``.lock`` (both mode 0600, tightened if
found only readable by others: :mod:`agentsession.privatefiles`), trusted only if
nobody else could have written it: a key file or lock that is a symbolic link or
belongs to another user (not root), a key file the group or others may write to,
or a directory every user may write to without the sticky bit is refused
(``StoreError``) at every (re)load. Writes take an exclusive ``fcntl`` lock and replace
the file atomically; every worker process re-reads it when it changes (checked at most
once per ``reload_interval`` seconds), so a revoked key stops working everywhere within
that interval. A key file records no last use.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError

from ..apikeys import (
    ApiKey,
    KeyStore,
    MemoryKeyStore,
    StoreKeyStore,
    hash_token,
    key_table,
    new_key,
)
from ..errors import StoreError
from ..principal import Principal
from ..privatefiles import check_directory, check_secret_file, open_private
from ..settings import Settings

__all__ = [
    "ApiKey",
    "FileKeyStore",
    "KeyFileInvalid",
    "KeyStore",
    "MemoryKeyStore",
    "Principal",
    "StoreKeyStore",
    "default_keys_file",
    "hash_token",
    "keys_in_store",
    "open_key_store",
]

logger = logging.getLogger(__name__)


class KeyFileInvalid(StoreError):
    """The key file exists and is not a key file (not JSON, or not the shape
    :class:`FileKeyStore` writes): nothing in it is trusted, and it is left unchanged."""


class _KeyFile(BaseModel):
    """The key file's content, as :class:`FileKeyStore` writes it."""

    model_config = ConfigDict(strict=True, extra="forbid")
    version: int
    keys: list[ApiKey]


class FileKeyStore:
    """Keys in a JSON file shared by every worker process (see the module docstring).

    Args:
        path: the JSON file; created (mode 0600) by the first :meth:`create`.
        reload_interval: seconds between checks whether the file changed.

    Raises:
        StoreError: (here and from :meth:`create`, :meth:`revoke`, :meth:`list`) the
            file, its lock or its directory could have been written by another user.
            :meth:`authenticate` instead logs it and accepts no key until it is fixed.
    """

    def __init__(self, path: str | os.PathLike[str], *, reload_interval: float = 1.0) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._interval = reload_interval
        self._lock = threading.Lock()
        self._keys: dict[str, ApiKey] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._checked = float("-inf")
        self._read()

    def authenticate(self, token: str) -> Principal | None:
        """See :meth:`KeyStore.authenticate`. At most once per ``reload_interval`` it
        stats the file, and reads it if it changed (small, local: the HTTP layer calls
        this on the event loop)."""
        key = self._current().get(hash_token(token))
        return key.principal() if key is not None and key.usable() else None

    def find(self, key_id: str) -> ApiKey | None:
        """See :meth:`KeyStore.find`."""
        found = (k for k in self._current().values() if k.key_id == key_id and k.usable())
        return next(found, None)

    def create(
        self,
        *,
        user_id: str,
        admin: bool = False,
        name: str | None = None,
        scope: str = "write",
        expires_at: datetime | None = None,
        agents: Iterable[str] | None = None,
    ) -> tuple[ApiKey, str]:
        """See :meth:`KeyStore.create`."""
        key, token = new_key(
            user_id, admin=admin, name=name, scope=scope, expires_at=expires_at, agents=agents
        )
        with self._locked() as keys:
            keys.append(key)
        return key, token

    def add(self, key: ApiKey) -> bool:
        """See :meth:`KeyStore.add`."""
        with self._locked() as keys:
            if any(k.key_id == key.key_id or k.token_sha256 == key.token_sha256 for k in keys):
                return False
            keys.append(key)
        return True

    def revoke(self, key_id: str) -> bool:
        """See :meth:`KeyStore.revoke`."""
        with self._locked() as keys:
            for i, key in enumerate(keys):
                if key.key_id == key_id and key.revoked_at is None:
                    keys[i] = replace(key, revoked_at=datetime.now(UTC).isoformat())
                    return True
        return False

    def list(self) -> list[ApiKey]:
        """See :meth:`KeyStore.list`."""
        return self._read()

    def remove_user(self, user_id: str) -> int:
        """Remove every key of ``user_id``, revoked ones too (erasure: not even their
        hashes stay). An absent key file is left absent.

        Returns:
            How many keys were removed.
        """
        if not self.path.exists():
            return 0
        with self._locked() as keys:
            kept = [k for k in keys if k.user_id != user_id]
            removed = len(keys) - len(kept)
            keys[:] = kept
        return removed

    # ------------------------------------------------------------------ internals

    def _current(self) -> dict[str, ApiKey]:
        """The keys by token hash, the file re-read first if it may have changed."""
        with self._lock:
            if time.monotonic() - self._checked >= self._interval:
                self._reload()
            return self._keys

    def _check(self) -> None:
        """Refuse a key file another user could have written (see the module docstring).

        Raises:
            StoreError: it could have been, or it cannot be checked.
        """
        try:
            check_directory(self.path.parent, (self.path, self._lock_path))
            check_secret_file(self.path)
        except FileNotFoundError:
            return  # no directory yet: no keys
        except OSError as exc:
            raise StoreError(f"cannot check the key file {self.path}: {exc}") from exc

    def _reload(self) -> None:
        self._checked = time.monotonic()
        try:
            st = self.path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                self._stamp = stamp
                self._keys = {k.token_sha256: k for k in self._read()}
            else:
                self._check()
        except FileNotFoundError:
            self._keys, self._stamp = {}, None
        except KeyFileInvalid as exc:
            # Our writes replace the file atomically, so this is an edit or a damaged
            # disk: keep serving the last good keys (an outage helps nobody; a key
            # revoked since stays usable until the file is fixed), warned about once.
            logger.warning("API key file not reloaded, the last good keys stay: %s", exc.message)
        except StoreError as exc:
            # Fail closed: no key is accepted until the file is trustworthy again.
            logger.error("API keys refused: %s", exc.message)
            self._keys, self._stamp = {}, None

    # builtins.list: in this class, after its method `list`, plain `list` names the method.
    def _read(self) -> builtins.list[ApiKey]:
        """The keys in the file ([] if absent or empty), its content checked before its
        mode is (so a file that is not a key file is left as it was).

        Raises:
            KeyFileInvalid: the file is not a key file.
            StoreError: the file cannot be trusted or read (:meth:`_check`).
        """
        try:
            check_directory(self.path.parent, (self.path, self._lock_path))
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot read the key file {self.path}: {exc}") from exc
        keys = _parse_key_file(self.path, raw)
        self._check()
        return keys

    @contextlib.contextmanager
    def _locked(self) -> Iterator[builtins.list[ApiKey]]:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._check()
        try:
            lock_fd = open_private(self._lock_path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise StoreError(f"cannot open the key file lock {self._lock_path}: {exc}") from exc
        with os.fdopen(lock_fd, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            keys = self._read()
            yield keys
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            # A fresh file: never one left (or planted) under this name.
            tmp.unlink(missing_ok=True)
            fd = open_private(tmp, os.O_WRONLY | os.O_EXCL)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"version": 1, "keys": [asdict(k) for k in keys]}, out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        with self._lock:
            self._checked = float("-inf")


def _parse_key_file(path: Path, raw: bytes) -> builtins.list[ApiKey]:
    """The keys in a key file's bytes; an empty file holds none (our own writes are
    atomic, so an empty file was made so on purpose).

    Raises:
        KeyFileInvalid: not JSON, or not the shape :class:`FileKeyStore` writes; the
            message names the file and the first fault.
    """
    if not raw.strip():
        return []
    try:
        return _KeyFile.model_validate_json(raw).keys
    except PydanticError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        reason = f"{where}: {first['msg']}" if where else first["msg"]
        raise KeyFileInvalid(f"{path} is not a valid key file ({reason})") from None


def default_keys_file(settings: Settings) -> Path:
    """Where the key file lives for ``settings`` (see the module docstring)."""
    if settings.keys_file is not None:
        return Path(settings.keys_file)
    prefix = "sqlite:///"
    if settings.url.startswith(prefix) and settings.url[len(prefix) :] not in ("", ":memory:"):
        db = Path(settings.url[len(prefix) :].split("?", 1)[0])
        return db.with_name(db.name + ".keys.json")
    return Path("agentsession-keys.json")


def keys_in_store(settings: Settings) -> bool:
    """Whether ``settings`` keep API keys in the session store (see the module
    docstring) rather than in a key file."""
    if settings.keys_file is not None:
        return False
    if settings.keys is not None:
        return settings.keys == "store"
    return not settings.url.startswith(("sqlite", "memory"))


def open_key_store(settings: Settings, store: Any = None) -> KeyStore:
    """The key store ``settings`` name: the key table of ``store`` (the opened session
    store of ``settings.url``) when :func:`keys_in_store`, else the key file.

    Raises:
        StoreError: keys are in the store and ``store`` is None or keeps none.
    """
    if not keys_in_store(settings):
        return FileKeyStore(default_keys_file(settings))
    if store is None:
        raise StoreError("API keys are kept in the session store: open it first")
    return StoreKeyStore(key_table(store), cache_seconds=settings.keys_cache_seconds)
