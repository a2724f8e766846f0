"""The write pipeline: every mutation is one unit of work with the same checks in order.

Inside one store transaction (docs/architecture.md, "The write pipeline"):

1. lookup and ownership, locking the session row: another user's session is reported
   exactly like a missing one;
2. idempotency: a retried key with the same request returns the first result and
   writes nothing (a *replay*); with a different request it raises IdempotencyKeyReused;
3. lazy TTL expiry: an ACTIVE session idle past its TTL is marked EXPIRED first, in its
   own committed transaction, and the call runs again; so is a run whose lease lapsed
   marked INTERRUPTED (:mod:`.leases`);
4. status: writes need ACTIVE (unless the request says otherwise);
5. optimistic locking: a stale ``expected_version`` raises VersionConflict;
6. the change itself, then ``version + 1``, ``updated_at``, one audit event and the
   idempotency record, all committed together or not at all. A change may instead
   refuse (:class:`Refused`, a spent budget): then its audit event alone is committed,
   and the call raises.

The whole transaction re-runs when the store reports a lost race (StoreBusy).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, cast

import pydantic
from pydantic import TypeAdapter

from ..auditchain import new_event
from ..errors import (
    AgentSessionError,
    IdempotencyKeyReused,
    SessionNotActive,
    SessionNotFound,
    VersionConflict,
)
from ..jsonvalues import canonical_hash, dumps
from ..models import AuditEvent, RunStatus, Session, SessionStatus
from ..principal import Principal
from ..stores.base import IdempotencyRecord, SessionRow, StoreTransaction
from .context import current_request_id, report_write
from .modelcopy import updated
from .policy import Policy
from .transitions import (
    TTL_REASON,
    expired,
    expires_at,
    is_due,
    is_lapsed,
    next_version,
    stop_running_runs,
)
from .uow import UnitOfWork
from .validation import check_expected_version, check_key

__all__ = [
    "SESSION",
    "SYSTEM",
    "Change",
    "ChangeFn",
    "DueForExpiry",
    "LapseFn",
    "Refused",
    "RowChange",
    "RowChangeFn",
    "RowWrite",
    "Unchanged",
    "WritePipeline",
    "WriteRequest",
    "Written",
    "check_version",
    "expiry_change",
    "request_parts",
]

R = TypeVar("R")

#: The principal of changes nobody asked for (lazy TTL expiry); audit ``actor`` "system".
SYSTEM = Principal("system", admin=True)

SESSION: TypeAdapter[Session] = TypeAdapter(Session)

#: What :meth:`WritePipeline._replay` answers when there is no first result to replay.
_NO_RECORD: Any = object()


@dataclass(frozen=True, slots=True)
class Change:
    """What a change function wants stored besides its own rows.

    Attributes:
        session: the session row after the change; the pipeline sets its version
            (one step up), ``updated_at`` and, for a touching write, the TTL clock.
        action: the audit action, e.g. ``"message.appended"``.
        details: the audit event's details (no message content).
        result: what the call returns (unless the request returns the session).
    """

    session: Session
    action: str
    details: Mapping[str, Any] = field(default_factory=dict)
    result: Any = None


@dataclass(frozen=True, slots=True)
class Unchanged:
    """A change that found nothing to do and wrote nothing (popping an empty history):
    no version step, no audit event; the call answers ``result``."""

    result: Any


@dataclass(frozen=True, slots=True)
class Refused:
    """A change that the rules refuse (a spent budget) and that the audit log must
    show: the pipeline commits one audit event of ``action`` with ``details`` (no
    version step, nothing else written, no idempotency record: a retry is checked
    again) and then raises ``error``. The change function must not have written."""

    action: str
    details: Mapping[str, Any]
    error: AgentSessionError


#: ``change(tx, session, now)``: writes its rows and returns a Change, or returns the
#: session unchanged for a no-op (closing a CLOSED session), or an :class:`Unchanged`
#: for a no-op that answers something else: no version step, no audit; or a
#: :class:`Refused`.
ChangeFn = Callable[[StoreTransaction, Session, datetime], Change | Session | Unchanged | Refused]

#: ``lapse(tx, session, now)``: the change that interrupts the run of a session whose
#: lease lapsed (:func:`agentsession.service.changes.leases.lapse_change`).
LapseFn = Callable[[StoreTransaction, Session, datetime], Change]


@dataclass(frozen=True, slots=True)
class RowChange(Generic[R]):
    """What a row change (:data:`RowChangeFn`) stored besides its own rows.

    Attributes:
        action: the audit action; details: the audit event's details.
        result: what the call returns, ``session_version`` already the new version.
        message_count: the session's ``message_count`` after the change.
    """

    action: str
    details: Mapping[str, Any]
    result: R
    message_count: int


#: ``change(tx, row, now)``: writes its rows for the session of ``row`` (locked, at
#: ``row.version``; the change stores it at ``row.version + 1``) and returns a
#: :class:`RowChange`.
RowChangeFn = Callable[[StoreTransaction, SessionRow, datetime], RowChange[R]]


@dataclass(frozen=True, slots=True)
class RowWrite(Generic[R]):
    """A write that changes no session field but those of its :class:`SessionRow`
    (an append, a working-memory update): the lean form of a touching
    :class:`WriteRequest` that needs an ACTIVE session, whose attributes of the same
    names it has; ``change`` is a :data:`RowChangeFn`."""

    scope: str
    session_id: str
    principal: Principal
    change: RowChangeFn[R]
    result_type: TypeAdapter[R]
    request: tuple[Any, ...] = ()
    expected_version: int | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class WriteRequest(Generic[R]):
    """One write through the pipeline.

    Attributes:
        scope: the operation, e.g. ``"append_messages"``; idempotency keys are scoped
            per principal and scope.
        session_id: the session written to.
        principal: the caller; its user id is the audit ``actor``.
        change: see :data:`ChangeFn`.
        result_type: validates a replayed result back into the result's type.
        request: the request's parts, hashed into the idempotency fingerprint.
        expected_version: optimistic locking; None = no precondition.
        idempotency_key: makes a retry return the first result; None = no key.
        require_active: raise SessionNotActive unless the session is ACTIVE.
        touch: the write counts as activity: ``last_active_at`` moves and the TTL
            deadline restarts.
        returns_session: the call returns the session as stored, not the change's result.
    """

    scope: str
    session_id: str
    principal: Principal
    change: ChangeFn
    result_type: TypeAdapter[R]
    request: tuple[Any, ...] = ()
    expected_version: int | None = None
    idempotency_key: str | None = None
    require_active: bool = True
    touch: bool = False
    returns_session: bool = False


@dataclass(frozen=True, slots=True)
class Written(Generic[R]):
    """What a write answered: its result, whether that is a replay of the first
    result of its idempotency key (nothing was written), and the session's version
    when it finished (after the change; the current one for a no-op or a replay;
    None for a session creation, which reports its session)."""

    value: R
    replayed: bool
    session_version: int | None = None


class DueForExpiry(AgentSessionError):
    """Internal signal: the session is due for expiry, or its run's lease lapsed; store
    that first (:meth:`WritePipeline.catch_up`, its own transactions) and run the call
    again. Raised before the call has written anything."""


class WritePipeline:
    """Runs :class:`WriteRequest` objects (see the module docstring).

    Args:
        uow: the unit of work (transactions, clock).
        policy: ``idempotency_retention_seconds`` says how long a key is remembered.
        lapse: the change storing a lapsed run lease (see :data:`LapseFn`).
    """

    def __init__(self, uow: UnitOfWork, policy: Policy, *, lapse: LapseFn) -> None:
        self._uow = uow
        self._retention = timedelta(seconds=policy.idempotency_retention_seconds)
        self._lapse = lapse

    def write(self, req: WriteRequest[R]) -> Written[R]:
        """Run one write and report it to the open :func:`~.context.write_report`.

        Raises:
            ValidationError: a malformed id, ``expected_version`` or key.
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused,
            StoreBusy, and whatever the change raises.
        """
        check_expected_version(req.expected_version)
        key = check_key(req.idempotency_key)
        fingerprint = self.fingerprint(req.scope, req.session_id, req.request) if key else ""

        def body(tx: StoreTransaction) -> Written[R]:
            # Lock the session row first: a concurrent retry with the same key then
            # waits here and finds the first one's record, instead of racing it.
            s = self._uow.load(tx, req.session_id, req.principal)
            checked = self._check(tx, req, s, key, fingerprint, active=req.require_active)
            if isinstance(checked, Written):
                return checked
            result, version = self._apply(tx, req, s, checked)
            if not isinstance(result, Refused):
                self._remember(tx, req.principal, req.scope, key, fingerprint, s, result)
            return Written(result, replayed=False, session_version=version)

        written = self._run(req.session_id, body)
        if isinstance(written.value, Refused):  # its audit event is committed
            raise written.value.error
        report_write(replayed=written.replayed, session_version=written.session_version)
        return written

    def write_row(self, req: RowWrite[R]) -> Written[R]:
        """Run one :class:`RowWrite`: the checks of :meth:`write`, in its order, on the
        session's :class:`SessionRow` (no :class:`Session` is built), then the change,
        the row one version up with the TTL clock restarted
        (:meth:`~agentsession.stores.base.StoreTransaction.advance_session`), its audit
        event and the idempotency record, in one transaction.

        Raises:
            As :meth:`write`.
        """
        check_expected_version(req.expected_version)
        key = check_key(req.idempotency_key)
        fingerprint = self.fingerprint(req.scope, req.session_id, req.request) if key else ""

        def body(tx: StoreTransaction) -> Written[R]:
            row = self._uow.load_row(tx, req.session_id, req.principal)
            now = self._check(tx, req, row, key, fingerprint, active=True)
            if isinstance(now, Written):
                return now
            change = req.change(tx, row, now)
            version = row.version + 1
            versions = (row.version, version)
            event = self.audit_event(
                row, req.principal, change.action, versions, change.details, now
            )
            tx.advance_session(
                row,
                at=now,
                expires_at=expires_at(now, row.ttl_seconds),
                message_count=change.message_count,
                audit_head=event.hash,
            )
            tx.insert_audit(event)
            self._remember(tx, req.principal, req.scope, key, fingerprint, row, change.result)
            return Written(change.result, replayed=False, session_version=version)

        written = self._run(req.session_id, body)
        report_write(replayed=written.replayed, session_version=written.session_version)
        return written

    def _check(
        self,
        tx: StoreTransaction,
        req: WriteRequest[R] | RowWrite[R],
        s: Session | SessionRow,
        key: str | None,
        fingerprint: str,
        *,
        active: bool,
    ) -> Written[R] | datetime:
        """The checks after the lookup, in order: a replay of the key (its first
        result), lazy expiry and a lapsed lease (DueForExpiry), the status (with
        ``active``), the expected version. Returns the replay, or the write's ``now``."""
        replay = self._replay(tx, req.principal, req.scope, key, fingerprint)
        if replay is not _NO_RECORD:
            value = req.result_type.validate_python(replay)
            return Written(value, replayed=True, session_version=s.version)
        now = self._uow.now()
        if is_due(s, now) or is_lapsed(s, now):
            raise DueForExpiry("session is due for expiry or its run's lease lapsed")
        if active and s.status != SessionStatus.ACTIVE:
            raise SessionNotActive(session_id=s.session_id, status=s.status.value)
        check_version(s, req.expected_version)
        return now

    def _run(self, session_id: str, body: Callable[[StoreTransaction], Written[R]]) -> Written[R]:
        """Run a write's ``body`` in a write transaction; when the session is due for
        expiry or its lease lapsed, store that first and run it again."""
        try:
            return self._uow.run(body, write=True)
        except DueForExpiry:
            # Lazy TTL expiry is its own committed change; then the call acts on an
            # EXPIRED session (a write fails, close is illegal, restore re-opens). The
            # same for a lapsed lease: the call then finds its run INTERRUPTED.
            self.catch_up(session_id)
            return self._uow.run(body, write=True)

    def _apply(
        self, tx: StoreTransaction, req: WriteRequest[R], s: Session, now: datetime
    ) -> tuple[R, int]:
        """Run ``req``'s change on ``s``: its result, and the session's version after it."""
        outcome = req.change(tx, s, now)
        if isinstance(outcome, Session):
            return cast(R, outcome), outcome.version
        if isinstance(outcome, Unchanged):
            return cast(R, outcome.result), s.version
        if isinstance(outcome, Refused):
            versions = (s.version, s.version)
            self.audit(tx, s, req.principal, outcome.action, versions, outcome.details, now)
            return cast(R, outcome), s.version
        stored = self.store_change(tx, s, outcome, req.principal, now, touch=req.touch)
        if req.returns_session:
            return cast(R, stored), stored.version
        return cast(R, _with_session_version(outcome.result, stored.version)), stored.version

    def create(
        self,
        principal: Principal,
        idempotency_key: str | None,
        request: tuple[Any, ...],
        build: Callable[[StoreTransaction, datetime], Session],
        *,
        scope: str = "create_session",
    ) -> Written[Session]:
        """Run a session creation: ``build(tx, now)`` inserts the session (and audits
        it); a retried idempotency key of ``scope`` answers the first session instead.
        Nothing is recorded when ``build`` raises.

        Raises:
            ValidationError: a malformed key. IdempotencyKeyReused, StoreBusy, and
            whatever ``build`` raises.
        """
        key = check_key(idempotency_key)
        fingerprint = self.fingerprint(scope, None, request)

        def body(tx: StoreTransaction) -> Written[Session]:
            replay = self._replay(tx, principal, scope, key, fingerprint)
            if replay is not _NO_RECORD:
                return Written(SESSION.validate_python(replay), replayed=True)
            session = build(tx, self._uow.now())
            self._remember(tx, principal, scope, key, fingerprint, session, session)
            return Written(session, replayed=False)

        written = self._uow.run(body, write=True)
        report_write(replayed=written.replayed)
        return written

    def write_sessionless(
        self,
        principal: Principal,
        scope: str,
        idempotency_key: str | None,
        request: tuple[Any, ...],
        result_type: TypeAdapter[R],
        change: Callable[[StoreTransaction, datetime], R],
        *,
        owner: str | None,
    ) -> Written[R]:
        """Run a write that belongs to no session (a shared-memory document):
        ``change(tx, now)`` writes and returns the result; a retried idempotency key of
        ``scope`` answers the first result instead (its record names no session, and
        ``owner``: the user whose data it writes, None for no user's, so that user's
        erasure purges it whoever the caller was). No session version step and no
        audit event.

        Raises:
            ValidationError: a malformed key. IdempotencyKeyReused, StoreBusy, and
            whatever ``change`` raises.
        """
        key = check_key(idempotency_key)
        fingerprint = self.fingerprint(scope, None, request) if key else ""

        def body(tx: StoreTransaction) -> Written[R]:
            replay = self._replay(tx, principal, scope, key, fingerprint)
            if replay is not _NO_RECORD:
                return Written(result_type.validate_python(replay), replayed=True)
            result = change(tx, self._uow.now())
            self._remember(tx, principal, scope, key, fingerprint, owner, result)
            return Written(result, replayed=False)

        written = self._uow.run(body, write=True)
        report_write(replayed=written.replayed)
        return written

    def write_removal(
        self,
        principal: Principal,
        scope: str,
        session_id: str,
        idempotency_key: str | None,
        remove: Callable[[StoreTransaction, Session], None],
    ) -> Written[None]:
        """Run a write that deletes the session: ``remove(tx, s)`` checks and deletes
        the session ``s`` (looked up and owned). A retried idempotency key of ``scope``
        answers the first call (None) instead, although the session is gone: the replay
        is looked up before the session, and the record names no session (the
        session's records go with it) but its owner, whose erasure purges it.

        Raises:
            ValidationError: a malformed key. SessionNotFound, IdempotencyKeyReused,
            StoreBusy, and whatever ``remove`` raises.
        """
        key = check_key(idempotency_key)
        fingerprint = self.fingerprint(scope, session_id, ()) if key else ""

        def body(tx: StoreTransaction) -> Written[None]:
            if self._replay(tx, principal, scope, key, fingerprint) is not _NO_RECORD:
                return Written(None, replayed=True)
            s = self._uow.load(tx, session_id, principal)
            remove(tx, s)
            self._remember(tx, principal, scope, key, fingerprint, s.user_id, None)
            return Written(None, replayed=False)

        def replayed(tx: StoreTransaction) -> bool:
            return self._replay(tx, principal, scope, key, fingerprint) is not _NO_RECORD

        try:
            written = self._uow.run(body, write=True)
        except SessionNotFound:
            # A concurrent retry of the key may have deleted it while this call waited.
            if key is None or not self._uow.run(replayed, write=True):
                raise
            written = Written(None, replayed=True)
        report_write(replayed=written.replayed)
        return written

    def store_change(
        self,
        tx: StoreTransaction,
        before: Session,
        change: Change,
        actor: Principal,
        now: datetime,
        *,
        touch: bool = False,
    ) -> Session:
        """Write the session row at the next version (compare-and-set against
        ``before.version``) and its audit event; return the stored row. With ``touch``
        the write counts as activity: ``last_active_at`` is ``now`` and the TTL deadline
        restarts from it."""
        target = next_version(before)
        update: dict[str, Any] = {"version": target, "updated_at": now}
        if touch:
            update["last_active_at"] = now
            update["expires_at"] = expires_at(now, change.session.ttl_seconds)
        versions = (before.version, target)
        event = self.audit_event(before, actor, change.action, versions, change.details, now)
        # The row carries its chain's head, written by the update it already makes.
        update["audit_head"] = event.hash
        new = updated(change.session, update)
        tx.update_session(new, expected_version=before.version)
        tx.insert_audit(event)
        return new

    @staticmethod
    def audit_event(
        s: Session | SessionRow,
        actor: Principal,
        action: str,
        versions: tuple[int | None, int | None],
        details: Mapping[str, Any],
        now: datetime,
    ) -> AuditEvent:
        """The audit event of ``s`` (its ``seq`` 0, for the store to give), chained after
        ``s.audit_head`` (:func:`~agentsession.auditchain.new_event`): ``actor`` is the
        principal's user id (the caller; the owner is ``s.user_id``), ``versions`` is
        (before, after)."""
        values = {
            "seq": 0,
            "session_id": s.session_id,
            "user_id": s.user_id,
            "actor": actor.user_id,
            "action": action,
            "at": now,
            "version_before": versions[0],
            "version_after": versions[1],
            "request_id": current_request_id(),
            "details": dict(details),
        }
        return new_event(values, s.audit_head)

    @staticmethod
    def audit(
        tx: StoreTransaction,
        s: Session,
        actor: Principal,
        action: str,
        versions: tuple[int | None, int | None],
        details: Mapping[str, Any],
        now: datetime,
    ) -> Session:
        """Insert the :meth:`audit_event` of ``s`` and, while ``s`` exists
        (``versions[1]`` set), store its new chain head on its row (no version step).
        Returns ``s`` with that head."""
        event = WritePipeline.audit_event(s, actor, action, versions, details, now)
        head = s.model_copy(update={"audit_head": event.hash})
        if versions[1] is not None:
            tx.update_session(head, expected_version=s.version)
        tx.insert_audit(event)
        return head

    def catch_up(self, session_id: str) -> None:
        """Store what time did to the session since its last write, in order: the lapse
        of its run's lease (:meth:`lapse_due`), then its TTL expiry; each its own
        transaction, actor ``system``. Nothing due: nothing written."""
        self.lapse_due([session_id])
        self.expire_if_due(session_id)

    def lapse_due(self, session_ids: Sequence[str]) -> list[str]:
        """Interrupt the runs of those of ``session_ids`` whose lease lapsed
        (:func:`~.transitions.is_lapsed`), all in one write transaction (actor
        ``system``): each session gets its own version step and ``run.lease_expired``
        audit event. A session that changed since it was found (a heartbeat, a finish,
        deleted) is skipped under its row lock.

        Returns:
            The ids of the runs interrupted.

        Raises:
            StoreBusy, StoreError: nothing of this call was written.
        """

        changes = self._system_changes(session_ids, is_lapsed, self._lapse)
        return [c.details["run_id"] for c in changes if c.details.get("run_id")]

    def expire_if_due(self, session_id: str) -> bool:
        """Expire the session if it is idle past its TTL (its own transaction, actor
        ``system``); return whether it did."""
        return bool(self.expire_due([session_id]))

    def expire_due(self, session_ids: Sequence[str]) -> list[str]:
        """Expire those of ``session_ids`` that are idle past their TTL, all in one write
        transaction (actor ``system``): each gets its own version step, audit event and
        INTERRUPTED runs. A session that changed since it was found due (touched,
        restored, deleted) is skipped under its row lock.

        Returns:
            The ids expired, in the order given.

        Raises:
            StoreBusy, StoreError: nothing of this call was written.
        """

        def expire(tx: StoreTransaction, s: Session, now: datetime) -> Change:
            assert s.expires_at is not None
            return expiry_change(tx, s, now, TTL_REASON, at=s.expires_at)

        return [c.session.session_id for c in self._system_changes(session_ids, is_due, expire)]

    def _system_changes(
        self,
        session_ids: Sequence[str],
        due: Callable[[Session, datetime], bool],
        change_of: Callable[[StoreTransaction, Session, datetime], Change],
    ) -> list[Change]:
        """Store ``change_of(tx, s, now)`` (actor ``system``) for each of ``session_ids``
        still ``due`` under its row lock, all in one write transaction; a session gone
        or no longer due is skipped. Returns the changes stored, in the order given."""

        def body(tx: StoreTransaction) -> list[Change]:
            now = self._uow.now()
            done = []
            for session_id in session_ids:
                s = tx.get_session(session_id)
                if s is None or not due(s, now):
                    continue
                change = change_of(tx, s, now)
                self.store_change(tx, s, change, SYSTEM, now)
                done.append(change)
            return done

        return self._uow.run(body, write=True)

    @staticmethod
    def fingerprint(scope: str, session_id: str | None, request: tuple[Any, ...]) -> str:
        """Hex SHA-256 of the canonical request: tells a retry from a different request."""
        return canonical_hash([scope, session_id, _to_json(list(request))])

    def _replay(
        self,
        tx: StoreTransaction,
        principal: Principal,
        scope: str,
        key: str | None,
        fingerprint: str,
    ) -> Any:
        """The stored first result of ``key`` as JSON (which may be ``null``: a pop of an
        empty history), or ``_NO_RECORD`` (no key, no record, or a record older than
        the retention, which is dropped: the key counts as new)."""
        if key is None:
            return _NO_RECORD
        record = tx.get_idempotency(principal.user_id, scope, key)
        if record is None:
            return _NO_RECORD
        if self._uow.now() - record.created_at > self._retention:
            tx.delete_idempotency(principal.user_id, scope, key)
            return _NO_RECORD
        if record.fingerprint != fingerprint:
            raise IdempotencyKeyReused(idempotency_key=key, operation=scope)
        return json.loads(record.result)

    def _remember(
        self,
        tx: StoreTransaction,
        principal: Principal,
        scope: str,
        key: str | None,
        fingerprint: str,
        target: Session | SessionRow | str | None,
        result: Any,
    ) -> None:
        """Store the idempotency record of ``key`` (None: nothing). ``target`` is the
        session written (the record goes with it; its owner owns the record too) or,
        for a session-less write, the user whose data it wrote (None: no user's)."""
        if key is None:
            return
        now = self._uow.now()
        session_id: str | None = None
        owner: str | None
        if isinstance(target, Session | SessionRow):
            session_id, owner = target.session_id, target.user_id
        else:
            owner = target
        tx.put_idempotency(
            IdempotencyRecord(
                owner_id=owner,
                user_id=principal.user_id,
                scope=scope,
                key=key,
                fingerprint=fingerprint,
                session_id=session_id,
                result=dumps(_to_json(result)),
                created_at=now,
                expires_at=now + self._retention,
            )
        )


