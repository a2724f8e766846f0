"""Import a LangGraph ``SqliteSaver`` database (``langgraph-checkpoint-sqlite``): every
thread becomes the session :class:`~agentsession.adapters.langgraph.AgentSessionSaver`
keeps it in, so a graph compiled with that saver resumes where ``SqliteSaver`` stopped.

The source is only read (:class:`~.sqlitefile.ReadOnlyDatabase`), through ``SqliteSaver``
itself: its ``list`` gives each checkpoint with its metadata and parent. Its serializer
here is :class:`_Verbatim`, which hands the stored ``(type, bytes)`` back instead of
loading them, so a checkpoint and each pending write go in as the same bytes, and
nothing is unpickled; the pending writes' rows are read with ``SqliteSaver``'s own
query (a ``CheckpointTuple`` drops their ``task_path`` and index, which the records
keep). ``SqliteSaver.setup`` would write (``PRAGMA journal_mode``, ``CREATE TABLE``):
the tables are checked here instead and it is marked done.

* A thread is the session of ``(user_id, "langgraph")`` keyed by its ``thread_id``;
  every checkpoint (all namespaces) and pending write is one record, laid out as the
  saver lays them (:func:`~agentsession.adapters.langgraph.checkpoint_record`,
  :func:`~agentsession.adapters.langgraph.write_record`), the metadata serialized by
  ``JsonPlusSerializer`` as the saver does.
* A checkpoint of type ``pickle``, or with a pending write of that type, is refused
  (reported; the others go on): the saver never loads pickle.
* The newest root checkpoint's ``messages`` channel (LangChain messages) becomes the
  session's messages (:func:`~agentsession.adapters.langchain.message_of_lc`), so
  ``show`` and ``export`` show the conversation. That checkpoint is the one value
  loaded, by :func:`~agentsession.adapters.langgraph.strict_serde`: a msgpack value
  naming a constructor outside LangGraph's safe types (``os.system``) is not called.

Re-running adds nothing new: checkpoints and regular pending writes are written
insert-if-absent (records already there are kept, and a batch of only those changes
nothing); a special pending write (``WRITES_IDX_MAP``: errors, interrupts...) replaces
the stored one when it differs, as ``SqliteSaver`` replaces it in the source (the
saver's rule, :func:`~agentsession.adapters.langgraph.write_record`), and is not
written when it is the same. The stored messages must be the first of the derived
ones: only the rest are appended.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, cast

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.utils import pending_writes_sql

from ..adapters.backend import RecordBatch
from ..adapters.langchain import message_of_lc
from ..adapters.langgraph import AGENT, checkpoint_record, strict_serde, write_record
from ..errors import AgentSessionError, ImportSourceError, ValidationError
from ..models import RecordWrite
from ..service import SessionManager
from .sourcecheck import at_row, column, first_lines, parse_json, refusal, scan, unreadable
from .sqlitefile import ReadOnlyDatabase, require_file

__all__ = ["LangGraphImportReport", "LangGraphSource", "import_langgraph"]

_CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
)
_WRITE_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value"
_NOT_OURS = "is not a LangGraph SqliteSaver database"
#: The columns as ``SqliteSaver`` writes them (``setup()``): ids and names text, the
#: serialized values blobs with their type's name, the metadata JSON.
_KEYS = (
    column("thread_id", "text"),
    column("checkpoint_ns", "text"),
    column("checkpoint_id", "text"),
)
_CHECKPOINT_SPEC = (
    *_KEYS,
    column("parent_checkpoint_id", "text", "null"),
    column("type", "text"),
    column("checkpoint", "blob", "null", read=False),
    column("metadata", "blob", "text", "null"),
)
_WRITE_SPEC = (
    *_KEYS,
    column("task_id", "text"),
    column("idx", "integer"),
    column("channel", "text"),
    column("type", "text"),
    column("value", "blob", "null", read=False),
    column("task_path", "text"),  # last: a database from before it has none
)


class Blob(NamedTuple):
    """A value as the source stored it: its serializer's type name and bytes."""

    type: str
    data: bytes


