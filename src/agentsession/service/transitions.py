"""Session rules shared by the write pipeline, the lifecycle use cases and listings: the
TTL deadline, lazy expiry, a lapsed run lease, the expiry transition of the session row,
the version step, stopping runs a status change ends, and the RUNNING run every write
tagged with a run needs."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..errors import RunLeaseExpired, RunNotFound, RunNotRunning
from ..models import Run, RunStatus, Session, SessionStatus
from ..stores.base import SessionHead, SessionRow, StoreTransaction
from ..stores.listing import is_due

__all__ = [
    "LEASE_LAPSED",
    "TTL_REASON",
    "as_of",
    "current_run",
    "expired",
    "expires_at",
    "is_due",
    "is_lapsed",
    "newest_run",
    "next_version",
    "running_run",
    "stop_running_runs",
]

#: The ``status_reason`` of a session expired because it sat idle past its TTL.
TTL_REASON = "ttl"

#: The ``error`` of a run INTERRUPTED because its lease lapsed (no heartbeat in time).
LEASE_LAPSED = "lease expired: no heartbeat before lease_expires_at"


def expires_at(last_active: datetime, ttl_seconds: float | None) -> datetime | None:
    """When a session idle since ``last_active`` expires: ``last_active + ttl``; None
    without a TTL."""
    return None if ttl_seconds is None else last_active + timedelta(seconds=ttl_seconds)


def expired(s: Session, at: datetime, reason: str) -> Session:
    """``s`` moved to EXPIRED at ``at`` for ``reason`` (the row only: no version step, no
    runs stopped). The one expiry transition; :func:`as_of` shows it ahead of time."""
    return s.model_copy(
        update={
            "status": SessionStatus.EXPIRED,
            "status_reason": reason,
            "expired_at": at,
            "expires_at": None,
            "lease_expires_at": None,
        }
    )


def as_of(s: Session, now: datetime) -> Session:
    """``s`` as a read at ``now`` reports it: a session due for TTL expiry is shown
    EXPIRED (reason ``"ttl"``, ``expired_at`` its deadline) before the expiry is stored;
    version and ``updated_at`` stay those of the stored row."""
    if not is_due(s, now):
        return s
    assert s.expires_at is not None
    return expired(s, s.expires_at, TTL_REASON)


def is_lapsed(s: Session | SessionHead | SessionRow, now: datetime) -> bool:
    """Whether the lease of the RUNNING run of ``s`` (a session, its head or its row) lapsed at
    or before ``now`` while the session was ACTIVE: before its TTL deadline, if it has
    one (a session whose TTL ran out first is expired instead, which interrupts the run
    as well). One compare on the session row, no read of the run."""
    lease = s.lease_expires_at
    if lease is None or lease > now:
        return False
    return s.expires_at is None or lease < s.expires_at


def next_version(s: Session | SessionRow) -> int:
    """The version a change to ``s`` stores: every committed change is one step."""
    return s.version + 1


def current_run(tx: StoreTransaction, s: Session) -> Run | None:
    """The RUNNING run of ``s``, or None, in O(1) of the session's runs.

    A session runs at most one run at a time and ``start_run`` only starts one when none
    is RUNNING, so a RUNNING run is always the newest (seq ``s.run_count``): reading that
    one row answers, without a scan of the runs by status.
    """
    newest = newest_run(tx, s)
    return newest if newest is not None and newest.status == RunStatus.RUNNING else None


def newest_run(tx: StoreTransaction, s: Session) -> Run | None:
    """The run of ``s`` with the highest seq (``s.run_count``; seqs are gapless from 1),
    as a row without steps, or None; one indexed read."""
    if not s.run_count:
        return None
    rows = tx.list_runs(s.session_id, after_seq=s.run_count - 1, limit=1)
    return rows[0] if rows else None


def stop_running_runs(
    tx: StoreTransaction, s: Session, now: datetime, status: RunStatus, error: str
) -> list[str]:
    """End the RUNNING run of ``s`` (:func:`current_run`), if any, with ``status`` and
    ``error``; return the ids of the runs ended (none or one)."""
    run = current_run(tx, s)
    if run is None:
        return []
    tx.update_run(run.model_copy(update={"status": status, "ended_at": now, "error": error}))
    return [run.run_id]


def running_run(tx: StoreTransaction, s: Session | SessionRow, run_id: str) -> Run:
    """The run ``run_id`` of ``s``, which must be RUNNING: a step, a finish, a message
    or a tool call tagged with a run is refused once the run ended (say, interrupted by
    a restore that took the session over), so a late writer stores nothing. Reads the
    run row only (``steps == []``), never its steps.

    Raises:
        RunNotFound: the session has no such run.
        RunLeaseExpired: the run was INTERRUPTED because its lease lapsed.
        RunNotRunning: the run is not RUNNING.
    """
    run = tx.get_run(s.session_id, run_id)
    if run is None:
        raise RunNotFound(session_id=s.session_id, run_id=run_id)
    if run.status == RunStatus.INTERRUPTED and run.error == LEASE_LAPSED:
        raise RunLeaseExpired(session_id=s.session_id, run_id=run_id, status=run.status.value)
    if run.status != RunStatus.RUNNING:
        raise RunNotRunning(session_id=s.session_id, run_id=run_id, status=run.status.value)
    return run
