"""Schema migrations of the SQL store, through Alembic's programmatic API.

No ``alembic.ini`` is needed: the scripts ship inside the package
(:mod:`agentsession.migrations`) and run on a connection this module opens. Migrating is
safe when several processes start at once: each takes the database-wide migration lock
(:func:`agentsession.stores.sql.dialect.migration_lock`) before Alembic reads the current
revision, so exactly one of them migrates and the others then find the schema at head.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util import CommandError
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ...errors import SchemaOutOfDate, StoreError
from .dialect import check_database, create_store_engine, migration_lock, parse_url, translate_error
from .schema import metadata

__all__ = ["current_revision", "ensure_schema", "head_revision", "upgrade"]

_SCRIPTS = Path(__file__).resolve().parents[2] / "migrations"


@lru_cache(maxsize=1)
def _script_directory() -> ScriptDirectory:
    return ScriptDirectory(str(_SCRIPTS))


def head_revision() -> str:
    """Return the revision id the code expects, e.g. ``"0002_expiry_columns"``."""
    head = _script_directory().get_current_head()
    assert head is not None  # the package always ships revisions
    return head


def current_revision(url: str, *, busy_timeout_seconds: float = 30.0) -> str | None:
    """Return the database's schema revision, or None if it has no schema yet.

    Args:
        url: database URL, as for :class:`~agentsession.stores.sql.store.SQLStore`.
        busy_timeout_seconds: how long to wait for a lock held by another connection.

    Raises:
        ValidationError: an unsupported URL.
        StoreError: the database cannot be read (StoreBusy if it stayed locked).
    """
    engine = create_store_engine(parse_url(url), busy_timeout_seconds=busy_timeout_seconds)
    try:
        with engine.connect() as conn:
            return _current(conn)
    except SQLAlchemyError as exc:
        raise translate_error(exc) from exc
    finally:
        engine.dispose()


def upgrade(url: str, *, revision: str = "head", busy_timeout_seconds: float = 30.0) -> str:
    """Migrate the database to ``revision`` (default: the newest) and return its revision.

    Creates the schema in an empty database. Safe to run from several processes at
    once: one migrates, the others wait for the lock and find nothing left to do.

    Args:
        url: database URL, as for :class:`~agentsession.stores.sql.store.SQLStore`.
        revision: target revision id; older ones exist for tests and staged rollouts.
        busy_timeout_seconds: how long to wait for the migration lock.

    Raises:
        ValidationError: an unsupported URL.
        SchemaOutOfDate: the database is at a revision this code does not know (newer).
        StoreError: the migration failed and was rolled back (where the database
            supports transactional DDL: SQLite and PostgreSQL).
    """
    engine = create_store_engine(parse_url(url), busy_timeout_seconds=busy_timeout_seconds)
    try:
        return ensure_schema(
            engine, auto_migrate=True, revision=revision, busy_timeout_seconds=busy_timeout_seconds
        )
    finally:
        engine.dispose()


def ensure_schema(
    engine: Engine,
    *,
    auto_migrate: bool,
    revision: str = "head",
    busy_timeout_seconds: float = 30.0,
) -> str:
    """Check the schema of ``engine``'s database; migrate it if allowed. Return its revision.

    The first check takes no lock, so an up-to-date database costs one query (plus the
    character-set check of :func:`~agentsession.stores.sql.dialect.check_database` on
    PostgreSQL and MySQL, before anything is created or read).

    Raises:
        SchemaOutOfDate: the schema is not at ``revision`` and ``auto_migrate`` is False,
            or the database is at a revision this code does not know.
        StoreError: reading or migrating failed; the database or a table is not in
            UTF-8 (utf8mb4 on MySQL), or MySQL's ``max_allowed_packet`` is too small.
    """
    target = head_revision() if revision == "head" else revision
    try:
        with engine.connect() as conn:
            check_database(conn, [*metadata.tables, "alembic_version"])
            current = _current(conn)
            conn.rollback()
            if current == target:
                return current
            _check_known(current)
            if not auto_migrate:
                raise SchemaOutOfDate(current_revision=current, expected_revision=target)
            with migration_lock(conn, timeout_seconds=busy_timeout_seconds):
                config = Config()
                config.set_main_option("script_location", str(_SCRIPTS))
                config.attributes["connection"] = conn
                command.upgrade(config, target)
                return _current(conn) or target
    except SQLAlchemyError as exc:
        raise translate_error(exc) from exc
    except (CommandError, RevisionError) as exc:
        raise StoreError(f"migration failed: {exc}") from exc


def _current(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def _check_known(current: str | None) -> None:
    if current is None:
        return
    try:
        _script_directory().get_revision(current)
    except (CommandError, RevisionError) as exc:
        raise SchemaOutOfDate(current_revision=current, expected_revision=head_revision()) from exc
