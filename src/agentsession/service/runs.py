"""Use cases on runs (one task each): start, heartbeat, add a step, finish, read, list,
page steps.

Every write reads and writes the run row only (its status and ``step_count``), never its
steps, so a run costs the same with 10 steps as with 20,000.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import TypeAdapter

from ..errors import RunAlreadyRunning, RunNotFound, ValidationError
from ..fieldlimits import STEP_NAME_CHARS
from ..ids import check_id, check_name, new_id
from ..jsonvalues import check_json
from ..models import Page, Run, RunStatus, RunStep, Session
from ..principal import Principal
from ..stores.base import StoreTransaction
from .core import ServiceCore
from .paging import Listing, Position, read_gapless
from .pipeline import Change, Refused, Unchanged, WriteRequest, request_parts
from .policy import Limits
from .transitions import current_run, running_run
from .usage import ledger_rows, run_entries, spent_budget
from .validation import (
    check_cursor_seq,
    check_enum,
    check_lease,
    check_metadata,
    check_text,
    check_time,
)

__all__ = ["RunUseCases"]

_RUN: TypeAdapter[Run] = TypeAdapter(Run)
_STEP: TypeAdapter[RunStep] = TypeAdapter(RunStep)
_FINISH_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class RunUseCases(ServiceCore):
    """Run use cases (part of :class:`SessionManager`)."""

    def start_run(
        self,
        *,
        session_id: str,
        user_id: str,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        lease_seconds: float | None = None,
    ) -> Run:
        """Start a run (one task) in RUNNING state.

        Args:
            user_id: the caller (the principal).
            input: the task, any JSON value (e.g. the user's request).
            metadata: a JSON object of at most ``limits.max_metadata_bytes``.
            lease_seconds: the run holds a lease until ``started_at + lease_seconds``
                (``Run.lease_expires_at``); :meth:`heartbeat_run` extends it, and once
                it lapses the run is INTERRUPTED (docs/semantics.md, "Run leases").
                A positive number, at most one day; None (the default): no lease.

        Raises:
            RunAlreadyRunning: the session has a RUNNING run (at most one at a time).
            BudgetExceeded: the session's or its owner's budget is spent; only the
                ``run.refused`` audit event is written.
            SessionNotFound, SessionNotActive, VersionConflict, ValidationError,
            IdempotencyKeyReused.
        """
        check_json(input, field="input", limit_bytes=self.limits.max_run_payload_bytes)
        meta = check_metadata(metadata, "metadata", self.limits)
        lease = check_lease(lease_seconds)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Refused:
            running = current_run(tx, s)
            if running is not None:
                raise RunAlreadyRunning(session_id=s.session_id, run_id=running.run_id)
            refusal = self._refusal(tx, s, "start_run", None)
            if refusal is not None:
                return refusal
            run = Run(
                run_id=new_id("run"),
                session_id=s.session_id,
                seq=s.run_count + 1,
                input=input,
                status=RunStatus.RUNNING,
                created_at=now,
                started_at=now,
                metadata=meta,
                lease_seconds=lease,
                lease_expires_at=None if lease is None else now + timedelta(seconds=lease),
            )
            tx.insert_run(run)
            update = {"run_count": s.run_count + 1, "lease_expires_at": run.lease_expires_at}
            details: dict[str, Any] = {"run_id": run.run_id}
            if lease is not None:
                details["lease_seconds"] = lease
            return Change(s.model_copy(update=update), "run.started", details, run)

        request = WriteRequest(
            scope="start_run",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_RUN,
            request=request_parts(input, meta, lease, required=2),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def heartbeat_run(
        self,
        *,
        session_id: str,
        user_id: str,
        run_id: str,
        lease_seconds: float | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Run:
        """Extend the lease of a RUNNING run to now + ``lease_seconds``.

        A heartbeat is liveness, not content: it moves the lease deadline on the run and
        on the session row and nothing else: no version step, no audit event, no TTL
        restart, and it takes no ``expected_version``. So a worker heartbeating every
        few seconds never makes another writer's ``expected_version`` (If-Match) stale,
        and never floods the audit log; what the lease changes (its start, its lapse)
        is audited (docs/semantics.md, "Run leases").

        Args:
            user_id: the caller (the principal).
            lease_seconds: the new lease (also kept as the run's ``lease_seconds``);
                None: the run's own. A run started without a lease gets one this way.

        Returns:
            The run (without steps), ``lease_expires_at`` its new deadline and
            ``session_version`` the session's version (unchanged).

        Raises:
            RunLeaseExpired: the lease lapsed before this heartbeat; the run is (now)
                INTERRUPTED. RunNotRunning: the run ended otherwise.
            ValidationError: ``lease_seconds`` out of range, or None for a run that
                holds no lease.
            RunNotFound, SessionNotFound, SessionNotActive, IdempotencyKeyReused.
        """
        check_id(run_id, field="run_id", prefix="run")
        lease = check_lease(lease_seconds)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Unchanged:
            run = running_run(tx, s, run_id)
            span = lease if lease is not None else run.lease_seconds
            if span is None:
                raise ValidationError(
                    "the run holds no lease: give lease_seconds", field="lease_seconds"
                )
            deadline = now + timedelta(seconds=span)
            beat = run.model_copy(update={"lease_seconds": span, "lease_expires_at": deadline})
            tx.update_run(beat)
            # The same version: a heartbeat is no change of the session (see above).
            live = s.model_copy(update={"lease_expires_at": deadline})
            tx.update_session(live, expected_version=s.version)
            return Unchanged(beat.model_copy(update={"session_version": s.version}))

        request = WriteRequest(
            scope="heartbeat_run",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_RUN,
            request=(run_id, lease),
            idempotency_key=idempotency_key,
        )
        return self._pipeline.write(request).value

    def add_run_step(
        self,
        *,
        session_id: str,
        user_id: str,
        run_id: str,
        kind: str,
        name: str | None = None,
        input: Any = None,
        output: Any = None,
        status: str = "ok",
        error: str | None = None,
        started_at: datetime | None = None,
        ended_at: datetime | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> RunStep:
        """Append a step to a RUNNING run; steps are numbered 0, 1, 2...

        Args:
            user_id: the caller (the principal).
            kind: what the step is, e.g. ``"model"``, ``"tool"``, ``"message"``.
            name: e.g. the tool's name. input/output: JSON values. status: free text
                such as ``"ok"`` or ``"error"``. started_at/ended_at: default now.

        Raises:
            BudgetExceeded: the session's or its owner's budget is spent; only the
                ``run.refused`` audit event is written (the run stays RUNNING:
                finish it).
            RunNotFound, RunNotRunning, SessionNotFound, SessionNotActive,
            VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        check_id(run_id, field="run_id", prefix="run")
        check_name(kind, field="kind")
        check_name(status, field="status")
        check_text(name, "name", max_chars=STEP_NAME_CHARS)
        check_text(error, "error")
        check_json(
            {"input": input, "output": output, "error": error, "name": name, "status": status},
            field="step",
            limit_bytes=self.limits.max_run_payload_bytes,
        )
        started = check_time(started_at, "started_at")
        ended = check_time(ended_at, "ended_at")

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Refused:
            run = running_run(tx, s, run_id)
            refusal = self._refusal(tx, s, "add_run_step", run_id)
            if refusal is not None:
                return refusal
            step = RunStep(
                run_id=run_id,
                index=run.step_count,
                kind=kind,
                name=name,
                input=input,
                output=output,
                status=status,
                error=error,
                started_at=started or now,
                ended_at=ended or now,
            )
            tx.insert_run_step(s.session_id, step)
            details = {"run_id": run_id, "index": step.index, "kind": kind}
            return Change(s, "run.step_added", details, step)

        request = WriteRequest(
            scope="add_run_step",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_STEP,
            request=(run_id, kind, name, input, output, status, error, started, ended),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def finish_run(
        self,
        *,
        session_id: str,
        user_id: str,
        run_id: str,
        status: RunStatus | str,
        error: str | None = None,
        output: Any = None,
        usage: Mapping[str, int] | None = None,
        model: str | None = None,
        usage_by_model: Mapping[str, Mapping[str, int]] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Run:
        """End a RUNNING run as SUCCEEDED, FAILED or CANCELLED, and enter its usage in
        the usage ledger in the same transaction (docs/semantics.md, "Usage and
        budgets"). A spent budget never refuses a finish: the tokens were spent.

        Args:
            user_id: the caller (the principal).
            error: what went wrong (FAILED). output: the run's result, any JSON.
            usage: token counts under the provider's names, integers >= 0, e.g.
                ``{"input_tokens": 812, "output_tokens": 95}`` or OpenAI's
                ``prompt_tokens``/``completion_tokens`` (the names read:
                :mod:`agentsession.usage`); stored as given in ``Run.usage``.
            model: the model those tokens are of (printable ASCII, no space, at most
                128 characters); None: not said.
            usage_by_model: for a run that used several models, model name -> counts
                (then no ``usage`` nor ``model``); ``Run.usage`` is their sum under the
                normalised names.

        Returns:
            The finished run without its steps (``step_count`` says how many), its
            ``usage_entries`` the ledger rows written (one per model).

        Raises:
            RunNotFound, RunNotRunning, SessionNotFound, SessionNotActive,
            VersionConflict, ValidationError, IdempotencyKeyReused.
        """
        check_id(run_id, field="run_id", prefix="run")
        final = check_enum(RunStatus, status, "status", optional=False)
        check_text(error, "error")
        if final not in _FINISH_STATUSES:
            raise ValidationError("status must be SUCCEEDED, FAILED or CANCELLED", field="status")
        counts, entries = run_entries(usage, model, usage_by_model)
        check_json(
            {"output": output, "error": error},
            field="run",
            limit_bytes=self.limits.max_run_payload_bytes,
        )

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
            run = running_run(tx, s, run_id)
            done = run.model_copy(
                update={
                    "status": final,
                    "ended_at": now,
                    "error": error,
                    "output": output,
                    "usage": counts,
                    "usage_entries": entries,
                }
            )
            tx.update_run(done)
            tx.insert_usage(ledger_rows(s, run_id, now, entries))
            details = {"run_id": run_id, "status": final.value}
            if s.lease_expires_at is not None:  # the run's lease ends with it
                s = s.model_copy(update={"lease_expires_at": None})
            return Change(s, "run.finished", details, done)

        request = WriteRequest(
            scope="finish_run",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_RUN,
            request=request_parts(
                run_id, final, error, output, counts, model, usage_by_model, required=5
            ),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def get_run(self, *, session_id: str, user_id: str, run_id: str, admin: bool = False) -> Run:
        """Return one run with a bounded window of its steps: the first
        ``limits.default_page_size`` (at most ``limits.max_page_size``), oldest first.
        ``len(run.steps) < run.step_count`` means there are more: page on with
        :meth:`list_run_steps` from ``after=run.steps[-1].index``. ``user_id`` names the
        caller (the principal).

        Raises:
            RunNotFound, SessionNotFound, ValidationError.
        """
        check_id(run_id, field="run_id", prefix="run")
        window = _step_page(self.limits)

        def read(tx: StoreTransaction, s: Session) -> Run:
            run = tx.get_run(s.session_id, run_id)
            if run is None:
                raise RunNotFound(session_id=s.session_id, run_id=run_id)
            steps = tx.list_run_steps(s.session_id, run_id, limit=window)
            return run.model_copy(update={"steps": steps})

        return self._reads.read(session_id, Principal(user_id, admin), read)

    def list_run_steps(
        self,
        *,
        session_id: str,
        user_id: str,
        run_id: str,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[RunStep]:
        """One page of a run's steps, oldest first (by ``index``).

        Args:
            user_id: the caller (the principal).
            after: a step index (exclusive); None starts at the first step.
            limit: page size, 1..``limits.max_page_size``; None gives
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this run's steps.

        Returns:
            A page; ``next_cursor`` (pass it as ``cursor``) is None on the last page.

        Raises:
            RunNotFound, SessionNotFound, ValidationError (also: a cursor with
            ``after``, or a cursor not of this run's steps).
        """
        check_id(run_id, field="run_id", prefix="run")
        if limit == 0:
            raise ValidationError("limit must be at least 1", field="limit")
        size = _step_page(self.limits) if limit is None else self._page_size(limit)
        listing = Listing("run_steps", session_id, run_id, older_ok=False)
        start = listing.start(cursor, after=check_cursor_seq(after, "after"), newest_first=False)

        def read(tx: StoreTransaction, s: Session) -> Page[RunStep]:
            run = tx.get_run(s.session_id, run_id)
            if run is None:
                raise RunNotFound(session_id=s.session_id, run_id=run_id)
            steps = tx.list_run_steps(s.session_id, run_id, after_index=start.seq, limit=size)
            # Indexes are 0..step_count-1: more follow iff the last one shown is not last.
            more = bool(steps) and steps[-1].index + 1 < run.step_count
            last = listing.cursor(Position(older=False, seq=steps[-1].index)) if more else None
            return Page[RunStep](items=steps, next_cursor=last)

        return self._reads.read(session_id, Principal(user_id, admin), read)

    def list_runs(
        self,
        *,
        session_id: str,
        user_id: str,
        status: RunStatus | str | None = None,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[Run]:
        """A page of runs, oldest first, without their steps (``steps == []``;
        ``step_count`` says how many: read them with :meth:`list_run_steps`); optionally
        of one status. ``user_id`` names the caller (the principal).

        Args:
            status: only runs in this status.
            after: start after this run seq (exclusive); None = from the first run.
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this listing (same session and
                ``status``), or ``runs_next_cursor`` of a restore (pages back to older
                runs; without ``status``).

        Returns:
            A page; ``next_cursor`` is None when no more runs lie beyond it.

        Raises:
            SessionNotFound, ValidationError (also: a cursor with ``after``, or a cursor
            not of this listing).
        """
        wanted = check_enum(RunStatus, status, "status")
        size = self._page_size(limit)
        scope = None if wanted is None else wanted.value
        listing = Listing("runs", session_id, scope, older_ok=wanted is None)
        start = listing.start(cursor, after=check_cursor_seq(after, "after"), newest_first=False)

        def read(tx: StoreTransaction, s: Session) -> Page[Run]:
            def fetch(after_seq: int | None, n: int) -> list[Run]:
                return tx.list_runs(s.session_id, status=wanted, after_seq=after_seq, limit=n)

            return read_gapless(fetch, start, size, s.run_count, listing)

        return self._reads.read(session_id, Principal(user_id, admin), read)

    def _refusal(
        self, tx: StoreTransaction, s: Session, operation: str, run_id: str | None
    ) -> Refused | None:
        """The refusal of a call past the session's or its owner's budget, else None."""
        spent = spent_budget(tx, s, self.policy.prices)
        if spent is None:
            return None
        details: dict[str, Any] = {
            "operation": operation,
            "reason": "budget",
            "scope": spent.scope,
            "limit": spent.limit,
            "maximum": spent.maximum,
            "used": spent.used,
        }
        if run_id is not None:
            details["run_id"] = run_id
        return Refused("run.refused", details, spent)


def _step_page(limits: Limits) -> int:
    """Steps per page when no limit is given: ``default_page_size``, within
    1..``max_page_size``."""
    return max(1, min(limits.default_page_size, limits.max_page_size))
