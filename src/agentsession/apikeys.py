"""API keys: Bearer tokens of which only SHA-256 hashes are kept.

A token looks like ``key_<26 base32 chars>.<43 url-safe chars>``: the part before the
dot is the public key id (shown by ``agentsession keys create``, used to revoke), the
rest 256 random bits. Only ``sha256(token)`` is stored; a token is printed once, at
creation, and cannot be recovered.

A key acts as its user (every user, as an admin), with its scope (``read`` or
``write``), until it is revoked or its expiry passes.

Where keys live: a session store's key table (:class:`KeyTable`: every SQL store and
Redis keep one, shared by every instance on every machine), read through
:class:`StoreKeyStore` and its short-lived cache; or a key file
(:class:`agentsession.http.keys.FileKeyStore`); or process memory
(:class:`MemoryKeyStore`, tests and the local inspector).
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from .errors import StoreError, ValidationError
from .fieldlimits import API_KEY_NAME_CHARS
from .ids import check_name, new_id
from .principal import SCOPES, Principal, Scope

__all__ = [
    "CACHE_SECONDS",
    "TOUCH_SECONDS",
    "ApiKey",
    "KeyStore",
    "KeyTable",
    "MemoryKeyStore",
    "MemoryKeyTable",
    "StoreKeyStore",
    "hash_token",
    "key_table",
    "new_key",
]

logger = logging.getLogger(__name__)

#: How long (seconds) an instance trusts what it read of a key in the store: a key
#: revoked (or expired, or removed) in the store is refused by every instance at the
#: latest this long after.
CACHE_SECONDS = 5.0
#: A key's ``last_used_at`` in the store is rewritten at most this often (seconds).
TOUCH_SECONDS = 60.0
#: The most keys one instance caches; past it the cache starts over.
_CACHE_ENTRIES = 10_000


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One stored key. ``token_sha256`` is the hex SHA-256 of the whole token; times are
    ISO 8601 text in UTC. ``last_used_at`` is kept by the
    store's key table only (at most once per :data:`TOUCH_SECONDS`). ``agents``: the
    only agents whose sessions the key may touch (sorted, no duplicates); None for
    every agent."""

    key_id: str
    user_id: str
    admin: bool
    token_sha256: str
    created_at: str
    name: str | None = None
    revoked_at: str | None = None
    scope: Scope = "write"
    expires_at: str | None = None
    last_used_at: str | None = None
    agents: tuple[str, ...] | None = None

    def principal(self) -> Principal:
        """The principal a request with this key acts as: the key's user (an admin if
        the key is one), its scope and its agents."""
        agents = None if self.agents is None else frozenset(self.agents)
        return Principal(user_id=self.user_id, admin=self.admin, scope=self.scope, agents=agents)

    def usable(self, now: datetime | None = None) -> bool:
        """Not revoked, and not expired at ``now`` (default: now)."""
        if self.revoked_at is not None:
            return False
        if self.expires_at is None:
            return True
        return datetime.fromisoformat(self.expires_at) > (now or datetime.now(UTC))


