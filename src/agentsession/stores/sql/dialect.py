"""Everything that differs between SQL databases, in one place.

The SQL store and the migration helpers are written once against SQLAlchemy Core; the
few things that differ per database live here: which drivers are supported, how
an engine is configured (SQLite PRAGMAs and transaction control, lock timeouts), how a
driver error is classified, and how a migration takes its database-wide lock.

SQLite notes:

* Every pooled connection runs ``PRAGMA busy_timeout``, ``journal_mode=WAL``,
  ``foreign_keys=ON`` (cascading deletes need it), ``secure_delete=ON`` (deleted
  content is overwritten with zeros, whatever SQLite was built with) and ``synchronous``. With WAL,
  ``FULL`` (the default) loses no acknowledged transaction even on power failure;
  ``NORMAL`` is faster and survives a process crash, but a power failure may lose the
  last transactions acknowledged before it.
* The database file is created 0600 before SQLite opens it, in a directory other
  users cannot write to (:mod:`agentsession.privatefiles`).
* pysqlite's own transaction handling is switched off (it does not BEGIN before a
  SELECT); SQLAlchemy's ``begin`` event emits ``BEGIN IMMEDIATE`` for a write
  transaction, so a writer takes the write lock up front (waiting up to the busy timeout)
  instead of failing to upgrade a read lock mid-transaction, and plain ``BEGIN`` for
  reads, which in WAL mode never wait for writers.

PostgreSQL and MySQL/MariaDB: the pool holds up to ``pool_size`` connections
(:data:`POOL_SIZE` by default; ``serve`` passes ``max_concurrent_requests``), opened as
concurrent transactions first need them and then kept, with no overflow: SQLAlchemy's
overflow connections (``max_overflow``) are closed as soon as they are returned to a
full pool, so under more concurrent transactions than the pool holds every few
transactions opened a new server connection (a new backend process on PostgreSQL) only
to close it again. A transaction that finds every connection in use waits for one, up
to ``busy_timeout_seconds`` (then :class:`StoreBusy`, as for a lock).

MySQL/MariaDB note: every connection adds ``STRICT_ALL_TABLES`` to its ``sql_mode``
(:data:`MYSQL_SQL_MODE`), whatever the server's default. Validation keeps every value
within its column (:mod:`agentsession.fieldlimits`); should one ever be too long
anyway, a strict mode makes it an error instead of silently cutting it short (in a
non-strict mode two idempotency keys sharing their first characters would collide).
"""

from __future__ import annotations

import functools
import importlib.util
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine, make_url

from ...errors import StoreBusy, StoreError, StoreUnavailable, ValidationError
from ...privatefiles import check_directory, create_private, tighten
from ..base import ConnectionLost, StoreConflict
from .execute import observed

__all__ = [
    "POOL_SIZE",
    "SQLITE_HEADER",
    "SQLITE_SYNCHRONOUS",
    "check_database",
    "connection_mode",
    "create_store_engine",
    "insert_unless_present",
    "masked_url",
    "migration_lock",
    "parse_url",
    "sqlite_file_state",
    "translate_error",
    "translated",
]

#: Accepted values of the SQLite ``synchronous`` PRAGMA.
SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
#: Server connections a PostgreSQL or MySQL/MariaDB store keeps at most (see the module
#: docstring): the threads ``AsyncSessionManager`` runs at once by default.
POOL_SIZE = 64

# backend -> (default driver, {driver: (module to import, extra that installs it)})
_DRIVERS: dict[str, tuple[str, dict[str, tuple[str, str | None]]]] = {
    "sqlite": ("pysqlite", {"pysqlite": ("sqlite3", None)}),
    "postgresql": ("psycopg", {"psycopg": ("psycopg", "postgres")}),
    "mysql": ("pymysql", {"pymysql": ("pymysql", "mysql")}),
    "mariadb": ("pymysql", {"pymysql": ("pymysql", "mysql")}),
}

