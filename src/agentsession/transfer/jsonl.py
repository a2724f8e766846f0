"""agentsession's session export: one session as JSON Lines, and back (docs/export.md).

:func:`export_session` yields one JSON object per line, each with a ``"type"``:
``session`` (first, with ``format_version``), ``working_memory``, then every
``message`` in seq order, every ``tool_call``, every ``run`` (with its ``steps``) and
every ``record`` (the session's per-session records), every ``summary`` (compaction)
and last an ``end`` line with the count of each type of line before it; each is read
page by page, so memory stays constant however long the session is (but a run's
steps, which come in one line).
:func:`import_session` creates a new session from such lines, through the manager's ordinary writes.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from enum import Enum
from typing import IO, Any, TypeVar

import pydantic
from pydantic import BaseModel

from ..adapters.backend import RecordBatch
from ..errors import AgentSessionError, SessionExists, ValidationError
from ..jsonvalues import MAX_DEPTH, text_depth
from ..models import RecordWrite, Run, RunStatus, Session, SessionStatus, WorkingMemory
from ..service import SessionManager
from ..usage import KINDS
from .sourcecheck import at_row

__all__ = [
    "FORMAT_VERSION",
    "LINE_LEVELS",
    "ImportedSession",
    "export_session",
    "import_session",
    "read_lines",
]

#: The version of the line format exports write (2 added ``record`` lines, 3 ``summary``
#: lines, 4 ``memory`` lines: the working-memory history, 5 the ``end`` line, so a file
#: cut at a line boundary is told from a whole one; every export since has one).
FORMAT_VERSION = 5
#: The versions an import reads: an older file is a newer one without the newer lines
#: (one of version 4 or older has no end line, so a cut in it cannot be told).
_READS = (1, 2, 3, 4, 5)
#: The first version whose files must end with an ``end`` line.
_ENDS = 5

#: The line types after the session line.
_KINDS = ("working_memory", "memory", "message", "tool_call", "run", "record", "summary")
#: Run statuses ``finish_run`` sets; others are imported as noted in docs/export.md.
_FINISHED = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}
_E = TypeVar("_E", bound=Enum)
#: A message record's fields the store sets, and its link to a run: not appended.
_NOT_APPENDED = ("message_id", "session_id", "seq", "created_at", "session_version", "run_id")


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
    scope: dict[str, Any] = {"session_id": session_id, "user_id": user_id, "admin": admin}
    yield {
        "type": "session",
        "format_version": FORMAT_VERSION,
        "session": session.model_dump(mode="json"),
    }
    counts: dict[str, int] = {}
    for line in _body(manager, scope, session.message_count):
        counts[line["type"]] = counts.get(line["type"], 0) + 1
        yield line
    yield {"type": "end", "end": {"counts": counts}}


def _body(manager: SessionManager, scope: dict[str, Any], count: int) -> Iterator[dict[str, Any]]:
    """The lines of an export between its session line and its end line, in order;
    ``count`` is the session's message count."""
    history = _memory_history(manager, scope, count)
    memory = manager.get_working_memory(**scope)
    yield {"type": "working_memory", "working_memory": _dump(memory)}
    size = manager.limits.max_page_size
    after: int | None = 0
    while after is not None:
        page = manager.get_messages(**scope, after=after, limit=size, align_tool_calls=False)
        for message in page.items:
            while history and history[0][0] < message.seq:
                yield _memory_line(*history.pop(0))
            yield {"type": "message", "message": _dump(message, exclude_unset=True)}
        after = page.items[-1].seq if page.items and page.next_cursor else None
    yield from (_memory_line(*row) for row in history)
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
    for namespace in _namespaces(manager, scope):
        key: str | None = None
        while True:
            records = manager.list_records(**scope, namespace=namespace, after=key, limit=size)
            for record in records:
                yield {
                    "type": "record",
                    "record": {
                        "namespace": record.namespace,
                        "key": record.key,
                        "data": base64.b64encode(record.data).decode("ascii"),
                        "meta": record.meta,
                    },
                }
            if len(records) < size:
                break
            key = records[-1].key
    number: int | None = None
    while True:
        summaries = manager.list_summaries(**scope, after=number, limit=size)
        for summary in summaries:
            yield {"type": "summary", "summary": _dump(summary)}
        if len(summaries) < size:
            break
        number = summaries[-1].number


