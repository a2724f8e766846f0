"""The SQL store: the storage port on SQLAlchemy Core, SQLite by default.

One implementation for SQLite, PostgreSQL (psycopg 3) and MySQL/MariaDB (PyMySQL); what
differs between them lives in :mod:`agentsession.stores.sql.dialect` and
:mod:`agentsession.stores.sql.columns`. The schema is :mod:`agentsession.stores.sql.schema`,
created and changed only by migrations (:mod:`agentsession.stores.sql.migrate`).

Costs, independent of history length: appending is one INSERT per message (one
executemany per batch); the last N messages are one ``ORDER BY seq DESC LIMIT N`` over
the ``(session_id, seq)`` index; a run is read and written as its row only (``step_count``
kept by each step insert), and its steps are read in pages over their primary key.
Statements on hot paths are built once per store, compiled once for the engine's dialect
and executed on the DBAPI cursor of the pooled connection (:mod:`.execute`), which skips
SQLAlchemy's per-execution overhead; everything else goes through ``Connection.execute``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.exc import SQLAlchemyError

from ...errors import StoreError, StoreUnavailable
from ...jsonvalues import dumps
from ...metafilter import MetadataFilter, matches
from ...models import AuditEvent, Message, Session, SessionStatus, WorkingMemory
from ..base import (
    FeedRead,
    IdempotencyRecord,
    JSONTexts,
    MessageBuilder,
    ScrubReport,
    SessionHead,
    StoreConflict,
)
from ..changefeed import check_reached, parse_seq_cursor
from ..keyhash import external_key_hash
from ..listing import merge_newest
from .apikeys import SQLKeyTable
from .authfailures import SQLFailureCounter
from .changes import ChangeOps, FeedHorizon, audit_insert, gated_audit_insert
from .columns import LONG_TEXT
from .dialect import (
    POOL_SIZE,
    connection_mode,
    create_store_engine,
    insert_unless_present,
    masked_url,
    parse_url,
    translate_error,
)
from .dialect import translated as _translated
from .execute import CompiledStatement, observed, unchanged
from .forks import ForkOps
from .groupcommit import MAX_BATCH, GroupCommit
from .hotread import LeanRead
from .hotwrite import HotWriteOps
from .idlereaders import IdleReaders
from .memory_history import MemoryHistoryOps
from .meta import MetaOps
from .metaindex import MetadataOps, metadata_condition, metadata_params
from .migrate import ensure_schema
from .pool import StalePings
from .records import RecordOps
from .rewinds import RewindOps
from .rewrite import RewriteOps
from .runs import RunOps
from .schema import (
    audit_events,
    idempotency_keys,
    memory_history,
    messages,
    sessions,
    working_memory,
)
from .scrub import scrub_database
from .search import SearchOps
from .shared import SharedMemoryOps
from .summaries import SummaryOps
from .toolcalls import ToolCallOps
from .usage import UsageOps

__all__ = ["SQLStore"]


class SQLStore:
    """A store in a SQL database. URLs: ``sqlite:///path/to/file.db`` (relative or
    absolute; parent directories are created), ``postgresql+psycopg://user:pw@host/db``,
    ``mysql+pymysql://user:pw@host/db``.

    Thread-safe: each read transaction takes its own pooled connection. On SQLite the
    write transactions of one store take turns, first come first served, on one writer
    connection, and concurrent writes share one COMMIT (group commit,
    :mod:`.groupcommit`): threads wait their turn instead of polling the file lock, and
    many writers pay for one fsync. Other processes are waited for up to
    ``busy_timeout_seconds``. On PostgreSQL and MySQL/MariaDB every transaction has its
    own connection; the server itself flushes concurrent commits together.

    Attributes:
        url: the URL, with any password masked as ``***``.
    """

    def __init__(
        self,
        url: str,
        *,
        auto_migrate: bool = False,
        sqlite_synchronous: str = "FULL",
        busy_timeout_seconds: float = 30.0,
        group_commit: bool = True,
        pool_size: int = POOL_SIZE,
        engine_options: dict[str, Any] | None = None,
    ) -> None:
        """Connect and check that the schema is current.

        Args:
            url: database URL (see the class docstring).
            auto_migrate: migrate an old or empty database to the current schema (under
                a database-wide lock; safe when several processes start at once). When
                False, an out-of-date schema raises instead.
            sqlite_synchronous: SQLite ``synchronous`` PRAGMA. ``FULL`` (default): no
                acknowledged transaction is lost, even on power failure. ``NORMAL``:
                faster; survives a process crash, but a power failure may lose the last
                acknowledged transactions. ``OFF`` / ``EXTRA`` as in the SQLite docs.
            busy_timeout_seconds: how long a transaction waits for locks held by other
                connections before failing with :class:`~agentsession.errors.StoreBusy`.
            group_commit: on SQLite, let concurrent writes of this store share one
                COMMIT (default). False commits each write on its own (the same rules
                and durability, one fsync per write); other databases ignore it.
            pool_size: on PostgreSQL and MySQL/MariaDB, the most server connections
                kept open (default :data:`~.dialect.POOL_SIZE`, 64), opened as
                concurrent transactions need them; a transaction finding them all in
                use waits for one, never opening a short-lived extra one. Set it to the
                concurrency the process runs (``serve``: ``max_concurrent_requests``)
                and keep it times the processes under the server's
                ``max_connections``. SQLite ignores it.
            engine_options: extra :func:`sqlalchemy.create_engine` keyword arguments.

        Raises:
            ValidationError: an unsupported URL or option.
            SchemaOutOfDate: the schema is not current and ``auto_migrate`` is False
                (run ``agentsession db upgrade``), or it is newer than this code.
            StoreError: the database cannot be opened or migrated; a missing driver
                names the extra to install.
        """
        parsed = parse_url(url)
        self.url = masked_url(parsed)
        self._busy_timeout = busy_timeout_seconds
        engine = create_store_engine(
            parsed,
            sqlite_synchronous=sqlite_synchronous,
            busy_timeout_seconds=busy_timeout_seconds,
            pool_size=pool_size,
            engine_options=engine_options,
        )
        try:
            ensure_schema(
                engine, auto_migrate=auto_migrate, busy_timeout_seconds=busy_timeout_seconds
            )
        except BaseException:
            engine.dispose()
            raise
        self._engine: Engine | None = engine
        self._errors = (SQLAlchemyError, sqlite3.Error, engine.dialect.loaded_dbapi.Error)
        self._writes: GroupCommit | None = None
        self._readers: IdleReaders | None = None
        self._pings: StalePings | None = None
        if engine.dialect.name != "sqlite":
            self._pings = StalePings(engine)
        else:
            self._readers = IdleReaders(engine)
            self._writes = GroupCommit(
                lambda: connection_mode(engine.connect(), write=True),
                translate_error,
                self._errors,
                max_batch=MAX_BATCH if group_commit else 1,
            )
        self._sql = _Statements(engine.dialect)
        self._horizon = FeedHorizon(engine, self._errors)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine, for diagnostics (PRAGMAs, query plans, row counts).

        Writing through it bypasses every rule of the SessionManager; don't.

        Raises:
            StoreError: the store is closed.
        """
        if self._engine is None:
            raise StoreError("the SQL store is closed")
        return self._engine

    def api_keys(self) -> SQLKeyTable:
        """The store's API keys (:mod:`agentsession.apikeys`): the ``api_keys`` table.

        Raises:
            StoreError: the store is closed.
        """
        return SQLKeyTable(self.engine)

    def auth_failures(self) -> SQLFailureCounter:
        """The HTTP service's failed-authentication windows, in ``auth_failures``
        (shared by every process on the database).

        Raises:
            StoreError: the store is closed.
        """
        return SQLFailureCounter(self.engine)

    def __repr__(self) -> str:
        return f"SQLStore({self.url!r})"

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def transaction(self, *, write: bool) -> AbstractContextManager[_SQLTransaction]:
        """Open a transaction (see :class:`~agentsession.stores.base.SessionStore`).

        Commits when the block ends, rolls back if it raises. A pooled connection the
        server may have closed is pinged first (:mod:`.pool`). A read on SQLite is a
        :class:`~.hotread.LeanRead` over the idle read connections.

        Raises:
            StoreBusy: a lock was not granted within ``busy_timeout_seconds``.
            ConnectionLost: the server closed the connection before the COMMIT (the
                transaction was rolled back; run it again).
            StoreUnavailable: the database cannot be reached, the connection was lost
                during the COMMIT (outcome unknown), or the disk is full.
            StoreError: the store is closed, or the database failed.
        """
        engine = self.engine
        if self._readers is not None and not write:
            return LeanRead(self._readers, self._read_transaction, self._errors)
        return self._transaction(engine, write=write)

    def _read_transaction(self, conn: Connection, direct: bool) -> _SQLTransaction:
        return _SQLTransaction(conn, self._sql, self._errors, write=False, direct=direct)

    @contextmanager
    def _transaction(self, engine: Engine, *, write: bool) -> Iterator[_SQLTransaction]:
        committing = False  # an error from here on ended the COMMIT: outcome unknown
        try:
            if write and self._writes is not None:
                with self._writes.write(self._busy_timeout) as conn:
                    yield from self._run(conn, write=True)
                return
            with engine.connect() as conn:
                connection_mode(conn, write=write)
                with conn.begin():
                    yield from self._run(conn, write=write)
                    committing = True
        except self._errors as exc:
            error = translate_error(exc, committing=committing)
            if isinstance(error, StoreUnavailable) and self._pings is not None:
                self._pings.connection_lost()
            raise error from exc
        except StoreUnavailable:  # raised by a statement of the transaction
            if self._pings is not None:
                self._pings.connection_lost()
            raise

    def _run(self, conn: Connection, *, write: bool) -> Iterator[_SQLTransaction]:
        tx = _SQLTransaction(conn, self._sql, self._errors, write=write)
        try:
            yield tx
        finally:
            tx.close()

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        """Get erased rows off the disk (see :mod:`.scrub`): on SQLite a WAL
        checkpoint that truncates the ``-wal`` file (in this process's write turn);
        ``compact`` also runs ``VACUUM`` / ``VACUUM FULL`` / ``OPTIMIZE TABLE``.

        Returns:
            What was done and what is left to the operator.

        Raises:
            StoreBusy: no write turn within ``busy_timeout_seconds`` (SQLite).
            StoreError: the store is closed, or the database failed.
        """
        engine = self.engine
        try:
            if self._writes is None:
                return scrub_database(engine, compact=compact)
            # In a write turn with no transaction open: nothing of ours holds the WAL.
            with self._writes.exclusive(self._busy_timeout):
                return scrub_database(engine, compact=compact)
        except self._errors as exc:
            raise translate_error(exc) from exc

    def read_changes(
        self,
        *,
        after: str | None,
        user_ids: Sequence[str] | None,
        session_id: str | None,
        limit: int,
    ) -> FeedRead:
        """The change feed (see
        :meth:`~agentsession.stores.base.SessionStore.read_changes`): audit events by
        seq, up to the horizon of :mod:`.changes`; cursors are seqs.

        Raises:
            ValidationError: a bad cursor. StoreError: as :meth:`transaction`.
        """
        start = parse_seq_cursor(after)
        upto = self._horizon.newest()
        with self.transaction(write=False) as tx:
            events = tx.list_changes(
                after=start, upto=upto, user_ids=user_ids, session_id=session_id, limit=limit + 1
            )
            if not events and start:  # nothing after it: is it a position of the feed?
                check_reached(start, tx.newest_change(upto=None))
        found = [(str(e.seq), e) for e in events[:limit]]
        return FeedRead(found, found[-1][0] if found else None, len(events) > limit)

    def change_tail(self) -> str | None:
        """The newest final seq (see
        :meth:`~agentsession.stores.base.SessionStore.change_tail`): the newest at or
        below the horizon of :mod:`.changes`.

        Raises:
            StoreError: as :meth:`transaction`.
        """
        upto = self._horizon.newest()
        with self.transaction(write=False) as tx:
            newest = tx.newest_change(upto=upto)
        return None if newest is None else str(newest)

    def close(self) -> None:
        """Close the connection pool. Idempotent; further transactions raise StoreError."""
        engine, self._engine = self._engine, None
        if engine is not None:
            if self._readers is not None:
                self._readers.close()
            if self._writes is not None:
                self._writes.close(self._busy_timeout)
            engine.dispose()


