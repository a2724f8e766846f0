"""Session rules shared by the write pipeline and the use cases: the TTL deadline, lazy
expiry, the version step, stopping runs a status change ends, and the RUNNING run every
write tagged with a run needs."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..errors import RunNotFound, RunNotRunning
from ..models import Run, RunStatus, Session, SessionStatus
from ..stores.base import StoreTransaction

__all__ = ["expires_at", "is_due", "next_version", "running_run", "stop_running_runs"]


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


def running_run(tx: StoreTransaction, s: Session, run_id: str) -> Run:
    """The run ``run_id`` of ``s``, which must be RUNNING: a step, a finish, a message
    or a tool call tagged with a run is refused once the run ended (say, interrupted by
    a restore that took the session over), so a late writer stores nothing. Reads the
    run row only (``steps == []``), never its steps.

    Raises:
        RunNotFound: the session has no such run.
        RunNotRunning: the run is not RUNNING.
    """
    run = tx.get_run(s.session_id, run_id)
    if run is None:
        raise RunNotFound(session_id=s.session_id, run_id=run_id)
    if run.status != RunStatus.RUNNING:
        raise RunNotRunning(session_id=s.session_id, run_id=run_id, status=run.status.value)
    return run