# Execution option read by the SQLite ``begin`` hook: the BEGIN mode of the connection.
_BEGIN_MODE = "agentsession_sqlite_begin"

# Arbitrary constant key of the PostgreSQL advisory lock / MySQL named lock of migrations.
_MIGRATION_LOCK_KEY = 0x6167_7365_7373  # "agsess"
_MIGRATION_LOCK_NAME = "agentsession_migrate"

# Transient errors, retried by the manager: SQLite busy/locked; PostgreSQL
# serialization failure, deadlock, lock timeout; MySQL lock wait timeout, deadlock.
_SQLITE_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED (primary result codes)
_PG_BUSY_STATES = {"40001", "40P01", "55P03"}
_MYSQL_BUSY_CODES = {1205, 1213, 3572}
# Integrity errors that mean "lost a race": unique/primary key, or a vanished parent row.
_PG_CONFLICT_STATES = {"23505", "23503"}
_MYSQL_CONFLICT_CODES = {1062, 1452, 1216}
# The store cannot be reached or cannot write (StoreUnavailable). SQLite: SQLITE_FULL
# (disk full, or max_page_count reached). PostgreSQL: the SQLSTATE classes 08
# (connection exception) and 53 (insufficient resources: disk full, out of memory, too
# many connections), shutdown or recovery (57P01-57P03), idle-session timeout (57P05)
# and 58 (system error, e.g. an I/O error). MySQL/MariaDB: can't connect (2002, 2003),
# gone away (2006), lost (2013, 2055), too many connections (1040), shutting down
# (1053), disk full (1021), table full (1114), and "Got error 28 (No space left on
# device)" from the storage engine (1030).
_SQLITE_UNAVAILABLE_CODES = {13}
_PG_UNAVAILABLE_CLASSES = ("08", "53", "58")
_PG_UNAVAILABLE_STATES = {"57P01", "57P02", "57P03", "57P05"}
_MYSQL_UNAVAILABLE_CODES = {1021, 1040, 1053, 1114, 2002, 2003, 2006, 2013, 2055}
_MYSQL_NO_SPACE = 1030

#: The sql_mode of every MySQL/MariaDB connection: the server's plus STRICT_ALL_TABLES
#: (see the module docstring).
MYSQL_SQL_MODE = "sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_ALL_TABLES')"

# The smallest MySQL/MariaDB max_allowed_packet the store accepts: a 4 MiB payload (the
# default message and tool-call limit) can double when PyMySQL quotes it (every "\\"
# of the JSON text becomes "\\\\"), next to up to 1 MB of other rows of one batch
# INSERT. 16 MiB is MariaDB's default (MySQL 8: 64 MiB; MySQL 5.7: 4 MiB, too small).
MYSQL_MIN_PACKET_BYTES = 16 * 1024 * 1024


def parse_url(url: str) -> URL:
    """Parse and check a database URL, normalising the driver.

    ``postgresql://`` means ``postgresql+psycopg://`` and ``mysql://`` means
    ``mysql+pymysql://`` (the drivers of the ``postgres`` and ``mysql`` extras).

    Raises:
        ValidationError: an unparsable URL, an unsupported backend or driver, or an
            in-memory SQLite URL (use ``memory://`` for that).
        StoreError: the driver is not installed; the message names the extra to install.
    """
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ValidationError(f"cannot parse database URL: {exc}", field="url") from exc
    backend, _, driver = parsed.drivername.partition("+")
    if backend not in _DRIVERS:
        raise ValidationError(
            f"unsupported SQL backend {backend!r}; supported: {', '.join(_DRIVERS)}", field="url"
        )
    default, drivers = _DRIVERS[backend]
    driver = driver or default
    if driver not in drivers:
        raise ValidationError(
            f"unsupported driver {driver!r} for {backend}; use {backend}+{default}://", field="url"
        )
    module, extra = drivers[driver]
    if importlib.util.find_spec(module) is None:
        raise StoreError(
            f"the {backend} driver {module!r} is not installed: pip install 'agentsession[{extra}]'"
        )
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ValidationError(
            "an in-memory SQLite database cannot be shared between connections; "
            "use memory:// for an in-memory store, or sqlite:///path/to/file.db",
            field="url",
        )
    return parsed.set(drivername=f"{backend}+{driver}")


