"""A run whose lease lapsed: the change that marks it INTERRUPTED.

A run started with ``lease_seconds`` holds its lease until ``lease_expires_at``; each
heartbeat moves that deadline, on the run and on the session row (whose copy every
access reads, so noticing a lapse costs no extra query). Once the deadline passes with
no heartbeat, the worker is taken for dead: the next access to the session (a write or
a read, through the pipeline and the read path) or the sweep stores this change first,
as its own write by ``system``, as lazy TTL expiry does (docs/semantics.md, "Run
leases").
"""

from __future__ import annotations

from datetime import datetime

from ...models import RunStatus, Session
from ...stores.base import StoreTransaction
from ..pipeline import Change
from ..transitions import LEASE_LAPSED, current_run
from .interrupted import answer_interrupted_calls

__all__ = ["lapse_change"]


def lapse_change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
    """The change that ends the lapsed lease of ``s`` (see the module docstring): its
    RUNNING run becomes INTERRUPTED (``ended_at`` its lease deadline, or its start if a
    clock stepped back put the deadline before it, so the run reads the same whoever
    noticed it, and ``error`` :data:`LEASE_LAPSED`, which tells later
    writes tagged with it apart), each call the run left unanswered gets a synthetic
    result as on restore, and the session's lease is cleared.

    Audit action ``run.lease_expired``, details: ``run_id`` (None if no leased run was
    RUNNING after all), ``interrupted_calls``.
    """
    run = current_run(tx, s)
    stopped: list[str] = []
    if run is not None and run.lease_expires_at is not None:
        # Never before the start: a clock stepped back may have set an early deadline.
        end = max(run.lease_expires_at, run.started_at or run.lease_expires_at)
        ended = {"status": RunStatus.INTERRUPTED, "ended_at": end}
        tx.update_run(run.model_copy(update={**ended, "error": LEASE_LAPSED}))
        stopped.append(run.run_id)
    answered = answer_interrupted_calls(tx, s, now, stopped)
    new = s.model_copy(
        update={"lease_expires_at": None, "message_count": s.message_count + len(answered.messages)}
    )
    details = {
        "run_id": stopped[0] if stopped else None,
        "interrupted_calls": list(answered.call_ids),
    }
    return Change(new, "run.lease_expired", details)
