"""Session records on the in-memory store, as a part of its transaction class: one dict
per session, keyed ``(namespace, key)``, listed in that order by
:func:`~agentsession.stores.recordkeys.select_keys`."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ...models import Record
from ..recordkeys import select_keys
from .state import TransactionBase, copy

__all__ = ["RecordOps"]


def _restore(rows: dict[tuple[str, str], Record], k: tuple[str, str], old: Record | None) -> None:
    """Undo a record write: put back ``old``, or drop the key if there was none."""
    if old is None:
        rows.pop(k, None)
    else:
        rows[k] = old


class RecordOps(TransactionBase):
    """The session-record methods of the in-memory transaction (see the store protocol)."""

    def put_records(self, records: Sequence[Record]) -> None:
        self._writing()
        for record in records:
            rows = self._data(record.session_id).records
            k = (record.namespace, record.key)
            self._undo.append(functools.partial(_restore, rows, k, rows.get(k)))
            rows[k] = copy(record)

    def get_record(self, session_id: str, namespace: str, key: str) -> Record | None:
        data = self._s._sessions.get(session_id)
        record = None if data is None else data.records.get((namespace, key))
        return None if record is None else copy(record)

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
        return [copy(data.records[k]) for k in keys]

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