def masked_url(url: URL) -> str:
    """Return the URL as text with any password replaced by ``***``."""
    return url.render_as_string(hide_password=True)


def create_store_engine(
    url: URL,
    *,
    sqlite_synchronous: str = "FULL",
    busy_timeout_seconds: float = 30.0,
    pool_size: int = POOL_SIZE,
    engine_options: dict[str, Any] | None = None,
) -> Engine:
    """Create an engine configured for the store (see the module docstring).

    Args:
        url: a URL from :func:`parse_url`.
        sqlite_synchronous: SQLite ``synchronous`` PRAGMA, one of :data:`SQLITE_SYNCHRONOUS`.
        busy_timeout_seconds: how long a statement waits for a lock held by another
            connection before failing with :class:`StoreBusy` (SQLite ``busy_timeout``,
            PostgreSQL ``lock_timeout``, MySQL ``innodb_lock_wait_timeout``).
        pool_size: PostgreSQL and MySQL/MariaDB: the most server connections the pool
            keeps open, with no overflow (at least 1); SQLite ignores it.
        engine_options: extra keyword arguments for :func:`sqlalchemy.create_engine`
            (pool size, echo...); they win over the defaults set here.

    Raises:
        ValidationError: a bad ``sqlite_synchronous``, ``busy_timeout_seconds`` or
            ``pool_size``.
        StoreError: the SQLite file's directory cannot be created.
    """
    if busy_timeout_seconds <= 0:
        raise ValidationError("busy_timeout_seconds must be positive", field="busy_timeout_seconds")
    if pool_size < 1:
        raise ValidationError("pool_size must be at least 1", field="pool_size")
    timeout_ms = int(busy_timeout_seconds * 1000)
    options: dict[str, Any] = {}
    backend = url.get_backend_name()
    if backend == "sqlite":
        synchronous = sqlite_synchronous.upper()
        if synchronous not in SQLITE_SYNCHRONOUS:
            raise ValidationError(
                f"sqlite_synchronous must be one of {', '.join(SQLITE_SYNCHRONOUS)}",
                field="sqlite_synchronous",
            )
        assert url.database is not None  # parse_url rejects in-memory URLs
        try:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory of {url.database!r}: {exc}") from exc
        _private_sqlite_files(Path(url.database))
        # Readers each take a pooled connection (writes have their own, see
        # .groupcommit); an SQLite connection is a file handle, so every thread of a
        # busy service (100 by default) may hold one instead of waiting in the pool.
        options["pool_size"] = 10
        options["max_overflow"] = 100
    else:
        # No overflow: SQLAlchemy closes an overflow connection as soon as it comes back
        # to a full pool, so a busy pool would open and close one every few writes.
        options["pool_size"] = pool_size
        options["max_overflow"] = 0
        options["pool_timeout"] = busy_timeout_seconds  # then StoreBusy, as for a lock
    if backend == "postgresql":
        options["connect_args"] = {"options": f"-c lock_timeout={timeout_ms}"}
    elif backend != "sqlite":
        seconds = max(1, round(busy_timeout_seconds))
        options["connect_args"] = {
            "init_command": f"SET SESSION innodb_lock_wait_timeout = {seconds}, {MYSQL_SQL_MODE}",
            # 4-byte UTF-8 on the wire whatever the URL or server default says.
            "charset": "utf8mb4",
        }
        # Fewer gap locks than REPEATABLE READ; the store never relies on repeatable reads.
        options["isolation_level"] = "READ COMMITTED"
    options.update(engine_options or {})
    engine = sa.create_engine(url, **options)
    if backend == "sqlite":
        _configure_sqlite(engine, synchronous=synchronous, timeout_ms=timeout_ms)
    return engine


