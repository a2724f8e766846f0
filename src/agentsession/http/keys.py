"""API keys: Bearer tokens whose SHA-256 hashes are kept in a small key store.

A token looks like ``key_<26 base32 chars>.<43 url-safe chars>``: the part before the
dot is the public key id (shown by ``agentsession keys create``, used to revoke), the
rest 256 random bits. Only ``sha256(token)`` is stored; a token is printed once, at
creation, and cannot be recovered.

Two stores:

* :class:`FileKeyStore`: a JSON file and its ``.lock`` (both mode 0600, tightened if
  found only readable by others: :mod:`agentsession.privatefiles`), trusted only if
  nobody else could have written it: a key file or lock that is a symbolic link or
  belongs to another user (not root), a key file the group or others may write to,
  or a directory every user may write to without the sticky bit is refused
  (``StoreError``) at every (re)load, by default next to an SQLite
  database (``<db>.keys.json``), else ``agentsession-keys.json`` in the working
  directory; set ``AGENTSESSION_KEYS_FILE`` to choose. Writes take an exclusive
  ``fcntl`` lock and replace the file atomically; every worker process re-reads it
  when it changes (checked at most once per ``reload_interval`` seconds), so a revoked
  key stops working everywhere within that interval. The session database stays
  untouched: its schema belongs to the SQL store and its migrations.
* :class:`MemoryKeyStore`: for tests and embedding.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError

from ..errors import StoreError
from ..ids import check_name, new_id
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
    "default_keys_file",
    "hash_token",
    "open_key_store",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One stored key. ``token_sha256`` is the hex SHA-256 of the whole token."""

    key_id: str
    user_id: str
    admin: bool
    token_sha256: str
    created_at: str
    name: str | None = None
    revoked_at: str | None = None

    def principal(self) -> Principal:
        """The principal a request with this key acts as: the key's user, an admin if
        the key is one."""
        return Principal(user_id=self.user_id, admin=self.admin)


class KeyFileInvalid(StoreError):
    """The key file exists and is not a key file (not JSON, or not the shape
    :class:`FileKeyStore` writes): nothing in it is trusted, and it is left unchanged."""


class _KeyFile(BaseModel):
    """The key file's content, as :class:`FileKeyStore` writes it."""

    model_config = ConfigDict(strict=True, extra="forbid")
    version: int
    keys: list[ApiKey]


def hash_token(token: str) -> str:
    """Return the hex SHA-256 of ``token`` (the only form a key store keeps)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_key(user_id: str, admin: bool, name: str | None) -> tuple[ApiKey, str]:
    check_name(user_id, field="user_id")
    key_id = new_id("key")
    token = f"{key_id}.{secrets.token_urlsafe(32)}"
    key = ApiKey(
        key_id=key_id,
        user_id=user_id,
        admin=admin,
        token_sha256=hash_token(token),
        created_at=datetime.now(UTC).isoformat(),
        name=name,
    )
    return key, token


class KeyStore(Protocol):
    """Where API keys live. Implementations are thread-safe."""

    def authenticate(self, token: str) -> Principal | None:
        """The principal of a valid, unrevoked ``token``; None for anything else."""
        ...

    def create(
        self, *, user_id: str, admin: bool = False, name: str | None = None
    ) -> tuple[ApiKey, str]:
        """Store a new key; return it and its token (the only time the token exists)."""
        ...

    def revoke(self, key_id: str) -> bool:
        """Revoke a key; False if there is no such unrevoked key."""
        ...

    def list(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        ...


class MemoryKeyStore:
    """Keys in process memory (tests, embedding)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, ApiKey] = {}

    def authenticate(self, token: str) -> Principal | None:
        """See :meth:`KeyStore.authenticate`."""
        with self._lock:
            key = self._keys.get(hash_token(token))
        if key is None or key.revoked_at is not None:
            return None
        return key.principal()

    def create(
        self, *, user_id: str, admin: bool = False, name: str | None = None
    ) -> tuple[ApiKey, str]:
        """See :meth:`KeyStore.create`."""
        key, token = _new_key(user_id, admin, name)
        with self._lock:
            self._keys[key.token_sha256] = key
        return key, token

    def revoke(self, key_id: str) -> bool:
        """See :meth:`KeyStore.revoke`."""
        with self._lock:
            for digest, key in self._keys.items():
                if key.key_id == key_id and key.revoked_at is None:
                    self._keys[digest] = replace(key, revoked_at=datetime.now(UTC).isoformat())
                    return True
        return False

    def list(self) -> list[ApiKey]:
        """See :meth:`KeyStore.list`."""
        with self._lock:
            return sorted(self._keys.values(), key=lambda k: k.created_at)


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
        with self._lock:
            if time.monotonic() - self._checked >= self._interval:
                self._reload()
            key = self._keys.get(hash_token(token))
        if key is None or key.revoked_at is not None:
            return None
        return key.principal()

    def create(
        self, *, user_id: str, admin: bool = False, name: str | None = None
    ) -> tuple[ApiKey, str]:
        """See :meth:`KeyStore.create`."""
        key, token = _new_key(user_id, admin, name)
        with self._locked() as keys:
            keys.append(key)
        return key, token

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


def open_key_store(settings: Settings) -> FileKeyStore:
    """The file key store ``settings`` names."""
    return FileKeyStore(default_keys_file(settings))
