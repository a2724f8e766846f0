"""Session rules shared by the write pipeline and the lifecycle use cases: the TTL
deadline, lazy expiry, the version step, and stopping runs a status change ends."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..models import RunStatus, Session, SessionStatus
from ..stores.base import StoreTransaction

__all__ = ["expires_at", "is_due", "next_version", "stop_running_runs"]


def expires_at(last_active: datetime, ttl_seconds: float | None) -> datetime | None:
    """When a session idle since ``last_active`` expires: ``last_active + ttl``; None
    without a TTL."""
    return None if ttl_seconds is None else last_active + timedelta(seconds=ttl_seconds)


def is_due(s: Session, now: datetime) -> bool:
    """Whether ``s`` is ACTIVE and idle past its TTL at ``now`` (to be expired first)."""
    return s.status == SessionStatus.ACTIVE and s.expires_at is not None and s.expires_at <= now


def next_version(s: Session) -> int:
    """The version a change to ``s`` stores: every committed change is one step."""
    return s.version + 1


def stop_running_runs(
    tx: StoreTransaction, s: Session, now: datetime, status: RunStatus, error: str
) -> list[str]:
    """End every RUNNING run of ``s`` with ``status`` and ``error``; return their ids."""
    stopped = []
    for run in tx.list_runs(s.session_id, status=RunStatus.RUNNING):
        tx.update_run(run.model_copy(update={"status": status, "ended_at": now, "error": error}))
        stopped.append(run.run_id)
    return stopped
