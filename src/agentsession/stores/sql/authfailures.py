"""The SQL stores' failed-authentication windows (:class:`~agentsession.authfailures.
FailureCounter`): one row per failure in ``auth_failures``, shared by every worker
process and instance on the database.

A hit counts the rows of its (kind, name) in the window and inserts one if there is
room, in one write transaction (SQLite: ``BEGIN IMMEDIATE``, so the count holds; on
PostgreSQL and MariaDB concurrent failures at the very limit may each be counted:
a few more than the limit, never a multiple). Rows older than the window are deleted
as hits go by. Only failed authentications reach it, never a valid key.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from .dialect import connection_mode, translate_error
from .schema import auth_failures

__all__ = ["SQLFailureCounter"]

_T = auth_failures.c
#: The width of ``name`` (an address or a key id is far shorter).
_NAME_CHARS = 255
#: The share of hits that also delete every stale row (names that stopped failing).
_SWEEP_SHARE = 0.02


class SQLFailureCounter:
    """Failure windows in an SQL store's ``auth_failures`` table.

    Args:
        engine: the store's engine.
    """

    shared = True

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._errors = (SQLAlchemyError, sqlite3.Error, engine.dialect.loaded_dbapi.Error)

    @contextmanager
    def _conn(self, *, write: bool) -> Iterator[Connection]:
        try:
            with connection_mode(self._engine.connect(), write=write) as conn, conn.begin():
                yield conn
        except self._errors as exc:
            raise translate_error(exc) from exc

    def hit(self, kind: str, name: str, limit: int, window_seconds: int) -> bool:
        """See :meth:`~agentsession.authfailures.FailureCounter.hit`."""
        now, name = time.time(), name[:_NAME_CHARS]
        mine = (_T.kind == kind) & (_T.name == name)
        with self._conn(write=True) as conn:
            conn.execute(auth_failures.delete().where(mine, _T.at <= now - window_seconds))
            if random.random() < _SWEEP_SHARE:
                conn.execute(auth_failures.delete().where(_T.at <= now - window_seconds))
            count = sa.select(sa.func.count()).select_from(auth_failures).where(mine)
            if conn.execute(count).scalar_one() >= limit:
                return False
            conn.execute(auth_failures.insert().values(kind=kind, name=name, at=now))
        return True

    def reset_at(self, kind: str, name: str, limit: int, window_seconds: int) -> float:
        """See :meth:`~agentsession.authfailures.FailureCounter.reset_at`: the time the
        oldest of the last ``limit`` failures leaves the window."""
        newest = (
            sa.select(_T.at)
            .where(_T.kind == kind, _T.name == name[:_NAME_CHARS])
            .order_by(_T.at.desc())
            .limit(1)
            .offset(limit - 1)
        )
        with self._conn(write=False) as conn:
            at = conn.execute(newest).scalar_one_or_none()
        return time.time() if at is None else float(at) + window_seconds
