"""In-memory store: the whole contract, in one process, gone at exit.

A real adapter, not a mock: it passes the same conformance suite as every other store.
Lookups scan Python lists (only the external key has an index, a dict): it is meant for tests
and small agents.
Models are immutable and every JSON-bearing field is deep-copied in and out, so nothing
a caller holds aliases stored state. Transactions are serialised by one lock
and made atomic by an undo log: a failure anywhere inside the block rolls every change
back in reverse order, so a transaction is stored whole or not at all.
"""

from __future__ import annotations

import functools
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from ..errors import StoreError
from ..models import (
    AuditEvent,
    Message,
    Record,
    Rewind,
    Run,
    RunStatus,
    RunStep,
    Session,
    SessionStatus,
    SharedMemory,
    Summary,
    ToolCall,
    WorkingMemory,
)
from .base import IdempotencyRecord, JSONTexts, ScrubReport, SessionHead, StoreConflict
from .listing import status_as_of
from .recordkeys import select_keys

__all__ = ["MemoryStore"]

M = TypeVar("M", bound=BaseModel)


def _copy(model: M) -> M:
    return model.model_copy(deep=True)


def _key_of(session: Session) -> tuple[str, str, str] | None:
    """The session's entry in the external key index, or None without a key."""
    if session.external_key is None:
        return None
    return (session.user_id, session.agent, session.external_key)


@dataclass
class _SessionData:
    session: Session
    messages: list[Message] = field(default_factory=list)  # index i holds seq i + 1
    memory: WorkingMemory | None = None
    # (at_seq, the memory as written), ascending versions.
    memory_history: list[tuple[int, WorkingMemory]] = field(default_factory=list)
    records: dict[tuple[str, str], Record] = field(default_factory=dict)
    summaries: list[Summary] = field(default_factory=list)  # ascending numbers
    rewinds: list[Rewind] = field(default_factory=list)  # index i holds number i + 1
    rewound: dict[int, list[Message]] = field(default_factory=dict)  # by rewind number
    tool_calls: list[ToolCall] = field(default_factory=list)  # by seq
    runs: dict[str, Run] = field(default_factory=dict)  # insertion order = seq order
    steps: dict[str, list[RunStep]] = field(default_factory=dict)
    audit: list[AuditEvent] = field(default_factory=list)


class MemoryStore:
    """A store that keeps everything in process memory. URL: ``memory://``.

    Thread-safe; all transactions are serialised. Use it for tests and for single-process
    agents that need no durability.
    """

    def __init__(self) -> None:
        self.url = "memory://"
        self._lock = threading.RLock()
        self._sessions: dict[str, _SessionData] = {}
        # (user_id, agent, external_key) -> session_id: the unique key index.
        self._keys: dict[tuple[str, str, str], str] = {}
        self._tombstones: list[AuditEvent] = []
        self._idempotency: dict[tuple[str, str, str], IdempotencyRecord] = {}
        # (agent, user_id or "" for the app scope) -> the shared document.
        self._shared: dict[tuple[str, str], SharedMemory] = {}
        self._audit_seq = 0
        self._closed = False

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_MemoryTransaction]:
        """Open a transaction (see :class:`~agentsession.stores.base.SessionStore`)."""
        with self._lock:
            if self._closed:
                raise StoreError("the memory store is closed")
            tx = _MemoryTransaction(self, write=write)
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        """Nothing to do: nothing is on disk. See
        :meth:`~agentsession.stores.base.SessionStore.scrub`."""
        return ScrubReport(
            done=("memory store: nothing on disk; the erased objects were released",),
            pending=("the process memory may hold released objects until it reuses it",),
        )

    def close(self) -> None:
        """Drop every session. Further transactions raise StoreError."""
        with self._lock:
            self._closed = True
            self._sessions.clear()
            self._keys.clear()
            self._idempotency.clear()
            self._shared.clear()


