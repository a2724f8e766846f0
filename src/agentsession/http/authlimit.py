"""Failed authentications, counted per client address and per key id (429).

A failure is a request that needs a key and has none, or one that is unknown or
revoked. Two moving windows of ``auth_failure_window_seconds`` (the ``limits``
library's in-memory storage) count them:

* per client address (the TCP peer: ``serve`` trusts no proxy header): past
  ``auth_failures_per_address``, a failed authentication from that address is
  answered 429 instead of 401;
* per key id (the token's part before the dot, when it has the shape of one): past
  ``auth_failures_per_key``, a wrong secret naming that key id is answered 429.

A valid key is never refused, from a limited address or for a limited key id: agents
on one machine share the loopback address, and one misconfigured client must not lock
the others out; the 256-bit secrets cannot be guessed, so the limit is there to make a
flood cheap to answer and visible (429), not to slow a guesser down.

Each worker process counts on its own: with N workers an address may fail up to N
times the limit before every worker refuses it.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from ..ids import is_id
from ..protocol import TooManyRequests
from ..settings import Settings

__all__ = ["AuthFailureLimiter", "key_id_of"]


def key_id_of(token: str | None) -> str | None:
    """The key id a bearer ``token`` names (``key_...`` before the dot), or None when
    it has no such part (then only its address is counted)."""
    if not token:
        return None
    head = token.split(".", 1)[0]
    return head if is_id(head, "key") else None


class AuthFailureLimiter:
    """Counts failed authentications and says when a request is to be answered 429.

    Args:
        per_address: failures one client address may make within the window.
        per_key: failures naming one key id within the window.
        window_seconds: the length of the moving window, in seconds.
    """

    def __init__(self, *, per_address: int, per_key: int, window_seconds: int) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._address = RateLimitItemPerSecond(per_address, window_seconds)
        self._key = RateLimitItemPerSecond(per_key, window_seconds)

    @classmethod
    def of(cls, settings: Settings) -> AuthFailureLimiter:
        """The limiter ``settings`` configure (``auth_failures_per_address``,
        ``auth_failures_per_key``, ``auth_failure_window_seconds``)."""
        return cls(
            per_address=settings.auth_failures_per_address,
            per_key=settings.auth_failures_per_key,
            window_seconds=settings.auth_failure_window_seconds,
        )

    def address_blocked(self, address: str) -> TooManyRequests | None:
        """The 429 error for a request from ``address`` while it is limited, else None."""
        return self._blocked(self._address, "address", address, "this client address")

    def key_blocked(self, key_id: str) -> TooManyRequests | None:
        """The 429 error for a wrong secret naming ``key_id`` while it is limited."""
        return self._blocked(self._key, "key", key_id, "this key id")

    def failed(self, address: str, key_id: str | None) -> None:
        """Count one failed authentication from ``address`` (and for ``key_id``)."""
        self._limiter.hit(self._address, "address", address)
        if key_id is not None:
            self._limiter.hit(self._key, "key", key_id)

    def _blocked(
        self, item: RateLimitItem, kind: str, name: str, what: str
    ) -> TooManyRequests | None:
        if self._limiter.test(item, kind, name):
            return None
        reset = self._limiter.get_window_stats(item, kind, name).reset_time
        return TooManyRequests(
            f"too many failed authentications from {what}; retry later",
            retry_after=max(1, math.ceil(reset - time.time())),
        )