#: The first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html).
SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_file_state(db: Path) -> Literal["missing", "empty", "database", "other"]:
    """What is at an SQLite database path, read without changing anything.

    Args:
        db: the database file.

    Returns:
        ``missing`` (nothing there), ``empty`` (a zero-byte file: SQLite makes it a new
        database), ``database`` (a file starting with :data:`SQLITE_HEADER`), or
        ``other`` (anything else: a text file, a directory, an unreadable file).
    """
    try:
        with db.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return "missing"
    except OSError:  # a directory, no permission...
        return "other"
    if not head:
        return "empty"
    return "database" if head == SQLITE_HEADER else "other"


def _private_sqlite_files(db: Path) -> None:
    """Create the database file 0600 before SQLite opens it (SQLite gives ``-wal`` and
    ``-shm`` the database file's mode), after checking its directory; tighten the files
    a wider umask made before (:mod:`agentsession.privatefiles`).

    Raises:
        StoreError: the file exists and is not an SQLite database (checked first, so
            nothing is changed), an unsafe directory, a file planted by another user or
            a symbolic link in place of one, or an OS error.
    """
    if sqlite_file_state(db) == "other":
        raise StoreError(f"{db} is not an SQLite database; nothing was changed")
    files = (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))
    try:
        check_directory(db.parent, files)
        create_private(db)
        for path in files[1:]:
            tighten(path)
    except OSError as exc:
        raise StoreError(f"cannot make {db} private: {exc}") from exc