#: The columns of the session row a write may set (all but its key), in table order.
SESSION_COLUMNS = tuple(c.key for c in sessions.c if c.key != "session_id")


def _binds(table: sa.Table, text: str) -> dict[str, Any]:
    """A bind parameter per column of ``table`` (by its name), the JSON column ``text``
    bound as the JSON text the caller encoded (the column's own encoding of it)."""
    return {
        c.key: sa.bindparam(c.key, type_=LONG_TEXT) if c.key == text else sa.bindparam(c.key)
        for c in table.c
    }


class _Statements:
    """Statements of the hot paths, built and compiled once per store (for its dialect);
    values are bound per call. See :mod:`.execute`."""

    def __init__(self, dialect: sa.engine.Dialect) -> None:
        def compiled(stmt: Any) -> CompiledStatement:
            return CompiledStatement(stmt, dialect)

        by_id = sessions.c.session_id == sa.bindparam("session_id")
        get_session = sa.select(sessions).where(by_id)
        self.get_session = compiled(get_session)
        self.get_session_for_update = compiled(get_session.with_for_update())
        head = [sessions.c[name] for name in SessionHead._fields]
        self.get_session_head = compiled(sa.select(*head).where(by_id))
        self.find_session_by_key = compiled(
            sa.select(sessions.c.session_id).where(
                sessions.c.user_id == sa.bindparam("user_id"),
                sessions.c.agent == sa.bindparam("agent"),
                sessions.c.external_key_hash == sa.bindparam("key_hash"),
            )
        )
        self._dialect = dialect
        self._session_updates: dict[tuple[str, ...], CompiledStatement] = {}
        # The payload is bound as the JSON text it already is (see insert_messages).
        self.insert_messages = compiled(sa.insert(messages).values(_binds(messages, "payload")))
        self.delete_messages = compiled(
            sa.delete(messages).where(
                messages.c.session_id == sa.bindparam("session_id"),
                messages.c.seq > sa.bindparam("after_seq"),
            )
        )
        # The audit seq comes back as the cursor's lastrowid where the dialect reads
        # generated keys that way (SQLite, MySQL), else by RETURNING (PostgreSQL). The flag
        # is DefaultDialect's (every dialect's base), not the Dialect interface's.
        assert isinstance(dialect, DefaultDialect)
        self.audit_lastrowid = bool(dialect.postfetch_lastrowid)
        insert_audit = audit_insert(dialect)
        if not self.audit_lastrowid:
            insert_audit = insert_audit.returning(audit_events.c.seq)
        self.insert_audit = compiled(insert_audit)
        gated = gated_audit_insert(dialect)
        self.insert_audit_gated = None if gated is None else compiled(gated)
        self.get_memory = compiled(
            sa.select(working_memory).where(
                working_memory.c.session_id == sa.bindparam("session_id")
            )
        )
        # The memory's data is bound as its JSON text, encoded once (put_working_memory).
        self.update_memory = compiled(
            sa.update(working_memory)
            .where(working_memory.c.session_id == sa.bindparam("b_session_id"))
            .values(
                version=sa.bindparam("version"),
                updated_at=sa.bindparam("updated_at"),
                data=sa.bindparam("data", type_=LONG_TEXT),
            )
        )
        # A working-memory write's history row, after dropping the older row(s) at its
        # at_seq (docs/semantics.md, "Working-memory history"; :mod:`.memory_history`).
        self.drop_older_history = compiled(
            sa.delete(memory_history).where(
                memory_history.c.session_id == sa.bindparam("session_id"),
                memory_history.c.at_seq == sa.bindparam("at_seq"),
                memory_history.c.version < sa.bindparam("version"),
            )
        )
        self.insert_history = compiled(
            sa.insert(memory_history).values(_binds(memory_history, "data"))
        )
        self.get_idempotency = compiled(
            sa.select(idempotency_keys).where(
                idempotency_keys.c.user_id == sa.bindparam("user_id"),
                idempotency_keys.c.scope == sa.bindparam("scope"),
                idempotency_keys.c.idem_key == sa.bindparam("idem_key"),
            )
        )
        self._compile = compiled
        self._messages: dict[tuple[bool, bool, str], CompiledStatement] = {}
        self._listings: dict[tuple[bool | int, ...], CompiledStatement] = {}
        self._due: dict[tuple[bool, bool], CompiledStatement] = {}
        self._cached: dict[Hashable, CompiledStatement] = {}

    def cached(self, key: Hashable, build: Callable[[], Any]) -> CompiledStatement:
        """See :class:`.execute.StatementCache`."""
        stmt = self._cached.get(key)
        if stmt is None:
            stmt = self._cached[key] = self._compile(build())
        return stmt

    def get_messages(self, *, after: bool, before: bool, mode: str) -> CompiledStatement:
        """The message query for one combination of bounds; ``mode`` is all/first/last."""
        key = (after, before, mode)
        stmt = self._messages.get(key)
        if stmt is None:
            stmt = self._compile(self._messages_select(after, before, mode))
            self._messages[key] = stmt
        return stmt

    def session_update(self, columns: tuple[str, ...]) -> CompiledStatement:
        """The compare-and-set UPDATE of the session row that sets only ``columns`` (a
        subset of :data:`SESSION_COLUMNS`), compiled once per tuple; binds
        ``b_session_id`` and ``b_expected_version`` select the row."""
        stmt = self._session_updates.get(columns)
        if stmt is None:
            update = (
                sa.update(sessions)
                .where(
                    sessions.c.session_id == sa.bindparam("b_session_id"),
                    sessions.c.version == sa.bindparam("b_expected_version"),
                )
                .values({c: sa.bindparam(c) for c in columns})
            )
            stmt = self._session_updates[columns] = CompiledStatement(update, self._dialect)
        return stmt

    def list_sessions(
        self,
        *,
        user: bool,
        status: bool,
        agent: bool,
        after: bool,
        live: bool,
        parent: bool,
        meta: int = 0,
    ) -> CompiledStatement:
        """The session listing for one combination of filters (newest first); ``live``
        leaves out sessions past ``expires_at`` (bound as ``now``); ``parent`` keeps the
        forks of one session (the ``(parent_session_id, updated_at, session_id)`` index);
        ``meta`` metadata entries are required (:func:`.metaindex.metadata_condition`)."""
        key = (user, status, agent, after, live, parent, meta)
        stmt = self._listings.get(key)
        if stmt is None:
            stmt = self._compile(self._sessions_select(*key))
            self._listings[key] = stmt
        return stmt

    def due_sessions(self, *, user: bool, agent: bool) -> CompiledStatement:
        """The sessions stored ACTIVE with ``expires_at <= now``, unordered; served by
        the ``(user_id, status, expires_at)`` or ``(status, expires_at)`` index."""
        key = (user, agent)
        stmt = self._due.get(key)
        if stmt is None:
            query = sa.select(sessions).where(
                sessions.c.status == SessionStatus.ACTIVE.value,
                sessions.c.expires_at <= sa.bindparam("now", type_=sessions.c.expires_at.type),
            )
            if user:
                query = query.where(sessions.c.user_id == sa.bindparam("user_id"))
            if agent:
                query = query.where(sessions.c.agent == sa.bindparam("agent"))
            stmt = self._due[key] = self._compile(query)
        return stmt

    @staticmethod
    def _sessions_select(
        user: bool, status: bool, agent: bool, after: bool, live: bool, parent: bool, meta: int
    ) -> sa.Select[Any]:
        stmt = sa.select(sessions)
        if meta:
            stmt = stmt.where(metadata_condition(meta, user))
        if parent:
            stmt = stmt.where(sessions.c.parent_session_id == sa.bindparam("parent"))
        if user:
            stmt = stmt.where(sessions.c.user_id == sa.bindparam("user_id"))
        if status:
            stmt = stmt.where(sessions.c.status == sa.bindparam("status"))
        if agent:
            stmt = stmt.where(sessions.c.agent == sa.bindparam("agent"))
        if live:
            now = sa.bindparam("now", type_=sessions.c.expires_at.type)
            stmt = stmt.where(sa.or_(sessions.c.expires_at.is_(None), sessions.c.expires_at > now))
        if after:
            at, sid = (
                sa.bindparam("after_at", type_=sessions.c.updated_at.type),
                sa.bindparam("after_id", type_=sessions.c.session_id.type),
            )
            stmt = stmt.where(
                sa.or_(
                    sessions.c.updated_at < at,
                    sa.and_(sessions.c.updated_at == at, sessions.c.session_id < sid),
                )
            )
        stmt = stmt.order_by(sessions.c.updated_at.desc(), sessions.c.session_id.desc())
        return stmt.limit(sa.bindparam("limit"))

    @staticmethod
    def _messages_select(after: bool, before: bool, mode: str) -> sa.Select[Any]:
        stmt = sa.select(
            messages.c.message_id,
            messages.c.session_id,
            messages.c.seq,
            messages.c.created_at,
            messages.c.payload,
        ).where(messages.c.session_id == sa.bindparam("session_id"))
        if after:
            stmt = stmt.where(messages.c.seq > sa.bindparam("after_seq"))
        if before:
            stmt = stmt.where(messages.c.seq < sa.bindparam("before_seq"))
        if mode == "last":
            stmt = stmt.order_by(messages.c.seq.desc())
        else:
            stmt = stmt.order_by(messages.c.seq)
        if mode != "all":
            stmt = stmt.limit(sa.bindparam("limit"))
        return stmt


