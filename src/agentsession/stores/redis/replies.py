"""Replies of redis-py's sync client, narrowed to the shape each command returns.

The Redis store's client is made with ``decode_responses=True``, so a reply is already
its value; redis-py types every reply as ``ResponseT`` (a value or an awaitable), and
these functions narrow it for the type checker, asserting it is not awaitable (an
async client passed by mistake fails here, not later in a decode).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # no runtime import: the store reports a missing redis-py itself
    from redis.typing import ResponseT

__all__ = ["SYNC_ONLY", "integer", "maybe_texts", "text", "texts"]

SYNC_ONLY = "an awaitable reply from redis-py: the store needs a sync redis.Redis client"


def text(reply: ResponseT) -> str | None:
    """GET, HGET: the value, or None where the key (or field) is absent."""
    assert not inspect.isawaitable(reply), SYNC_ONLY
    value: str | None = reply
    return value


def texts(reply: ResponseT | Any) -> list[str]:
    """ZRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZREVRANGEBYLEX: the members; HVALS."""
    assert not inspect.isawaitable(reply), SYNC_ONLY
    values: list[str] = reply
    return values


def maybe_texts(reply: ResponseT) -> list[str | None]:
    """MGET, HMGET: a value per key (or field), None where absent."""
    assert not inspect.isawaitable(reply), SYNC_ONLY
    values: list[str | None] = reply
    return values


def integer(reply: ResponseT) -> int:
    """INCR: the new value; ZCOUNT: the count."""
    assert not inspect.isawaitable(reply), SYNC_ONLY
    return int(reply)
