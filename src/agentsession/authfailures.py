"""Where failed authentications are counted: a moving window per (kind, name).

:class:`FailureCounter` is what :class:`agentsession.http.authlimit.AuthFailureLimiter`
counts in. :class:`LimitsCounter` puts the windows in a storage of the ``limits``
library: in process memory (one worker process: each counts its own), or in Redis
(the Redis store's server: shared by every worker and instance). The SQL stores count
in their ``auth_failures`` table (:mod:`agentsession.stores.sql.authfailures`).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["FailureCounter", "LimitsCounter"]


class FailureCounter(Protocol):
    """Moving windows of failures, each named by a kind and a name.

    Raises (every method):
        StoreError: a shared counter's store failed.
    """

    #: Whether every worker process and instance on the store shares the windows
    #: (and whether a call may wait on I/O).
    shared: bool

    def hit(self, kind: str, name: str, limit: int, window_seconds: int) -> bool:
        """Count one failure, unless ``limit`` failures are in the last
        ``window_seconds`` already; return whether it was counted (room was left)."""
        ...

    def reset_at(self, kind: str, name: str, limit: int, window_seconds: int) -> float:
        """When (Unix seconds) the window of (``kind``, ``name``) has room again."""
        ...


class LimitsCounter:
    """A :class:`FailureCounter` in a ``limits`` storage (moving windows).

    Args:
        storage: a ``limits.storage`` storage; None: one in process memory.
        shared: the storage is shared by every process (Redis).
    """

    def __init__(self, storage: Any = None, *, shared: bool = False) -> None:
        from limits.storage import MemoryStorage
        from limits.strategies import MovingWindowRateLimiter

        self.shared = shared
        self._limiter = MovingWindowRateLimiter(storage if storage is not None else MemoryStorage())

    def hit(self, kind: str, name: str, limit: int, window_seconds: int) -> bool:
        """See :meth:`FailureCounter.hit`."""
        return self._limiter.hit(_item(limit, window_seconds), kind, name)

    def reset_at(self, kind: str, name: str, limit: int, window_seconds: int) -> float:
        """See :meth:`FailureCounter.reset_at`."""
        stats = self._limiter.get_window_stats(_item(limit, window_seconds), kind, name)
        return float(stats.reset_time)


def _item(limit: int, window_seconds: int) -> Any:
    from limits import RateLimitItemPerSecond

    return RateLimitItemPerSecond(limit, window_seconds)
