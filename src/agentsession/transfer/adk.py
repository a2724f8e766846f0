"""Import a Google ADK session database: every ADK session of the named apps becomes one
session of ours, written through :class:`~agentsession.adapters.adk.AgentSessionService`,
so the service reads it back equal to the source's ``get_session`` (events, state with
its ``app:`` / ``user:`` keys, ``last_update_time``).

The source is read through ADK's own services: ``SqliteSessionService`` for the file
of that service, ``DatabaseSessionService`` for a SQLAlchemy URL. A SQLite source is
opened read-only (a ``file:`` URI with ``mode=ro``, its path percent-escaped, so a
``#``, ``?`` or ``%`` in it names that file and nothing else); a source without ADK's
``sessions`` and ``events`` tables is refused before ADK's service touches it (it
would create them). Nothing is written to any source by this module.

Re-running an import adds nothing, and resumes one that stopped part-way: a session's
stored events must be a prefix of its source events, and only the source events past
that prefix are appended; the state is written only when it differs. A session whose
stored events are not such a prefix (changed since) is left alone and reported.

google-adk is imported here, so this module is imported only by the command that uses
it.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ..adapters.adk import AgentSessionService
from ..errors import AgentSessionError, ImportSourceError, ValidationError
from ..jsonvalues import check_json
from ..service import SessionManager
from .sourcecheck import at_row, first_lines, refusal, unreadable
from .sqlitefile import require_file

__all__ = ["AdkImportReport", "import_google_adk", "list_source", "open_source", "shown_source"]


#: The tables every ADK session database has (both of ADK's schemas).
_ADK_TABLES = frozenset({"sessions", "events"})


def open_source(source: str) -> DatabaseSessionService | SqliteSessionService:
    """ADK's own service over ``source``, reading a SQLite file read-only and leaving
    nothing beside it (no ``-wal`` or ``-shm`` file).

    Args:
        source: a SQLAlchemy URL (``scheme://...``; a SQLite one, of any driver and
            with any query, is opened through ``sqlite+aiosqlite``), or the path of a
            ``SqliteSessionService`` file. A SQLite file without a ``-wal`` beside it is
            read alone (``immutable=1``); with one, a private copy of the file and its
            ``-wal`` is read, removed by the service's ``close()``.

    Returns:
        A ``DatabaseSessionService`` for a URL, a ``SqliteSessionService`` for a path;
        the caller closes it (``await service.close()``).

    Raises:
        ImportSourceError: a path or SQLite URL that is not a file (or is a
            directory), not SQLite, a SQLite file without ADK's tables or of the other
            service's schema (saying what to pass instead) (``field="source"``).
        ValidationError: a URL SQLAlchemy or ADK cannot use (``field="source"``).
    """
    if "://" not in source:
        plain = _SqliteSource(source, "SqliteSessionService")
        # ADK unquotes the URL's path once and hands it to SQLite as a ``file:`` URI,
        # which SQLite unquotes again: escape twice.
        path = quote(_uri_path(plain.file), safe="/")
        query = "&".join(f"{k}={v}" for k, v in plain.query.items())
        return _close_with(SqliteSessionService(f"sqlite:///{path}?{query}"), plain)
    try:
        url = make_url(source)
    except ArgumentError as exc:
        raise ValidationError("the source is not a database URL", field="source") from exc
    opened: _SqliteSource | None = None
    if url.get_backend_name() == "sqlite":
        opened = _SqliteSource(url.database or "", "DatabaseSessionService")
        url = url.set(
            drivername="sqlite+aiosqlite",
            database="file:" + _uri_path(opened.file),
            query={**url.query, **opened.query, "uri": "true"},
        )
    try:
        service = DatabaseSessionService(url.render_as_string(hide_password=False))
    except ValueError as exc:  # ADK's words for a URL it cannot use
        if opened is not None:
            opened.cleanup()
        raise ValidationError(str(exc), field="source") from exc
    return service if opened is None else _close_with(service, opened)


_Service = TypeVar("_Service", DatabaseSessionService, SqliteSessionService)


def _close_with(service: _Service, opened: _SqliteSource) -> _Service:
    """``service``, whose ``close()`` also removes ``opened``'s private copy."""
    close = service.close

    async def close_and_clean() -> None:
        try:
            await close()
        finally:
            opened.cleanup()

    service.close = close_and_clean  # type: ignore[method-assign]
    return service