def hash_token(token: str) -> str:
    """Return the hex SHA-256 of ``token`` (the only form a key store keeps)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_key(
    user_id: str,
    *,
    admin: bool = False,
    name: str | None = None,
    scope: str = "write",
    expires_at: datetime | None = None,
    agents: Iterable[str] | None = None,
) -> tuple[ApiKey, str]:
    """A new key and its token (not stored anywhere yet). ``agents``: limit the key to
    these agents' sessions (None: every agent; docs/security.md, "Keys limited to
    agents").

    Raises:
        ValidationError: a malformed user id or agent name, an empty ``agents``, a
            name over 200 characters or with a control character,
            a scope other than ``read``/``write``, an expiry without a time zone or not
            in the future.
    """
    check_name(user_id, field="user_id")
    if scope not in SCOPES:
        raise ValidationError(f"scope must be one of {', '.join(SCOPES)}", field="scope")
    if name is not None and not (0 < len(name) <= API_KEY_NAME_CHARS and name.isprintable()):
        raise ValidationError(
            f"name must be 1-{API_KEY_NAME_CHARS} printable characters", field="name"
        )
    if expires_at is not None and (expires_at.tzinfo is None or expires_at <= datetime.now(UTC)):
        raise ValidationError("expires_at must be a future time with a zone", field="expires_at")
    limited = None
    if agents is not None:
        limited = tuple(sorted({check_name(a, field="agents") for a in agents}))
        if not limited:
            raise ValidationError("agents must name at least one agent", field="agents")
    key_id = new_id("key")
    token = f"{key_id}.{secrets.token_urlsafe(32)}"
    key = ApiKey(
        key_id=key_id,
        user_id=user_id,
        admin=admin,
        token_sha256=hash_token(token),
        created_at=_now(),
        name=name,
        scope=scope,
        expires_at=None if expires_at is None else expires_at.astimezone(UTC).isoformat(),
        agents=limited,
    )
    return key, token


class KeyTable(Protocol):
    """Where a session store keeps API keys (hashes only). Thread-safe.

    Raises (every method):
        StoreError: the store failed (or has no key table yet: ``agentsession db upgrade``).
    """

    def get(self, token_sha256: str) -> ApiKey | None:
        """The key with this token hash, revoked or not; None if there is none."""
        ...

    def get_by_id(self, key_id: str) -> ApiKey | None:
        """The key with this id, revoked or not; None if there is none."""
        ...

    def insert(self, key: ApiKey) -> bool:
        """Store a key; False (and nothing written) if its id or hash is stored already."""
        ...

    def revoke(self, key_id: str, at: str) -> bool:
        """Mark an unrevoked key revoked at ``at``; False if there is no such key."""
        ...

    def touch(self, key_id: str, at: str) -> None:
        """Set the key's ``last_used_at`` (and nothing else)."""
        ...

    def list(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        ...

    def remove_user(self, user_id: str) -> int:
        """Delete every key of ``user_id`` (erasure); return how many."""
        ...


class KeyStore(Protocol):
    """What the HTTP service and the CLI use of a key store. Thread-safe."""

    def authenticate(self, token: str) -> Principal | None:
        """The principal of a valid, usable ``token``; None for anything else."""
        ...

    def find(self, key_id: str) -> ApiKey | None:
        """The usable key with this id; None if none."""
        ...

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
        """Store a new key (:func:`new_key`); return it and its token (the only time
        the token exists)."""
        ...

    def add(self, key: ApiKey) -> bool:
        """Store an existing key as it is (an import); False if it is there already."""
        ...

    def revoke(self, key_id: str) -> bool:
        """Revoke a key; False if there is no such unrevoked key."""
        ...

    def list(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        ...

    def remove_user(self, user_id: str) -> int:
        """Remove every key of ``user_id`` (erasure: not even their hashes stay)."""
        ...


class MemoryKeyTable:
    """A key table in process memory (the memory store's, tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, ApiKey] = {}  # key id -> key

    def get(self, token_sha256: str) -> ApiKey | None:
        """See :meth:`KeyTable.get`."""
        with self._lock:
            return next((k for k in self._keys.values() if k.token_sha256 == token_sha256), None)

    def get_by_id(self, key_id: str) -> ApiKey | None:
        """See :meth:`KeyTable.get_by_id`."""
        with self._lock:
            return self._keys.get(key_id)

    def insert(self, key: ApiKey) -> bool:
        """See :meth:`KeyTable.insert`."""
        with self._lock:
            if key.key_id in self._keys or any(
                k.token_sha256 == key.token_sha256 for k in self._keys.values()
            ):
                return False
            self._keys[key.key_id] = key
            return True

    def revoke(self, key_id: str, at: str) -> bool:
        """See :meth:`KeyTable.revoke`."""
        with self._lock:
            key = self._keys.get(key_id)
            if key is None or key.revoked_at is not None:
                return False
            self._keys[key_id] = replace(key, revoked_at=at)
            return True

    def touch(self, key_id: str, at: str) -> None:
        """See :meth:`KeyTable.touch`."""
        with self._lock:
            if key_id in self._keys:
                self._keys[key_id] = replace(self._keys[key_id], last_used_at=at)

    def list(self) -> builtins.list[ApiKey]:
        """See :meth:`KeyTable.list`."""
        with self._lock:
            return sorted(self._keys.values(), key=lambda k: k.created_at)

    def remove_user(self, user_id: str) -> int:
        """See :meth:`KeyTable.remove_user`."""
        with self._lock:
            gone = [i for i, k in self._keys.items() if k.user_id == user_id]
            for key_id in gone:
                del self._keys[key_id]
            return len(gone)


class StoreKeyStore:
    """A :class:`KeyStore` over a store's :class:`KeyTable`, with a short-lived cache.

    What it read of a key is trusted for ``cache_seconds``; then the next request with
    the key reads it again. So a key revoked, expired or removed in the store is refused
    by every instance within ``cache_seconds`` (:data:`CACHE_SECONDS`, 5 s by default);
    a revocation through this object is seen by it at once. Unknown tokens are never
    cached (the failed-authentication limit answers a flood of them). On each read from
    the table, a key whose ``last_used_at`` is older than ``touch_seconds`` gets it set.

    Args:
        table: the key table.
        cache_seconds: how long a read is trusted (0: every call reads the table).
        touch_seconds: the least time between two writes of a key's ``last_used_at``.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        table: KeyTable,
        *,
        cache_seconds: float = CACHE_SECONDS,
        touch_seconds: float = TOUCH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self._ttl = cache_seconds
        self._touch = touch_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, ApiKey]] = {}  # token hash or key id -> read

    @property
    def blocking(self) -> bool:
        """Whether reading the table may wait on I/O (not a table in process memory)."""
        return not isinstance(self.table, MemoryKeyTable)

    def cached(self, token: str) -> tuple[bool, Principal | None]:
        """``(True, principal or None)`` if the cache answers for ``token`` without
        reading the table, else ``(False, None)``: cheap, for the event loop."""
        hit = self._hit(hash_token(token))
        if hit is None:
            return False, None
        return True, hit.principal() if hit.usable() else None

    def authenticate(self, token: str) -> Principal | None:
        """See :meth:`KeyStore.authenticate` (reads the table on a cache miss)."""
        key = self._lookup(hash_token(token), self.table.get)
        return key.principal() if key is not None and key.usable() else None

    def find(self, key_id: str) -> ApiKey | None:
        """See :meth:`KeyStore.find`."""
        key = self._lookup(key_id, self.table.get_by_id)
        return key if key is not None and key.usable() else None

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
        if not self.table.insert(key):  # 128 random bits: never in practice
            raise StoreError(f"key id {key.key_id} is taken; create the key again")
        return key, token

    def add(self, key: ApiKey) -> bool:
        """See :meth:`KeyStore.add`."""
        return self.table.insert(key)

    def revoke(self, key_id: str) -> bool:
        """See :meth:`KeyStore.revoke`."""
        done = self.table.revoke(key_id, _now())
        self._forget()
        return done

    def list(self) -> builtins.list[ApiKey]:
        """See :meth:`KeyStore.list`."""
        return self.table.list()

    def remove_user(self, user_id: str) -> int:
        """See :meth:`KeyStore.remove_user`."""
        removed = self.table.remove_user(user_id)
        self._forget()
        return removed

    def _hit(self, name: str) -> ApiKey | None:
        with self._lock:
            found = self._cache.get(name)
        if found is None or self._clock() - found[0] >= self._ttl:
            return None
        return found[1]

    def _lookup(self, name: str, read: Callable[[str], ApiKey | None]) -> ApiKey | None:
        hit = self._hit(name)
        if hit is not None:
            return hit
        key = read(name)
        if key is None:
            return None
        if key.usable():
            key = self._touched(key)
        with self._lock:
            if len(self._cache) >= _CACHE_ENTRIES:
                self._cache.clear()
            self._cache[name] = (self._clock(), key)
        return key

    def _touched(self, key: ApiKey) -> ApiKey:
        """``key``, its ``last_used_at`` written first if it is older than the touch
        interval (a failure is logged: it never refuses the key)."""
        now = datetime.now(UTC)
        last = key.last_used_at
        if last is not None and (now - datetime.fromisoformat(last)).total_seconds() < self._touch:
            return key
        try:
            self.table.touch(key.key_id, now.isoformat())
        except StoreError as exc:
            logger.warning("last use of key %s not recorded: %s", key.key_id, exc.message)
            return key
        return replace(key, last_used_at=now.isoformat())

    def _forget(self) -> None:
        with self._lock:
            self._cache.clear()


class MemoryKeyStore(StoreKeyStore):
    """Keys in process memory (tests, embedding, the local inspector); no cache."""

    def __init__(self) -> None:
        super().__init__(MemoryKeyTable(), cache_seconds=0)


def key_table(store: object) -> KeyTable:
    """The key table of a session store (its ``api_keys()``).

    Raises:
        StoreError: the store keeps no API keys.
    """
    table = getattr(store, "api_keys", None)
    if table is None:
        raise StoreError(f"the store {getattr(store, 'url', store)!r} keeps no API keys")
    return table()  # type: ignore[no-any-return]
