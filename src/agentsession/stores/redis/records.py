"""Session records on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:records      hash  "<namespace>\\x00<key>" -> {"d": base64 data, "m": meta,
                                "v": version, "t": updated_at} JSON
    as:{sid}:records:idx  zset  score 0, member "<namespace>\\x00<key>"

Redis orders equal-score members by their bytes (ZRANGEBYLEX), and UTF-8 byte order is
code-point order; a namespace holds no control character, so NUL ends it and sorts
before every character: the index lists ``(namespace, key)`` in the order of every
store. Writes are buffered like every other write and applied by the commit script;
every record write also rewrites the session (its version), whose guard makes the
transaction a compare-and-set.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...jsonvalues import dumps, loads
from ...models import Record
from ..recordkeys import prefix_end, select_keys

if TYPE_CHECKING:
    import redis

__all__ = ["RecordOps", "lex_range"]

_SEP = "\x00"


def _member(namespace: str, key: str) -> str:
    return f"{namespace}{_SEP}{key}"


def _split(member: str) -> tuple[str, str]:
    namespace, _, key = member.partition(_SEP)
    return namespace, key


def _enc(record: Record) -> str:
    return dumps(
        {
            "d": base64.b64encode(record.data).decode("ascii"),
            "m": record.meta,
            "v": record.version,
            "t": record.updated_at.isoformat(),
        }
    )


def _dec(session_id: str, member: str, text: str) -> Record:
    value = loads(text)
    namespace, key = _split(member)
    return Record(
        session_id=session_id,
        namespace=namespace,
        key=key,
        data=base64.b64decode(value["d"], validate=True),
        meta=value["m"],
        version=value["v"],
        updated_at=datetime.fromisoformat(value["t"]),
    )


def lex_range(
    namespace: str, prefix: str | None, after: str | None, before: str | None
) -> tuple[bytes, bytes]:
    """ZRANGEBYLEX bounds (``min``, ``max``, as bytes) of one namespace's keys that
    start with ``prefix`` and lie strictly between ``after`` and ``before``."""
    base = (namespace + _SEP).encode()
    lows = [(base + (prefix or "").encode(), b"[")]
    if after is not None:
        lows.append((base + after.encode(), b"("))
    # The larger start wins; at a tie the exclusive one (it says more).
    low, low_kind = max(lows, key=lambda b: (b[0], b[1] == b"("))
    highs = [namespace.encode() + b"\x01"]  # just past every member of the namespace
    if before is not None:
        highs.append(base + before.encode())
    if prefix and (end := prefix_end(prefix)) is not None:
        highs.append(base + end.encode())
    return low_kind + low, b"(" + min(highs)


class RecordOps:
    """The record methods of the Redis transaction (see the store protocol). The host
    class provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _fresh: set[str]
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]

    @functools.cached_property
    def _records(self) -> dict[str, dict[str, Record | None]]:
        """Session id -> member -> the record as buffered here (None = deleted here)."""
        return {}

    def _pending(self, session_id: str) -> dict[str, Record | None]:
        """This transaction's record writes of the session; none once it deleted the
        session (its records go at commit)."""
        return {} if session_id in self._fresh else self._records.get(session_id, {})

    def put_records(self, records: Sequence[Record]) -> None:
        """Buffer an HSET and a ZADD per record."""
        self._writing()
        for record in records:
            sid = record.session_id
            self._require_session(sid)
            member = _member(record.namespace, record.key)
            self._do("HSET", _key(sid), member, _enc(record))
            self._do("ZADD", _key(sid) + ":idx", 0, member)
            self._records.setdefault(sid, {})[member] = record.model_copy(deep=True)

    def get_record(self, session_id: str, namespace: str, key: str) -> Record | None:
        """The record as this transaction sees it."""
        member = _member(namespace, key)
        pending = self._pending(session_id)
        if member in pending:
            found = pending[member]
            return None if found is None else found.model_copy(deep=True)
        if not self._stored(session_id):
            return None
        raw = self._r.hget(_key(session_id), member)
        return None if raw is None else _dec(session_id, member, str(raw))

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
        """One namespace: a ZRANGEBYLEX of exactly the rows asked for. Every namespace,
        or records buffered here: the whole index, filtered here."""
        if limit is not None and limit <= 0:
            return []
        if namespace is not None and not self._pending(session_id):
            members = self._lex_members(
                session_id, namespace, prefix, after, before, limit, descending
            )
        else:
            members = [
                _member(ns, k)
                for ns, k in select_keys(
                    map(_split, self._members(session_id)),
                    namespace=namespace,
                    prefix=prefix,
                    after=after,
                    before=before,
                    limit=limit,
                    descending=descending,
                )
            ]
        return self._load(session_id, members)

    def delete_records(
        self, session_id: str, *, namespace: str | None = None, prefix: str | None = None
    ) -> int:
        """Buffer an HDEL and a ZREM per matching record; return how many."""
        self._writing()
        self._require_session(session_id)
        doomed = select_keys(
            map(_split, self._members(session_id)),
            namespace=namespace,
            prefix=prefix,
            after=None,
            before=None,
            limit=None,
            descending=False,
        )
        pending = self._records.setdefault(session_id, {})
        for ns, k in doomed:
            member = _member(ns, k)
            self._do("HDEL", _key(session_id), member)
            self._do("ZREM", _key(session_id) + ":idx", member)
            pending[member] = None
        return len(doomed)

    def _members(self, session_id: str) -> list[str]:
        """Every member of the session's index as this transaction sees it."""
        stored: set[str] = set()
        if self._stored(session_id):
            stored = {str(m) for m in self._zrange(_key(session_id) + ":idx")}
        for member, record in self._pending(session_id).items():
            if record is None:
                stored.discard(member)
            else:
                stored.add(member)
        return list(stored)

    def _zrange(self, key: str) -> list[Any]:
        reply: Any = self._r.zrange(key, 0, -1)
        return list(reply)

    def _lex_members(
        self,
        session_id: str,
        namespace: str,
        prefix: str | None,
        after: str | None,
        before: str | None,
        limit: int | None,
        descending: bool,
    ) -> list[str]:
        if not self._stored(session_id):
            return []
        low, high = lex_range(namespace, prefix, after, before)
        if low[1:] >= high[1:]:
            return []  # an empty range (Redis would refuse none, but answer nothing)
        key = _key(session_id) + ":idx"
        start = None if limit is None else 0
        reply: Any = (
            self._r.zrevrangebylex(key, high, low, start=start, num=limit)
            if descending
            else self._r.zrangebylex(key, low, high, start=start, num=limit)
        )
        return [str(m) for m in reply]

    def _load(self, session_id: str, members: list[str]) -> list[Record]:
        """The records of ``members`` (in that order), from this transaction's buffer
        or one HMGET."""
        pending = self._pending(session_id)
        stored = [m for m in members if m not in pending]
        raws: Any = self._r.hmget(_key(session_id), stored) if stored else []
        found = dict(zip(stored, raws, strict=True))
        rows = []
        for member in members:
            if member in pending:
                record = pending[member]
                if record is not None:
                    rows.append(record.model_copy(deep=True))
            elif found.get(member) is not None:
                rows.append(_dec(session_id, member, str(found[member])))
        return rows


def _key(session_id: str) -> str:
    return f"as:{{{session_id}}}:records"