class _SQLTransaction(
    HotWriteOps,
    ChangeOps,
    ForkOps,
    RecordOps,
    SummaryOps,
    RewindOps,
    MemoryHistoryOps,
    SharedMemoryOps,
    ToolCallOps,
    RunOps,
    SearchOps,
    UsageOps,
    MetadataOps,
    RewriteOps,
    MetaOps,
):
    """One transaction on one connection (the StoreTransaction protocol)."""

    _sql: _Statements

    def __init__(
        self,
        conn: Connection,
        sql: _Statements,
        errors: tuple[type[BaseException], ...],
        *,
        write: bool,
        direct: bool | None = None,
    ) -> None:
        self._conn = conn
        self._sql = sql
        # What _translated raises as store errors: the driver's, and undecodable rows.
        self._translatable: tuple[type[BaseException], ...] = (*errors, ValueError)
        self._write = write
        self._cursor: Any = None
        # Statements on the DBAPI cursor, unless someone observes them (None: ask).
        self._direct = not observed(conn) if direct is None else direct
        # Session rows as this write transaction read or wrote them (None: no such row),
        # so an update sets only the columns that changed (see _session_changes).
        self._stored: dict[str, Session | None] = {}
        self._indexed: dict[str, list[tuple[str, str]]] = {}  # see MetadataOps
        self._gated = False  # holds the change feed's gate (MariaDB/MySQL)

    def _dbapi_cursor(self) -> Any:
        """The DBAPI cursor of this transaction's connection, opened on first use; None
        when the engine is observed (events, echo): then statements go through
        ``exec_driver_sql`` (see :mod:`.execute`)."""
        if self._cursor is None and self._direct:
            dbapi_connection = self._conn.connection.dbapi_connection
            assert dbapi_connection is not None
            self._cursor = dbapi_connection.cursor()
        return self._cursor

    def _execute(self, stmt: CompiledStatement, params: dict[str, Any]) -> Any:
        """Run a compiled hot statement on this transaction's DBAPI cursor."""
        return stmt.execute(self._conn, self._dbapi_cursor(), params)

    def _execute_rows(self, stmt: CompiledStatement, rows: Sequence[dict[str, Any]]) -> None:
        """Run a compiled hot statement once per row (one execute for one row)."""
        if len(rows) == 1:
            self._execute(stmt, rows[0])
        else:
            stmt.executemany(self._conn, self._dbapi_cursor(), rows)

    def close(self) -> None:
        """Release the DBAPI cursor (the transaction itself is the store's to end)."""
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            cursor.close()

    def _writing(self) -> None:
        if not self._write:
            raise StoreError("write attempted in a read-only transaction")

    # -- sessions --------------------------------------------------------------------
    @_translated
    def get_session(self, session_id: str) -> Session | None:
        stmt = self._sql.get_session_for_update if self._write else self._sql.get_session
        rows = stmt.rows(self._execute(stmt, {"session_id": session_id}))
        session = Session.model_validate(stmt.record(rows[0])) if rows else None
        if self._write:  # the row as stored, locked until the end of this transaction
            self._stored[session_id] = session
            if session is not None:
                self._metadata_read(session)
        return session

    @_translated
    def get_session_head(self, session_id: str) -> SessionHead | None:
        stmt = self._sql.get_session_head  # seven columns, two of them decoded; no Session
        rows = stmt.rows(self._execute(stmt, {"session_id": session_id}))
        return _session_head(rows[0]) if rows else None

    @_translated
    def insert_session(self, session: Session) -> None:
        self._writing()
        # A racing create of the same external key loses here, with no unique violation
        # (and so no user id) in the server's log.
        if not insert_unless_present(self._conn, sessions, _session_row(session)):
            raise StoreConflict(f"session {session.session_id!r} lost a race on its key")
        self._index_title(session, replace=False)
        self._index_metadata(session, replace=False)
        self._stored[session.session_id] = session  # an update sets what changed only

    @_translated
    def find_session_by_key(self, user_id: str, agent: str, external_key: str) -> str | None:
        stmt = self._sql.find_session_by_key
        params = {"user_id": user_id, "agent": agent, "key_hash": external_key_hash(external_key)}
        rows = stmt.rows(self._execute(stmt, params))
        return str(stmt.record(rows[0])["session_id"]) if rows else None

    @_translated
    def update_session(self, session: Session, *, expected_version: int) -> None:
        self._writing()
        session_id = session.session_id
        values = _session_changes(session, self._stored.get(session_id))
        stmt = self._sql.session_update(tuple(values))
        values["b_session_id"] = session_id
        values["b_expected_version"] = expected_version
        # Compare-and-set in one statement: no row matched = someone else won.
        if self._execute(stmt, values).rowcount != 1:
            raise StoreConflict(f"session {session_id!r} changed concurrently")
        if "title" in values:
            self._index_title(session, replace=True)
        if "metadata" in values:
            self._index_metadata(session, replace=True)
        self._stored[session_id] = session

    @_translated
    def delete_session(self, session_id: str) -> None:
        self._writing()
        self._stored.pop(session_id, None)
        self._indexed.pop(session_id, None)
        # Children go by ON DELETE CASCADE; these two have no foreign key (see schema).
        for table in (sessions, audit_events, idempotency_keys):
            self._conn.execute(sa.delete(table).where(table.c.session_id == session_id))

    @_translated
    def list_sessions(
        self,
        *,
        user_id: str | None,
        status: SessionStatus | None,
        agent: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
        now: datetime,
        parent_session_id: str | None = None,
        metadata: MetadataFilter | None = None,
    ) -> list[Session]:
        if limit <= 0:
            return []
        parent = parent_session_id
        params: dict[str, Any] = {
            **metadata_params(self._rarest_first(metadata, user_id)),
            "user_id": user_id,
            "parent": parent,
            "status": None if status is None else status.value,
            "agent": agent,
            "after_at": None if after is None else after[0],
            "after_id": None if after is None else after[1],
            "limit": limit,
            "now": now,
        }
        stmt = self._sql.list_sessions(
            # A parent's forks are all its owner's: read by the parent's index (a user
            # filter would make SQLite take the user's), the owner checked on the rows.
            user=user_id is not None and parent is None,
            status=status is not None,
            agent=agent is not None,
            after=after is not None,
            live=status is SessionStatus.ACTIVE,
            parent=parent is not None,
            meta=len(metadata or ()),
        )
        rows = [s for s in self._sessions(stmt, params) if user_id in (None, s.user_id)]
        if status is not SessionStatus.EXPIRED:
            return rows
        due = self._sql.due_sessions(user=user_id is not None, agent=agent is not None)
        forks = [
            s
            for s in self._sessions(due, params)
            if parent in (None, s.parent_session_id) and matches(s.metadata, metadata)
        ]
        return merge_newest(rows, forks, after=after, limit=limit)

    @_translated
    def count_sessions(
        self,
        *,
        user_id: str | None,
        status: SessionStatus | None,
        agent: str | None,
        now: datetime,
        parent_session_id: str | None = None,
        metadata: MetadataFilter | None = None,
    ) -> int:
        """``COUNT(*)`` with the listing's conditions, on the index the listing reads:
        ``(user_id, status | agent, ...)`` or ``(status | agent, ...)``; EXPIRED adds
        the due sessions, counted on ``(user_id, status, expires_at)`` (stored ACTIVE,
        so none is counted twice). A parent's forks are counted on the parent's index,
        ``(parent_session_id, ...)``, the other filters checked on its rows (a
        ``CASE``), as the listing does: a filter in the ``WHERE`` could make the
        database take the status index and count every session of the store with that
        status. One or two index ranges: the cost grows with the sessions counted (the
        store's sessions for an unfiltered admin count), and no row is sent. A
        metadata filter counts on the metadata index instead (:mod:`.metaindex`): one
        index range of the matching sessions, the session rows joined only for the
        other filters."""
        t = sessions
        filters: list[Any] = []
        if user_id is not None and metadata is None:
            filters.append(t.c.user_id == user_id)
        if agent is not None:
            filters.append(t.c.agent == agent)

        def count(*conditions: Any) -> int:
            where = [*filters, *conditions]
            if metadata is not None:
                if parent_session_id is not None:
                    where.append(t.c.parent_session_id == parent_session_id)
                return self._count_by_metadata(metadata, user_id, where)
            if parent_session_id is None:
                stmt = sa.select(sa.func.count()).select_from(t).where(*where)
            else:
                counted = sa.func.count(sa.case((sa.and_(*where), 1))) if where else sa.func.count()
                stmt = sa.select(counted).where(t.c.parent_session_id == parent_session_id)
            return int(self._conn.execute(stmt).scalar_one())

        if status is None:
            return count()
        if status is SessionStatus.ACTIVE:
            live = sa.or_(t.c.expires_at.is_(None), t.c.expires_at > now)
            return count(t.c.status == status.value, live)
        stored = count(t.c.status == status.value)
        if status is SessionStatus.EXPIRED:  # and the due ones, stored ACTIVE
            stored += count(t.c.status == SessionStatus.ACTIVE.value, t.c.expires_at <= now)
        return stored

    def _sessions(self, stmt: CompiledStatement, params: dict[str, Any]) -> list[Session]:
        rows = stmt.rows(self._execute(stmt, params))
        return [Session.model_validate(stmt.record(row)) for row in rows]

    @_translated
    def list_due_sessions(self, *, now: datetime, limit: int) -> list[str]:
        if limit <= 0:
            return []
        stmt = (
            sa.select(sessions.c.session_id)
            .where(sessions.c.status == SessionStatus.ACTIVE.value, sessions.c.expires_at <= now)
            .order_by(sessions.c.expires_at, sessions.c.session_id)
            .limit(limit)
        )
        return list(self._conn.execute(stmt).scalars())

    @_translated
    def list_lapsed_leases(self, *, now: datetime, limit: int) -> list[str]:
        if limit <= 0:
            return []
        stmt = (
            sa.select(sessions.c.session_id)
            .where(sessions.c.lease_expires_at <= now)
            .order_by(sessions.c.lease_expires_at, sessions.c.session_id)
            .limit(limit)
        )
        return list(self._conn.execute(stmt).scalars())

    @_translated
    def list_user_session_ids(self, user_id: str) -> list[str]:
        stmt = sa.select(sessions.c.session_id).where(sessions.c.user_id == user_id)
        return list(self._conn.execute(stmt).scalars())

    # -- messages --------------------------------------------------------------------
    @_translated
    def insert_messages(self, messages_: Sequence[Message], *, payloads: JSONTexts = None) -> None:
        self._writing()
        if not messages_:
            return
        if payloads is None:
            payloads = [dumps(m.payload()) for m in messages_]
        rows = [
            {
                "message_id": m.message_id,
                "session_id": m.session_id,
                "seq": m.seq,
                "created_at": m.created_at,
                "role": m.role.value,
                "run_id": m.run_id,
                "payload": text,
            }
            for m, text in zip(messages_, payloads, strict=True)
        ]
        self._execute_rows(self._sql.insert_messages, rows)
        self._index_messages(messages_, payloads)

    @_translated
    def get_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest: bool = True,
        build: MessageBuilder = None,
    ) -> list[Message]:
        if limit is not None and limit <= 0:
            return []
        make = Message.from_store if build is None else build
        mode = "all" if limit is None else "last" if newest else "first"
        stmt = self._sql.get_messages(
            after=after_seq is not None, before=before_seq is not None, mode=mode
        )
        params = {
            "session_id": session_id,
            "after_seq": after_seq,
            "before_seq": before_seq,
            "limit": limit,
        }
        cursor = self._execute(stmt, params)
        # Decoded while the messages are built: the rows' hottest loop, done once.
        mid, sid, num, at, load = stmt.decoders(cursor)
        if build is None and mid is sid is num is unchanged:
            messages_ = Message.from_store_rows(cursor.fetchall(), load, at)
        else:
            messages_ = [
                make(load(p), message_id=mid(m), session_id=sid(s), seq=num(n), created_at=at(t))
                for m, s, n, t, p in cursor.fetchall()
            ]
        if mode == "last":
            messages_.reverse()
        return messages_

    @_translated
    def delete_messages(self, session_id: str, *, after_seq: int) -> int:
        self._writing()
        params = {"session_id": session_id, "after_seq": after_seq}
        self._unindex_messages(session_id, after_seq=after_seq)
        return int(self._execute(self._sql.delete_messages, params).rowcount)

    # -- working memory --------------------------------------------------------------
    @_translated
    def get_working_memory(self, session_id: str) -> WorkingMemory | None:
        stmt = self._sql.get_memory
        rows = stmt.rows(self._execute(stmt, {"session_id": session_id}))
        return WorkingMemory.model_validate(stmt.record(rows[0])) if rows else None

    @_translated
    def put_working_memory(self, memory: WorkingMemory, *, at_seq: int) -> None:
        self._writing()
        # The data's JSON, encoded once for both rows (as the JSON column would encode it).
        values = {"version": memory.version, "updated_at": memory.updated_at}
        text = {**values, "data": dumps(memory.data)}
        # The history row first (a duplicate version is a StoreConflict before anything
        # else is written), with the compiled statements: this is every memory write's path.
        key = {"session_id": memory.session_id, "at_seq": at_seq}
        self._execute(self._sql.drop_older_history, {**key, "version": memory.version})
        self._execute(self._sql.insert_history, {**key, **text})
        # The manager holds the session row lock, so update-then-insert cannot race;
        # if it somehow did, the duplicate key becomes StoreConflict and a retry.
        updated = self._execute(
            self._sql.update_memory, {**text, "b_session_id": memory.session_id}
        )
        if updated.rowcount == 0:
            row = {**values, "data": memory.data, "session_id": memory.session_id}
            self._conn.execute(sa.insert(working_memory), row)

    # -- audit -----------------------------------------------------------------------
    @_translated
    def insert_audit(self, event: AuditEvent) -> int:
        self._writing()
        row = dict(event.__dict__)  # the field values as they are (see _session_row)
        del row["seq"]
        stmt = self._sql.insert_audit
        gating = self._sql.insert_audit_gated is not None and not self._gated
        if gating:  # takes the change feed's gate, held to the end (see .changes)
            stmt = self._sql.insert_audit_gated or stmt
        cursor = self._execute(stmt, row)
        if gating:
            if cursor.rowcount != 1:
                raise StoreError("the change feed's gate row is missing: restart the store")
            self._gated = True
        if self._sql.audit_lastrowid:
            return int(cursor.lastrowid)
        return int(stmt.rows(cursor)[0][0])

    @_translated
    def list_audit(
        self, session_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[AuditEvent]:
        if limit is not None and limit <= 0:
            return []
        stmt = sa.select(audit_events).where(audit_events.c.session_id == session_id)
        if after_seq is not None:
            stmt = stmt.where(audit_events.c.seq > after_seq)
        stmt = stmt.order_by(audit_events.c.seq).limit(limit)
        return [AuditEvent.model_validate(row._asdict()) for row in self._conn.execute(stmt)]

    # -- idempotency -----------------------------------------------------------------
    @_translated
    def get_idempotency(self, user_id: str, scope: str, key: str) -> IdempotencyRecord | None:
        params = {"user_id": user_id, "scope": scope, "idem_key": key}
        stmt = self._sql.get_idempotency
        rows = stmt.rows(self._execute(stmt, params))
        if not rows:
            return None
        return _idempotency_record(stmt.record(rows[0]))

    @_translated
    def put_idempotency(self, record: IdempotencyRecord) -> None:
        self._writing()
        row = _idempotency_row(record)
        if not insert_unless_present(self._conn, idempotency_keys, row):
            raise StoreConflict(f"idempotency key {record.key!r} exists")

    @_translated
    def delete_idempotency(self, user_id: str, scope: str, key: str) -> None:
        self._writing()
        t = idempotency_keys
        self._conn.execute(
            sa.delete(t).where(t.c.user_id == user_id, t.c.scope == scope, t.c.idem_key == key)
        )

    @_translated
    def list_idempotency(
        self, *, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        t = idempotency_keys
        stmt = sa.select(t)
        if after is not None:
            stmt = stmt.where(sa.tuple_(t.c.user_id, t.c.scope, t.c.idem_key) > sa.tuple_(*after))
        stmt = stmt.order_by(t.c.user_id, t.c.scope, t.c.idem_key).limit(limit)
        return [_idempotency_record(dict(row)) for row in self._conn.execute(stmt).mappings()]

    @_translated
    def rewrite_idempotency(self, record: IdempotencyRecord) -> None:
        self._writing()
        t = idempotency_keys
        key = (t.c.user_id == record.user_id, t.c.scope == record.scope)
        stmt = sa.update(t).where(*key, t.c.idem_key == record.key)
        self._conn.execute(stmt.values(result=record.result))

    @_translated
    def purge_idempotency(self, *, created_before: datetime, user_id: str | None = None) -> int:
        self._writing()
        t = idempotency_keys
        stmt = sa.delete(t).where(t.c.created_at < created_before)
        if user_id is not None:
            stmt = stmt.where(sa.or_(t.c.user_id == user_id, t.c.owner_id == user_id))
        return int(self._conn.execute(stmt).rowcount)


def _idempotency_record(row: Mapping[str, Any]) -> IdempotencyRecord:
    """The record of an ``idempotency_keys`` row (by column name)."""
    return IdempotencyRecord(
        user_id=row["user_id"],
        scope=row["scope"],
        key=row["idem_key"],
        fingerprint=row["fingerprint"],
        session_id=row["session_id"],
        result=row["result"],
        created_at=row["created_at"],
        owner_id=row["owner_id"],
    )


def _idempotency_row(record: IdempotencyRecord) -> dict[str, Any]:
    """The ``idempotency_keys`` row of a record (its ``expires_at`` is not stored: the
    manager checks the retention itself)."""
    return {
        "user_id": record.user_id,
        "scope": record.scope,
        "idem_key": record.key,
        "fingerprint": record.fingerprint,
        "session_id": record.session_id,
        "result": record.result,
        "created_at": record.created_at,
        "owner_id": record.owner_id,
    }


def _session_head(row: Sequence[Any]) -> SessionHead:
    """The :class:`SessionHead` of a row of the ``get_session_head`` statement."""
    session_id, user_id, status, count, expires_at, lease_expires_at, agent = row
    return SessionHead(
        session_id, user_id, SessionStatus(status), count, expires_at, lease_expires_at, agent
    )


def _session_row(session: Session) -> dict[str, Any]:
    # The field values as they are (a model_dump would copy each, to be encoded anyway).
    row = dict(session.__dict__)
    row["status"] = session.status.value
    key = session.external_key
    row["external_key_hash"] = None if key is None else external_key_hash(key)
    return row


def _session_changes(session: Session, stored: Session | None) -> dict[str, Any]:
    """The columns an update of ``session`` sets (in its fields' order): all
    of them, or, given the row as ``stored`` (read or written in this transaction, its
    row locked), those whose value is not the very object stored. Identity, not
    equality, so what is written is exactly what an update of every column would
    write; a dict or list value is always written, as it may have changed in place."""
    if stored is None:
        row = _session_row(session)
        del row["session_id"]
        return row
    new, old = session.__dict__, stored.__dict__
    changed = {
        column: value
        for column, value in new.items()
        if value is not old[column] or type(value) in _MUTABLE
    }
    changed.pop("session_id", None)
    if "status" in changed:
        changed["status"] = session.status.value
    if "external_key" in changed:
        key = session.external_key
        changed["external_key_hash"] = None if key is None else external_key_hash(key)
    return changed


_MUTABLE = (dict, list)
