"""agentsession's session export: one session as JSON Lines, and back (docs/export.md).

:func:`export_session` yields one JSON object per line, each with a ``"type"``:
``session`` (first, with ``format_version``), ``working_memory``, then every
``message`` in seq order, every ``tool_call`` and every ``run`` (with its ``steps``),
each read page by page, so memory stays constant however long the session is (but a
run's steps, which come in one line). :func:`import_session` creates a new session from
such lines, through the manager's ordinary writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from ..errors import SessionExists, ValidationError
from ..models import Message, Run, RunStatus, Session, SessionStatus
from ..service import SessionManager

__all__ = ["FORMAT_VERSION", "ImportedSession", "export_session", "import_session"]

#: The version of the line format; an import refuses any other.
FORMAT_VERSION = 1

#: Run statuses ``finish_run`` sets; others are imported as noted in docs/export.md.
_FINISHED = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}


def export_session(
    manager: SessionManager, *, session_id: str, user_id: str, admin: bool = False
) -> Iterator[dict[str, Any]]:
    """The lines of one session's export, in order (JSON-ready dicts).

    Args:
        session_id: the session to export; user_id, admin: the caller, as for reads.

    Raises:
        SessionNotFound: no such session of this user (raised before the first line).
    """
    session = manager.get_session(session_id=session_id, user_id=user_id, admin=admin)
    yield {
        "type": "session",
        "format_version": FORMAT_VERSION,
        "session": session.model_dump(mode="json"),
    }
    memory = manager.get_working_memory(session_id=session_id, user_id=user_id, admin=admin)
    yield {"type": "working_memory", "working_memory": _dump(memory)}
    scope: dict[str, Any] = {"session_id": session_id, "user_id": user_id, "admin": admin}
    size = manager.limits.max_page_size
    after: int | None = 0
    while after is not None:
        page = manager.get_messages(**scope, after=after, limit=size, align_tool_calls=False)
        for message in page.items:
            yield {"type": "message", "message": _dump(message, exclude_unset=True)}
        after = page.items[-1].seq if page.items and page.next_cursor else None
    after = 0
    while after is not None:
        calls = manager.get_tool_history(**scope, after=after, limit=size)
        for call in calls.items:
            yield {"type": "tool_call", "tool_call": _dump(call)}
        after = calls.items[-1].seq if calls.items and calls.next_cursor else None
    after = 0
    while after is not None:
        runs = manager.list_runs(**scope, after=after, limit=size)
        for run in runs.items:
            yield {"type": "run", "run": {**_dump(run), "steps": _steps(manager, scope, run)}}
        after = runs.items[-1].seq if runs.items and runs.next_cursor else None


def _steps(manager: SessionManager, scope: dict[str, Any], run: Run) -> list[dict[str, Any]]:
    """Every step of ``run``, oldest first, as JSON-ready dicts."""
    steps: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        page = manager.list_run_steps(
            **scope, run_id=run.run_id, after=after, limit=manager.limits.max_page_size
        )
        steps.extend(_dump(step) for step in page.items)
        if not page.items or page.next_cursor is None:
            return steps
        after = page.items[-1].index


def _dump(record: BaseModel, *, exclude_unset: bool = False) -> dict[str, Any]:
    """A record as JSON-ready dict, without the answer-only ``session_version`` (and a
    run's ``steps``, which come from their own listing)."""
    data: dict[str, Any] = record.model_dump(
        mode="json", exclude={"session_version", "steps"}, exclude_unset=exclude_unset
    )
    return data


class ImportedSession:
    """What :func:`import_session` made.

    Attributes:
        session: the new session, as it stands after the import.
        key_taken: the export's ``external_key`` was in use, so the new session has none.
        counts: how many lines of each type were imported, e.g. ``{"message": 12}``.
    """

    def __init__(self, session: Session, key_taken: bool, counts: dict[str, int]) -> None:
        self.session, self.key_taken, self.counts = session, key_taken, counts


def import_session(
    manager: SessionManager, lines: Iterable[Any], *, user_id: str
) -> ImportedSession:
    """Create a new session, owned by ``user_id``, from the lines of an export.

    The session gets a new id, the export's agent, title, metadata, TTL, working memory
    and external key (left out when another session of the user and agent has it);
    messages are appended as they were appended (in batches), tool calls recorded with
    their ids, times and results, runs replayed with their steps; last, a CLOSED or
    EXPIRED session is closed or expired again. Links from messages and tool calls to
    runs are dropped (runs get new ids, and a link needs a RUNNING run).

    Args:
        lines: the export's lines as parsed JSON, in file order (``session`` first).
        user_id: the owner of the new session.

    Returns:
        The new session (after the import), whether its key was taken, and the counts.

    Raises:
        ValidationError: a line out of place, of an unknown type or format version,
            or a record the manager refuses (the session made so far stays; the error
            names the line).
    """
    it = iter(lines)
    head = _record(next(it, None), "session", 1)
    session, key_taken = _create(manager, head, user_id)
    writer = _Writer(manager, session.session_id, user_id)
    for number, line in enumerate(it, start=2):
        try:
            writer.add(line, number)
        except ValidationError as exc:
            if exc.field is not None and exc.field.startswith("line "):
                raise
            raise ValidationError(f"line {number}: {exc.message}", field=f"line {number}") from exc
        except ValueError as exc:  # a field of the wrong shape (pydantic, an enum)
            raise ValidationError(f"line {number}: {exc}", field=f"line {number}") from exc
    writer.flush()
    status = SessionStatus(head.get("status", "ACTIVE"))
    scope: dict[str, Any] = {"session_id": session.session_id, "user_id": user_id}
    if status is SessionStatus.CLOSED:
        manager.close_session(**scope, reason=head.get("status_reason"))
    elif status is SessionStatus.EXPIRED:
        manager.expire_session(**scope, reason=head.get("status_reason"))
    return ImportedSession(manager.get_session(**scope), key_taken, writer.counts)


def _record(line: Any, kind: str, number: int) -> dict[str, Any]:
    """The record of a line of type ``kind`` (its object under the key ``kind``).

    Raises:
        ValidationError: the line is not ``{"type": kind, kind: {...}}``, or a session
            line of another format version.
    """
    field = f"line {number}"
    if (
        not isinstance(line, dict)
        or line.get("type") != kind
        or not isinstance(line.get(kind), dict)
    ):
        raise ValidationError(
            f'{field}: expected {{"type": "{kind}", "{kind}": {{...}}}}', field=field
        )
    if kind == "session" and line.get("format_version") != FORMAT_VERSION:
        raise ValidationError(
            f"{field}: unsupported format_version {line.get('format_version')!r} (this "
            f"version reads {FORMAT_VERSION})",
            field=field,
        )
    record: dict[str, Any] = line[kind]
    return record


def _create(manager: SessionManager, head: dict[str, Any], user_id: str) -> tuple[Session, bool]:
    """The new session of an export's session record, and whether its key was taken."""
    fields = {
        "user_id": user_id,
        "agent": head.get("agent", "default"),
        "title": head.get("title"),
        "metadata": head.get("metadata") or None,
        "ttl_seconds": head.get("ttl_seconds"),
    }
    key = head.get("external_key")
    if key is not None:
        try:
            return manager.create_session(**fields, external_key=key), False
        except SessionExists:
            pass
    return manager.create_session(**fields), key is not None


class _Writer:
    """The lines after the session line, written in order; messages in batches."""

    def __init__(self, manager: SessionManager, session_id: str, user_id: str) -> None:
        self._manager = manager
        self._scope: dict[str, Any] = {"session_id": session_id, "user_id": user_id}
        self._batch: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}

    def add(self, line: Any, number: int) -> None:
        """Write line ``number`` (a message may wait for its batch).

        Raises:
            ValidationError: a line that is not a record of a known type.
        """
        kind = line.get("type") if isinstance(line, dict) else None
        if kind not in ("working_memory", "message", "tool_call", "run"):
            raise ValidationError(
                f"line {number}: the type must be working_memory, message, tool_call or "
                f"run, not {kind!r}",
                field=f"line {number}",
            )
        record = _record(line, kind, number)
        if kind != "message":
            self.flush()
        if kind == "working_memory":
            if record.get("data"):
                self._manager.update_working_memory(**self._scope, data=record["data"])
        elif kind == "message":
            self._batch.append(_payload(record))
            if len(self._batch) >= self._manager.limits.max_batch_messages:
                self.flush()
        elif kind == "tool_call":
            self._tool_call(record)
        else:
            self._run(record)
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def flush(self) -> None:
        """Append the messages waiting for their batch."""
        if self._batch:
            self._manager.append_messages(**self._scope, messages=self._batch)
            self._batch = []

    def _tool_call(self, call: dict[str, Any]) -> None:
        self._manager.record_tool_call(
            **self._scope, tool=str(call.get("tool")), arguments=call.get("arguments"),
            result=call.get("result"), status=call.get("status", "ok"), error=call.get("error"),
            started_at=_time(call.get("started_at")), ended_at=_time(call.get("ended_at")),
            call_id=call.get("call_id"), provider_call_id=call.get("provider_call_id"),
        )  # fmt: skip

    def _run(self, line: dict[str, Any]) -> None:
        run = self._manager.start_run(
            **self._scope, input=line.get("input"), metadata=line.get("metadata") or None
        )
        for step in line.get("steps") or []:
            self._manager.add_run_step(
                **self._scope, run_id=run.run_id, kind=step.get("kind"), name=step.get("name"),
                input=step.get("input"), output=step.get("output"),
                status=step.get("status", "ok"), error=step.get("error"),
                started_at=_time(step.get("started_at")), ended_at=_time(step.get("ended_at")),
            )  # fmt: skip
        status = RunStatus(line.get("status", "RUNNING"))
        if not status.is_final:
            return
        finished = status in _FINISHED
        self._manager.finish_run(
            **self._scope, run_id=run.run_id,
            status=status if finished else RunStatus.CANCELLED,
            error=line.get("error") if finished else line.get("error") or "interrupted",
            output=line.get("output"), usage=line.get("usage") or None,
        )  # fmt: skip


def _payload(record: dict[str, Any]) -> dict[str, Any]:
    """The message to append for a message record: as it was appended, without the
    store's fields and without its link to a run."""
    payload = Message.model_validate(record).payload()
    payload.pop("run_id", None)
    return payload


def _time(value: Any) -> datetime | None:
    """An ISO 8601 time of a record, or None.

    Raises:
        ValidationError: not an ISO 8601 time.
    """
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValidationError(f"not an ISO 8601 time: {value!r}", field="time") from None
