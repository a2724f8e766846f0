"""Import a Google ADK session database: every ADK session of the named apps becomes one
session of ours, written through :class:`~agentsession.adapters.adk.AgentSessionService`,
so the service reads it back equal to the source's ``get_session`` (events, state with
its ``app:`` / ``user:`` keys, ``last_update_time``).

The source is read through ADK's own services: ``SqliteSessionService`` for the file
of that service, ``DatabaseSessionService`` for a SQLAlchemy URL. A SQLite source is
opened read-only (``mode=ro``); nothing is written to any source by this module.

Re-running an import adds nothing, and resumes one that stopped part-way: a session's
stored events must be a prefix of its source events, and only the source events past
that prefix are appended; the state is written only when it differs. A session whose
stored events are not such a prefix (changed since) is left alone and reported.

google-adk is imported here, so this module is imported only by the command that uses
it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from ..adapters.adk import AgentSessionService
from ..errors import AgentSessionError, ValidationError
from ..service import SessionManager

__all__ = ["AdkImportReport", "import_google_adk", "list_source", "open_source"]


def open_source(source: str) -> DatabaseSessionService | SqliteSessionService:
    """ADK's own service over ``source``, reading a SQLite file read-only.

    Args:
        source: a SQLAlchemy URL (``scheme://...``; ``sqlite+aiosqlite:///path`` is
            opened with ``mode=ro``), or the path of a ``SqliteSessionService`` file.

    Raises:
        ValidationError: a path that is not a file.
    """
    if "://" in source:
        scheme, _, rest = source.partition(":///")
        if scheme in ("sqlite", "sqlite+aiosqlite") and rest and "?" not in rest:
            path = Path(rest).resolve()
            source = f"sqlite+aiosqlite:///file:{quote(str(path))}?mode=ro&uri=true"
        return DatabaseSessionService(source)
    file = Path(source)
    if not file.is_file():
        raise ValidationError(f"no such database file: {file}", field="path")
    return SqliteSessionService(f"sqlite:///{file.resolve()}?mode=ro")


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


async def list_source(source: BaseSessionService, apps: Sequence[str]) -> list[Session]:
    """Every session of ``apps`` in the source (without events), app by app."""
    found: list[Session] = []
    for app in apps:
        found += (await source.list_sessions(app_name=app)).sessions
    return found


async def import_google_adk(
    manager: SessionManager,
    source: BaseSessionService,
    sessions: Sequence[Session],
    *,
    advance: Callable[[int], None] | None = None,
) -> AdkImportReport:
    """Import ``sessions`` (from :func:`list_source`) of ``source`` (see the module
    docstring); re-running adds nothing. Each keeps its app name, user id and session
    id. A session that fails (an id or event the store refuses, a stored history that
    diverged) is reported in ``failed`` and the others go on.

    Args:
        advance: called with 1 after each session (for a progress bar).

    Returns:
        The counts, and the sessions not imported with why. One source session is
        held in memory at a time.
    """
    report = AdkImportReport()
    target = AgentSessionService(manager)
    try:
        for brief in sessions:
            report.sessions += 1
            try:
                await _import_one(source, target, brief, report)
            except AgentSessionError as exc:
                report.failed.append((brief.app_name, brief.user_id, brief.id, exc.message))
            if advance is not None:
                advance(1)
    finally:
        target.close()
    return report


async def _import_one(
    source: BaseSessionService,
    target: AgentSessionService,
    brief: Session,
    report: AdkImportReport,
) -> None:
    """Bring one source session up to date (the module docstring has the rules).

    Raises:
        ValidationError: its stored events are not a prefix of the source's.
        AgentSessionError: as the store raises.
    """
    key: dict[str, Any] = {
        "app_name": brief.app_name, "user_id": brief.user_id, "session_id": brief.id
    }
    full = await source.get_session(**key)
    if full is None:
        return  # deleted since it was listed
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
