"""Group commit for SQLite: concurrent writers of one process share one COMMIT.

SQLite lets one connection write at a time, and at ``synchronous=FULL`` every COMMIT
waits for an fsync of the WAL. A store that commits once per write therefore tops out at
one write per fsync however many threads call it. Here the writers of one
:class:`~agentsession.stores.sql.SQLStore` take turns on one dedicated writer
connection (first come, first served), and a turn that ends while others wait does not
commit: it hands the open transaction to the next writer, who adds its own changes. The
last writer of a batch (nobody waiting, or :data:`MAX_BATCH` writes in it) commits, and
every writer of the batch returns only after that COMMIT, so an answer always follows a
durable commit: a crash before it loses writes nobody was told about, never one that
was acknowledged.

Each writer keeps its own checks and fails alone: from the second writer of a batch on,
each runs inside a SAVEPOINT, and a writer whose body raises is rolled back to it (its
error is its own; the others commit). A writer whose body breaks the shared transaction
itself (SQLite rolled it back, or the savepoint cannot be undone) fails every writer of
the batch with :class:`~agentsession.errors.StoreBusy`, which the unit of work answers
by running each again; a failed COMMIT fails each writer of the batch with that error.
The first writer of a batch needs no savepoint: if it fails, the whole transaction is
its own and rolls back.

While a batch commits, the next writers queue, so under load the next batch forms
during the fsync of the last one; a writer alone commits at once, as before.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection, RootTransaction

from ..errors import StoreBusy

__all__ = ["MAX_BATCH", "FifoLock", "GroupCommit"]

#: Most writes one COMMIT carries: bounds how long the first writer of a busy batch
#: waits for its answer (each write adds its own statements, about 0.1-0.5 ms).
MAX_BATCH = 64

_SAVEPOINT = "agentsession_write"


class FifoLock:
    """A lock granted in arrival order (``threading.Lock`` lets the releasing thread win
    again at once, which starves the other writers of a busy process)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False

    def acquire(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the lock; return whether it was granted."""
        with self._mutex:
            if not self._held:
                self._held = True
                return True
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        if waiter.acquire(timeout=timeout):
            return True
        with self._mutex:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return False
        return True  # handed over just as the wait timed out

    def hand_over(self) -> bool:
        """Give the lock to the longest waiter, if there is one; return whether it did
        (the caller no longer holds it then). With no waiter the caller keeps it."""
        with self._mutex:
            if not self._waiters:
                return False
            self._waiters.popleft().release()
            return True

    def release(self) -> None:
        """Hand the lock to the longest waiter, or free it."""
        if not self.hand_over():
            with self._mutex:
                if self._waiters:  # one arrived since hand_over looked
                    self._waiters.popleft().release()
                else:
                    self._held = False


@dataclass(eq=False)
class _Batch:
    """One open write transaction and the writers whose changes it holds."""

    conn: Connection
    trans: RootTransaction
    members: int = 0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class GroupCommit:
    """The write turns of one SQLite store, on one writer connection (module docstring).

    Args:
        connect: opens the writer connection (a SQLAlchemy ``Connection`` whose
            ``begin()`` starts a ``BEGIN IMMEDIATE`` transaction).
        translate: turns a driver error of a shared COMMIT into the error each writer of
            the batch raises (a new exception per writer).
        errors: the driver's error types (caught around the shared statements).
        max_batch: most writes per COMMIT; 1 commits every write on its own.
    """

    def __init__(
        self,
        connect: Callable[[], Connection],
        translate: Callable[[BaseException], BaseException],
        errors: tuple[type[BaseException], ...],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._connect = connect
        self._translate = translate
        self._errors = errors
        self._max_batch = max_batch
        self._turn = FifoLock()
        self._conn: Connection | None = None
        self._batch: _Batch | None = None

    @contextmanager
    def write(self, timeout: float) -> Iterator[Connection]:
        """Take a write turn and yield the connection to write on, inside the batch's
        transaction. Returns (leaves the block) once the batch holding this write has
        committed; a block that raises is undone alone and re-raises.

        Args:
            timeout: seconds to wait for the turn.

        Raises:
            StoreBusy: no turn within ``timeout``; or a write sharing this one's
                transaction broke it (nothing of this write is stored; run it again).
            The translated COMMIT error (see ``translate``); the driver's error when
                ``BEGIN`` fails; whatever the block raises.
        """
        if not self._turn.acquire(timeout=timeout):
            raise StoreBusy(f"no write turn within {timeout} s")
        joined: _Batch | None = None
        try:
            batch = self._open_batch()
            nested = batch.members > 0
            if nested:
                self._driver(batch).execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                yield batch.conn
                if nested:
                    self._driver(batch).execute(f"RELEASE {_SAVEPOINT}")
            except BaseException:
                self._undo(batch, nested)
                raise
            batch.members += 1
            joined = batch
        finally:
            self._end_turn()
        joined.done.wait()
        error = joined.error
        if isinstance(error, StoreBusy):  # a broken batch: a new one for each writer
            raise StoreBusy(str(error))
        if error is not None:
            raise self._translate(error) from error

    @contextmanager
    def exclusive(self, timeout: float) -> Iterator[Connection]:
        """Hold a write turn with no transaction open (any open batch is committed
        first), for work that needs the database to itself (a WAL checkpoint).

        Raises:
            StoreBusy: no turn within ``timeout``.
        """
        if not self._turn.acquire(timeout=timeout):
            raise StoreBusy(f"no write turn within {timeout} s")
        try:
            if self._batch is not None:
                self._finish(self._batch)
            yield self._connection()
        finally:
            self._turn.release()

    def close(self, timeout: float) -> None:
        """Commit any open batch and close the writer connection (waits for the turn up
        to ``timeout`` seconds; closes regardless after that)."""
        granted = self._turn.acquire(timeout=timeout)
        try:
            if self._batch is not None:
                self._finish(self._batch)
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
        finally:
            if granted:
                self._turn.release()

    # -- inside a turn --------------------------------------------------------------
    def _connection(self) -> Connection:
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            if conn is not None:
                conn.close()
            conn = self._conn = None
            conn = self._conn = self._connect()
        return conn

    def _open_batch(self) -> _Batch:
        batch = self._batch
        if batch is None:
            conn = self._connection()
            batch = self._batch = _Batch(conn, conn.begin())
        return batch

    @staticmethod
    def _driver(batch: _Batch) -> Any:
        dbapi_connection = batch.conn.connection.dbapi_connection
        assert dbapi_connection is not None
        return dbapi_connection

    def _undo(self, batch: _Batch, nested: bool) -> None:
        """Roll back what the failed block wrote: to its savepoint, or (first writer of
        the batch) the whole transaction. A transaction that did not survive fails the
        batch's other writers with StoreBusy (they run again)."""
        if nested:
            driver = self._driver(batch)
            try:
                driver.execute(f"ROLLBACK TO {_SAVEPOINT}")
                driver.execute(f"RELEASE {_SAVEPOINT}")
                if driver.in_transaction:
                    return
            except self._errors:
                pass
            broken = StoreBusy("a write sharing this one's commit failed the transaction")
            self._abandon(batch, broken)
            return
        self._abandon(batch, None)

    def _abandon(self, batch: _Batch, error: BaseException | None) -> None:
        """Roll back the batch's transaction and fail its writers with ``error``."""
        self._batch = None
        try:
            batch.trans.rollback()
        except self._errors:
            batch.conn.invalidate()
        batch.error = error
        batch.done.set()

    def _end_turn(self) -> None:
        """Pass the open batch to the next writer, or commit it and free the turn."""
        batch = self._batch
        if batch is not None and batch.members < self._max_batch and self._turn.hand_over():
            return
        if batch is not None:
            self._finish(batch)
        self._turn.release()

    def _finish(self, batch: _Batch) -> None:
        """COMMIT the batch and wake its writers (with the error, if it failed)."""
        self._batch = None
        try:
            batch.trans.commit()
        except BaseException as exc:  # every writer of the batch must hear of it
            batch.error = exc
            try:
                batch.trans.rollback()
            except self._errors:
                batch.conn.invalidate()
        finally:
            batch.done.set()
