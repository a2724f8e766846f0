"""Group commit for SQLite: concurrent writers of one process share one COMMIT.

SQLite lets one connection write at a time, and at ``synchronous=FULL`` every COMMIT
waits for an fsync of the WAL. A store that commits once per write therefore tops out at
one write per fsync however many threads call it. Here the writers of one
:class:`~agentsession.stores.sql.store.SQLStore` take turns on one dedicated writer
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
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from ...errors import StoreBusy, StoreError
from ...observe import note
from .execute import end_transaction, observed

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

    def acquire(
        self, timeout: float, *, on_interrupted_grant: Callable[[], None] | None = None
    ) -> bool:
        """Wait up to ``timeout`` seconds for the lock; return whether it was granted.

        A wait interrupted by an exception (``KeyboardInterrupt``) leaves the queue; if
        the lock was handed over just then, ``on_interrupted_grant`` (default
        :meth:`release`) gives it up before the exception goes on.
        """
        with self._mutex:
            if not self._held:
                self._held = True
                return True
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        try:
            granted = waiter.acquire(timeout=timeout)
        except BaseException:
            with self._mutex:
                queued = waiter in self._waiters
                if queued:
                    self._waiters.remove(waiter)
            if not queued:
                (on_interrupted_grant or self.release)()
            raise
        if granted:
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
        self._closed = False

    @contextmanager
    def write(self, timeout: float) -> Iterator[Connection]:
        """Take a write turn and yield the connection to write on, inside the batch's
        transaction. Returns (leaves the block) once the batch holding this write has
        committed; a block that raises is undone alone and re-raises, once the batch
        it was part of has committed (its checks may have read the uncommitted writes
        before it in the batch).

        Args:
            timeout: seconds to wait for the turn.

        Raises:
            StoreBusy: no turn within ``timeout``; or a write sharing this one's
                transaction broke it, or the batch a failed block had read from did
                not commit (nothing of this write is stored; run it again).
            StoreError: the store was closed while this write waited.
            The translated COMMIT error (see ``translate``); the driver's error when
                ``BEGIN`` fails; whatever the block raises.
        """
        joined: _Batch | None = None
        failed_in: _Batch | None = None
        if not self._turn.acquire(timeout, on_interrupted_grant=self._end_turn):
            raise StoreBusy(f"no write turn within {timeout} s")
        try:
            if self._closed:
                raise StoreError("the SQL store is closed")
            batch = self._open_batch()
            nested = batch.members > 0
            if nested:
                self._driver(batch).execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                yield batch.conn
                if nested:
                    self._driver(batch).execute(f"RELEASE {_SAVEPOINT}")
            except Exception:
                if self._undo(batch, nested):
                    failed_in = batch
                raise
            except BaseException:
                self._undo(batch, nested)
                raise
            batch.members += 1
            joined = batch
        finally:
            self._end_turn()
            if failed_in is not None:
                failed_in.done.wait()
                if failed_in.error is not None:
                    raise StoreBusy("the writes before this one in its commit failed")
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
        if not self._turn.acquire(timeout, on_interrupted_grant=self._end_turn):
            raise StoreBusy(f"no write turn within {timeout} s")
        try:
            if self._closed:
                raise StoreError("the SQL store is closed")
            if self._batch is not None:
                self._finish(self._batch)
            yield self._connection()
        finally:
            self._turn.release()

    def close(self, timeout: float) -> None:
        """Commit any open batch and close the writer connection; writes that wait for
        a turn then fail with StoreError. Waits for the turn up to ``timeout`` seconds;
        if a write still holds it then, that write's turn ends the closing."""
        self._closed = True
        if not self._turn.acquire(timeout, on_interrupted_grant=self._end_turn):
            return  # the holder's _end_turn closes the connection
        try:
            self._end_turn_closing()
        finally:
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
            _begin(conn)
            batch = self._batch = _Batch(conn)
        return batch

    @staticmethod
    def _driver(batch: _Batch) -> Any:
        dbapi_connection = batch.conn.connection.dbapi_connection
        assert dbapi_connection is not None
        return dbapi_connection

    def _undo(self, batch: _Batch, nested: bool) -> bool:
        """Roll back what the failed block wrote: to its savepoint, or (first writer of
        the batch) the whole transaction. A transaction that did not survive fails the
        batch's other writers with StoreBusy (they run again). Returns whether the
        batch goes on with other writers in it."""
        if nested:
            driver = self._driver(batch)
            try:
                driver.execute(f"ROLLBACK TO {_SAVEPOINT}")
                driver.execute(f"RELEASE {_SAVEPOINT}")
                if driver.in_transaction:
                    return True
            except self._errors:
                pass
            broken = StoreBusy("a write sharing this one's commit failed the transaction")
            self._abandon(batch, broken)
            return False
        self._abandon(batch, None)
        return False

    def _abandon(self, batch: _Batch, error: BaseException | None) -> None:
        """Roll back the batch's transaction and fail its writers with ``error``."""
        self._batch = None
        with suppress(*self._errors):
            end_transaction(batch.conn, commit=False)
        self._drop_if_in_transaction(batch)
        batch.error = error
        batch.done.set()

    def _drop_if_in_transaction(self, batch: _Batch) -> None:
        """Close the writer connection if a transaction is still open on it (a COMMIT
        or ROLLBACK that failed at the driver): SQLite then rolls it back and frees its
        write lock, and the next turn opens a fresh connection."""
        driver = batch.conn.connection.dbapi_connection if not batch.conn.invalidated else None
        if driver is not None and not driver.in_transaction:
            return
        batch.conn.invalidate()
        if self._conn is batch.conn:
            self._conn = None
            batch.conn.close()

    def _end_turn(self) -> None:
        """Pass the open batch to the next writer, or commit it and free the turn."""
        batch = self._batch
        if self._closed:
            try:
                self._end_turn_closing()
            finally:
                self._turn.release()
            return
        if batch is not None and batch.members < self._max_batch and self._turn.hand_over():
            return
        try:
            if batch is not None:
                self._finish(batch)
        finally:
            self._turn.release()

    def _end_turn_closing(self) -> None:
        """Commit the open batch, if any, and close the writer connection."""
        if self._batch is not None:
            self._finish(self._batch)
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _finish(self, batch: _Batch) -> None:
        """COMMIT the batch and wake its writers (with the error, if it failed)."""
        self._batch = None
        note("group_commit_batch", batch.members)
        try:
            end_transaction(batch.conn, commit=True)
        except BaseException as exc:  # every writer of the batch must hear of it
            batch.error = exc
            with suppress(*self._errors):
                end_transaction(batch.conn, commit=False)
            self._drop_if_in_transaction(batch)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt and the like go on, after the writers hear
        finally:
            batch.done.set()


def _begin(conn: Connection) -> None:
    """Begin a batch's ``BEGIN IMMEDIATE`` transaction on the writer connection: with
    SQL on its DBAPI connection, which costs a tenth of Core's ``begin()``, unless the
    engine is observed (events, ``echo``): then Core begins it, and reports it. A Core
    statement inside a transaction begun on the driver joins it (the store's ``begin``
    hook emits no BEGIN then); :func:`~.execute.end_transaction` ends either kind.

    Raises:
        The driver's error when BEGIN fails (the database is locked, after the busy
        timeout); Core's wrapping of it when observed.
    """
    if observed(conn):
        conn.begin()
        return
    driver = conn.connection.dbapi_connection
    assert driver is not None
    driver.execute("BEGIN IMMEDIATE")
