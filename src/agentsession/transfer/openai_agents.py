"""Import an openai-agents ``SQLiteSession`` database: every openai-agents session becomes
one session of ours, stored exactly as the openai-agents adapter stores it.

The source is only read: no write goes to it and no file is created beside it (see
:class:`~.sqlitefile.ReadOnlyDatabase`). Each source session is the session keyed by
its ``session_id`` under ``(user_id, agent)``
(:meth:`~agentsession.SessionManager.open_session`); each item one message
(:func:`~agentsession.adapters.openai_agents.message_of_item`), so the adapter reads
the session on as if it had written it; each ``function_call`` answered by a
``function_call_output`` one tool call in tool history (``provider_call_id`` = its
``call_id``).

Re-running an import adds nothing, and resumes one that stopped part-way, without
relying on idempotency keys (they expire): a session's stored items must be a prefix of
its source items, and only the source items past that prefix are appended (nothing,
once it is complete, or once the adapter has added more); a tool call's own id is
derived from the source row of its ``function_call`` (``openai-agents:<row id>``), and
calls already recorded are skipped. A session whose stored items are not such a prefix
(changed since) is left alone and reported.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..adapters.openai_agents import message_of_item
from ..errors import AgentSessionError, ImportSourceError, ValidationError
from ..service import Limits, SessionManager
from ..service.validation import check_message
from .sourcecheck import at_row, column, json_text, scan, unreadable, utc_text
from .sqlitefile import ReadOnlyDatabase, require_file

__all__ = ["ImportReport", "OpenAIAgentsSource", "import_openai_agents"]

#: A table name we put into SQL text: a plain identifier, nothing else.
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: Tool names and provider call ids the tool history takes.
_LABEL = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_NOT_OURS = "is not an openai-agents SQLiteSession database"
#: The columns read, and the SQLite classes each may hold (``SQLiteSession`` writes
#: text; a ``message_data`` it skips, NULL or not JSON, is skipped here too).
_SESSION_COLUMNS = (column("session_id", "text"), column("created_at", "text"))
_MESSAGE_COLUMNS = (
    column("id", "integer"),
    column("session_id", "text"),
    column("message_data", "text", "blob", "null"),
    column("created_at", "text"),
)


@dataclass(frozen=True)
class Row:
    """One stored item of a source session: its row id, time and the item."""

    row_id: int
    created_at: datetime
    item: dict[str, Any]


class OpenAIAgentsSource:
    """An openai-agents ``SQLiteSession`` database, opened read-only.

    Args:
        path: the database file.
        sessions_table, messages_table: its table names (``SQLiteSession``'s defaults).

    Raises:
        ValidationError: a table name that is not a plain identifier.
        ImportSourceError: a file that is not there or cannot be opened for reading
            ("cannot open ..."); a file that is not such a database ("... is not an
            openai-agents ...").
    """

    def __init__(
        self,
        path: str | Path,
        *,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
    ) -> None:
        for name, value in (("sessions_table", sessions_table), ("messages_table", messages_table)):
            if not _TABLE.fullmatch(value):
                raise ValidationError(f"{name} must be a plain SQL identifier", field=name)
        file = Path(path)
        self.name = str(file)
        require_file(file, "path")
        self._sessions, self._messages = sessions_table, messages_table
        try:
            self._file = ReadOnlyDatabase(file)
        except (sqlite3.OperationalError, OSError) as exc:
            message = f"cannot open {file} for reading ({exc})"
            raise ImportSourceError(message, source=self.name) from None
        except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
            raise ImportSourceError(f"{file} {_NOT_OURS} ({exc})", source=self.name) from None
        try:
            self._db = self._file.connection
            self._db.execute(f"SELECT session_id FROM {sessions_table} LIMIT 1").fetchall()
            self._db.execute(
                f"SELECT id, session_id, message_data, created_at FROM {messages_table} LIMIT 1"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ImportSourceError(f"{file} {_NOT_OURS} ({exc})", source=self.name) from None

    def check(self, limits: Limits | None = None) -> None:
        """Read every row of both tables once, as the import reads them, so that a
        malformed source is refused before anything is written.

        Args:
            limits: the limits of the store imported into
                (``SessionManager.limits``): each item is checked as the message it
                becomes, so that an item the store refuses (over
                ``limits.max_message_bytes``) stops the import before any write,
                instead of leaving its session half imported. None: no such check.

        Raises:
            ImportSourceError: a value of the wrong type (``id`` not an integer, a
                ``session_id`` that is not text, ``created_at`` not a time...), text
                that is not UTF-8, a ``message_data`` nesting deeper than a stored
                value may, an item the store would refuse as a message (too large),
                or a file that cannot be read to its end. It names the source row
                (``agent_messages rowid N``).
        """
        for label, values in scan(self._db, self.name, self._sessions, _SESSION_COLUMNS):
            with at_row(self.name, label):
                utc_text(values["created_at"], field="created_at")
        for label, values in scan(self._db, self.name, self._messages, _MESSAGE_COLUMNS):
            row = self._row(label, values)
            if row is not None and limits is not None:
                with at_row(self.name, label):
                    check_message(message_of_item(row.item, "message_data"), "message_data", limits)

    def session_ids(self) -> list[str]:
        """Every source session id, in the order they were created: those of the
        sessions table and those of messages without a row there (``SQLiteSession``
        reads them all the same), the latter dated by their first message.

        Raises:
            ImportSourceError: the file cannot be read.
        """
        try:
            rows = self._db.execute(
                f"SELECT session_id FROM (SELECT session_id, created_at FROM {self._sessions} "
                f"UNION ALL SELECT session_id, MIN(created_at) FROM {self._messages} "
                f"WHERE session_id NOT IN (SELECT session_id FROM {self._sessions}) "
                "GROUP BY session_id) ORDER BY created_at, session_id"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise unreadable(self.name, exc) from None
        return [str(r[0]) for r in rows]

    def item_count(self) -> int:
        """How many items the database holds, in all sessions.

        Raises:
            ImportSourceError: the file cannot be read.
        """
        try:
            row = self._db.execute(f"SELECT COUNT(*) FROM {self._messages}").fetchone()
        except sqlite3.DatabaseError as exc:
            raise unreadable(self.name, exc) from None
        return int(row[0])

    def rows(self, session_id: str) -> tuple[list[Row], int]:
        """A session's items in order, and how many rows were not a JSON object
        (skipped, as ``SQLiteSession`` skips them).

        Raises:
            ImportSourceError: as :meth:`check` (the file changed since).
        """
        rows: list[Row] = []
        bad = 0
        found = scan(
            self._db,
            self.name,
            self._messages,
            _MESSAGE_COLUMNS,
            where="session_id = ?",
            params=(session_id,),
            order="id",
        )
        for label, values in found:
            row = self._row(label, values)
            if row is None:
                bad += 1
            else:
                rows.append(row)
        return rows, bad

    def _row(self, label: str, values: dict[str, Any]) -> Row | None:
        """The item of a checked row, or None for a row ``SQLiteSession`` skips (no
        text, text that is not JSON, JSON that is not an object).

        Raises:
            ImportSourceError: text that is not UTF-8, nesting deeper than a stored
                value may, or a ``created_at`` that is not a time.
        """
        with at_row(self.name, label):
            created = utc_text(values["created_at"], field="created_at")
            data = values["message_data"]
            if data is None:
                return None
            text = json_text(data, field="message_data")
        try:
            item = json.loads(text)
        except ValueError:
            return None
        return Row(values["id"], created, item) if isinstance(item, dict) else None

    def close(self) -> None:
        """Close the connection (and remove the private copy, if one was read)."""
        self._file.close()


@dataclass
class ImportReport:
    """What :func:`import_openai_agents` did.

    Attributes:
        sessions: source sessions seen; created: of them, sessions newly created here.
        messages: items appended; tool_calls: tool calls recorded.
        bad_rows: source rows skipped for not holding a JSON object.
        skipped_calls: call/output pairs not recorded (a tool name the tool history
            cannot take).
        failed: ``(source session id, reason)`` of sessions not imported.
    """

    sessions: int = 0
    created: int = 0
    messages: int = 0
    tool_calls: int = 0
    bad_rows: int = 0
    skipped_calls: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)


def import_openai_agents(
    manager: SessionManager,
    source: OpenAIAgentsSource,
    *,
    user_id: str,
    agent: str = "openai-agents",
    advance: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import every session of ``source`` (see the module docstring); re-running adds
    nothing. An item the store would refuse (too large) stops the import before any
    write, naming its source row. A session that fails (a session id the store refuses
    as external key, a stored history that diverged, the store failing) is reported in
    ``failed`` and the others go on.

    Args:
        user_id: the owner of the imported sessions; agent: the agent they are filed under.
        advance: called with the number of source items done after each session (for a
            progress bar; its total is ``source.item_count()``).

    Returns:
        The counts, and the sessions not imported with why. One source session's
        items are held in memory at a time.

    Raises:
        ImportSourceError: a malformed source, or an item the store would refuse as
            a message (:meth:`OpenAIAgentsSource.check` with ``manager.limits``, run
            first: nothing is written then). Every other AgentSessionError (a
            refusal, StoreError, StoreBusy) is one session's: it goes to ``failed``
            and the others go on.
    """
    source.check(manager.limits)
    report = ImportReport()
    for source_id in source.session_ids():
        rows, bad = source.rows(source_id)
        report.sessions += 1
        report.bad_rows += bad
        try:
            _import_one(manager, source_id, rows, user_id, agent, report)
        except AgentSessionError as exc:
            report.failed.append((source_id, exc.message))
        if advance is not None:
            advance(len(rows) + bad)
    return report


def _import_one(
    manager: SessionManager,
    source_id: str,
    rows: list[Row],
    user_id: str,
    agent: str,
    report: ImportReport,
) -> None:
    """Bring one source session up to date (the module docstring has the rules).

    Raises:
        ValidationError: its stored items are not a prefix of the source's.
        AgentSessionError: as the manager raises.
    """
    session, created = manager.open_session(user_id=user_id, agent=agent, external_key=source_id)
    report.created += int(created)
    scope: dict[str, Any] = {"session_id": session.session_id, "user_id": user_id}
    stored = 0
    for item in _stored_items(manager, scope):
        if stored == len(rows):
            break  # the adapter added items after the import: the source is a prefix
        if item != rows[stored].item:
            raise ValidationError(
                f"its stored history differs from the source at item {stored + 1}; left "
                "alone (delete the session to import it again)",
                field="session_id",
            )
        stored += 1
    new = [message_of_item(r.item, f"row {r.row_id}") for r in rows[stored:]]
    size = manager.limits.max_batch_messages
    for start in range(0, len(new), size):
        manager.append_messages(**scope, messages=new[start : start + size])
        report.messages += len(new[start : start + size])
    _record_calls(manager, scope, rows, report)


def _stored_items(manager: SessionManager, scope: dict[str, Any]) -> Iterator[Any]:
    """The ``item`` of each stored message in seq order (None for a message without)."""
    after: int | None = 0
    while after is not None:
        page = manager.get_messages(
            **scope, after=after, limit=manager.limits.max_page_size, align_tool_calls=False
        )
        for message in page.items:
            yield message.payload().get("item")
        after = page.items[-1].seq if page.items and page.next_cursor else None


def _record_calls(
    manager: SessionManager, scope: dict[str, Any], rows: list[Row], report: ImportReport
) -> None:
    """Record each answered ``function_call`` of ``rows`` not recorded yet."""
    known: set[str] = set()
    after: int | None = 0
    while after is not None:
        page = manager.get_tool_history(**scope, after=after, limit=manager.limits.max_page_size)
        known.update(c.call_id for c in page.items)
        after = page.items[-1].seq if page.items and page.next_cursor else None
    for row, answer in _answered(rows):
        item = row.item
        call_id = f"openai-agents:{row.row_id}"
        if call_id in known:
            continue
        name, provider = item.get("name"), item.get("call_id")
        if not (isinstance(name, str) and _LABEL.fullmatch(name)):
            report.skipped_calls += 1
            continue
        manager.record_tool_call(
            **scope,
            tool=name,
            arguments=_arguments(item.get("arguments")),
            result=answer.item.get("output"),
            started_at=row.created_at,
            ended_at=answer.created_at,
            call_id=call_id,
            provider_call_id=provider if _LABEL.fullmatch(str(provider)) else None,
        )
        report.tool_calls += 1


def _answered(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Each ``function_call`` row with the ``function_call_output`` row answering it,
    in call order. An output answers the oldest call of its ``call_id`` before it not
    answered yet (a reused ``call_id`` pairs each call with its own output)."""
    waiting: dict[str, deque[Row]] = {}
    pairs: list[tuple[Row, Row]] = []
    for row in rows:
        kind, provider = row.item.get("type"), row.item.get("call_id")
        if not isinstance(provider, str):
            continue
        if kind == "function_call":
            waiting.setdefault(provider, deque()).append(row)
        elif kind == "function_call_output" and waiting.get(provider):
            pairs.append((waiting[provider].popleft(), row))
    return sorted(pairs, key=lambda pair: pair[0].row_id)


def _arguments(text: Any) -> dict[str, Any]:
    """A call's arguments as the JSON object they encode; anything else (not text, not
    JSON, nesting deeper than a stored value may, not an object) under
    ``{"arguments": text}``."""
    try:
        value = json.loads(json_text(text, field="arguments")) if isinstance(text, str) else None
    except (ValidationError, ValueError):  # too deep to parse, or not JSON
        value = None
    return value if isinstance(value, dict) else {"arguments": text}