class _MemoryTransaction:
    def __init__(self, store: MemoryStore, *, write: bool) -> None:
        self._s = store
        self._write = write
        self._undo: list[Callable[[], object]] = []  # what an undo returns is ignored

    def rollback(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def _writing(self) -> None:
        if not self._write:
            raise StoreError("write attempted in a read-only transaction")

    def _data(self, session_id: str) -> _SessionData:
        data = self._s._sessions.get(session_id)
        if data is None:
            raise StoreConflict(f"session {session_id!r} vanished during the transaction")
        return data

    def _set_attr(self, obj: Any, name: str, value: Any) -> None:
        old = getattr(obj, name)
        setattr(obj, name, value)
        self._undo.append(lambda: setattr(obj, name, old))

    def _append(self, seq: list[Any], item: Any) -> None:
        seq.append(item)
        self._undo.append(seq.pop)

    # -- sessions --------------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None:
        data = self._s._sessions.get(session_id)
        return None if data is None else _copy(data.session)

    def get_session_head(self, session_id: str) -> SessionHead | None:
        data = self._s._sessions.get(session_id)  # a head holds no mutable value: no copy
        return None if data is None else SessionHead.of(data.session)

    def insert_session(self, session: Session) -> None:
        self._writing()
        if session.session_id in self._s._sessions:
            raise StoreConflict(f"session {session.session_id!r} exists")
        key = _key_of(session)
        if key is not None:
            if key in self._s._keys:
                raise StoreConflict("a session with this external key exists")
            self._s._keys[key] = session.session_id
            self._undo.append(lambda: self._s._keys.pop(key))
        self._s._sessions[session.session_id] = _SessionData(_copy(session))
        self._undo.append(lambda: self._s._sessions.pop(session.session_id))

    def find_session_by_key(self, user_id: str, agent: str, external_key: str) -> str | None:
        return self._s._keys.get((user_id, agent, external_key))

    def update_session(self, session: Session, *, expected_version: int) -> None:
        self._writing()
        data = self._data(session.session_id)
        if data.session.version != expected_version:
            raise StoreConflict(f"session {session.session_id!r} changed concurrently")
        self._set_attr(data, "session", _copy(session))

    def delete_session(self, session_id: str) -> None:
        self._writing()
        data = self._s._sessions.pop(session_id, None)
        if data is None:
            return
        self._undo.append(lambda: self._s._sessions.__setitem__(session_id, data))
        key = _key_of(data.session)
        if key is not None:
            del self._s._keys[key]
            self._undo.append(lambda: self._s._keys.__setitem__(key, session_id))
        doomed = {k: r for k, r in self._s._idempotency.items() if r.session_id == session_id}
        for k in doomed:
            del self._s._idempotency[k]
        self._undo.append(lambda: self._s._idempotency.update(doomed))

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
    ) -> list[Session]:
        rows = [
            d.session
            for d in self._s._sessions.values()
            if (user_id is None or d.session.user_id == user_id)
            and (parent_session_id is None or d.session.parent_session_id == parent_session_id)
            and (status is None or status_as_of(d.session, now) == status)
            and (agent is None or d.session.agent == agent)
            and (after is None or (d.session.updated_at, d.session.session_id) < after)
        ]
        rows.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return [_copy(s) for s in rows[:limit]]

    def list_due_sessions(self, *, now: datetime, limit: int) -> list[str]:
        due = [
            d.session
            for d in self._s._sessions.values()
            if d.session.status == SessionStatus.ACTIVE
            and d.session.expires_at is not None
            and d.session.expires_at <= now
        ]
        due.sort(key=lambda s: (s.expires_at, s.session_id))
        return [s.session_id for s in due[:limit]]

    def list_lapsed_leases(self, *, now: datetime, limit: int) -> list[str]:
        lapsed = [
            (d.session.lease_expires_at, sid)
            for sid, d in self._s._sessions.items()
            if d.session.lease_expires_at is not None and d.session.lease_expires_at <= now
        ]
        return [sid for _, sid in sorted(lapsed)[: max(limit, 0)]]

    def list_user_session_ids(self, user_id: str) -> list[str]:
        return [sid for sid, d in self._s._sessions.items() if d.session.user_id == user_id]

    # -- messages --------------------------------------------------------------------
    def insert_messages(self, messages: Sequence[Message], *, payloads: JSONTexts = None) -> None:
        self._writing()
        for message in messages:
            rows = self._data(message.session_id).messages
            if message.seq != len(rows) + 1:
                raise StoreConflict(f"message seq {message.seq} is not next in its session")
            self._append(rows, _copy(message))

    def get_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest: bool = True,
    ) -> list[Message]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        rows = data.messages
        # rows[i].seq == i + 1, so a seq range is a slice: O(returned rows).
        lo = 0 if after_seq is None else max(0, min(after_seq, len(rows)))
        hi = len(rows) if before_seq is None else max(0, min(before_seq - 1, len(rows)))
        if limit is not None and hi - lo > limit:
            if newest:
                lo = hi - limit
            else:
                hi = lo + limit
        return [_copy(m) for m in rows[lo:hi]]

    def delete_messages(self, session_id: str, *, after_seq: int) -> int:
        self._writing()
        rows = self._data(session_id).messages
        removed = rows[after_seq:]
        if not removed:
            return 0
        del rows[after_seq:]
        self._undo.append(lambda: rows.extend(removed))
        return len(removed)

    # -- records ---------------------------------------------------------------------
    def put_records(self, records: Sequence[Record]) -> None:
        self._writing()
        for record in records:
            rows = self._data(record.session_id).records
            k = (record.namespace, record.key)
            self._undo.append(functools.partial(_restore, rows, k, rows.get(k)))
            rows[k] = _copy(record)

    def get_record(self, session_id: str, namespace: str, key: str) -> Record | None:
        data = self._s._sessions.get(session_id)
        record = None if data is None else data.records.get((namespace, key))
        return None if record is None else _copy(record)

    def list_records(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        prefix: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[Record]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        keys = select_keys(
            data.records,
            namespace=namespace,
            prefix=prefix,
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )
        return [_copy(data.records[k]) for k in keys]

    def delete_records(
        self, session_id: str, *, namespace: str | None = None, prefix: str | None = None
    ) -> int:
        self._writing()
        rows = self._data(session_id).records
        keys = select_keys(
            rows,
            namespace=namespace,
            prefix=prefix,
            after=None,
            before=None,
            limit=None,
            descending=False,
        )
        doomed = {k: rows.pop(k) for k in keys}
        self._undo.append(lambda: rows.update(doomed))
        return len(doomed)

    # -- summaries -------------------------------------------------------------------
    def insert_summary(self, summary: Summary) -> None:
        self._writing()
        rows = self._data(summary.session_id).summaries
        if rows and summary.number <= rows[-1].number:
            raise StoreConflict(f"summary {summary.number} is not above the newest")
        rows.append(_copy(summary))
        self._undo.append(rows.pop)

    def list_summaries(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        before_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Summary]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        rows = data.summaries
        # rows ascend by number (with gaps after a removal): a number range is a slice.
        lo = 0 if after_number is None else bisect_right(rows, after_number, key=_number)
        hi = len(rows) if before_number is None else bisect_left(rows, before_number, key=_number)
        if limit is not None and hi - lo > limit:
            lo, hi = (max(lo, hi - limit), hi) if newest else (lo, lo + max(limit, 0))
        return [_copy(x) for x in rows[lo:hi]]

    def delete_summaries(self, session_id: str, *, after_seq: int) -> int:
        self._writing()
        rows = self._data(session_id).summaries
        kept = [s for s in rows if s.to_seq <= after_seq]
        if len(kept) == len(rows):
            return 0
        before = rows[:]
        rows[:] = kept
        self._undo.append(functools.partial(rows.__setitem__, slice(None), before))
        return len(before) - len(kept)

    # -- rewinds ---------------------------------------------------------------------
    def insert_rewind(self, rewind: Rewind) -> None:
        self._writing()
        rows = self._data(rewind.session_id).rewinds
        if rewind.number != len(rows) + 1:
            raise StoreConflict(f"rewind {rewind.number} is not next in its session")
        self._append(rows, _copy(rewind))

    def list_rewinds(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Rewind]:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.rewinds[after_number or 0 :]
        if limit is not None and len(rows) > limit:
            rows = rows[len(rows) - limit :] if newest else rows[:limit]
        return [_copy(r) for r in rows]

    def hide_messages(self, session_id: str, *, after_seq: int, number: int) -> int:
        self._writing()
        data = self._data(session_id)
        if number in data.rewound:
            raise StoreConflict(f"rewind {number} already hid messages")
        data.rewound[number] = [_copy(m) for m in data.messages[after_seq:]]
        self._undo.append(functools.partial(data.rewound.pop, number))
        return len(data.rewound[number])

    def get_rewound_messages(
        self,
        session_id: str,
        number: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.rewound.get(number, [])
        rows = [m for m in rows if after_seq is None or m.seq > after_seq]
        return [_copy(m) for m in rows[:limit]]

    # -- forks -----------------------------------------------------------------------
    def copy_history(
        self, source_id: str, target_id: str, *, upto_seq: int, id_part: str
    ) -> tuple[int, int]:
        self._writing()
        source, target = self._data(source_id), self._data(target_id)
        # The target is new and empty: the undo log drops its rows whole.
        target.messages = [
            m.model_copy(
                update={
                    "message_id": "msg_" + id_part + m.message_id[17:30],
                    "session_id": target_id,
                },
                deep=True,
            )
            for m in source.messages[:upto_seq]
        ]
        target.summaries = [
            s.model_copy(update={"session_id": target_id}, deep=True)
            for s in source.summaries
            if s.to_seq <= upto_seq
        ]
        target.memory_history = [
            (at, m.model_copy(update={"session_id": target_id}, deep=True))
            for at, m in source.memory_history
            if at <= upto_seq
        ]
        return len(target.messages), len(target.summaries)

    # -- working memory --------------------------------------------------------------
    def get_working_memory(self, session_id: str) -> WorkingMemory | None:
        data = self._s._sessions.get(session_id)
        if data is None or data.memory is None:
            return None
        return _copy(data.memory)

    def put_working_memory(self, memory: WorkingMemory, *, at_seq: int) -> None:
        self._writing()
        data = self._data(memory.session_id)
        if data.memory_history and memory.version <= data.memory_history[-1][1].version:
            raise StoreConflict(f"memory version {memory.version} is not above the newest")
        self._set_attr(data, "memory", _copy(memory))
        rows = data.memory_history
        i = bisect_left(rows, at_seq, key=_at_seq)
        if i == len(rows):
            self._append(rows, (at_seq, _copy(memory)))
        else:  # the rows at at_seq can never be read again: replace them
            self._splice(rows, i, (at_seq, _copy(memory)))

    def get_working_memory_at(self, session_id: str, seq: int) -> WorkingMemory | None:
        data = self._s._sessions.get(session_id)
        rows = [] if data is None else data.memory_history
        # at_seq never decreases with the version: the last row at or below seq.
        i = bisect_right(rows, seq, key=_at_seq)
        return _copy(rows[i - 1][1]) if i else None

    def rebase_memory_history(self, session_id: str, *, after_seq: int) -> None:
        self._writing()
        rows = self._data(session_id).memory_history
        i = bisect_left(rows, after_seq, key=_at_seq)
        if i == len(rows) or (i == len(rows) - 1 and rows[i][0] == after_seq):
            return
        # Only the newest row at or above after_seq can be read again: keep it, there.
        self._splice(rows, i, (after_seq, rows[-1][1]))

    def _splice(
        self, rows: list[tuple[int, WorkingMemory]], i: int, row: tuple[int, WorkingMemory]
    ) -> None:
        """Replace ``rows[i:]`` by ``row``, undone on rollback."""
        before = rows[:]
        rows[i:] = [row]
        self._undo.append(functools.partial(rows.__setitem__, slice(None), before))

    # -- shared memory ---------------------------------------------------------------
    def get_shared_memory(self, agent: str, user_id: str | None) -> SharedMemory | None:
        doc = self._s._shared.get((agent, user_id or ""))
        return None if doc is None else _copy(doc)

    def put_shared_memory(self, doc: SharedMemory, *, expected_version: int) -> None:
        self._writing()
        key = (doc.agent, doc.user_id or "")
        old = self._s._shared.get(key)
        if (0 if old is None else old.version) != expected_version:
            raise StoreConflict(f"shared memory {key!r} changed during the transaction")
        self._s._shared[key] = _copy(doc)
        self._undo.append(lambda: self._restore_shared(key, old))

    def delete_shared_memory(self, agent: str, user_id: str | None) -> bool:
        self._writing()
        key = (agent, user_id or "")
        old = self._s._shared.pop(key, None)
        if old is not None:
            self._undo.append(lambda: self._restore_shared(key, old))
        return old is not None

    def delete_user_shared_memory(self, user_id: str) -> int:
        self._writing()
        if not user_id:
            return 0
        keys = [k for k in self._s._shared if k[1] == user_id]
        for agent, _ in keys:
            self.delete_shared_memory(agent, user_id)
        return len(keys)

    def _restore_shared(self, key: tuple[str, str], doc: SharedMemory | None) -> None:
        if doc is None:
            self._s._shared.pop(key, None)
        else:
            self._s._shared[key] = doc

    # -- tool calls ------------------------------------------------------------------
    def insert_tool_call(self, call: ToolCall) -> None:
        self._writing()
        rows = self._data(call.session_id).tool_calls
        if any(c.call_id == call.call_id for c in rows):
            raise StoreConflict(f"tool call {call.call_id!r} exists")
        self._append(rows, _copy(call))

    def get_tool_call(self, session_id: str, call_id: str) -> ToolCall | None:
        data = self._s._sessions.get(session_id)
        if data is None:
            return None
        for call in data.tool_calls:
            if call.call_id == call_id:
                return _copy(call)
        return None

    def list_tool_calls(
        self,
        session_id: str,
        *,
        tool: str | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[ToolCall]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        start = 0 if after_seq is None else bisect_right(data.tool_calls, after_seq, key=_seq)
        rows = [c for c in data.tool_calls[start:] if tool is None or c.tool == tool]
        return [_copy(c) for c in rows[:limit]]

    def find_tool_call(self, session_id: str, *, tool: str, arguments_hash: str) -> ToolCall | None:
        data = self._s._sessions.get(session_id)
        if data is None:
            return None
        for call in reversed(data.tool_calls):
            if call.tool == tool and call.arguments_hash == arguments_hash:
                return _copy(call)
        return None

    def find_tool_call_by_provider_id(
        self, session_id: str, provider_call_id: str
    ) -> ToolCall | None:
        data = self._s._sessions.get(session_id)
        if data is None:
            return None
        for call in reversed(data.tool_calls):
            if call.provider_call_id == provider_call_id:
                return _copy(call)
        return None

    # -- runs ------------------------------------------------------------------------
    def insert_run(self, run: Run) -> None:
        self._writing()
        data = self._data(run.session_id)
        if run.run_id in data.runs:
            raise StoreConflict(f"run {run.run_id!r} exists")
        data.runs[run.run_id] = _copy(run).model_copy(update={"steps": [], "step_count": 0})
        data.steps[run.run_id] = []

        def undo() -> None:
            del data.runs[run.run_id]
            del data.steps[run.run_id]

        self._undo.append(undo)

    def update_run(self, run: Run) -> None:
        self._writing()
        data = self._data(run.session_id)
        old = data.runs.get(run.run_id)
        if old is None:
            raise StoreConflict(f"run {run.run_id!r} vanished during the transaction")
        kept = {"steps": [], "step_count": old.step_count}
        data.runs[run.run_id] = _copy(run).model_copy(update=kept)
        self._undo.append(lambda: data.runs.__setitem__(run.run_id, old))

    def insert_run_step(self, session_id: str, step: RunStep) -> None:
        self._writing()
        data = self._data(session_id)
        run = data.runs.get(step.run_id)
        if run is None or step.index != run.step_count:
            raise StoreConflict(f"step {step.index} of run {step.run_id!r} is not next")
        self._append(data.steps[step.run_id], _copy(step))
        data.runs[step.run_id] = run.model_copy(update={"step_count": step.index + 1})
        self._undo.append(lambda: data.runs.__setitem__(step.run_id, run))

    def get_run(self, session_id: str, run_id: str) -> Run | None:
        data = self._s._sessions.get(session_id)
        if data is None or run_id not in data.runs:
            return None
        return _copy(data.runs[run_id])

    def list_run_steps(
        self,
        session_id: str,
        run_id: str,
        *,
        after_index: int | None = None,
        limit: int | None = None,
    ) -> list[RunStep]:
        data = self._s._sessions.get(session_id)
        if data is None or run_id not in data.steps:
            return []
        # steps[i].index == i, so an index range is a slice: O(returned rows).
        start = 0 if after_index is None else after_index + 1
        stop = None if limit is None else start + limit
        return [_copy(s) for s in data.steps[run_id][start:stop]]

    def list_runs(
        self,
        session_id: str,
        *,
        status: RunStatus | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        rows = [
            r
            for r in data.runs.values()
            if (status is None or r.status == status) and (after_seq is None or r.seq > after_seq)
        ]
        return [_copy(r) for r in rows[:limit]]

    # -- audit -----------------------------------------------------------------------
    def insert_audit(self, event: AuditEvent) -> int:
        self._writing()
        self._s._audit_seq += 1
        seq = self._s._audit_seq
        stored = event.model_copy(update={"seq": seq}, deep=True)
        data = self._s._sessions.get(event.session_id)
        # A session's tombstone outlives it; every other event lives with its session.
        self._append(data.audit if data is not None else self._s._tombstones, stored)
        return seq

    def list_audit(
        self, session_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[AuditEvent]:
        data = self._s._sessions.get(session_id)
        rows = (
            data.audit
            if data is not None
            else [e for e in self._s._tombstones if e.session_id == session_id]
        )
        start = 0 if after_seq is None else bisect_right(rows, after_seq, key=_seq)
        return [_copy(e) for e in rows[start:][:limit]]

    # -- idempotency -----------------------------------------------------------------
    def get_idempotency(self, user_id: str, scope: str, key: str) -> IdempotencyRecord | None:
        return self._s._idempotency.get((user_id, scope, key))

    def put_idempotency(self, record: IdempotencyRecord) -> None:
        self._writing()
        k = (record.user_id, record.scope, record.key)
        if k in self._s._idempotency:
            raise StoreConflict(f"idempotency key {record.key!r} exists")
        self._s._idempotency[k] = record  # frozen dataclass of immutable values
        self._undo.append(lambda: self._s._idempotency.pop(k))

    def delete_idempotency(self, user_id: str, scope: str, key: str) -> None:
        self._writing()
        k = (user_id, scope, key)
        old = self._s._idempotency.pop(k, None)
        if old is not None:
            self._undo.append(lambda: self._s._idempotency.__setitem__(k, old))

    def purge_idempotency(self, *, created_before: datetime, user_id: str | None = None) -> int:
        self._writing()
        doomed = {
            k: r
            for k, r in self._s._idempotency.items()
            if r.created_at < created_before and user_id in (None, r.user_id, r.owner_id)
        }
        for k in doomed:
            del self._s._idempotency[k]
        self._undo.append(lambda: self._s._idempotency.update(doomed))
        return len(doomed)


def _at_seq(row: tuple[int, WorkingMemory]) -> int:
    return row[0]


def _number(summary: Summary) -> int:
    return summary.number


def _restore(rows: dict[tuple[str, str], Record], k: tuple[str, str], old: Record | None) -> None:
    """Undo a record write: put back ``old``, or drop the key if there was none."""
    if old is None:
        rows.pop(k, None)
    else:
        rows[k] = old


def _seq(row: Any) -> int:
    return int(row.seq)