class _SqliteSource:
    """The SQLite file of an ADK source, checked, and how to read it leaving nothing
    beside it: :attr:`file` (the source, or a private copy of it and its ``-wal``)
    with the URI query :attr:`query` (``mode=ro``, and ``immutable=1`` for a file
    without a ``-wal``: read alone, nothing created); :meth:`cleanup` removes the copy.

    Args:
        path: the source file; wanted: the ADK service the caller opens it with
            (``SqliteSessionService`` or ``DatabaseSessionService``).

    Raises:
        ImportSourceError: not a file, not SQLite, without ADK's tables, or a file of
            the other service (``field="source"``).
    """

    def __init__(self, path: str, wanted: str) -> None:
        if not path or path == ":memory:":
            message = f"no such database file: {path or ':memory:'}"
            raise ImportSourceError(message, source=path or ":memory:", field="source")
        require_file(Path(path), "source")
        source = Path(path).resolve()
        self._copy: tempfile.TemporaryDirectory[str] | None = None
        self.file, self.query = source, {"mode": "ro", "immutable": "1"}
        log = source.with_name(source.name + "-wal")
        if log.exists():
            self._copy = tempfile.TemporaryDirectory(prefix="agentsession-import-")
            self.file = Path(self._copy.name) / "source.db"
            shutil.copyfile(source, self.file)
            shutil.copyfile(log, self.file.with_name("source.db-wal"))
            self.query = {"mode": "ro"}
        try:
            _check_schema(self.file, self.query, path, wanted)
        except BaseException:
            self.cleanup()
            raise

    def cleanup(self) -> None:
        """Remove the private copy, if one was made."""
        if self._copy is not None:
            self._copy.cleanup()
            self._copy = None


def _check_schema(file: Path, query: dict[str, str], shown: str, wanted: str) -> None:
    """Refuse ``file`` unless it holds ADK's tables in the schema of ``wanted``: a
    ``DatabaseSessionService`` file has ``adk_internal_metadata`` (or, older, events
    without ``event_data``); a ``SqliteSessionService`` file has neither.

    Raises:
        ImportSourceError: not SQLite, not ADK, or the other service's file, naming
            what to pass instead.
    """
    try:
        uri = f"file:{_uri_path(file)}?" + "&".join(f"{k}={v}" for k, v in query.items())
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            columns = {row[1] for row in db.execute("PRAGMA table_info(events)")}
    except sqlite3.DatabaseError as exc:
        raise unreadable(shown, exc) from exc
    _require_adk_tables(tables, shown)
    database = "adk_internal_metadata" in tables or "event_data" not in columns
    if database and wanted == "SqliteSessionService":
        raise ImportSourceError(
            f"{shown} is a DatabaseSessionService database: pass "
            f"sqlite+aiosqlite:///{Path(shown).resolve()}",
            source=shown,
            field="source",
        )
    if not database and wanted == "DatabaseSessionService":
        raise ImportSourceError(
            f"{shown} is a SqliteSessionService database: pass its path ({shown})",
            source=shown,
            field="source",
        )


def shown_source(source: str) -> str:
    """``source`` fit for a message: a URL with its password masked.

    Args:
        source: a path or a SQLAlchemy URL.

    Returns:
        The path as it is, or the URL rendered with ``***`` for a password.
    """
    if "://" not in source:
        return source
    try:
        return make_url(source).render_as_string(hide_password=True)
    except ArgumentError:
        return "the source URL"


def _uri_path(file: Path) -> str:
    """``file`` (absolute) as the path of a SQLite ``file:`` URI: percent-escaped."""
    return quote(str(file), safe="/")


def _require_adk_tables(tables: set[str], name: str) -> None:
    """Refuse a source without ADK's tables (ADK's service would create them in it).

    Raises:
        ImportSourceError: ``sessions`` or ``events`` missing from ``tables``.
    """
    missing = sorted(_ADK_TABLES - tables)
    if missing:
        raise ImportSourceError(
            f"{name} is not an ADK session database (no {', '.join(missing)} table); "
            "nothing was read or written",
            source=name,
            field="source",
        )


@dataclass
class AdkImportReport:
    """What :func:`import_google_adk` did.

    Attributes:
        sessions: source sessions seen; created: of them, sessions newly created here.
        events: events appended; states: sessions whose state was written.
        failed: ``(app name, user id, session id, reason)`` of sessions not imported.
    """

    sessions: int = 0
    created: int = 0
    events: int = 0
    states: int = 0
    failed: list[tuple[str, str, str, str]] = field(default_factory=list)