def request_parts(*parts: Any, required: int) -> tuple[Any, ...]:
    """A write's request parts for its idempotency fingerprint, without the trailing
    ones not sent (None) past the first ``required``: a request that leaves out an
    argument added later keeps the fingerprint older versions recorded for its key."""
    kept = list(parts)
    while len(kept) > required and kept[-1] is None:
        kept.pop()
    return tuple(kept)


def check_version(s: Session | SessionRow, expected_version: int | None) -> None:
    """Optimistic locking: raise VersionConflict unless ``expected_version`` is None or
    the session's current version."""
    if expected_version is not None and expected_version != s.version:
        raise VersionConflict(
            session_id=s.session_id, current_version=s.version, expected_version=expected_version
        )


def expiry_change(
    tx: StoreTransaction,
    s: Session,
    now: datetime,
    reason: str,
    *,
    at: datetime | None = None,
    reason_given: bool | None = None,
) -> Change:
    """The change that moves ``s`` to EXPIRED (``expired_at`` = ``at``, default ``now``);
    its RUNNING runs become INTERRUPTED at ``now``. A TTL expiry passes the session's
    deadline as ``at``, so it reads the same before it is stored (listings) and after.

    ``reason_given`` is None for the TTL expiry (audit ``reason`` ``"ttl"``); for an
    ``expire_session`` it says whether the caller gave a reason (audit ``reason``
    ``"request"``): the free text itself stays out of the audit log."""
    stopped = stop_running_runs(tx, s, now, RunStatus.INTERRUPTED, "session expired while RUNNING")
    new = expired(s, now if at is None else at, reason)
    details: dict[str, Any] = {"reason": TTL_REASON, "interrupted_runs": stopped}
    if reason_given is not None:
        details.update(reason="request", reason_given=reason_given)
    return Change(new, "session.expired", details)


def _with_session_version(result: Any, version: int) -> Any:
    """``result`` (a model, or a list of them) with ``session_version`` set wherever the
    model has that field: a write's answer tells the caller the session's new version,
    and the idempotency record keeps it, so a replay answers the same."""
    if isinstance(result, list):
        return [_with_session_version(item, version) for item in result]
    if isinstance(result, pydantic.BaseModel) and "session_version" in type(result).model_fields:
        return updated(result, {"session_version": version})
    return result


def _to_json(value: Any) -> Any:
    """JSON form of a result or request part (models keep unset fields unset)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value