class _Verbatim:
    """A serializer for ``SqliteSaver`` that loads nothing: ``loads_typed`` answers the
    stored ``(type, bytes)`` as a :class:`Blob`. Reading only: it never dumps."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Never called: ``SqliteSaver`` dumps only when it writes.

        Raises:
            TypeError: always (the import never writes to the source).
        """
        raise TypeError("the import reads the source; it never writes to it")

    def loads_typed(self, data: tuple[str, bytes]) -> Blob:
        """``data``, the stored ``(type name, bytes)`` (bytes may be None: read as
        ``b""``), as a :class:`Blob`, loading nothing."""
        return Blob(str(data[0]), bytes(data[1] or b""))


class Checkpoint(NamedTuple):
    """One source checkpoint: where it is, its parent, its blob, metadata and writes
    (rows ``(task_id, channel, type, value, task_path, idx)``)."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent: str | None
    blob: Blob
    metadata: dict[str, Any]
    writes: list[tuple[Any, ...]]


class LangGraphSource:
    """A LangGraph ``SqliteSaver`` database, opened read-only.

    Args:
        path: the database file.

    Raises:
        ImportSourceError: a file that is not there ("no such database file"), cannot
            be opened for reading ("cannot open ..."), or is not a ``SqliteSaver``
            database ("... is not a LangGraph SqliteSaver database").
    """

    def __init__(self, path: str | Path) -> None:
        file = Path(path)
        self.name = str(file)
        require_file(file, "path")
        try:
            self._file = ReadOnlyDatabase(file)
        except (sqlite3.OperationalError, OSError) as exc:
            message = f"cannot open {file} for reading ({exc})"
            raise ImportSourceError(message, source=self.name) from None
        except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
            raise ImportSourceError(f"{file} {_NOT_OURS} ({exc})", source=self.name) from None
        db = self._file.connection
        try:
            db.execute(f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints LIMIT 1").fetchall()
            db.execute(f"SELECT {_WRITE_COLUMNS} FROM writes LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ImportSourceError(f"{file} {_NOT_OURS} ({exc})", source=self.name) from None
        self._saver = SqliteSaver(db, serde=_Verbatim())
        try:  # a database from before task_path was added reads it as ""
            db.execute("SELECT task_path FROM writes LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            self._saver._has_task_path = False
        self._saver.is_setup = True  # setup() writes; the tables are checked above

    def check(self) -> None:
        """Read every row of both tables once, checking each value as ``SqliteSaver``
        and the import use it, so that a malformed source is refused before anything
        is written.

        Raises:
            ImportSourceError: a value of the wrong type (an id or channel that is
                not text, an ``idx`` that is not an integer, a checkpoint or value
                that is not a blob...), text that is not UTF-8, metadata that is not
                a JSON object or nests deeper than a stored value may, or a file that
                cannot be read to its end.
        """
        db = self._file.connection
        for label, values in scan(db, self.name, "checkpoints", _CHECKPOINT_SPEC):
            _metadata(self.name, label, values["metadata"])
        spec = _WRITE_SPEC if self._saver._has_task_path else _WRITE_SPEC[:-1]
        for _ in scan(db, self.name, "writes", spec):
            pass

    def thread_ids(self) -> list[str]:
        """Every thread that has a checkpoint, oldest first (by its first checkpoint).

        Raises:
            ImportSourceError: the file cannot be read.
        """
        try:
            rows = self._file.connection.execute(
                "SELECT thread_id FROM checkpoints GROUP BY thread_id "
                "ORDER BY MIN(checkpoint_id), thread_id"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise unreadable(self.name, exc) from None
        return [str(r[0]) for r in rows]

    def checkpoint_count(self) -> int:
        """How many checkpoints the database holds, in all threads.

        Raises:
            ImportSourceError: the file cannot be read.
        """
        try:
            row = self._file.connection.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
        except sqlite3.DatabaseError as exc:
            raise unreadable(self.name, exc) from None
        return int(row[0])

    def checkpoints(self, thread_id: str) -> Iterator[Checkpoint]:
        """The thread's checkpoints, newest first (every namespace), read lazily through
        ``SqliteSaver.list``, each with its pending writes' rows.

        Raises:
            ImportSourceError: ``SqliteSaver`` cannot read a row (the file changed or
                was damaged since :meth:`check`).
        """
        sql = pending_writes_sql(self._saver._has_task_path)
        db = self._file.connection
        listed = self._saver.list({"configurable": {"thread_id": thread_id}})
        while True:
            try:
                found = next(listed, None)
                if found is None:
                    return
                conf = found.config["configurable"]
                parent = found.parent_config["configurable"] if found.parent_config else {}
                ns, checkpoint_id = str(conf["checkpoint_ns"]), str(conf["checkpoint_id"])
                writes = db.execute(sql, (thread_id, ns, checkpoint_id)).fetchall()
                metadata = dict(found.metadata)
            except sqlite3.DatabaseError as exc:
                raise unreadable(self.name, exc) from None
            except Exception as exc:  # SqliteSaver's own error on a row changed since
                reason = f"cannot read it ({type(exc).__name__}: {first_lines(exc)})"
                raise refusal(self.name, f"thread {thread_id!r}", reason) from exc
            yield Checkpoint(
                thread_id,
                ns,
                checkpoint_id,
                parent.get("checkpoint_id"),
                cast(Blob, found.checkpoint),
                metadata,
                writes,
            )

    def close(self) -> None:
        """Close the database."""
        self._file.close()


def _metadata(source: str, label: str, raw: str | bytes | None) -> None:
    """Check a checkpoint's metadata as ``SqliteSaver`` reads it and the import stores
    it: NULL (``{}``), or UTF-8 JSON text of an object, within the store's depth, that
    ``JsonPlusSerializer`` can write (an integer beyond 64 bits or a lone surrogate
    it cannot).

    Raises:
        ImportSourceError: anything else, naming the row.
    """
    if raw is None:
        return
    with at_row(source, label):
        value = parse_json(raw, field="metadata")
        if not isinstance(value, dict):
            raise ValidationError("metadata is not a JSON object", field="metadata")
        try:
            strict_serde().dumps_typed(value)
        except (TypeError, ValueError) as exc:  # msgpack's words for what it cannot hold
            reason = f"metadata cannot be stored ({first_lines(exc)})"
            raise ValidationError(reason, field="metadata") from None


@dataclass
class LangGraphImportReport:
    """What :func:`import_langgraph` did.

    Attributes:
        threads: source threads seen; created: of them, sessions newly created here.
        checkpoints: source checkpoints imported (or found already imported).
        records: checkpoint and pending-write records written (those already stored
            are kept, or for a special write replaced only if it changed, and not
            counted: 0 on a re-run of an unchanged source).
        messages: messages appended.
        failed: ``(thread id, reason)``: a thread not imported, or its part not imported
            (a refused checkpoint, messages that could not be derived).
        warnings: ``(thread id, reason)``: a thread imported whose stored messages
            differ from the source's (after a ``RemoveMessage``, say): its records are
            imported, its messages left alone.
    """

    threads: int = 0
    created: int = 0
    checkpoints: int = 0
    records: int = 0
    messages: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def import_langgraph(
    manager: SessionManager,
    source: LangGraphSource,
    *,
    user_id: str,
    advance: Callable[[int], None] | None = None,
) -> LangGraphImportReport:
    """Import every thread of ``source`` (see the module docstring); re-running adds
    nothing. A thread the store refuses (a ``thread_id`` no session can be keyed by, a
    checkpoint over ``limits.max_record_bytes``) is reported in ``failed`` and the
    others go on.

    Args:
        manager: the manager of the store to import into (its ``limits`` size the
            batches).
        source: the opened source database (:class:`LangGraphSource`; the caller
            closes it).
        user_id: the owner of the threads' sessions (the saver's ``user_id``).
        advance: called with the number of checkpoints done, as they are read (for a
            progress bar; its total is ``source.checkpoint_count()``).

    Returns:
        The counts, and what was not imported with why. One batch of records
        (``limits.max_batch_messages`` records, or about ``limits.max_record_bytes``)
        and one thread's messages are held in memory at a time.

    Raises:
        ImportSourceError: a malformed source (:meth:`LangGraphSource.check`, run
            first: nothing is written then).
    """
    source.check()
    report = LangGraphImportReport()
    for thread_id in source.thread_ids():
        report.threads += 1
        try:
            _import_thread(manager, source, thread_id, user_id, report, advance)
        except ImportSourceError:  # the source, not this thread: the import stops
            raise
        except AgentSessionError as exc:
            report.failed.append((thread_id, exc.message))
    return report


def _import_thread(
    manager: SessionManager,
    source: LangGraphSource,
    thread_id: str,
    user_id: str,
    report: LangGraphImportReport,
    advance: Callable[[int], None] | None,
) -> None:
    """Bring one thread's session up to date: records, then messages.

    Raises:
        AgentSessionError: as the manager raises (the thread is reported).
    """
    session, created = manager.open_session(user_id=user_id, agent=AGENT, external_key=thread_id)
    report.created += int(created)
    scope: dict[str, Any] = {"session_id": session.session_id, "user_id": user_id}
    serde = strict_serde()  # an untrusted file: no constructor outside the safe types
    batch = RecordBatch(
        lambda records: manager.put_records(**scope, records=records).written, manager.limits
    )
    newest: Blob | None = None
    for cp in source.checkpoints(thread_id):
        if newest is None and cp.ns == "":
            newest = cp.blob
        refused = _refusal(cp)
        if refused:
            report.failed.append((thread_id, refused))
        else:
            for task, channel, kind, value, path, idx in cp.writes:
                write = write_record(
                    cp.ns,
                    cp.checkpoint_id,
                    str(task),
                    str(path or ""),
                    int(idx),
                    str(channel),
                    (str(kind), bytes(value or b"")),
                )
                if write.if_absent or _changed(manager, scope, write):
                    batch.add(write)
            batch.add(
                checkpoint_record(
                    cp.ns,
                    cp.checkpoint_id,
                    (cp.blob.type, cp.blob.data),
                    serde.dumps_typed(cp.metadata),
                    cp.parent,
                    if_absent=True,
                )
            )
            report.checkpoints += 1
        if advance is not None:
            advance(1)
    batch.flush()
    report.records += batch.written
    if newest is not None:
        _import_messages(manager, scope, thread_id, newest, serde, report)


def _changed(manager: SessionManager, scope: dict[str, Any], record: RecordWrite) -> bool:
    """Whether a replacing record (a special pending write) differs from the one stored:
    an unchanged one is not written again, so a re-run writes and counts nothing.

    Raises:
        AgentSessionError: as ``get_record`` raises.
    """
    stored = manager.get_record(**scope, namespace=record.namespace, key=record.key)
    return stored is None or stored.data != record.data or stored.meta != dict(record.meta)


def _refusal(cp: Checkpoint) -> str | None:
    """Why ``cp`` cannot be imported (it, or one of its pending writes, is pickled),
    or None."""
    where = f"checkpoint {cp.checkpoint_id}" + (f" (namespace {cp.ns!r})" if cp.ns else "")
    if cp.blob.type == "pickle":
        return f"{where} is pickled; refused (pickle is never loaded)"
    if any(row[2] == "pickle" for row in cp.writes):
        return f"{where} has a pickled pending write; refused (pickle is never loaded)"
    return None


def _import_messages(
    manager: SessionManager,
    scope: dict[str, Any],
    thread_id: str,
    newest: Blob,
    serde: JsonPlusSerializer,
    report: LangGraphImportReport,
) -> None:
    """Append the LangChain messages of the newest root checkpoint's ``messages``
    channel that the session does not hold yet (its stored messages must be the first
    of them; otherwise they are left alone and the thread is in ``report.warnings``)."""
    if newest.type == "pickle":
        return  # refused above
    try:
        values = serde.loads_typed((newest.type, newest.data)).get("channel_values") or {}
    except Exception as exc:  # a serializer's own type, damaged bytes: records stay
        report.failed.append(
            (
                thread_id,
                f"messages not derived: cannot load the newest "
                f"checkpoint ({type(exc).__name__}: {exc})",
            )
        )
        return
    found = values.get("messages") if isinstance(values, dict) else None
    if not isinstance(found, list):
        return
    derived = [message_of_lc(m) for m in found if isinstance(m, BaseMessage)]
    stored = 0
    after: int | None = 0
    while after is not None:
        page = manager.get_messages(
            **scope, after=after, limit=manager.limits.max_page_size, align_tool_calls=False
        )
        for message in page.items:
            lc = message.payload().get("lc")
            if stored >= len(derived) or lc != derived[stored]["lc"]:
                report.warnings.append(
                    (
                        thread_id,
                        "messages left alone: the session's "
                        f"messages differ from the thread's at {stored + 1}",
                    )
                )
                return
            stored += 1
        after = page.items[-1].seq if page.items and page.next_cursor else None
    size = manager.limits.max_batch_messages
    for start in range(stored, len(derived), size):
        manager.append_messages(**scope, messages=derived[start : start + size])
        report.messages += len(derived[start : start + size])