async def list_source(
    source: BaseSessionService, apps: Sequence[str], *, name: str = "the ADK source"
) -> list[Session]:
    """The sessions to import from ``source``.

    Args:
        source: a service from :func:`open_source`; apps: the app names; name: the
            source in errors (:func:`shown_source`).

    Returns:
        Every session of ``apps`` in the source, without events, app by app (each
        app's in the source's order).

    Raises:
        ImportSourceError: a database without ADK's tables (checked before ADK's
            service reads it, which would create them), one that does not answer
            (``cannot read <name>: ...``), or sessions ADK's service cannot list
            (``<name>: sessions of app 'NAME': ...``: a state that is not JSON...).
    """
    if isinstance(source, DatabaseSessionService):
        try:
            async with source.db_engine.connect() as conn:
                tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        except Exception as exc:  # the source's driver, whatever it raises
            raise unreadable(name, exc) from exc
        _require_adk_tables(tables, name)
    found: list[Session] = []
    for app in apps:
        try:
            found += (await source.list_sessions(app_name=app)).sessions
        except Exception as exc:  # ADK's own error: json, pydantic, its driver's...
            reason = f"cannot list them ({type(exc).__name__}: {first_lines(exc)})"
            raise refusal(name, f"sessions of app {app!r}", reason) from exc
    return found


async def import_google_adk(
    manager: SessionManager,
    source: BaseSessionService,
    sessions: Sequence[Session],
    *,
    advance: Callable[[int], None] | None = None,
    name: str = "the ADK source",
) -> AdkImportReport:
    """Import ``sessions`` (from :func:`list_source`) of ``source`` (see the module
    docstring); re-running adds nothing. Each keeps its app name, user id and session
    id. Every session is read and checked first; then a session that fails (an id or
    event the store refuses, a stored history that diverged) is reported in
    ``failed`` and the others go on.

    Args:
        advance: called with 1 after each session (for a progress bar).
        name: the source in errors (:func:`shown_source`).

    Returns:
        The counts, and the sessions not imported with why. One source session is
        held in memory at a time.

    Raises:
        ImportSourceError: a session ADK's service cannot read, or holding a value
            nesting deeper than a stored value may (naming it: ``session
            app/user/id``); nothing is written then.
    """
    for brief in sessions:
        await _read(source, brief, name)
    report = AdkImportReport()
    target = AgentSessionService(manager)
    try:
        for brief in sessions:
            report.sessions += 1
            full = await _read(source, brief, name)
            try:
                if full is not None:  # None: deleted since it was listed
                    await _import_one(target, full, report)
            except AgentSessionError as exc:
                report.failed.append((brief.app_name, brief.user_id, brief.id, exc.message))
            if advance is not None:
                advance(1)
    finally:
        target.close()
    return report


async def _read(source: BaseSessionService, brief: Session, name: str) -> Session | None:
    """The whole session ``brief`` names, read through ADK's service and checked as
    the store will check it; None when it is gone.

    Raises:
        ImportSourceError: ADK's service cannot read it (a row of the wrong type, not
            JSON, too deep for its parser...), or a value of it nests deeper than a
            stored value may.
    """
    row = f"session {brief.app_name}/{brief.user_id}/{brief.id}"
    try:
        full = await source.get_session(
            app_name=brief.app_name, user_id=brief.user_id, session_id=brief.id
        )
        events = [] if full is None else [e.model_dump(mode="json") for e in full.events]
    except Exception as exc:  # ADK's own error: json, pydantic, its driver's...
        reason = f"cannot read it ({type(exc).__name__}: {first_lines(exc)})"
        raise refusal(name, row, reason) from exc
    if full is not None:
        with at_row(name, row):
            check_json(full.state, field="state")
            for i, event in enumerate(events):
                check_json(event, field=f"events[{i}]")
    return full


async def _import_one(target: AgentSessionService, full: Session, report: AdkImportReport) -> None:
    """Bring one source session, read whole, up to date (the module docstring has
    the rules).

    Raises:
        ValidationError: its stored events are not a prefix of the source's.
        AgentSessionError: as the store raises.
    """
    key: dict[str, Any] = {
        "app_name": full.app_name,
        "user_id": full.user_id,
        "session_id": full.id,
    }
    mine = await target.get_session(**key)
    if mine is None:
        mine = await target.create_session(**key)
        report.created += 1
    stored = len(mine.events)
    if mine.events != full.events[:stored]:
        raise ValidationError(
            "its stored events differ from the source's; left alone (delete the session "
            "to import it again)",
            field="session_id",
        )
    for event in full.events[stored:]:
        await target.append_event(mine, event.model_copy(deep=True))
        report.events += 1
    if mine.state != full.state or mine.last_update_time != full.last_update_time:
        await target.put_state(**key, state=full.state, last_update_time=full.last_update_time)
        report.states += 1
