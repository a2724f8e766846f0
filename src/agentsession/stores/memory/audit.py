"""Audit events and idempotency records on the in-memory store, as a part of its
transaction class. A session's events live with it; its tombstone event outlives it, in
the store's list of tombstones. Idempotency records are keyed ``(user_id, scope, key)``."""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime

from ...models import AuditEvent
from ..base import IdempotencyRecord, StoreConflict
from .state import TransactionBase, copy, seq_of

__all__ = ["AuditOps"]


class AuditOps(TransactionBase):
    """The audit and idempotency methods of the in-memory transaction (see the store
    protocol)."""

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
        start = 0 if after_seq is None else bisect_right(rows, after_seq, key=seq_of)
        return [copy(e) for e in rows[start:][:limit]]

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
