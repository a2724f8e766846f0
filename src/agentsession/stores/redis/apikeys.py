"""The Redis store's key table (:class:`~agentsession.apikeys.KeyTable`).

Every key lives under the hash tag ``{apikeys}`` (one slot, so a cluster runs each
script): ``as:{apikeys}:ids`` maps each key id to its token hash, and
``as:{apikeys}:k:<token hash>`` is a hash of the key's fields (a field that is None is
absent). Insert, revoke and touch are scripts, each atomic; a revocation and a last-use
stamp each write only their own field, so neither undoes the other.
"""

from __future__ import annotations

import builtins
from typing import Any

import redis

from ...apikeys import ApiKey
from .errors import translate

__all__ = ["RedisKeyTable"]

_IDS = "as:{apikeys}:ids"
_KEY = "as:{apikeys}:k:"

# KEYS: ids, the key's hash. ARGV: key id, token hash, then field, value pairs.
_INSERT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
return 1
"""
# KEYS: the key's hash. ARGV: field, value, only_if_unset (1/0).
_SET_FIELD = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[3] == '1' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
_TEXT_FIELDS = (
    "key_id",
    "user_id",
    "token_sha256",
    "created_at",
    "name",
    "revoked_at",
    "scope",
    "expires_at",
    "last_used_at",
)


def _fields(key: ApiKey) -> dict[str, str]:
    found = {f: getattr(key, f) for f in _TEXT_FIELDS if getattr(key, f) is not None}
    found["admin"] = "1" if key.admin else "0"
    if key.agents is not None:  # sorted names joined by commas (no name holds one)
        found["agents"] = ",".join(key.agents)
    return found


def _key(found: dict[str, str]) -> ApiKey:
    return ApiKey(
        key_id=found["key_id"],
        user_id=found["user_id"],
        admin=found["admin"] == "1",
        token_sha256=found["token_sha256"],
        created_at=found["created_at"],
        name=found.get("name"),
        revoked_at=found.get("revoked_at"),
        scope=found["scope"],  # type: ignore[arg-type]  # written from an ApiKey
        expires_at=found.get("expires_at"),
        last_used_at=found.get("last_used_at"),
        agents=tuple(found["agents"].split(",")) if "agents" in found else None,
    )


class RedisKeyTable:
    """API keys in a Redis store (see the module docstring).

    Args:
        client: the store's client (``decode_responses=True``).

    Raises (every method):
        StoreError: as the store raises it.
    """

    def __init__(self, client: redis.Redis) -> None:
        self._r = client
        self._insert = client.register_script(_INSERT)
        self._set_field = client.register_script(_SET_FIELD)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (redis.RedisError, KeyError, ValueError) as exc:
            raise translate(exc) from exc

    def _read(self, digest: str | None) -> ApiKey | None:
        if digest is None:
            return None
        found = self._call(self._r.hgetall, _KEY + digest)
        return _key(found) if found else None

    def get(self, token_sha256: str) -> ApiKey | None:
        """See :meth:`~agentsession.apikeys.KeyTable.get`."""
        return self._call(self._read, token_sha256)  # type: ignore[no-any-return]

    def get_by_id(self, key_id: str) -> ApiKey | None:
        """See :meth:`~agentsession.apikeys.KeyTable.get_by_id`."""
        return self._read(self._call(self._r.hget, _IDS, key_id))

    def insert(self, key: ApiKey) -> bool:
        """See :meth:`~agentsession.apikeys.KeyTable.insert`."""
        pairs = [v for item in _fields(key).items() for v in item]
        keys = [_IDS, _KEY + key.token_sha256]
        return bool(
            self._call(self._insert, keys=keys, args=[key.key_id, key.token_sha256, *pairs])
        )

    def revoke(self, key_id: str, at: str) -> bool:
        """See :meth:`~agentsession.apikeys.KeyTable.revoke`."""
        digest = self._call(self._r.hget, _IDS, key_id)
        if digest is None:
            return False
        args = ["revoked_at", at, "1"]
        return bool(self._call(self._set_field, keys=[_KEY + digest], args=args))

    def touch(self, key_id: str, at: str) -> None:
        """See :meth:`~agentsession.apikeys.KeyTable.touch`."""
        digest = self._call(self._r.hget, _IDS, key_id)
        if digest is not None:
            self._call(self._set_field, keys=[_KEY + digest], args=["last_used_at", at, "0"])

    def list(self) -> builtins.list[ApiKey]:
        """See :meth:`~agentsession.apikeys.KeyTable.list`."""
        digests = self._call(self._r.hvals, _IDS)
        keys = [k for k in (self._read(d) for d in digests) if k is not None]
        return sorted(keys, key=lambda k: (k.created_at, k.key_id))

    def remove_user(self, user_id: str) -> int:
        """See :meth:`~agentsession.apikeys.KeyTable.remove_user`."""
        gone = [k for k in self.list() if k.user_id == user_id]
        for key in gone:
            pipe = self._r.pipeline(transaction=True)
            pipe.hdel(_IDS, key.key_id)
            pipe.delete(_KEY + key.token_sha256)
            self._call(pipe.execute)
        return len(gone)
