"""Content rewrites on the Redis store, as a part of its transaction class: what
``agentsession encrypt`` and ``keyring reencrypt`` write back (see the store protocol,
"content rewrite").

Each rewrite reads the stored row, replaces its content fields and buffers the write
of the new row where the old one was (a zset member is removed and added again at
its score; a step list's element is set in place by ``LSET``; an idempotency record
keeps its expiry, ``SET ... KEEPTTL``). A pass rewrites a session in the transaction
that read the session, whose guard makes the whole rewrite a compare-and-set. The
walks of the store-wide keys (sessions, shared documents, idempotency records) read
every key of that kind and sort them: a pass over a Redis store costs O(keys) per
batch (Redis keeps no ordered index of them all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticError

from ...jsonvalues import dumps, loads
from ...models import (
    MemoryVersion,
    Message,
    RunStep,
    SharedMemory,
    Summary,
    ToolCall,
    WorkingMemory,
)
from ..base import IdempotencyRecord
from .codec import dec, enc, prefix
from .errors import translated
from .idempotency import decode_record, encode_record, record_key
from .memory import encode_memory, memory_keys
from .replies import text as _text
from .replies import texts as _texts
from .rewinds import enc_message

if TYPE_CHECKING:
    import redis

__all__ = ["RewriteOps"]


class RewriteOps:
    """The content-rewrite methods of the Redis transaction (see the store protocol).
    The host class provides the client, the write check and the write buffer."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _read: Callable[[str], str | None]
    _do: Callable[..., None]

    @translated
    def list_session_ids(self, *, after: str | None, limit: int) -> list[str]:
        ids = {
            key[len("as:{") : -len("}:session")]
            for key in _texts(list(self._r.scan_iter(match="as:{*}:session", count=1000)))
        }
        return sorted(i for i in ids if after is None or i > after)[:limit]

    @translated
    def rewrite_messages(self, messages: Sequence[Message]) -> None:
        for m in messages:
            self._replace_member(prefix(m.session_id) + "msgs", m.seq, enc_message(m))

    @translated
    def rewrite_rewound_messages(
        self, session_id: str, number: int, messages: Sequence[Message]
    ) -> None:
        key = f"{prefix(session_id)}rewound:{number}"
        for m in messages:
            self._replace_member(key, m.seq, enc_message(m))

    @translated
    def rewrite_working_memory(self, memory: WorkingMemory) -> None:
        self._writing()
        current = memory_keys(memory.session_id)[0]
        raw = _text(self._r.get(current))
        if raw is not None and loads(raw)["version"] == memory.version:
            self._do("SET", current, encode_memory(memory))

    @translated
    def rewrite_memory_history(self, session_id: str, versions: Sequence[MemoryVersion]) -> None:
        self._writing()
        history = memory_keys(session_id)[1]
        for v in versions:
            raw = _text(self._r.hget(history, str(v.version)))
            if raw is not None:
                row = dec(WorkingMemory, raw).model_copy(update={"data": v.data})
                self._do("HSET", history, str(v.version), encode_memory(row))

    @translated
    def rewrite_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        self._writing()
        for c in calls:
            key = prefix(c.session_id) + "calls"
            raw = _text(self._r.hget(key, c.call_id))
            if raw is not None:
                row = _content_of(dec(ToolCall, raw), c, ("arguments", "result", "error"))
                self._do("HSET", key, c.call_id, enc(row))

    @translated
    def rewrite_run_steps(self, session_id: str, steps: Sequence[RunStep]) -> None:
        self._writing()
        for step in steps:
            key = f"{prefix(session_id)}steps:{step.run_id}"
            raw = _text(self._r.lindex(key, step.index))
            if raw is not None:
                row = _content_of(dec(RunStep, raw), step, ("input", "output", "error"))
                self._do("LSET", key, step.index, enc(row))

    @translated
    def rewrite_summaries(self, summaries: Sequence[Summary]) -> None:
        for s in summaries:
            member = dumps(s.model_dump(mode="json", exclude={"session_version"}))
            self._replace_member(f"{prefix(s.session_id)}summaries", s.number, member)

    @translated
    def list_shared_memory(
        self, *, after: tuple[str, str] | None, limit: int
    ) -> list[SharedMemory]:
        docs: dict[tuple[str, str], SharedMemory] = {}
        for pattern in ("as:shared:app:*", "as:shared:user:{*}:*"):
            keys = [
                k for k in _texts(list(self._r.scan_iter(match=pattern))) if not k.endswith(":lock")
            ]
            for raw in _texts(self._r.mget(keys)) if keys else []:
                doc = _document(raw)
                if doc is not None:
                    docs[(doc.agent, doc.user_id or "")] = doc
        chosen = sorted(k for k in docs if after is None or k > after)[:limit]
        return [docs[k] for k in chosen]

    @translated
    def list_idempotency(
        self, *, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        keys = _texts(self._r.zrange("as:idem:by_time", 0, -1))
        found = [decode_record(raw) for raw in _texts(self._r.mget(keys)) if raw] if keys else []
        found = [r for r in found if after is None or (r.user_id, r.scope, r.key) > after]
        found.sort(key=lambda r: (r.user_id, r.scope, r.key))
        return found[:limit]

    @translated
    def rewrite_idempotency(self, record: IdempotencyRecord) -> None:
        self._writing()
        key = record_key(record.user_id, record.scope, record.key)
        raw = self._read(key)  # guarded: a record purged meanwhile is not written back
        if raw is not None:
            stored = replace(decode_record(raw), result=record.result)
            self._do("SETKEEPTTL", key, encode_record(stored))

    def _replace_member(self, key: str, score: int, member: str) -> None:
        """Buffer replacing the zset member of ``key`` scored ``score`` by ``member``."""
        self._writing()
        for old in _texts(self._r.zrangebyscore(key, score, score)):
            self._do("ZREM", key, old)
            self._do("ZADD", key, score, member)


def _content_of(row: Any, new: Any, fields: tuple[str, ...]) -> Any:
    """A copy of the stored ``row`` with ``fields`` taken from ``new``."""
    return row.model_copy(update={f: getattr(new, f) for f in fields})


def _document(raw: str | None) -> SharedMemory | None:
    """The shared document a key holds, or None for another kind of value."""
    if raw is None:
        return None
    try:
        return SharedMemory.model_validate(loads(raw))
    except (PydanticError, ValueError, TypeError):
        return None