def _memory_history(
    manager: SessionManager, scope: dict[str, Any], count: int
) -> list[tuple[int, WorkingMemory]]:
    """The seqs at which the memory as of them changed, with that memory, ascending:
    ``(n, memory as of n)`` for each ``n`` whose memory differs in version from that
    of ``n - 1`` (for ``n = 0``: from never written). The version as of ``n`` never
    decreases with ``n``, so a range whose ends agree holds no change: a bisection
    costs O(changes x log(message_count)) reads, not one per message."""

    def at(n: int) -> WorkingMemory:
        return manager.get_working_memory(**scope, at_seq=n)

    found: list[tuple[int, WorkingMemory]] = []
    first, last = at(0), at(count)
    if first.version:
        found.append((0, first))
    # (lo, hi) with the memory at each end; depth-first, lower half first: ascending.
    todo = [(0, first, count, last)]
    while todo:
        lo, low, hi, high = todo.pop()
        if low.version == high.version:
            continue
        if hi == lo + 1:
            found.append((hi, high))
            continue
        mid = (lo + hi) // 2
        middle = at(mid)
        todo += [(mid, middle, hi, high), (lo, low, mid, middle)]
    return found


def _memory_line(at_seq: int, memory: WorkingMemory) -> dict[str, Any]:
    row = _dump(memory)
    return {"type": "memory", "memory": {"at_seq": at_seq, **row}}


def _namespaces(manager: SessionManager, scope: dict[str, Any]) -> list[str]:
    """The session's record namespaces in order, from the first and the last page of
    the listing of every namespace (the store lists records by ``(namespace, key)`` and
    has no namespace cursor): a full first page holds every namespace up to its last
    one, a full last page every namespace from its first one.

    Raises:
        ValidationError: both pages are full and leave a range of namespaces between
            them unread (over ``2 * limits.max_page_size`` records in 3+ namespaces).
    """
    size = manager.limits.max_page_size
    first = manager.list_records(**scope, limit=size)
    found = {record.namespace for record in first}
    if len(first) == size:
        last = manager.list_records(**scope, limit=size, descending=True)
        found |= {record.namespace for record in last}
        if len(last) == size and last[-1].namespace > first[-1].namespace:
            raise ValidationError(
                "cannot export the records: too many in too many namespaces to list "
                f"(namespaces between {first[-1].namespace!r} and {last[-1].namespace!r})"
            )
    return sorted(found)


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


def read_lines(f: IO[bytes], *, source: str | None = None) -> Iterator[tuple[int, Any]]:
    """The JSON value of each non-blank line of an export, with its line number in the
    file (blank lines counted), ready for :func:`import_session`.

    Args:
        f: the file, opened in binary (it must be UTF-8).
        source: the file's name in errors (default: ``f.name``, else ``-``).

    Raises:
        ImportSourceError: a line that is not UTF-8, nests deeper than
            :data:`LINE_LEVELS`, or is not JSON (``<source>: line N: ...``).
    """
    name = source if source is not None else str(getattr(f, "name", "-"))
    for number, raw in enumerate(f, start=1):
        with at_row(name, f"line {number}"):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValidationError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
            if not text.strip():
                continue
            if text_depth(text) > LINE_LEVELS + 1:
                raise ValidationError(
                    f"nests deeper than {LINE_LEVELS} levels (a value in it may nest "
                    f"{MAX_DEPTH}, the most a store holds)"
                )
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ValidationError(f"not JSON ({str(exc)[:200]})") from None
        yield number, value


