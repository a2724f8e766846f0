"""Read connections kept open between reads, on SQLite.

Taking a connection from SQLAlchemy's pool and giving it back costs more than a short
read itself (checkout and checkin events, the fairy, the reset on return). A read
transaction of :class:`~agentsession.stores.sql.store.SQLStore` on SQLite therefore takes a
connection left idle by an earlier read, and leaves it idle after its own
transaction ended (committed or rolled back). The transaction itself is begun and
ended with SQL on the driver connection (``BEGIN`` / ``COMMIT``), unless the engine is
observed. At most :data:`MAX_IDLE` stay idle; the
rest go back to the pool, so the pool always has connections for the writer and for
everything else. Each read still has a connection to itself, in its own transaction.

A connection made before someone started to observe the engine (event listeners,
``echo``) would not show its statements to them, so such a one is closed and a fresh
one taken instead (:func:`~agentsession.stores.sql.execute.observed`). A process forked
from one that held idle connections takes its own from the pool.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from sqlalchemy.engine import Connection, Engine

from .execute import end_transaction, observed

__all__ = ["MAX_IDLE", "IdleReaders"]

#: Most read connections kept idle: about the number of reads that run at once in a
#: busy process (they hold their GIL turns briefly), far below the pool's size.
MAX_IDLE = 8


class IdleReaders:
    """The idle read connections of one engine (module docstring).

    Args:
        engine: the SQLite engine whose pool the connections come from.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        # A forked child's copies of its parent's connections: kept, never used nor
        # closed (that would act on the parent's open database files).
        self._inherited: list[Connection] = []

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Yield a connection in a read transaction of its own: committed when the block
        ends, rolled back if it raises. The connection stays idle afterwards if sound.

        Raises:
            Whatever the pool raises when it has no connection to give; the driver's
            error when BEGIN or COMMIT fails; whatever the block raises.
        """
        conn = self.take()
        try:
            if observed(conn):
                # Made before the engine was observed, it would hide its statements:
                # a fresh one shows them, in a transaction Core begins (and reports).
                conn.close()
                conn = self._engine.connect()
                with conn.begin():
                    yield conn
            else:
                with _driver_transaction(conn):
                    yield conn
        finally:
            self.give_back(conn)

    def take(self) -> Connection:
        """A connection for a read: one left idle, else a new one from the pool. Give
        it back with :meth:`give_back` once its transaction ended.

        Raises:
            Whatever the pool raises when it has no connection to give.
        """
        if self._pid != os.getpid():
            self._forget_parents()
        try:
            return self._idle.pop()  # atomic: no lock needed to take one
        except IndexError:
            return self._engine.connect()

    def _forget_parents(self) -> None:
        with self._lock:
            self._inherited += self._idle
            self._idle = []
            self._pid = os.getpid()

    def give_back(self, conn: Connection) -> None:
        """Keep ``conn`` idle for the next read if it is sound, out of any transaction
        and fewer than :data:`MAX_IDLE` are idle; else close it (back to the pool)."""
        if not (conn.closed or conn.invalidated or conn.in_transaction() or _driver_busy(conn)):
            with self._lock:
                if not self._closed and len(self._idle) < MAX_IDLE:
                    self._idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        """Close the idle connections; those in use are closed when their read ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


@contextmanager
def _driver_transaction(conn: Connection) -> Iterator[None]:
    """A read transaction begun and ended by SQL on ``conn``'s DBAPI connection, which
    costs a tenth of Core's ``begin()``/``commit()``. A Core statement run inside it
    joins it (the store's ``begin`` hook then emits no BEGIN); Core then ends it."""
    driver = conn.connection.dbapi_connection
    assert driver is not None
    driver.execute("BEGIN")
    try:
        yield
    except BaseException:
        with suppress(Exception):  # the block's error is the one to report
            end_transaction(conn, commit=False)
        raise
    end_transaction(conn, commit=True)


def _driver_busy(conn: Connection) -> bool:
    """Whether ``conn``'s DBAPI connection is still inside a transaction."""
    driver = conn.connection.dbapi_connection
    return driver is None or bool(driver.in_transaction)
