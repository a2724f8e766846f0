"""Redis errors as store errors: what the Redis store and its transaction parts raise
instead of redis-py's own exceptions (or a decoding error of stored data)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import redis

from ...errors import StoreBusy, StoreError, StoreUnavailable
from ..base import StoreConflict

__all__ = ["translate", "translated"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")  # the transaction class a method of which `translated` wraps


def translate(exc: Exception, *, committing: bool = False) -> StoreError:
    """A redis-py (or decoding) error as a store error; never let it escape as is.

    Args:
        exc: the error caught. committing: it ended a commit, whose outcome is then
            unknown if the connection failed.

    Returns:
        StoreConflict (a lost WATCH race), StoreBusy (loading, a busy script),
        StoreUnavailable (unreachable, or refusing writes: out of memory, or its last
        save to disk failed, e.g. a full disk) or StoreError.
    """
    if isinstance(exc, redis.exceptions.WatchError):
        return StoreConflict(f"Redis transaction lost a race: {exc}")
    if isinstance(exc, redis.exceptions.BusyLoadingError):
        return StoreBusy(f"Redis is loading its data set: {exc}")
    if isinstance(exc, redis.exceptions.ResponseError) and str(exc).startswith("BUSY"):
        return StoreBusy(f"Redis is busy running a script: {exc}")
    if isinstance(exc, redis.exceptions.AuthenticationError):
        return StoreError(f"Redis refused the credentials: {exc}")
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        outcome = " (the commit's outcome is unknown)" if committing else ""
        return StoreUnavailable(f"Redis unreachable{outcome}: {exc}")
    # Refusing writes: over ``maxmemory`` (OOM), a replica during a failover
    # (READONLY), or its last background save failed (MISCONF, e.g. a full disk).
    if isinstance(exc, redis.exceptions.OutOfMemoryError | redis.exceptions.ReadOnlyError) or (
        isinstance(exc, redis.exceptions.ResponseError) and str(exc).startswith("MISCONF")
    ):
        return StoreUnavailable(f"Redis refuses writes: {exc}")
    if isinstance(exc, redis.exceptions.RedisError):
        return StoreError(f"Redis failed: {exc}")
    return StoreError(f"undecodable data in Redis: {exc}")


def translated(method: Callable[Concatenate[T, P], R]) -> Callable[Concatenate[T, P], R]:
    """Decorate a method so it raises redis-py errors (and undecodable stored data) as
    store errors (:func:`translate`)."""

    @functools.wraps(method)
    def wrapper(self: T, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except (redis.RedisError, ValueError, KeyError) as exc:
            raise translate(exc) from exc

    return wrapper
