"""Pooled connections the server may have closed: pinged before use when in doubt.

PostgreSQL (``idle_session_timeout``), MariaDB/MySQL (``wait_timeout``), proxies,
failovers and restarts close connections that sit idle in the pool; the next
transaction on one would fail. SQLAlchemy's ``pool_pre_ping`` tests every connection
at every checkout, one round trip (about 0.1 ms on loopback, a tenth of a one-message
append) on every transaction. :class:`StalePings` pings only a connection in doubt:
one that sat in the pool for :data:`IDLE_SECONDS` or more, or was returned before the
store last saw a connection lost (:meth:`StalePings.connection_lost`: a restart closes
them all). A busy pool thus pays nothing; a dead connection is replaced before
anything is sent on it, and the pool's other connections of that age are recycled
(SQLAlchemy's ``InvalidatePoolError``, raised from the ``checkout`` pool
event). A connection closed in the short time nobody doubts it fails its transaction
with ConnectionLost, which the manager re-runs (:mod:`agentsession.service.uow`).
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["IDLE_SECONDS", "StalePings"]

#: A connection idle in the pool at least this long (seconds) is pinged before use.
#: Far below any server's idle timeout; a pool in steady use never reaches it.
IDLE_SECONDS = 0.5

# Where a connection record keeps the time it went back to the pool.
_RETURNED = "agentsession_returned_at"


class StalePings:
    """Ping a pooled connection before use when it may have been closed (see the
    module docstring). Installed on ``engine``'s pool at construction.

    Args:
        engine: a PostgreSQL or MySQL/MariaDB engine (SQLite has no server to lose).
        idle_seconds: the idle time after which a connection is pinged.
    """

    def __init__(self, engine: Engine, *, idle_seconds: float = IDLE_SECONDS) -> None:
        self._dialect = engine.dialect
        self._idle = idle_seconds
        self._lost_at = 0.0
        event.listen(engine, "checkin", self._checkin)
        event.listen(engine, "checkout", self._checkout)

    def connection_lost(self) -> None:
        """Note that a connection was found closed: every connection returned to the
        pool before now is pinged at its next checkout."""
        self._lost_at = time.monotonic()

    def _checkin(self, dbapi_connection: Any, record: Any) -> None:
        if dbapi_connection is not None:  # None: invalidated, reopened at checkout
            record.info[_RETURNED] = time.monotonic()

    def _checkout(self, dbapi_connection: Any, record: Any, proxy: Any) -> None:
        returned = record.info.get(_RETURNED)
        if returned is None:  # a new connection: it was just opened
            return
        if returned > self._lost_at and time.monotonic() - returned < self._idle:
            return
        try:
            self._dialect.do_ping(dbapi_connection)
        except self._dialect.loaded_dbapi.Error as exc:
            if not self._dialect.is_disconnect(exc, dbapi_connection, None):
                raise
            self.connection_lost()
            # The pool drops this connection and every older one, and checks out anew.
            raise sa.exc.InvalidatePoolError(str(exc)) from exc