def _configure_sqlite(engine: Engine, *, synchronous: str, timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Transactions are ours (see "begin" below); PRAGMAs run outside any transaction.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            _enable_wal(cursor, timeout_ms)
            cursor.execute("PRAGMA foreign_keys = ON")
            # Deleted rows are overwritten with zeros, not left in free pages (erasure).
            cursor.execute("PRAGMA secure_delete = ON")
            cursor.execute(f"PRAGMA synchronous = {synchronous}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_BEGIN_MODE, "DEFERRED")
        dbapi_connection = conn.connection.dbapi_connection
        assert dbapi_connection is not None
        if dbapi_connection.in_transaction:
            # Begun on the driver (a read of .idlereaders, a write batch of
            # .groupcommit): Core joins that transaction.
            return
        sql = f"BEGIN {mode}"
        if observed(conn):
            conn.exec_driver_sql(sql)
            return
        # Straight to the driver (see .execute): a Core round trip per BEGIN costs more
        # than the BEGIN. Errors are wrapped as exec_driver_sql would wrap them.
        try:
            dbapi_connection.execute(sql)
        except sqlite3.Error as exc:
            raise sa.exc.DBAPIError.instance(
                sql, None, exc, sqlite3.Error, hide_parameters=True, dialect=conn.dialect
            ) from exc


def _enable_wal(cursor: Any, timeout_ms: int) -> None:
    """Switch the file to WAL (persistent), retrying while another connection holds a lock.

    Changing the journal mode needs an exclusive lock that SQLite does not wait for
    through the busy handler, so two processes opening a new file at once would
    otherwise see "database is locked" at connect.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 0.001
    while True:
        try:
            mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF not in _SQLITE_BUSY_CODES:
                raise
            mode = None
        if mode == "wal":
            return
        if time.monotonic() >= deadline:
            raise sqlite3.OperationalError(f"database is locked (journal mode stays {mode})")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def check_database(conn: Connection, tables: Iterable[str]) -> None:
    """Refuse a database the store cannot keep every character in (checked at start).

    PostgreSQL: the database encoding must be ``UTF8``. MySQL/MariaDB: utf8mb4
    everywhere: the connection, the database's default character set (what a table
    made without one would get), and every table and text column of ``tables`` that
    exists; ``max_allowed_packet`` must be at least :data:`MYSQL_MIN_PACKET_BYTES`.
    SQLite stores UTF-8 text as it is. Costs one or two queries, once per start.

    Raises:
        StoreError: what is wrong, and the statement that fixes it.
    """
    name = conn.dialect.name
    if name == "postgresql":
        encoding = conn.exec_driver_sql("SHOW server_encoding").scalar()
        if encoding != "UTF8":
            raise StoreError(
                f"the PostgreSQL database uses the {encoding} encoding; agentsession needs "
                "UTF8: CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0"
            )
        return
    if name not in ("mysql", "mariadb"):
        return
    database, default_charset, connection_charset, packet = conn.execute(
        sa.text(
            "SELECT DATABASE(), s.DEFAULT_CHARACTER_SET_NAME, @@character_set_connection,"
            " @@max_allowed_packet FROM information_schema.SCHEMATA s"
            " WHERE s.SCHEMA_NAME = DATABASE()"
        )
    ).one()
    if default_charset != "utf8mb4":
        raise StoreError(
            f"the MySQL database {database!r} defaults to the {default_charset} character "
            "set; agentsession needs utf8mb4 everywhere: ALTER DATABASE "
            f"`{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
        )
    if connection_charset != "utf8mb4":
        raise StoreError(
            f"the MySQL connection uses the {connection_charset} character set; "
            "agentsession needs utf8mb4"
        )
    names = sorted(tables)
    wrong = conn.execute(
        sa.text(
            "SELECT t.TABLE_NAME, NULL, t.TABLE_COLLATION FROM information_schema.TABLES t"
            " WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME IN :names"
            " AND t.TABLE_COLLATION NOT LIKE 'utf8mb4\\_%'"
            " UNION ALL"
            " SELECT c.TABLE_NAME, c.COLUMN_NAME, c.CHARACTER_SET_NAME"
            " FROM information_schema.COLUMNS c"
            " WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME IN :names"
            " AND c.CHARACTER_SET_NAME IS NOT NULL AND c.CHARACTER_SET_NAME <> 'utf8mb4'"
        ).bindparams(sa.bindparam("names", expanding=True)),
        {"names": names},
    ).all()
    if wrong:
        where = ", ".join(
            f"{table}.{column} ({charset})" if column else f"table {table} ({charset})"
            for table, column, charset in wrong
        )
        raise StoreError(
            f"not utf8mb4 in MySQL database {database!r}: {where}; agentsession needs "
            "utf8mb4 everywhere: ALTER TABLE ... CONVERT TO CHARACTER SET utf8mb4 "
            "COLLATE utf8mb4_bin"
        )
    if int(packet) < MYSQL_MIN_PACKET_BYTES:
        raise StoreError(
            f"MySQL max_allowed_packet is {int(packet)} bytes; a 4 MiB message needs at "
            f"least {MYSQL_MIN_PACKET_BYTES}: SET GLOBAL max_allowed_packet = "
            f"{MYSQL_MIN_PACKET_BYTES} (and max_allowed_packet=16M in the server config)"
        )


def connection_mode(conn: Connection, *, write: bool) -> Connection:
    """Mark a fresh connection as a reader or writer before its transaction begins.

    On SQLite a writer's BEGIN is ``BEGIN IMMEDIATE``; other databases lock rows as
    statements run, so the mark changes nothing there. Returns ``conn``.
    """
    if write and conn.dialect.name == "sqlite":
        conn.execution_options(**{_BEGIN_MODE: "IMMEDIATE"})
    return conn


@contextmanager
def migration_lock(conn: Connection, *, timeout_seconds: float) -> Iterator[None]:
    """Hold the database-wide migration lock and a transaction on ``conn``.

    Whoever holds it migrates; a second process waits, then finds the schema at head.
    SQLite: ``BEGIN EXCLUSIVE`` (waits up to the connection's busy timeout);
    PostgreSQL: ``pg_advisory_lock``; MySQL/MariaDB: ``GET_LOCK``. The transaction
    commits when the block ends, or rolls back if it raises.

    Raises:
        StoreBusy: the lock was not granted within ``timeout_seconds`` (MySQL).
        StoreError: an unsupported backend.
    """
    name = conn.dialect.name
    if name == "sqlite":
        conn.execution_options(**{_BEGIN_MODE: "EXCLUSIVE"})
        with conn.begin():
            yield
        return
    if name == "postgresql":
        lock = sa.text("SELECT pg_advisory_lock(:key)").bindparams(key=_MIGRATION_LOCK_KEY)
        unlock = sa.text("SELECT pg_advisory_unlock(:key)").bindparams(key=_MIGRATION_LOCK_KEY)
    elif name in ("mysql", "mariadb"):
        lock = sa.text("SELECT GET_LOCK(:name, :timeout)").bindparams(
            name=_MIGRATION_LOCK_NAME, timeout=max(1, round(timeout_seconds))
        )
        unlock = sa.text("SELECT RELEASE_LOCK(:name)").bindparams(name=_MIGRATION_LOCK_NAME)
    else:
        raise StoreError(f"no migration lock for the {name!r} database")
    granted = conn.execute(lock).scalar()
    conn.commit()
    if name != "postgresql" and granted != 1:
        raise StoreBusy(f"another process held the migration lock for {timeout_seconds} s")
    try:
        with conn.begin():
            yield
    finally:
        conn.execute(unlock)
        conn.commit()


class Translating(Protocol):
    """A store transaction: what its driver may raise, to be raised as store errors."""

    _translatable: tuple[type[BaseException], ...]


T = TypeVar("T", bound=Translating)
P = ParamSpec("P")
R = TypeVar("R")


def insert_unless_present(conn: Connection, table: sa.Table, row: dict[str, Any]) -> bool:
    """Insert ``row`` into ``table`` unless a row with the same primary or unique key is
    there; return whether it was inserted.

    A lost race on a unique key is then no error: PostgreSQL writes every unique
    violation to its server log with the key's values (``DETAIL: Key (user_id, ...)=(...)
    already exists``), which would keep user ids and keys there after an erasure.
    PostgreSQL and SQLite run ``INSERT ... ON CONFLICT DO NOTHING`` (the row count tells
    a skipped row). MariaDB/MySQL run a plain ``INSERT``: a duplicate key raises
    (StoreConflict through :func:`translate_error`). ``INSERT IGNORE`` would also turn
    strict-mode errors into warnings, and ``ON DUPLICATE KEY UPDATE`` reports a
    matched row like an inserted one under ``CLIENT_FOUND_ROWS`` (the drivers' setting);
    and the server logs no failed statement unless an audit or error-log plugin is on.

    Args:
        conn: a connection inside the store's write transaction.
        table: the table; row: column name -> value.

    Returns:
        True when inserted, False when a row with the same key was there (PostgreSQL
        and SQLite only; on MariaDB/MySQL a duplicate raises).
    """
    name = conn.dialect.name
    if name == "postgresql":
        stmt: Any = pg_dialect.insert(table).on_conflict_do_nothing()
    elif name == "sqlite":
        stmt = sqlite_dialect.insert(table).on_conflict_do_nothing()
    else:
        stmt = sa.insert(table)
    # SQLAlchemy reports an INSERT's row count only when asked to keep it.
    return conn.execute(stmt, row, execution_options={"preserve_rowcount": True}).rowcount == 1


def translated(method: Callable[Concatenate[T, P], R]) -> Callable[Concatenate[T, P], R]:
    """Raise driver errors (and undecodable stored rows: whatever the transaction's
    ``_translatable`` names) as store errors (:func:`translate_error`)."""

    @functools.wraps(method)
    def wrapper(self: T, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except self._translatable as exc:
            raise translate_error(exc) from exc

    return wrapper


def translate_error(exc: BaseException, *, committing: bool = False) -> StoreError:
    """Map a driver or SQLAlchemy error to the store's errors (raise it ``from exc``).

    Args:
        exc: the error caught. committing: it was raised by the COMMIT, whose outcome
            is unknown when the connection was lost (so it is not re-run).

    Returns:
        :class:`StoreBusy` for a transient condition (locked database, lock wait
        timeout, deadlock, serialization failure, pool timeout); :class:`StoreConflict`
        for a lost race on a unique key or a vanished parent row;
        :class:`ConnectionLost` for a connection the server dropped before the COMMIT
        (the transaction was rolled back: re-run it); :class:`StoreUnavailable` for an
        unreachable server, a connection lost at the COMMIT or a full disk; else
        :class:`StoreError`. The message carries the driver's text, never parameters.
    """
    orig = getattr(exc, "orig", None) or exc
    detail = str(orig).splitlines()[0] if str(orig) else type(orig).__name__
    if isinstance(exc, sa.exc.TimeoutError) or _is_busy(orig):
        return StoreBusy(f"the database is busy: {detail}")
    dropped = bool(getattr(exc, "connection_invalidated", False))
    if dropped and committing:
        return StoreUnavailable(
            f"the connection was lost during the COMMIT, whose outcome is unknown: {detail}"
        )
    if dropped:
        return ConnectionLost(f"the connection was lost before the COMMIT: {detail}")
    if _is_unavailable(exc, orig):
        outcome = " (the COMMIT's outcome is unknown)" if committing else ""
        return StoreUnavailable(f"the database is unavailable{outcome}: {detail}")
    if isinstance(exc, sa.exc.IntegrityError) and _is_conflict(orig):
        return StoreConflict(f"a concurrent write won: {detail}")
    return StoreError(f"database error: {detail}")


def _mysql_code(orig: BaseException) -> int | None:
    """PyMySQL's error number (``args[0]``); None for other drivers.

    Checked before ``sqlstate``: PyMySQL also sets a generic SQLSTATE (``23000`` for
    every integrity error), which does not tell a duplicate key from other failures.
    """
    args = getattr(orig, "args", ())
    return args[0] if args and type(args[0]) is int else None


def _is_busy(orig: BaseException) -> bool:
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in _SQLITE_BUSY_CODES
        return "database is locked" in str(orig)
    mysql_code = _mysql_code(orig)
    if mysql_code is not None:
        return mysql_code in _MYSQL_BUSY_CODES
    return getattr(orig, "sqlstate", None) in _PG_BUSY_STATES


def _is_unavailable(exc: BaseException, orig: BaseException) -> bool:
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in _SQLITE_UNAVAILABLE_CODES
        return "database or disk is full" in str(orig)
    mysql_code = _mysql_code(orig)
    if mysql_code is not None:
        if mysql_code == _MYSQL_NO_SPACE:
            return "error 28 " in str(orig)
        return mysql_code in _MYSQL_UNAVAILABLE_CODES
    if not hasattr(orig, "sqlstate"):  # not psycopg's
        return False
    state = orig.sqlstate
    if state is None:  # psycopg: a client-side failure to connect or to talk
        return isinstance(exc, sa.exc.OperationalError)
    return state.startswith(_PG_UNAVAILABLE_CLASSES) or state in _PG_UNAVAILABLE_STATES


def _is_conflict(orig: BaseException) -> bool:
    if getattr(orig, "sqlite_errorcode", None) is not None:
        text = str(orig)
        return text.startswith("UNIQUE constraint") or text.startswith("FOREIGN KEY")
    mysql_code = _mysql_code(orig)
    if mysql_code is not None:
        return mysql_code in _MYSQL_CONFLICT_CODES
    return getattr(orig, "sqlstate", None) in _PG_CONFLICT_STATES
