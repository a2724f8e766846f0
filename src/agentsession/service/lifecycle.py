"""Lifecycle use cases: close, expire, restore, and the sweep of idle sessions.

ACTIVE -> CLOSED (close), ACTIVE -> EXPIRED (idle past the TTL, or expire),
CLOSED/EXPIRED -> ACTIVE (restore; EXPIRED only within the policy's restore window).
See docs/semantics.md, "Lifecycle".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import BaseModel, Field, TypeAdapter

from ..errors import IllegalTransition, StoreError
from ..models import RestoredSession, RunStatus, Session, SessionStatus
from ..principal import Principal
from ..stores.base import StoreTransaction
from .changes.interrupted import answer_interrupted_calls
from .context import report_write
from .core import ServiceCore
from .messages import message_page
from .paging import Listing, Position, read_gapless
from .pipeline import SESSION, Change, Unchanged, WriteRequest, expiry_change
from .reads import memory_of
from .transitions import current_run, expires_at, stop_running_runs
from .validation import check_limit, check_reason

__all__ = ["SWEEP_BATCH", "LifecycleUseCases", "SweepResult"]

logger = logging.getLogger(__name__)

#: Due sessions expired per write transaction by :meth:`LifecycleUseCases.sweep_expired`:
#: one commit per batch instead of one per session, while a batch still holds its
#: locks for only a few milliseconds.
SWEEP_BATCH = 100


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What one :meth:`SessionManager.sweep_expired` pass did.

    Attributes:
        expired_session_ids: sessions moved from ACTIVE to EXPIRED.
        purged_idempotency_keys: idempotency records past their retention, deleted.
        failed_session_ids: due sessions the store failed to expire, or whose lapsed
            run lease it failed to store (logged; the next sweep tries them again).
        interrupted_run_ids: runs marked INTERRUPTED because their lease lapsed.
    """

    expired_session_ids: list[str]
    purged_idempotency_keys: int
    failed_session_ids: list[str] = field(default_factory=list)
    interrupted_run_ids: list[str] = field(default_factory=list)


