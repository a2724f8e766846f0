"""The read path: a read of one session, in one read transaction.

A read looks up the session and checks ownership like a write; a session found idle
past its TTL is expired first (a write of its own), then the read runs again, so no
read ever shows an ACTIVE session whose TTL has passed; the same for a run whose lease
lapsed: it is stored INTERRUPTED first, so no read shows it RUNNING.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..models import Session, WorkingMemory
from ..principal import Principal
from ..stores.base import SessionHead, SessionOrHead, StoreTransaction
from .pipeline import DueForExpiry, WritePipeline
from .transitions import is_due, is_lapsed
from .uow import UnitOfWork
from .validation import check_within

__all__ = ["ReadPath", "memory_of"]

T = TypeVar("T")


class ReadPath:
    """Runs reads of one session (see the module docstring).

    Args:
        uow: the unit of work; pipeline: expires a session found due.
    """

    def __init__(self, uow: UnitOfWork, pipeline: WritePipeline) -> None:
        self._uow = uow
        self._pipeline = pipeline

    def read(
        self, session_id: str, principal: Principal, fn: Callable[[StoreTransaction, Session], T]
    ) -> T:
        """Return ``fn(tx, session)`` for the principal's session.

        Raises:
            ValidationError: a malformed id. SessionNotFound: missing, deleted, or not
            the principal's (unless admin). Whatever ``fn`` raises.
        """
        return self.read_found(lambda tx: session_id, principal, fn)

    def read_found(
        self,
        find: Callable[[StoreTransaction], str],
        principal: Principal,
        fn: Callable[[StoreTransaction, Session], T],
    ) -> T:
        """As :meth:`read`, for the session whose id ``find(tx)`` answers in the same
        read transaction (so nothing can delete or replace it in between).

        Raises:
            Whatever ``find`` raises (e.g. SessionNotFound), and what :meth:`read` raises.
        """
        return self._read(find, principal, fn, self._uow.load)

    def read_head(
        self,
        session_id: str,
        principal: Principal,
        fn: Callable[[StoreTransaction, SessionHead], T],
    ) -> T:
        """As :meth:`read`, for a read that needs no more of the session row than its
        :class:`~agentsession.stores.base.SessionHead` (no Session is built)."""
        return self._read(lambda tx: session_id, principal, fn, self._uow.load_head)

    def _read(
        self,
        find: Callable[[StoreTransaction], str],
        principal: Principal,
        fn: Callable[[StoreTransaction, SessionOrHead], T],
        load: Callable[[StoreTransaction, str, Principal], SessionOrHead],
    ) -> T:
        due: list[str] = []

        def body(tx: StoreTransaction) -> T:
            session_id = find(tx)
            s = load(tx, session_id, principal)
            now = self._uow.now()
            if is_due(s, now) or is_lapsed(s, now):
                due.append(session_id)
                raise DueForExpiry("session is due for expiry or its run's lease lapsed")
            return fn(tx, s)

        try:
            return self._uow.run(body, write=False)
        except DueForExpiry:
            self._pipeline.catch_up(due[-1])
            return self._uow.run(body, write=False)


def memory_of(tx: StoreTransaction, s: Session) -> WorkingMemory:
    """The stored memory (empty at version 0 if never written) with ``session_version``
    of ``s``: read in the same transaction, after the session row, so a pairing with a
    memory newer than ``s`` can only make a later compare-and-set fail, never lose."""
    memory = tx.get_working_memory(s.session_id) or WorkingMemory(session_id=s.session_id)
    return memory.model_copy(update={"session_version": s.version})


def memory_as_of(tx: StoreTransaction, s: Session, seq: int) -> WorkingMemory:
    """The working memory as of message ``seq`` (0..``message_count``), with
    ``session_version`` of ``s``: the history row with the highest version among those
    with ``at_seq <= seq`` (docs/semantics.md, "Working-memory history"), its
    ``version`` the one it was written at; the current memory for ``seq ==
    message_count``; an empty document at version 0 if there is none.

    Raises:
        ValidationError: ``seq`` above the session's ``message_count``.
    """
    if check_within(s, seq, "at_seq") == s.message_count:
        return memory_of(tx, s)
    memory = tx.get_working_memory_at(s.session_id, seq) or WorkingMemory(session_id=s.session_id)
    return memory.model_copy(update={"session_version": s.version})
