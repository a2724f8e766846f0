"""Idempotency records on the Redis store, as a part of its transaction class.

Key layout::

    as:idem:{uid}:<scope>:<key>  string  IdempotencyRecord JSON, with a Redis expiry
    as:idem:by_time         zset    score = created_at in us, member = record key
    as:idem:user:{uid}      zset    the same, per user: written by them, or to their data
                                    (the record's ``owner_id``, an admin's write for them)
    as:idem:owners          hash    record key -> owner_id, for the records whose owner is
                                    not their caller (to find the owner's index entry)
    as:{sid}:idem           set     keys of the idempotency records of session sid

A read of a record is guarded (its text must be unchanged at commit), so of two
racing first requests with one key one commits. Records carry a Redis expiry at their
``expires_at``, so keys never purged by a sweep still go away.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ...jsonvalues import dumps, loads
from ..base import IdempotencyRecord, StoreConflict
from .codec import prefix
from .errors import translated
from .index import us
from .replies import maybe_texts as _maybe_texts
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["IdempotencyOps", "decode_record", "encode_record", "record_key"]

_IDEM_BY_TIME = "as:idem:by_time"
_IDEM_OWNERS = "as:idem:owners"


def record_key(user_id: str, scope: str, key: str) -> str:
    return f"as:idem:{{{user_id}}}:{scope}:{key}"


def _idem_user_index(user_id: str) -> str:
    return f"as:idem:user:{{{user_id}}}"


def encode_record(r: IdempotencyRecord) -> str:
    return dumps(
        {
            "user_id": r.user_id,
            "scope": r.scope,
            "key": r.key,
            "fingerprint": r.fingerprint,
            "session_id": r.session_id,
            "result": r.result,
            "created_at": r.created_at.isoformat(),
            "owner_id": r.owner_id,
        }
    )


def decode_record(text: str) -> IdempotencyRecord:
    row = loads(text)
    return IdempotencyRecord(
        user_id=row["user_id"],
        scope=row["scope"],
        key=row["key"],
        fingerprint=row["fingerprint"],
        session_id=row["session_id"],
        result=row["result"],
        created_at=datetime.fromisoformat(row["created_at"]).astimezone(UTC),
        owner_id=row.get("owner_id"),
    )


class IdempotencyOps:
    """The idempotency methods of the Redis transaction (see the store protocol). The
    host class provides the client, the write buffer and its guarded reads."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _read: Callable[[str], str | None]
    _do: Callable[..., None]
    _idem: dict[str, IdempotencyRecord | None]

    @translated
    def get_idempotency(self, user_id: str, scope: str, key: str) -> IdempotencyRecord | None:
        k = record_key(user_id, scope, key)
        if k in self._idem:
            return self._idem[k]
        raw = self._read(k)
        return None if raw is None else decode_record(raw)

    @translated
    def put_idempotency(self, record: IdempotencyRecord) -> None:
        self._writing()
        if self.get_idempotency(record.user_id, record.scope, record.key) is not None:
            raise StoreConflict(f"idempotency key {record.key!r} exists")
        k = record_key(record.user_id, record.scope, record.key)
        at = us(record.created_at)
        if record.expires_at is None:
            self._do("SET", k, encode_record(record))
        else:
            lifetime = (record.expires_at - record.created_at).total_seconds()
            self._do("SETEX", k, encode_record(record), max(1, math.ceil(lifetime)))
        self._do("ZADD", _IDEM_BY_TIME, at, k)
        self._do("ZADD", _idem_user_index(record.user_id), at, k)
        if record.owner_id is not None and record.owner_id != record.user_id:
            self._do("ZADD", _idem_user_index(record.owner_id), at, k)
            self._do("HSET", _IDEM_OWNERS, k, record.owner_id)
        if record.session_id is not None:
            self._do("SADD", prefix(record.session_id) + "idem", k)
        self._idem[k] = record

    def _drop_idempotency(self, k: str, record: IdempotencyRecord) -> None:
        self._do("DEL", k)
        self._do("ZREM", _IDEM_BY_TIME, k)
        self._do("ZREM", _idem_user_index(record.user_id), k)
        if record.owner_id is not None and record.owner_id != record.user_id:
            self._do("ZREM", _idem_user_index(record.owner_id), k)
            self._do("HDEL", _IDEM_OWNERS, k)
        if record.session_id is not None:
            self._do("SREM", prefix(record.session_id) + "idem", k)
        self._idem[k] = None

    @translated
    def delete_idempotency(self, user_id: str, scope: str, key: str) -> None:
        self._writing()
        record = self.get_idempotency(user_id, scope, key)
        if record is not None:
            self._drop_idempotency(record_key(user_id, scope, key), record)

    @translated
    def purge_idempotency(self, *, created_before: datetime, user_id: str | None = None) -> int:
        self._writing()
        index = _IDEM_BY_TIME if user_id is None else _idem_user_index(user_id)
        keys = [
            k
            for k in _texts(self._r.zrangebyscore(index, "-inf", f"({us(created_before)}"))
            if k not in self._idem
        ]
        count = 0
        raws = _maybe_texts(self._r.mget(keys)) if keys else []
        owners = _maybe_texts(self._r.hmget(_IDEM_OWNERS, keys)) if keys else []
        for k, raw, owner in zip(keys, raws, owners, strict=True):
            if raw is None:  # expired by Redis already: drop the stale index entries
                self._do("ZREM", _IDEM_BY_TIME, k)
                uid = k.split("{", 1)[1].split("}", 1)[0]
                self._do("ZREM", _idem_user_index(uid), k)
                if owner is not None:
                    self._do("ZREM", _idem_user_index(owner), k)
                    self._do("HDEL", _IDEM_OWNERS, k)
                continue
            self._drop_idempotency(k, decode_record(raw))
            count += 1
        for k, record in list(self._idem.items()):
            if (
                record is not None
                and record.created_at < created_before
                and user_id in (None, record.user_id, record.owner_id)
            ):
                self._drop_idempotency(k, record)
                count += 1
        return count