class LifecycleUseCases(ServiceCore):
    """Lifecycle use cases (part of :class:`SessionManager`)."""

    def close_session(
        self,
        *,
        session_id: str,
        user_id: str,
        reason: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Session:
        """Close the session on purpose: history stays readable, restore re-opens it.

        Closing a CLOSED session changes nothing and returns it. A run still RUNNING is
        marked CANCELLED (no write can finish it once the session is closed). ``user_id``
        names the caller (the principal).

        Raises:
            IllegalTransition: the session is EXPIRED.
            SessionNotFound, VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        text = check_reason(reason) or "closed"

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Session:
            if s.status == SessionStatus.CLOSED:
                return s
            if s.status != SessionStatus.ACTIVE:
                raise IllegalTransition(
                    session_id=s.session_id, status=s.status.value, action="close"
                )
            stopped = stop_running_runs(tx, s, now, RunStatus.CANCELLED, "session closed")
            new = s.model_copy(
                update={
                    "status": SessionStatus.CLOSED,
                    "status_reason": text,
                    "closed_at": now,
                    "expires_at": None,
                    "lease_expires_at": None,
                }
            )
            # The reason is free text: the audit log only says whether one was given.
            details = {"reason_given": reason is not None, "cancelled_runs": stopped}
            return Change(new, "session.closed", details)

        request = WriteRequest(
            scope="close_session",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=SESSION,
            request=(text,),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            require_active=False,
            returns_session=True,
        )
        return self._pipeline.write(request).value

    def expire_session(
        self,
        *,
        session_id: str,
        user_id: str,
        reason: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Session:
        """Expire the session now (policy ended it; not the same as closing).

        Expiring an EXPIRED session changes nothing. Runs still RUNNING become
        INTERRUPTED. ``user_id`` names the caller (the principal). A retried
        ``idempotency_key`` answers the first call's session and writes nothing.

        Raises:
            IllegalTransition: the session is CLOSED.
            SessionNotFound, VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        text = check_reason(reason) or "expired by request"

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Session:
            if s.status == SessionStatus.EXPIRED:
                return s
            if s.status != SessionStatus.ACTIVE:
                raise IllegalTransition(
                    session_id=s.session_id, status=s.status.value, action="expire"
                )
            return expiry_change(tx, s, now, text, reason_given=reason is not None)

        request = WriteRequest(
            scope="expire_session",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=SESSION,
            request=(text,),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            require_active=False,
            returns_session=True,
        )
        return self._pipeline.write(request).value

    def restore_session(
        self,
        *,
        session_id: str,
        user_id: str,
        message_limit: int | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> RestoredSession:
        """Take over a session to continue it, and return all an engine needs.

        CLOSED is re-opened always; EXPIRED only within
        ``policy.expired_restore_window_seconds`` of expiring; ACTIVE stays ACTIVE.
        Restoring means the caller is now the session's worker, so a run still RUNNING
        was left by a dead process and is marked INTERRUPTED; each tool call it (or the
        close or expiry undone) left unanswered gets a synthetic result in the same write
        (docs/semantics.md, "Calls a crash left unanswered"). When nothing changes,
        the version does not move. ``user_id`` names the caller (the principal).

        Args:
            message_limit: how many recent messages to return (default
                ``policy.restore_message_limit``, at most ``limits.max_page_size``).
            idempotency_key: a retry with the same key writes nothing and answers the
                first call's ``previous_status``, ``interrupted_run_ids`` and
                ``interrupted_call_ids`` (the windows are read as the session is now).

        Returns:
            Session, working memory, bounded windows of the newest messages, tool calls
            and runs (``policy.restore_*_limit``) with cursors to page back further,
            the ids of runs this call interrupted and of the calls it answered.

        Raises:
            IllegalTransition: EXPIRED past the restore window.
            SessionNotFound, VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        policy = self.policy
        limit = check_limit(
            policy.restore_message_limit if message_limit is None else message_limit,
            "message_limit",
            allow_none=False,
            maximum=self.limits.max_page_size,
        )
        limits = (limit or 0, policy.restore_tool_call_limit, policy.restore_run_limit)
        principal = Principal(user_id, admin)
        if expected_version is None and idempotency_key is None:
            # The lean form: a restore that changes nothing (an ACTIVE session with no
            # RUNNING run) is answered by one read transaction, with the same checks.
            kept = self._reads.read(session_id, principal, lambda tx, s: _kept(tx, s, limits))
            if kept is not None:
                report_write(replayed=False, session_version=kept.session.version)
                return kept.model_copy(update={"interrupted_call_ids": []})

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Unchanged:
            self._check_restorable(s, now)
            interrupted = stop_running_runs(
                tx, s, now, RunStatus.INTERRUPTED, "worker stopped while RUNNING"
            )
            if s.status == SessionStatus.ACTIVE and not interrupted:
                return Unchanged(_Restore(previous_status=s.status, interrupted_run_ids=[]))
            answered = answer_interrupted_calls(tx, s, now, interrupted)
            details = {"from": s.status.value, "interrupted_runs": list(interrupted)}
            details["interrupted_calls"] = list(answered.call_ids)
            outcome = _Restore(
                previous_status=s.status,
                interrupted_run_ids=list(interrupted),
                interrupted_call_ids=list(answered.call_ids),
            )
            reopened = _reopened(s, now, len(answered.messages))
            return Change(reopened, "session.restored", details, outcome)

        request = WriteRequest(
            scope="restore_session",
            session_id=session_id,
            principal=principal,
            change=change,
            result_type=_RESTORE,
            request=(limit,),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            require_active=False,
        )
        done = self._pipeline.write(request).value
        restored = self._reads.read(
            session_id,
            principal,
            lambda tx, s: _restored(tx, s, limits, done.interrupted_run_ids, done.previous_status),
        )
        return restored.model_copy(update={"interrupted_call_ids": done.interrupted_call_ids})

    def _check_restorable(self, s: Session, now: datetime) -> None:
        """Raise IllegalTransition if ``s`` expired longer ago than the restore window."""
        window = self.policy.expired_restore_window_seconds
        if s.status != SessionStatus.EXPIRED or window is None:
            return
        if s.expired_at is None or now - s.expired_at >= timedelta(seconds=window):
            raise IllegalTransition(
                session_id=s.session_id,
                status=s.status.value,
                action="restore",
                reason=f"it expired more than {window:g} s ago (policy)",
            )

    def sweep_expired(self, *, limit: int = 1000) -> SweepResult:
        """Interrupt every run whose lease lapsed, expire every ACTIVE session idle past
        its TTL, and purge old idempotency keys.

        A system task (run it from cron or ``agentsession sweep``); sessions are also
        expired lazily whenever they are touched, so the sweep only bounds staleness.
        Lapsed leases go first, the same way (:meth:`WritePipeline.lapse_due`, batches
        and failures as below; docs/semantics.md, "Run leases").
        Due sessions are expired :data:`SWEEP_BATCH` to a write transaction, each with
        its own version step, audit event and INTERRUPTED runs; one that changed since
        it was found due is skipped. A batch that fails is retried one session per
        transaction, so one bad session holds back neither its batch nor the next ones:
        it is logged, reported in ``failed_session_ids`` and left for the next sweep.

        Args:
            limit: at most this many sessions per call (and this many lapsed leases).

        Returns:
            What was expired, failed and purged.

        Raises:
            ValidationError: a bad ``limit``.
            StoreError: every session of a batch failed on its own (the store is
                failing); the batches before it stay committed.
        """
        size = check_limit(limit, "limit", allow_none=False, maximum=None)
        assert size is not None
        now = self._uow.now()
        pipeline = self._pipeline
        lapsed = self._uow.run(lambda tx: tx.list_lapsed_leases(now=now, limit=size), write=False)
        interrupted, failed = _in_batches(lapsed, pipeline.lapse_due)
        due = self._uow.run(lambda tx: tx.list_due_sessions(now=now, limit=size), write=False)
        expired, bad = _in_batches(due, pipeline.expire_due)
        failed += [session_id for session_id in bad if session_id not in failed]
        cutoff = self._uow.now() - timedelta(seconds=self.policy.idempotency_retention_seconds)
        purged = self._uow.run(lambda tx: tx.purge_idempotency(created_before=cutoff), write=True)
        return SweepResult(
            expired_session_ids=expired,
            purged_idempotency_keys=purged,
            failed_session_ids=failed,
            interrupted_run_ids=interrupted,
        )


def _in_batches(
    session_ids: list[str], settle: Callable[[list[str]], list[str]]
) -> tuple[list[str], list[str]]:
    """Run ``settle`` (expire, or interrupt lapsed leases) over ``session_ids``,
    :data:`SWEEP_BATCH` to a call; return (what it settled, the sessions that failed).
    A batch the store fails is retried one session per call.

    Raises:
        StoreError: every session of a batch failed on its own.
    """
    done: list[str] = []
    failed: list[str] = []
    for start in range(0, len(session_ids), SWEEP_BATCH):
        batch = session_ids[start : start + SWEEP_BATCH]
        try:
            done += settle(batch)
        except StoreError:
            settled, bad = _one_by_one(batch, settle)
            done += settled
            failed += bad
    return done, failed


def _one_by_one(
    batch: list[str], settle: Callable[[list[str]], list[str]]
) -> tuple[list[str], list[str]]:
    """Settle a failed batch's sessions one per transaction; return (settled, failed).

    Raises:
        StoreError: every session failed (the store, not one session, is failing).
    """
    done: list[str] = []
    bad: list[str] = []
    error: StoreError | None = None
    for session_id in batch:
        try:
            done += settle([session_id])
        except StoreError as exc:
            logger.warning("sweep: cannot settle %s: %s", session_id, exc)
            bad.append(session_id)
            error = exc
    if error is not None and len(bad) == len(batch):
        raise error
    return done, bad


class _Restore(BaseModel):
    """What a restore did, kept as its idempotency record's result."""

    previous_status: SessionStatus
    interrupted_run_ids: list[str]
    interrupted_call_ids: list[str] = Field(default_factory=list)


_RESTORE: TypeAdapter[_Restore] = TypeAdapter(_Restore)


def _reopened(s: Session, now: datetime, messages_added: int) -> Session:
    """``s`` ACTIVE again from ``now`` (its TTL restarted), with ``messages_added``
    more messages."""
    return s.model_copy(
        update={
            "status": SessionStatus.ACTIVE,
            "status_reason": None,
            "closed_at": None,
            "expired_at": None,
            "last_active_at": now,
            "expires_at": expires_at(now, s.ttl_seconds),
            "lease_expires_at": None,  # its run, if any, was just interrupted
            "message_count": s.message_count + messages_added,
        }
    )


def _kept(tx: StoreTransaction, s: Session, limits: tuple[int, int, int]) -> RestoredSession | None:
    """The restore of ``s`` when the take-over changes nothing: ``s`` is ACTIVE and
    has no RUNNING run (:func:`~.transitions.current_run`), so the write would be
    :class:`~.pipeline.Unchanged` and the windows are read as the session is; else
    None (the write must run)."""
    if s.status != SessionStatus.ACTIVE or current_run(tx, s) is not None:
        return None
    return _restored(tx, s, limits, [], s.status)


def _restored(
    tx: StoreTransaction,
    s: Session,
    limits: tuple[int, int, int],
    interrupted: list[str],
    previous: SessionStatus,
) -> RestoredSession:
    """All an engine needs to continue ``s``: memory and the newest windows of messages
    (aligned to whole tool-call groups), tool calls and runs, sized by ``limits``
    (messages, tool calls, runs), each with the cursor that pages back further."""
    message_limit, call_limit, run_limit = limits
    newest = Position(older=True, seq=None)
    history = Listing("messages", s.session_id, True)
    messages = message_page(tx, s, newest, message_limit, history, align=True)
    messages_cursor = messages.next_cursor
    if message_limit == 0 and s.message_count:
        # An empty window still says that history exists, and where to read it.
        [top] = tx.get_messages(s.session_id, limit=1)
        top_end = Position(older=True, seq=top.seq + 1, anchor=(top.seq, top.message_id))
        messages_cursor = history.cursor(top_end)
    calls = read_gapless(
        lambda after_seq, n: tx.list_tool_calls(s.session_id, after_seq=after_seq, limit=n),
        newest,
        call_limit,
        s.tool_call_count,
        Listing("tool_calls", s.session_id),
    )
    runs = read_gapless(
        lambda after_seq, n: tx.list_runs(s.session_id, after_seq=after_seq, limit=n),
        newest,
        run_limit,
        s.run_count,
        Listing("runs", s.session_id),
    )
    return RestoredSession(
        session=s,
        working_memory=memory_of(tx, s),
        messages=messages.items,
        tool_calls=calls.items,
        runs=runs.items,
        messages_next_cursor=messages_cursor,
        tool_calls_next_cursor=calls.next_cursor,
        runs_next_cursor=runs.next_cursor,
        interrupted_run_ids=interrupted,
        previous_status=previous,
    )
