"""Failed authentications, counted per client address and per key id (429).

A failure is a request that needs a key and has none, or one that is unknown or
revoked. Two moving windows of ``auth_failure_window_seconds`` count them:

* per client address (the TCP peer: ``serve`` trusts no proxy header): past
  ``auth_failures_per_address``, a failed authentication from that address is
  answered 429 instead of 401;
* per key id (the token's part before the dot, when it has the shape of one): past
  ``auth_failures_per_key``, a wrong secret naming that key id is answered 429.

A valid key is never refused, from a limited address or for a limited key id: agents
on one machine share the loopback address, and one misconfigured client must not lock
the others out; the 256-bit secrets cannot be guessed, so the limit is there to make a
flood cheap to answer and visible (429), not to slow a guesser down.

Where they are counted (:meth:`AuthFailureLimiter.of`): in the session store when
several processes may serve it (a server store, or SQLite with several workers): the
SQL stores' ``auth_failures`` table, or Redis (the ``limits`` library's moving windows
there), so the limit holds at its number across every worker and instance; in process
memory with one process (``memory://``, or SQLite with one worker).
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..authfailures import FailureCounter, LimitsCounter
from ..ids import is_id
from ..protocol import TooManyRequests
from ..settings import Settings

__all__ = ["AuthFailureLimiter", "key_id_of", "shared_counts"]


def key_id_of(token: str | None) -> str | None:
    """The key id a bearer ``token`` names (``key_...`` before the dot), or None when
    it has no such part (then only its address is counted)."""
    if not token:
        return None
    head = token.split(".", 1)[0]
    return head if is_id(head, "key") else None


def shared_counts(settings: Settings) -> bool:
    """Whether ``settings`` count failures in the store (several processes may serve
    it) rather than in each process's memory."""
    if settings.url.startswith("memory"):
        return False
    return not (settings.url.startswith("sqlite") and settings.workers == 1)


class AuthFailureLimiter:
    """Counts failed authentications and says when a request is to be answered 429.

    Args:
        per_address: failures one client address may make within the window.
        per_key: failures naming one key id within the window.
        window_seconds: the length of the moving window, in seconds.
        counter: where the windows are kept (default: this process's memory).
    """

    def __init__(
        self,
        *,
        per_address: int,
        per_key: int,
        window_seconds: int,
        counter: FailureCounter | None = None,
    ) -> None:
        self._counter: FailureCounter = counter if counter is not None else LimitsCounter()
        self._limits = {"address": per_address, "key": per_key}
        self._window = window_seconds

    @property
    def shared(self) -> bool:
        """Whether the counts are shared by every process (and calls may wait on I/O)."""
        return self._counter.shared

    @classmethod
    def of(cls, settings: Settings, store: Any = None) -> AuthFailureLimiter:
        """The limiter ``settings`` configure (``auth_failures_per_address``,
        ``auth_failures_per_key``, ``auth_failure_window_seconds``), counting in
        ``store`` (its ``auth_failures()``) when :func:`shared_counts` says so and the
        store keeps counts, else in memory."""
        counter = None
        if store is not None and shared_counts(settings):
            made = getattr(store, "auth_failures", None)
            counter = made() if made is not None else None
        return cls(
            per_address=settings.auth_failures_per_address,
            per_key=settings.auth_failures_per_key,
            window_seconds=settings.auth_failure_window_seconds,
            counter=counter,
        )

    def refuse(self, address: str, key_id: str | None) -> TooManyRequests | None:
        """Count one failed authentication from ``address`` (and naming ``key_id``);
        return the 429 error if the address, or the key id, was over its limit already
        (that failure is then not counted again), else None.

        Raises:
            StoreError: a shared counter's store failed.
        """
        blocked = self._hit("address", address, "this client address")
        if key_id is not None:
            blocked = self._hit("key", key_id, "this key id") or blocked
        return blocked

    def _hit(self, kind: str, name: str, what: str) -> TooManyRequests | None:
        limit = self._limits[kind]
        if self._counter.hit(kind, name, limit, self._window):
            return None
        reset = self._counter.reset_at(kind, name, limit, self._window)
        return TooManyRequests(
            f"too many failed authentications from {what}; retry later",
            retry_after=max(1, math.ceil(reset - time.time())),
        )