def import_session(
    manager: SessionManager,
    lines: Iterable[tuple[int, Any]],
    *,
    user_id: str,
    source: str = "the export",
) -> ImportedSession:
    """Create a new session, owned by ``user_id``, from the lines of an export: all of
    them, or nothing.

    The session gets a new id, the export's agent, title, metadata, TTL, working memory
    and external key (left out when another session of the user and agent has it);
    messages are appended as they were appended (in batches), tool calls recorded with
    their ids, times and results, runs replayed with their steps; last, a CLOSED or
    EXPIRED session is closed or expired again. Links from messages and tool calls to
    runs are dropped (runs get new ids, and a link needs a RUNNING run).

    Args:
        lines: ``(line number, parsed JSON value)`` pairs in file order, ``session``
            first (:func:`read_lines`, or ``enumerate(values, start=1)``).
        user_id: the owner of the new session.
        source: the file's name in errors.

    Returns:
        The new session (after the import), whether its key was taken, and the counts.

    Raises:
        ImportSourceError: its message starts ``<source>: line N:`` (``lines N-M:``
            for a batch of messages): no lines, a line out of place, of an unknown
            type or format version, a field of the wrong shape, a file of version 5
            or later that ends before its end line or whose end line counts other
            lines than it holds (a file cut at a line boundary), or a write the
            manager refuses (its error chained as ``__cause__``). The session made
            so far is deleted: nothing of the file stays.
        StoreError: the store failed (the session made so far is deleted too, when
            the store lets it).
    """
    it = iter(lines)
    first_number, first = next(it, (1, _EMPTY))
    with _line(source, f"line {first_number}"):
        if first is _EMPTY:
            raise ValidationError("no lines: an export starts with its session line")
        head = _record(first, "session")
        version: int = first["format_version"]  # one of _READS: checked by _record
        status = _enum(SessionStatus, head.get("status", "ACTIVE"), "session.status")
        session, key_taken = _create(manager, head, user_id)
    scope: dict[str, Any] = {"session_id": session.session_id, "user_id": user_id}
    try:
        writer = _Writer(manager, scope, source, head_version=version)
        last = first_number
        for last, line in it:
            with _line(source, f"line {last}"):
                writer.add(line, last)
        with _line(source, f"line {last}"):
            writer.check_end()
        writer.finish()
        with _line(source, f"line {first_number}"):
            if status is SessionStatus.CLOSED:
                manager.close_session(**scope, reason=head.get("status_reason"))
            elif status is SessionStatus.EXPIRED:
                manager.expire_session(**scope, reason=head.get("status_reason"))
        return ImportedSession(manager.get_session(**scope), key_taken, writer.counts)
    except BaseException:
        with suppress(AgentSessionError):  # the store failing too: the import's error
            manager.delete_session(**scope)
        raise


#: The deepest a line of an export nests below itself: a stored value (``MAX_DEPTH``
#: levels below its own) sits at most 4 levels down a line (a run step's input:
#: ``{"run": {"steps": [{"input": ...}]}}``), so every exported value fits.
LINE_LEVELS = MAX_DEPTH + 4
#: What ``next`` answers for lines without any.
_EMPTY: Any = object()


@contextmanager
def _line(source: str, label: str) -> Iterator[None]:
    """Turn what is raised inside into one ImportSourceError naming ``source`` and
    ``label`` (``line N``), once (an inner label wins): a refusal of a check here or
    of the manager, or a pydantic error (its first error). A StoreError passes.

    Raises:
        ImportSourceError: as described; StoreError: as raised.
    """
    with at_row(source, label):
        try:
            yield
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            raise ValidationError(f"{where}: {first['msg']}{more}", field=where) from None


def _enum(kind: type[_E], value: Any, name: str) -> _E:
    """``value`` as a member of ``kind``.

    Raises:
        ValidationError: not one of its values (naming them).
    """
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in kind)
        raise ValidationError(f"{name} must be one of {allowed}, not {value!r}") from None


