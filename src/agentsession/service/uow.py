"""The unit of work: one store transaction per call, re-run when the store lost a race
or the connection before the COMMIT.

Every read and write of the service layer runs its body through
:meth:`UnitOfWork.run`. A body may run more than once (on StoreBusy or ConnectionLost),
so it must not keep state outside the transaction between runs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from ..errors import SessionNotFound, StoreBusy
from ..ids import check_id, check_name
from ..models import Session
from ..observe import note
from ..principal import Principal
from ..stores.base import (
    ConnectionLost,
    SessionHead,
    SessionOrHead,
    SessionRow,
    SessionStore,
    StoreTransaction,
)
from .policy import Policy

__all__ = ["UnitOfWork", "utcnow"]

T = TypeVar("T")


def utcnow() -> datetime:
    """The current time as an aware UTC datetime (the default clock)."""
    return datetime.now(UTC)


class UnitOfWork:
    """Runs functions in store transactions, with the clock every rule reads.

    Args:
        store: the storage adapter.
        clock: returns the current time (aware; naive values are taken as UTC).
        policy: ``max_retries`` and ``max_retry_seconds`` bound the re-runs.
    """

    def __init__(self, store: SessionStore, clock: Callable[[], datetime], policy: Policy) -> None:
        self.store = store
        self._clock = clock
        self._policy = policy
        #: Called before each transaction (None: nothing); raises to refuse the call
        #: (a manager opened without a keyring: :class:`~..stores.keyringmark.MarkWatch`).
        self.guard: Callable[[], None] | None = None

    def now(self) -> datetime:
        """The clock's time, normalised to UTC."""
        now = self._clock()
        if now.tzinfo is None or now.utcoffset() != timedelta(0):
            now = now.astimezone(UTC) if now.tzinfo is not None else now.replace(tzinfo=UTC)
        return now

    def run(self, fn: Callable[[StoreTransaction], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction and return its result; re-run it when the store
        reports a lost race (StoreBusy) or lost its connection before the COMMIT
        (ConnectionLost: the server rolled it back; a fresh connection is taken), at
        most ``policy.max_retries`` times and not after ``policy.max_retry_seconds``,
        with a random exponential backoff.

        Raises:
            StoreBusy: still busy at the bound. StoreUnavailable: still no connection
            at the bound, or the connection was lost during the COMMIT (never re-run:
            its outcome is unknown). Whatever ``fn`` or :attr:`guard` raises (rolled
            back; KeyringMismatch: the store was marked, nothing ran).
        """
        started = time.monotonic()
        for attempt in range(1, self._policy.max_retries + 1):
            try:
                if self.guard is not None:
                    self.guard()
                with self.store.transaction(write=write) as tx:
                    result = fn(tx)
            except (StoreBusy, ConnectionLost):
                spent = time.monotonic() - started
                if attempt == self._policy.max_retries or spent >= self._policy.max_retry_seconds:
                    raise
                note("busy_retry", label="write" if write else "read")
                time.sleep(random.uniform(0, 0.005 * 2**attempt))
                continue
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def load(tx: StoreTransaction, session_id: str, principal: Principal) -> Session:
        """Look up the session and check ownership; in a write transaction the store
        locks the row.

        Raises:
            ValidationError: a malformed session id or user id.
            SessionNotFound: missing, deleted, or not the principal's (unless admin):
                the same error in all three cases.
        """
        return _owned(session_id, principal, tx.get_session)

    @staticmethod
    def load_head(tx: StoreTransaction, session_id: str, principal: Principal) -> SessionHead:
        """As :meth:`load`, for a read that needs only the session's
        :class:`~agentsession.stores.base.SessionHead` (no Session is built; nothing
        is locked).

        Raises:
            ValidationError, SessionNotFound: as :meth:`load`.
        """
        return _owned(session_id, principal, tx.get_session_head)

    @staticmethod
    def load_row(tx: StoreTransaction, session_id: str, principal: Principal) -> SessionRow:
        """As :meth:`load`, for a write that changes only the fields of the session's
        :class:`~agentsession.stores.base.SessionRow` (no Session is built; the row
        is locked).

        Raises:
            ValidationError, SessionNotFound: as :meth:`load`.
        """
        return _owned(session_id, principal, tx.lock_session_row)


def _owned(
    session_id: str, principal: Principal, get: Callable[[str], SessionOrHead | None]
) -> SessionOrHead:
    """``get(session_id)`` (a session or its head), checked: the ids well-formed, the
    session there and the principal's (or the principal an admin).

    Raises:
        ValidationError: a malformed session id or user id.
        SessionNotFound: missing, deleted, not the principal's, or of an agent the
            principal is not limited to: one error for all.
    """
    check_id(session_id, field="session_id", prefix="ses")
    check_name(principal.user_id, field="user_id")
    s = get(session_id)
    if s is None or not principal.may_see(s.user_id, s.agent):
        raise SessionNotFound(session_id=session_id)
    return s
