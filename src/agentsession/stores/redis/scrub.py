"""After an erasure: getting the deleted keys out of Redis's files.

A ``DEL`` removes the keys from memory at once, but the append-only file (AOF) keeps
the commands that wrote them until it is rewritten, and an RDB snapshot (``dump.rdb``)
keeps them until the next snapshot replaces it. ``BGREWRITEAOF`` writes a new AOF
from the live keys only (Redis 7: a new base file; the old base and increment files
are deleted); :func:`scrub` runs it when asked and waits until it has finished.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import redis
from redis.typing import ResponseT

from ..base import ScrubReport
from .replies import SYNC_ONLY as _SYNC_ONLY

__all__ = ["config_of", "scrub"]

_DELETED = "the erased keys were deleted from Redis's memory"
_REPLICAS = "replicas keep their own AOF and RDB files: run BGREWRITEAOF (and BGSAVE) there too"
_SLOWLOG = (
    "the slow log keeps the arguments of slow commands (the store's write scripts "
    "included) in memory until SLOWLOG RESET or a restart"
)
_AOF_KEEPS = (
    "the append-only file keeps the erased values until its next rewrite: run "
    "`agentsession erase --compact`, or open the store with rewrite_aof_after_erasure=True "
    "(AGENTSESSION_REDIS_REWRITE_AOF=1) so every erasure rewrites it"
)
_POLL_S = 0.05


def config_of(reply: ResponseT) -> dict[str, str]:
    """CONFIG GET: parameter -> value."""
    assert not inspect.isawaitable(reply), _SYNC_ONLY
    config: dict[str, str] = reply
    return config


def _persistence(client: redis.Redis) -> dict[str, Any]:
    reply = client.info("persistence")
    assert not inspect.isawaitable(reply), _SYNC_ONLY
    info: dict[str, Any] = reply
    return info


def scrub(client: redis.Redis, *, rewrite_aof: bool, timeout_seconds: float) -> ScrubReport:
    """Report what holds erased keys; with ``rewrite_aof``, rewrite the AOF first.

    Args:
        client: the store's client.
        rewrite_aof: run ``BGREWRITEAOF`` (when the server has an AOF) and wait for it.
        timeout_seconds: how long to wait for the rewrite before reporting it pending.

    Returns:
        The steps done and those left to the operator.

    Raises:
        redis.RedisError: a command failed (the store translates it).
    """
    done, pending = [_DELETED], []
    try:
        config = config_of(client.config_get("appendonly")) | config_of(client.config_get("save"))
    except redis.exceptions.ResponseError:
        pending.append(
            "this Redis refuses CONFIG (managed service?): its AOF and RDB files may hold "
            "the erased values until they are rewritten; ask its operator"
        )
        return ScrubReport(tuple(done), (*pending, _REPLICAS))
    if config.get("appendonly") == "yes":
        if not rewrite_aof:
            pending.append(_AOF_KEEPS)
        elif _rewrite(client, timeout_seconds):
            done.append("BGREWRITEAOF: the append-only file rewritten from the live keys only")
        else:
            pending.append(
                f"the AOF rewrite did not finish within {timeout_seconds:g} s (or failed: "
                "see the Redis log); the append-only file may still hold the erased values"
            )
    if config.get("save"):
        pending.append(
            "RDB snapshots (dump.rdb) taken before the erasure hold the erased values "
            "until the next snapshot replaces them (BGSAVE)"
        )
    pending += [_SLOWLOG, _REPLICAS]
    return ScrubReport(tuple(done), tuple(pending))


def _rewrite(client: redis.Redis, timeout_seconds: float) -> bool:
    """Run an AOF rewrite that starts after this call and wait for it; return whether
    it finished, successfully, within ``timeout_seconds``.

    A rewrite already running may have forked before the erasure, so it does not count:
    once it ends, ours starts. BGREWRITEAOF answers once its fork is made (or the
    rewrite is scheduled behind a running BGSAVE), so the rewrite is then visible as
    in progress or scheduled until it ends.
    """
    deadline = time.monotonic() + timeout_seconds
    started = False
    while time.monotonic() < deadline:
        if not started:
            try:
                client.execute_command("BGREWRITEAOF")  # type: ignore[no-untyped-call]
                started = True
            except redis.exceptions.ResponseError as exc:
                if "already in progress" not in str(exc):
                    raise
        info = _persistence(client)
        if started and not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]):
            return str(info["aof_last_bgrewrite_status"]) == "ok"
        time.sleep(_POLL_S)
    return False
