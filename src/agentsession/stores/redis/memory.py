"""Working memory and its history on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:memory       string  the current WorkingMemory as JSON
    as:{sid}:memhist      hash    version -> the WorkingMemory written at it, as JSON
    as:{sid}:memhist:at   zset    score = at_seq, member = the version, 20 digits

The memory as of a seq is the newest version whose ``at_seq`` is at or below it
(docs/semantics.md, "Working-memory history"). ``at_seq`` never decreases with the
version and equal scores sort by member, which the zero-padded version makes numeric
order, so that row is the last member with a score at or below the seq: one
ZREVRANGEBYSCORE with a limit of 1 and one HGET. A write drops the stored rows at its
``at_seq`` (the commit script's ``ZDROPAT``: ZREM and HDEL); a removal's clamp is its
``ZCLAMP``: of the members scored at or above the new end the last one is kept, scored
at it, the others are dropped, in the same script as the removal. So the history
holds at most one row per ``at_seq``. Writes are buffered like every other write; every memory
write also rewrites the session (its version), whose guard makes the transaction a
compare-and-set.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...jsonvalues import dumps, loads
from ...models import MemoryVersion, WorkingMemory
from .errors import translated

if TYPE_CHECKING:
    import redis

__all__ = ["MemoryOps", "memory_keys"]


def memory_keys(session_id: str) -> tuple[str, str, str]:
    """The session's memory keys: the current document, the history hash and zset."""
    p = f"as:{{{session_id}}}:"
    return p + "memory", p + "memhist", p + "memhist:at"


def _enc(memory: WorkingMemory) -> str:
    return dumps(memory.model_dump(mode="json", exclude={"session_version"}))


def _dec(text: object) -> WorkingMemory:
    assert not inspect.isawaitable(text), "the store needs a sync redis.Redis client"
    return WorkingMemory.model_validate(loads(str(text)))


def _version(at_seq: int, memory: WorkingMemory) -> MemoryVersion:
    return MemoryVersion(
        seq=at_seq, version=memory.version, updated_at=memory.updated_at, data=memory.data
    )


def _member(version: int) -> str:
    return f"{version:020d}"


class MemoryOps:
    """The working-memory methods of the Redis transaction (see the store protocol).
    The host class provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    _check: Callable[..., None]
    _memory: dict[str, WorkingMemory]

    @functools.cached_property
    def _new_history(self) -> dict[str, list[tuple[int, WorkingMemory]]]:
        """Session id -> the history rows this transaction wrote: (at_seq, memory)."""
        return {}

    @functools.cached_property
    def _history_cut(self) -> dict[str, int]:
        """Session id -> the lowest clamp this transaction applied to stored rows."""
        return {}

    @translated
    def get_working_memory(self, session_id: str) -> WorkingMemory | None:
        if session_id in self._memory:
            return self._memory[session_id].model_copy(deep=True)
        if not self._stored(session_id):
            return None
        raw = self._r.get(memory_keys(session_id)[0])
        return None if raw is None else _dec(raw)

    @translated
    def put_working_memory(self, memory: WorkingMemory, *, at_seq: int) -> None:
        """Buffer the SET of the document, a ZDROPAT of the stored rows at ``at_seq``,
        the HSET and ZADD of its history row."""
        self._writing()
        sid = memory.session_id
        self._require_session(sid)
        current, history, at = memory_keys(sid)
        if self._stored(sid):
            self._check("HNX", history, str(memory.version))
        self._memory[sid] = memory.model_copy(deep=True)
        self._do("SET", current, _enc(memory))
        self._do("ZDROPAT", at, at_seq)  # the rows at at_seq can never be read again
        self._do("HSET", history, str(memory.version), _enc(memory))
        self._do("ZADD", at, at_seq, _member(memory.version))
        self._new_history.setdefault(sid, []).append((at_seq, memory.model_copy(deep=True)))

    @translated
    def get_working_memory_at(self, session_id: str, seq: int) -> WorkingMemory | None:
        """This transaction's newest qualifying row, else the stored one."""
        mine = [m for at, m in self._new_history.get(session_id, []) if at <= seq]
        if mine:  # written here: newer than every stored row
            return mine[-1].model_copy(deep=True)
        if not self._stored(session_id):
            return None
        _, history, at = memory_keys(session_id)
        cut = self._history_cut.get(session_id)
        # A clamp at or below seq brought every stored row to at most seq.
        high = "+inf" if cut is not None and cut <= seq else seq
        top = self._r.zrevrangebyscore(at, high, "-inf", start=0, num=1)
        assert not inspect.isawaitable(top)
        if not top:
            return None
        return _dec(self._r.hget(history, str(int(top[0]))))

    @translated
    def list_memory_history(
        self, session_id: str, *, before_seq: int | None, limit: int
    ) -> list[MemoryVersion]:
        """This transaction's rows first (newer than every stored one), then the stored
        ones: one ZREVRANGEBYSCORE with scores and one HMGET of their documents."""
        mine = [
            (at, m)
            for at, m in reversed(self._new_history.get(session_id, []))
            if before_seq is None or at < before_seq
        ][:limit]
        found = [_version(at, m) for at, m in mine]
        if len(found) == limit or not self._stored(session_id):
            return found
        _, history, at_key = memory_keys(session_id)
        high = "+inf" if before_seq is None else f"({before_seq}"
        low = f"({mine[-1][0]}" if mine else "-inf"  # the stored rows below this tx's
        rows = self._r.zrevrangebyscore(
            at_key, high, low, start=0, num=limit - len(found), withscores=True
        )
        assert not inspect.isawaitable(rows)
        if not rows:
            return found
        docs = self._r.hmget(history, [str(int(member)) for member, _ in rows])
        assert not inspect.isawaitable(docs)
        found += [
            _version(int(score), _dec(doc)) for (_, score), doc in zip(rows, docs, strict=True)
        ]
        return found

    @translated
    def rebase_memory_history(self, session_id: str, *, after_seq: int) -> None:
        """Clamp this transaction's rows, and buffer a ZCLAMP of the stored ones (it
        keeps the newest at or above ``after_seq`` only; reads here need no change: the
        newest is the one they find at or above the clamp)."""
        self._writing()
        self._require_session(session_id)
        mine = self._new_history.get(session_id, [])
        mine[:] = [(min(at, after_seq), m) for at, m in mine]
        if self._stored(session_id):
            cut = self._history_cut.get(session_id, after_seq)
            self._history_cut[session_id] = min(cut, after_seq)
        self._do("ZCLAMP", memory_keys(session_id)[2], after_seq)
