"""Hot statements compiled once per dialect and run on the DBAPI cursor.

SQLAlchemy Core spends tens of microseconds per ``Connection.execute`` (cache-key
lookup, execution context, parameter construction, result metadata), several times the
cost of the statement itself on SQLite. The few statements on the hot paths (load the
session row, compare-and-set it, insert messages and audit events, read messages)
therefore go through :class:`CompiledStatement`: the Core statement is compiled once for
the engine's dialect, and its SQL text, parameter order (positional paramstyles) or
names (named paramstyles), bind processors and result processors are all taken from
that compiled form, so no SQL is written per driver. Execution then is one
``cursor.execute`` on the DBAPI connection that SQLAlchemy checked out of its pool, inside
the transaction SQLAlchemy began. Pooling, dialects, transactions and migrations stay
SQLAlchemy's.

When someone observes the engine (``before/after_cursor_execute`` listeners, as tracing
tools and tests install, or ``echo``), the same SQL text and DBAPI parameters go through
:meth:`Connection.exec_driver_sql` instead (:func:`observed`), so every statement is seen
exactly as the driver receives it. On the direct path, driver errors are wrapped as
SQLAlchemy's :class:`~sqlalchemy.exc.DBAPIError` subclasses (exactly as Core would), and a
disconnect invalidates the pooled connection.
A statement whose compiled form needs per-execution rendering (``literal_execute`` or
expanding parameters) is refused at construction; keep those on ``Connection.execute``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["CompiledStatement", "StatementCache", "end_transaction", "observed", "unchanged"]

_REQUIRED = object()

Processor = Callable[[Any], Any]


def observed(conn: Connection) -> bool:
    """Whether statements on ``conn`` must be visible to events or ``echo`` logging."""
    engine = conn.engine
    if engine.echo:
        return True
    # Asking a connection's joined dispatch builds a joined listener per event name per
    # connection, which costs more than a BEGIN: read the engine's long-lived dispatch
    # (where tracing tools and tests listen; class-level listeners included), the
    # connection's local one, and only such joined listeners as exist already (one is
    # made when someone listens on the connection itself).
    dispatch = conn.dispatch
    local = getattr(dispatch, "local", None)
    if local is None:  # not joined to the engine's: the dispatch is the whole answer
        return bool(dispatch.before_cursor_execute or dispatch.after_cursor_execute)
    for part in (engine.dispatch, local):
        if part.before_cursor_execute or part.after_cursor_execute:
            return True
    for name in _CURSOR_EVENTS:
        try:
            joined = object.__getattribute__(dispatch, name)
        except AttributeError:  # never built: nobody listened on this connection
            continue
        if joined:
            return True
    return False


def end_transaction(conn: Connection, *, commit: bool) -> None:
    """COMMIT (or ROLLBACK) a transaction begun with SQL on ``conn``'s DBAPI connection
    (``BEGIN``, which costs a tenth of Core's ``begin()``): by Core if a Core statement
    joined it (Core's commit or rollback then ends both), else by SQL on the driver.

    Raises:
        The driver's (or Core's) error when the COMMIT or ROLLBACK fails.
    """
    if conn.in_transaction():
        if commit:
            conn.commit()
        else:
            conn.rollback()
        return
    driver = conn.connection.dbapi_connection
    assert driver is not None
    driver.execute("COMMIT" if commit else "ROLLBACK")


class StatementCache(Protocol):
    """Compiled statements of one store, each compiled once (for its dialect)."""

    def cached(self, key: Hashable, build: Callable[[], Any]) -> CompiledStatement:
        """The statement ``build()`` makes, compiled on the first call with ``key``
        (``key`` names everything that changes the statement's text) and kept."""
        ...


#: The events that see every statement as the driver receives it.
_CURSOR_EVENTS = ("before_cursor_execute", "after_cursor_execute")


class CompiledStatement:
    """One Core statement compiled for one dialect, executable on a DBAPI cursor.

    Attributes:
        sql: the SQL text in the driver's paramstyle.
        columns: names of the result columns (empty for DML without RETURNING).
    """

    def __init__(self, stmt: sa.sql.ClauseElement, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):  # DDL compiles with a DDLCompiler
            raise TypeError(f"not a SQL statement: {type(stmt).__name__}")
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("statement needs per-execution rendering; use Connection.execute")
        self.sql: str = compiled.string
        self._dialect = dialect
        self._positional = bool(compiled.positional)
        names = list(compiled.positiontup or ()) if self._positional else list(compiled.binds)
        escaped = compiled.escaped_bind_names
        # (parameter key the caller passes, key in the DBAPI dict, bind processor, default)
        self._binds: list[tuple[str, str, Processor | None, Any]] = []
        for name in names:
            bind = compiled.binds[name]
            default = _REQUIRED
            if bind.callable is not None or bind.value is not None:
                default = bind.effective_value
            proc = bind.type.dialect_impl(dialect).bind_processor(dialect)
            self._binds.append((bind.key, escaped.get(name, name), proc, default))
        # The common case, precomputed: every value comes from the caller, and only the
        # binds at ``_processed`` positions need a processor.
        self._keys = tuple(b[0] for b in self._binds)
        self._names = tuple(b[1] for b in self._binds)
        self._processed = tuple((i, b[2]) for i, b in enumerate(self._binds) if b[2] is not None)
        self._all_given = all(b[3] is _REQUIRED for b in self._binds)
        columns = list(getattr(stmt, "exported_columns", ()) or ())
        self.columns: tuple[str, ...] = tuple(c.key for c in columns)
        self._column_types = [c.type.dialect_impl(dialect) for c in columns]
        # Result processors may depend on the driver's type code of each column (as in
        # Core), so they are made from the first result's cursor.description.
        self._results: list[tuple[int, Processor]] | None = None

    def parameters(self, params: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        """The DBAPI parameters for one execution: bound, processed, in driver order.

        Raises:
            ArgumentError: ``params`` lacks a bind that has no default value.
        """
        values: list[Any]
        try:
            if not self._all_given:
                raise KeyError
            values = [params[key] for key in self._keys]
        except KeyError:
            values = []
            for key, _name, _proc, default in self._binds:
                value = params.get(key, default)
                if value is _REQUIRED:
                    raise sa.exc.ArgumentError(
                        f"a value is required for bind parameter {key!r}"
                    ) from None
                values.append(value)
        for i, proc in self._processed:
            values[i] = proc(values[i])
        if self._positional:
            return values
        return dict(zip(self._names, values, strict=True))

    def execute(self, conn: Connection, cursor: Any, params: Mapping[str, Any]) -> Any:
        """Execute once on ``cursor`` (of ``conn``'s DBAPI connection), or through
        ``conn.exec_driver_sql`` when ``cursor`` is None. Returns the cursor or result:
        either has ``rowcount``, ``lastrowid`` and ``fetchall()`` (see :meth:`rows`)."""
        args = self.parameters(params)
        if cursor is None:
            return conn.exec_driver_sql(self.sql, _driver_args(args))
        try:
            cursor.execute(self.sql, args)
        except self._driver_error as exc:
            raise self._wrapped(conn, cursor, exc) from exc
        return cursor

    def executemany(
        self, conn: Connection, cursor: Any, params: Iterable[Mapping[str, Any]]
    ) -> Any:
        """Execute for each parameter set (DBAPI ``executemany``); see :meth:`execute`."""
        args = [self.parameters(p) for p in params]
        if cursor is None:
            return conn.exec_driver_sql(self.sql, [_driver_args(a) for a in args])
        try:
            cursor.executemany(self.sql, args)
        except self._driver_error as exc:
            raise self._wrapped(conn, cursor, exc) from exc
        return cursor

    def rows(self, cursor: Any) -> list[tuple[Any, ...]]:
        """Fetch every remaining row of a cursor or result, result processors applied."""
        results = self._processors(cursor)
        rows = cursor.fetchall()
        if not results:
            return [tuple(r) for r in rows]
        out = []
        for row in rows:
            values = list(row)
            for i, proc in results:
                values[i] = proc(values[i])
            out.append(tuple(values))
        return out

    def decoders(self, cursor: Any) -> list[Processor]:
        """One function per result column turning the driver's value into the column
        type's (its result processor, or :func:`unchanged`): for a caller that decodes
        the rows of ``cursor.fetchall()`` as it builds its own objects from them."""
        decoders: list[Processor] = [unchanged] * len(self.columns)
        for i, proc in self._processors(cursor):
            decoders[i] = proc
        return decoders

    def _processors(self, cursor: Any) -> list[tuple[int, Processor]]:
        results = self._results
        if results is None:
            description = getattr(cursor, "cursor", cursor).description or ()
            results = self._results = self._result_processors(description)
        return results

    def _result_processors(self, description: Sequence[Any]) -> list[tuple[int, Processor]]:
        procs = []
        for i, impl in enumerate(self._column_types):
            coltype = description[i][1] if i < len(description) else None
            proc = impl.result_processor(self._dialect, coltype)
            if proc is not None:
                procs.append((i, proc))
        return procs

    def record(self, row: Sequence[Any]) -> dict[str, Any]:
        """One row from :meth:`rows` as a dict keyed by column name."""
        return dict(zip(self.columns, row, strict=True))

    @property
    def _driver_error(self) -> type[Exception]:
        """The driver's base exception class (read only when something was raised)."""
        error: type[Exception] = self._dialect.loaded_dbapi.Error
        return error

    def _wrapped(self, conn: Connection, cursor: Any, exc: Any) -> sa.exc.StatementError:
        """``exc`` of the driver as Core wraps it; a disconnect invalidates ``conn``."""
        invalidated = False
        try:
            invalidated = self._dialect.is_disconnect(exc, conn.connection.dbapi_connection, cursor)
        except Exception:  # pragma: no cover - a dialect's check must not mask exc
            invalidated = False
        if invalidated:
            conn.invalidate(exc)
        wrapped: sa.exc.StatementError = sa.exc.DBAPIError.instance(
            self.sql,
            None,
            exc,
            self._driver_error,
            hide_parameters=True,
            connection_invalidated=invalidated,
            dialect=self._dialect,
        )
        return wrapped


def unchanged(value: Any) -> Any:
    """The decoder of a column the driver already returns as its type's value."""
    return value


def _driver_args(args: Sequence[Any] | dict[str, Any]) -> Any:
    """``exec_driver_sql`` takes a tuple (positional) or a dict (named) per execution."""
    return args if isinstance(args, dict) else tuple(args)
