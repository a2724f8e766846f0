"""In-memory store: the whole contract, in one process, gone at exit.

A real adapter, not a mock: it passes the same conformance suite as every other store.
Lookups scan Python lists (only the external key has an index, a dict): it is meant for tests
and small agents.
Models are immutable and every JSON-bearing field is deep-copied in and out, so nothing
a caller holds aliases stored state. Transactions are serialised by one lock
and made atomic by an undo log (:mod:`.state`): a failure anywhere inside the block rolls
every change back in reverse order, so a transaction is stored whole or not at all. The
transaction class composes one class per aggregate, each in its module.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ...apikeys import MemoryKeyTable
from ...errors import StoreError
from ..base import FeedRead, ScrubReport
from ..changefeed import check_reached, parse_seq_cursor, selected
from ..rowwrites import RowWriteDefaults
from .audit import AuditOps
from .forks import ForkOps
from .messages import MessageOps
from .meta import MetaOps
from .records import RecordOps
from .rewinds import RewindOps
from .rewrite import RewriteOps
from .runs import RunOps
from .search import SearchOps
from .sessions import SessionOps
from .shared import SharedMemoryOps
from .state import Tables
from .summaries import SummaryOps
from .toolcalls import ToolCallOps
from .usage import UsageOps
from .working_memory import WorkingMemoryOps

__all__ = ["MemoryStore"]


class MemoryStore(Tables):
    """A store that keeps everything in process memory. URL: ``memory://``.

    Thread-safe; all transactions are serialised. Use it for tests and for single-process
    agents that need no durability.
    """

    def __init__(self) -> None:
        super().__init__()
        self.url = "memory://"
        self._lock = threading.RLock()
        self._closed = False
        self._api_keys = MemoryKeyTable()

    def api_keys(self) -> MemoryKeyTable:
        """The store's API keys (:mod:`agentsession.apikeys`), in process memory."""
        return self._api_keys

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_MemoryTransaction]:
        """Open a transaction (see :class:`~agentsession.stores.base.SessionStore`)."""
        with self._lock:
            if self._closed:
                raise StoreError("the memory store is closed")
            tx = _MemoryTransaction(self, write=write)
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        """Nothing to do: nothing is on disk. See
        :meth:`~agentsession.stores.base.SessionStore.scrub`."""
        return ScrubReport(
            done=("memory store: nothing on disk; the erased objects were released",),
            pending=("the process memory may hold released objects until it reuses it",),
        )

    def read_changes(
        self,
        *,
        after: str | None,
        user_ids: Sequence[str] | None,
        session_id: str | None,
        limit: int,
    ) -> FeedRead:
        """The change feed (see :meth:`~agentsession.stores.base.SessionStore.read_changes`),
        ordered by seq: a transaction holds the store's lock from its first seq to its
        end, so seqs are handed out in commit order and a rolled-back event is undone
        before any reader sees it. Scans every kept event: this store is for tests and
        small agents."""
        start = parse_seq_cursor(after)
        with self._lock:
            if self._closed:
                raise StoreError("the memory store is closed")
            if session_id is not None:
                data = self._sessions.get(session_id)
                pools = [data.audit if data is not None else [], self._tombstones]
            else:
                pools = [self._tombstones, *(d.audit for d in self._sessions.values())]
            events = [
                e
                for pool in pools
                for e in pool
                if e.seq > start and selected(e, user_ids, session_id)
            ]
            check_reached(start, self._audit_seq)
            events.sort(key=lambda e: e.seq)
            found = [(str(e.seq), e.model_copy(deep=True)) for e in events[:limit]]
            return FeedRead(found, found[-1][0] if found else None, len(events) > limit)

    def change_tail(self) -> str | None:
        """The newest event's seq (see
        :meth:`~agentsession.stores.base.SessionStore.change_tail`)."""
        with self._lock:
            if self._closed:
                raise StoreError("the memory store is closed")
            pools = [self._tombstones, *(d.audit[-1:] for d in self._sessions.values())]
            newest = max((e.seq for pool in pools for e in pool), default=None)
            return None if newest is None else str(newest)

    def close(self) -> None:
        """Drop every session. Further transactions raise StoreError."""
        with self._lock:
            self._closed = True
            self._sessions.clear()
            self._keys.clear()
            self._idempotency.clear()
            self._shared.clear()
            self._budgets.clear()
            self._meta.clear()
            self._chain.clear()


class _MemoryTransaction(
    RowWriteDefaults,
    SessionOps,
    MessageOps,
    WorkingMemoryOps,
    RecordOps,
    SummaryOps,
    RewindOps,
    ForkOps,
    SharedMemoryOps,
    ToolCallOps,
    RunOps,
    AuditOps,
    SearchOps,
    UsageOps,
    RewriteOps,
    MetaOps,
):
    """One transaction: every aggregate's methods over the store's tables, one undo log."""
