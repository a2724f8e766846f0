"""The write locks of a Redis transaction: a session's or a shared document's, each
``SET NX PX`` with a random token, released by a compare-and-delete script (the store's
module docstring tells what they guard and for how long).
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from typing import TYPE_CHECKING

import redis

from ...errors import StoreBusy

if TYPE_CHECKING:
    from redis.commands.core import Script

__all__ = ["LOCK_TTL_MS", "LOCK_WAIT_S", "UNLOCK_LUA", "SessionLock"]

logger = logging.getLogger(__name__)


#: Expiry of a session's write lock (ms): far above a transaction's usual few ms; a
#: holder that died frees the session after this long.
LOCK_TTL_MS = 500


#: Longest wait for the lock (s) before StoreBusy: many expiries, so a waiter behind a
#: dead holder gets the lock rather than giving up as it frees, and 16 writers queued on
#: one session on a loaded 2-core machine (the polling is not a fair queue) all get
#: their turn (2 s was not enough there: StoreBusy, then a 503).
LOCK_WAIT_S = 10.0


#: Delete the lock only if it is still ours (it may have expired and been re-taken).
UNLOCK_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class SessionLock:
    """The write locks of one transaction (see the module docstring): a session's or a
    shared document's, each ``SET NX PX`` with a random token, released by a
    compare-and-delete script, so only its holder frees it.

    Args:
        client: the store's client; release: the registered ``UNLOCK_LUA`` script.
    """

    def __init__(self, client: redis.Redis, release: Script) -> None:
        self._r = client
        self._release = release
        self._held: dict[str, str] = {}  # lock key -> our token

    def take(self, key: str, what: str) -> None:
        """Wait for the lock ``key`` (``what`` it guards, for the error) and hold it
        until :meth:`release`; a lock already held is not taken again.

        Raises:
            StoreBusy: still held by other writers after ``LOCK_WAIT_S``.
        """
        if key in self._held:
            return
        token = secrets.token_hex(8)
        deadline = time.monotonic() + LOCK_WAIT_S
        delay = 0.0005
        while not self._r.set(key, token, nx=True, px=LOCK_TTL_MS):
            if time.monotonic() >= deadline:
                raise StoreBusy(f"{what} is locked by another writer")
            time.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, 0.01)
        self._held[key] = token

    def release(self) -> None:
        """Release the locks held (errors only logged: a lock expires by itself)."""
        held, self._held = self._held, {}
        for key, token in held.items():
            try:
                self._release(keys=[key], args=[token], client=self._r)
            except redis.RedisError as exc:
                logger.warning(
                    "could not release %s (it expires in %d ms): %s", key, LOCK_TTL_MS, exc
                )
