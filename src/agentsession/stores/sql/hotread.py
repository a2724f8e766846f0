"""The lean read transaction of the SQL store on SQLite: nothing around its ``BEGIN``
and ``COMMIT`` but what they need.

A read transaction was four nested generator context managers (the store's, the idle
readers', the driver transaction's, the transaction object's), each entered and left
on every read. :class:`LeanRead` is the read transaction of
:meth:`~agentsession.stores.sql.store.SQLStore.transaction` on SQLite: one object,
entered and left once, over :class:`~.idlereaders.IdleReaders`; it does what
:meth:`~.idlereaders.IdleReaders.transaction` and the store did, in the same order
(the same connection kept idle, ``BEGIN`` / ``COMMIT`` on the driver, a Core
transaction when the engine is observed, the driver's errors raised as store errors).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

from sqlalchemy.engine import Connection

from .dialect import translate_error
from .execute import end_transaction, observed
from .idlereaders import IdleReaders

__all__ = ["LeanRead"]


class LeanRead:
    """A read transaction on SQLite (see the module docstring): enter it for the
    transaction object, leave it to COMMIT (ROLLBACK on an error).

    Args:
        readers: the store's idle read connections.
        make: the transaction object for a connection, told whether its statements
            may run on the DBAPI cursor (False: the engine is observed).
        errors: the driver's and SQLAlchemy's errors, raised as store errors
            (:func:`~.dialect.translate_error`).
    """

    __slots__ = ("_conn", "_errors", "_make", "_readers", "_tx", "_watched")

    def __init__(
        self,
        readers: IdleReaders,
        make: Callable[[Connection, bool], Any],
        errors: tuple[type[BaseException], ...],
    ) -> None:
        self._readers = readers
        self._make = make
        self._errors = errors
        self._conn: Connection | None = None
        self._tx: Any = None
        self._watched: Any = None  # the observed path's context manager

    def __enter__(self) -> Any:
        readers, errors = self._readers, self._errors
        try:
            conn = readers.take()
        except errors as exc:
            raise translate_error(exc) from exc
        if observed(conn):
            # Statements must be seen: IdleReaders' own way (a fresh connection and a
            # Core transaction), entered here and left in __exit__.
            readers.give_back(conn)
            self._watched = readers.transaction()
            try:
                conn = self._watched.__enter__()
            except errors as exc:
                raise translate_error(exc) from exc
        else:
            driver = conn.connection.dbapi_connection
            assert driver is not None
            try:
                driver.execute("BEGIN")
            except BaseException as exc:
                readers.give_back(conn)
                if isinstance(exc, errors):
                    raise translate_error(exc) from exc
                raise
        self._conn = conn
        self._tx = self._make(conn, self._watched is None)
        return self._tx

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        conn, tx, watched = self._conn, self._tx, self._watched
        self._conn = self._tx = self._watched = None
        assert conn is not None
        tx.close()
        errors = self._errors
        if watched is not None:
            try:
                watched.__exit__(kind, error, trace)
            except errors as exc:
                raise translate_error(exc) from exc
        else:
            try:
                if kind is None:
                    end_transaction(conn, commit=True)
                else:
                    with suppress(Exception):  # the block's error is the one to report
                        end_transaction(conn, commit=False)
            except errors as exc:
                raise translate_error(exc) from exc
            finally:
                self._readers.give_back(conn)
        if kind is not None and issubclass(kind, errors):
            raise translate_error(error) from error