def _record(line: Any, kind: str) -> dict[str, Any]:
    """The record of a line of type ``kind`` (its object under the key ``kind``).

    Raises:
        ValidationError: the line is not ``{"type": kind, kind: {...}}``, or a session
            line of another format version.
    """
    if (
        not isinstance(line, dict)
        or line.get("type") != kind
        or not isinstance(line.get(kind), dict)
    ):
        raise ValidationError(f'expected {{"type": "{kind}", "{kind}": {{...}}}}')
    if kind == "session" and line.get("format_version") not in _READS:
        raise ValidationError(
            f"unsupported format_version {line.get('format_version')!r} (this "
            f"version reads {' and '.join(map(str, _READS))})"
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

    def __init__(
        self, manager: SessionManager, scope: dict[str, Any], source: str, head_version: int
    ) -> None:
        self._manager = manager
        self._version = head_version
        self._ended = False  # the end line came
        self._scope = scope
        self._source = source
        self._batch: list[dict[str, Any]] = []
        self._batch_lines: list[int] = []
        self._record_lines: list[int] = []  # the lines of the records waiting
        self._records = RecordBatch(self._put, manager.limits)
        # exported summary number -> imported one (a removal of messages may leave gaps)
        self._numbers: dict[int, int] = {}
        self.counts: dict[str, int] = {}
        # The working_memory line's data: written by finish() unless memory lines
        # (the history, which ends with it) came.
        self._current: Any = None
        self._current_line = 0

    def add(self, line: Any, number: int) -> None:
        """Write line ``number`` (a message may wait for its batch).

        Raises:
            ValidationError: a line that is not a record of a known type, or of the
                wrong shape; AgentSessionError: a write the manager refuses.
        """
        kind = line.get("type") if isinstance(line, dict) else None
        if self._ended:
            raise ValidationError("a line after the end line")
        if kind == "end" and self._version >= _ENDS:
            self._end(_record(line, kind))
            return
        if kind not in _KINDS:
            raise ValidationError(f"the type must be {', '.join(_KINDS)}, not {kind!r}")
        record = _record(line, kind)
        if kind == "record":
            write = _record_write(record)
            self._record_lines.append(number)
            self._records.add(write)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            return
        if kind != "message":
            self.flush()
        if kind == "working_memory":
            self._current, self._current_line = record.get("data"), number
        elif kind == "memory":
            self._memory(record)
        elif kind == "message":
            self._batch.append(_payload(record))
            self._batch_lines.append(number)
            if len(self._batch) >= self._manager.limits.max_batch_messages:
                self.flush()
        elif kind == "tool_call":
            self._tool_call(record)
        elif kind == "summary":
            self._summary(record)
        else:
            self._run(record)
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def _end(self, line: dict[str, Any]) -> None:
        """Check the end line's counts against the lines read before it.

        Raises:
            ValidationError: counts that are not an object of counts, or that differ
                from the lines read (naming each type that differs).
        """
        stated = line.get("counts")
        if not (
            isinstance(stated, dict) and all(type(n) is int and n >= 0 for n in stated.values())
        ):
            raise ValidationError("end.counts must be an object of counts", field="end.counts")
        differ = [
            f"{stated.get(kind, 0)} {kind} lines, read {self.counts.get(kind, 0)}"
            for kind in sorted(set(stated) | set(self.counts))
            if stated.get(kind, 0) != self.counts.get(kind, 0)
        ]
        if differ:
            raise ValidationError(
                f"the end line counts other lines than the file holds ({'; '.join(differ)}): "
                "lines are missing or were added"
            )
        self._ended = True

    def check_end(self) -> None:
        """Check that a file of version 5 or later had its end line.

        Raises:
            ValidationError: it ends early (cut at a line boundary), naming what was read.
        """
        if self._version >= _ENDS and not self._ended:
            read = ", ".join(f"{n} {kind}" for kind, n in self.counts.items()) or "nothing"
            raise ValidationError(
                "the file ends early: no end line (an export of format version "
                f"{_ENDS} or later ends with one); read after the session line: {read}"
            )

    def flush(self) -> None:
        """Append the messages waiting for their batch, and put the records waiting
        for theirs.

        Raises:
            ImportSourceError: as the manager refuses, naming ``lines N-M``.
        """
        self._records.flush()
        if self._batch:
            batch = self._batch
            self._batched(
                "messages",
                self._batch_lines,
                lambda: self._manager.append_messages(**self._scope, messages=batch),
            )
            self._batch, self._batch_lines = [], []

    def _batched(self, name: str, lines: list[int], write: Callable[[], Any]) -> Any:
        """``write()``, a batch of the lines ``lines``; a refusal names the line of the
        item it names (its field ``<name>[i]``), else the batch's lines.

        Raises:
            ImportSourceError: as the manager refuses.
        """
        try:
            return write()
        except AgentSessionError as exc:
            index = re.match(rf"{name}\[(\d+)\]", str(exc.context.get("field") or ""))
            first, last = lines[0], lines[-1]
            label = f"line {first}" if first == last else f"lines {first}-{last}"
            if index and int(index[1]) < len(lines):
                label = f"line {lines[int(index[1])]}"
            with _line(self._source, label):
                raise

    def finish(self) -> None:
        """Write what waits: the messages and records of the last batch, and the
        working memory of an export without history (version 3 and older), as of the
        end of its messages.

        Raises:
            ImportSourceError: as the manager refuses, naming the line.
        """
        self.flush()
        if self._current and not self.counts.get("memory"):
            with _line(self._source, f"line {self._current_line}"):
                self._manager.update_working_memory(**self._scope, data=self._current)

    def _memory(self, line: dict[str, Any]) -> None:
        """Write a history row's memory where the export had it: after the messages
        up to its ``at_seq`` (all of them came before it and are appended).

        Raises:
            ValidationError: ``at_seq`` is not the number of messages appended so far.
        """
        appended = self.counts.get("message", 0)
        if line.get("at_seq") != appended:
            raise ValidationError(
                f"memory.at_seq must be {appended} here (the messages before it), "
                f"not {line.get('at_seq')!r}"
            )
        data: Any = line.get("data")  # not an object: the manager refuses it
        self._manager.update_working_memory(**self._scope, data=data)

    def _put(self, records: list[RecordWrite]) -> int:
        """Put one batch of records (the first waiting); answers how many were written.

        Raises:
            ImportSourceError: as the manager refuses, naming the record's line.
        """
        lines, self._record_lines = (
            self._record_lines[: len(records)],
            self._record_lines[len(records) :],
        )
        done = self._batched(
            "records", lines, lambda: self._manager.put_records(**self._scope, records=records)
        )
        return int(done.written)

    def _tool_call(self, call: dict[str, Any]) -> None:
        tool: Any = call.get("tool")  # None or a bad name: the manager refuses it
        self._manager.record_tool_call(
            **self._scope,
            tool=tool,
            arguments=call.get("arguments"),
            result=call.get("result"),
            status=call.get("status", "ok"),
            error=call.get("error"),
            started_at=_time(call.get("started_at")),
            ended_at=_time(call.get("ended_at")),
            call_id=call.get("call_id"),
            provider_call_id=call.get("provider_call_id"),
        )

    def _summary(self, line: dict[str, Any]) -> None:
        """Add the summary as exported: they come back in the same order, numbered
        1, 2, 3... (an export's gaps, left by a removal of messages, close), and
        ``supersedes`` names the same summary as before, or None where that one was
        removed with its messages; ``created_at`` is the import's."""
        supersedes, number = line.get("supersedes"), line.get("number")
        if type(supersedes) is int and type(number) is int and supersedes < number:
            supersedes = self._numbers.get(supersedes)
        added = self._manager.add_summary(
            **self._scope,
            text=line.get("text", ""),
            from_seq=line.get("from_seq", 0),
            to_seq=line.get("to_seq", 0),
            author=line.get("author"),
            model=line.get("model"),
            summary_tokens=line.get("summary_tokens"),
            replaced_tokens=line.get("replaced_tokens"),
            tokenizer=_CountedBy(line.get("tokenizer")),
            supersedes=supersedes,
        )
        if type(number) is int:
            self._numbers[number] = added.number

    def _run(self, line: dict[str, Any]) -> None:
        """Start, step and finish a run like the exported one; its status and steps
        are checked before the run starts."""
        steps = line.get("steps") or []
        if not (isinstance(steps, list) and all(isinstance(step, dict) for step in steps)):
            raise ValidationError("run.steps must be a list of objects")
        status = _enum(RunStatus, line.get("status", "RUNNING"), "run.status")
        run = self._manager.start_run(
            **self._scope,
            input=line.get("input"),
            metadata=line.get("metadata") or None,
            lease_seconds=line.get("lease_seconds"),
        )
        for step in steps:
            self._manager.add_run_step(
                **self._scope,
                run_id=run.run_id,
                kind=step.get("kind"),
                name=step.get("name"),
                input=step.get("input"),
                output=step.get("output"),
                status=step.get("status", "ok"),
                error=step.get("error"),
                started_at=_time(step.get("started_at")),
                ended_at=_time(step.get("ended_at")),
            )
        if not status.is_final:
            return
        finished = status in _FINISHED
        self._manager.finish_run(
            **self._scope,
            run_id=run.run_id,
            status=status if finished else RunStatus.CANCELLED,
            error=line.get("error") if finished else line.get("error") or "interrupted",
            output=line.get("output"),
            **_usage_of(line),
        )


def _usage_of(line: dict[str, Any]) -> dict[str, Any]:
    """``finish_run``'s usage arguments of an exported run: its models' entries when
    each names its model (one: ``usage`` and ``model``; several: ``usage_by_model``),
    else its ``usage`` as exported, of no model."""
    entries = line.get("usage_entries") or []
    named = [e for e in entries if isinstance(e, dict) and isinstance(e.get("model"), str)]
    if not named or len(named) != len(entries):
        return {"usage": line.get("usage") or None}
    counts = {e["model"]: {k: e[k] for k in KINDS if k in e} for e in named}
    if len(counts) == 1:
        [(model, usage)] = counts.items()
        return {"usage": line.get("usage") or usage, "model": model}
    return {"usage_by_model": counts}


class _CountedBy:
    """The tokenizer an exported summary names: its counts come with it, so only the
    name is needed; an absent count is refused rather than counted by another rule."""

    def __init__(self, name: Any) -> None:
        self.name = name

    def count(self, text: str) -> int:
        raise ValidationError("summary.summary_tokens and replaced_tokens are required")


def _payload(record: dict[str, Any]) -> dict[str, Any]:
    """The message to append for a message record: as it was appended, without the
    store's fields and without its link to a run (the manager checks the rest)."""
    return {k: v for k, v in record.items() if k not in _NOT_APPENDED}


def _record_write(record: dict[str, Any]) -> RecordWrite:
    """The write of a record line: its namespace, key, data (base64) and meta.

    Raises:
        ValidationError: a field of the wrong type, or data that is not base64 (the
            manager checks the namespace, key and sizes).
    """
    namespace, key, data = record.get("namespace", ""), record.get("key"), record.get("data", "")
    meta = record.get("meta") or {}
    if not (isinstance(namespace, str) and isinstance(key, str) and isinstance(data, str)):
        raise ValidationError("record.namespace, key and data must be strings")
    if not isinstance(meta, dict):
        raise ValidationError("record.meta must be an object")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError("record.data must be base64") from None
    return RecordWrite(namespace=namespace, key=key, data=raw, meta=meta)


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
