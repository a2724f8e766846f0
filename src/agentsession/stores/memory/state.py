"""The in-memory store's tables, and the undo log every part of its transaction writes through.

Each aggregate (sessions, messages, records, runs...) is a module of this package with one
class of transaction methods, all built on :class:`TransactionBase`; the transaction in
:mod:`.store` composes them. Models are immutable and every JSON-bearing field is
deep-copied in and out (:func:`copy`), so nothing a caller holds aliases stored state.
Every change appends its inverse to the undo log, which :meth:`TransactionBase.rollback`
runs in reverse order: a transaction is stored whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from ...errors import StoreError
from ...models import (
    AuditEvent,
    Budget,
    Message,
    Record,
    Rewind,
    Run,
    RunStep,
    Session,
    SharedMemory,
    Summary,
    ToolCall,
    WorkingMemory,
)
from ..base import ChainLink, IdempotencyRecord, StoreConflict, UsageRow

__all__ = ["SessionData", "Tables", "TransactionBase", "copy", "seq_of"]

M = TypeVar("M", bound=BaseModel)


def copy(model: M) -> M:
    """A deep copy of ``model``: what goes in or out of the store."""
    return model.model_copy(deep=True)


def seq_of(row: Any) -> int:
    """The ``seq`` of a row (a tool call, an audit event): the key of a bisection."""
    return int(row.seq)


@dataclass
class SessionData:
    """One session and every row that belongs to it."""

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
    usage: list[UsageRow] = field(default_factory=list)  # the ledger, oldest first
    budget: Budget | None = None
    # (kind, seq) -> (the text the store holds there, its plaintext): texts a sealed
    # store with search on gave (.search); used while the stored text is the same.
    search_texts: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)


class Tables:
    """Everything the store holds, shared by its transactions (one at a time)."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionData] = {}
        # (user_id, agent, external_key) -> session_id: the unique key index.
        self._keys: dict[tuple[str, str, str], str] = {}
        self._tombstones: list[AuditEvent] = []
        self._idempotency: dict[tuple[str, str, str], IdempotencyRecord] = {}
        # (agent, user_id or "" for the app scope) -> the shared document.
        self._shared: dict[tuple[str, str], SharedMemory] = {}
        self._audit_seq = 0
        # user_id -> the user's budget (a session's is in its SessionData).
        self._budgets: dict[str, Budget] = {}
        # name -> value: the keyring mark, the session chain's head (.meta).
        self._meta: dict[str, str] = {}
        self._chain: list[ChainLink] = []  # the session chain, ascending seqs


class TransactionBase:
    """What every part of the transaction shares: the tables, whether it may write, and
    the undo log."""

    def __init__(self, tables: Tables, *, write: bool) -> None:
        self._s = tables
        self._write = write
        self._undo: list[Callable[[], object]] = []  # what an undo returns is ignored

    def rollback(self) -> None:
        """Undo every change of this transaction, newest first."""
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def _writing(self) -> None:
        if not self._write:
            raise StoreError("write attempted in a read-only transaction")

    def _data(self, session_id: str) -> SessionData:
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
