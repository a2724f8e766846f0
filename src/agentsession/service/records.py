"""Use cases on a session's opaque records: put, get, list, delete.

A record is ``(namespace, key) -> (data: bytes, meta: JSON object)``, kept for a
framework's own state (a checkpointer's checkpoints and writes) and never interpreted:
the data is stored and returned byte for byte. Records live and die with their session
(delete and erasure take them); they count toward no other limit of the session.
Writes go through the write pipeline like any other (ACTIVE only, ownership,
``expected_version``, idempotency keys, one version step, one audit event of counts only:
no namespace, key or data).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ..errors import PayloadTooLarge, ValidationError
from ..fieldlimits import RECORD_KEY_CHARS, RECORD_NAMESPACE_CHARS
from ..models import DeleteRecordsResult, PutRecordsResult, Record, RecordWrite, Session
from ..principal import Principal
from ..stores.base import StoreTransaction
from .core import ServiceCore
from .pipeline import Change, Unchanged, WriteRequest
from .transitions import next_version
from .validation import check_object, check_record_name

__all__ = ["MAX_RECORD_META_BYTES", "RecordUseCases"]

#: The largest ``meta`` of a record, in bytes of its UTF-8 JSON.
MAX_RECORD_META_BYTES = 64 * 1024

_PUT: TypeAdapter[PutRecordsResult] = TypeAdapter(PutRecordsResult)
_DELETED: TypeAdapter[DeleteRecordsResult] = TypeAdapter(DeleteRecordsResult)


class RecordUseCases(ServiceCore):
    """Session records (part of :class:`SessionManager`)."""

    def put_records(
        self,
        *,
        session_id: str,
        user_id: str,
        records: Sequence[RecordWrite],
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> PutRecordsResult:
        """Insert or replace records of the session, all in one transaction.

        Each :class:`RecordWrite` replaces the record of its ``(namespace, key)``, or,
        with ``if_absent``, leaves an existing one untouched; of two writes of one
        ``(namespace, key)`` in a batch the later one counts. Writing anything is one
        version step (the TTL clock restarts as for an append) and one audit event
        ``records.put`` with counts only (never namespaces, keys or data); every
        written record gets ``version`` = the new session version. Writing nothing
        (``[]``, or only ``if_absent`` records that exist) changes nothing.
        ``user_id`` names the caller.

        Returns:
            ``PutRecordsResult(written, session_version)``; a retry with the same
            ``idempotency_key`` answers the first result again and writes nothing.

        Raises:
            ValidationError: not a list of RecordWrite, more than
                ``limits.max_batch_messages`` records, a bad namespace (0-128
                characters) or key (1-512 characters; control characters refused in
                both), data not bytes, meta not a JSON object.
            PayloadTooLarge: ``data`` over ``limits.max_record_bytes``, ``meta`` over
                64 KiB of JSON.
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
        """
        writes = self._check_writes(records)
        fingerprint = [
            (w.namespace, w.key, hashlib.sha256(w.data).hexdigest(), dict(w.meta), w.if_absent)
            for w in writes
        ]

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Unchanged:
            version = next_version(s)
            rows = [
                Record(
                    session_id=s.session_id,
                    namespace=w.namespace,
                    key=w.key,
                    data=w.data,
                    meta=dict(w.meta),
                    version=version,
                    updated_at=now,
                )
                for w in writes
                if not (w.if_absent and tx.get_record(s.session_id, w.namespace, w.key) is not None)
            ]
            if not rows:
                return Unchanged(PutRecordsResult(written=0, session_version=s.version))
            tx.put_records(rows)
            # Counts only: a namespace is caller-chosen text, kept out of the log.
            namespace_count = len({r.namespace for r in rows})
            details = {
                "count": len(rows),
                "kept": len(writes) - len(rows),
                "namespace_count": namespace_count,
            }
            result = PutRecordsResult(written=len(rows), session_version=s.version)
            return Change(s, "records.put", details, result)

        request = WriteRequest(
            scope="put_records",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_PUT,
            request=(fingerprint,),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def get_record(
        self, *, session_id: str, user_id: str, namespace: str, key: str, admin: bool = False
    ) -> Record | None:
        """Return the session's record of ``(namespace, key)``, or None if absent.

        Raises:
            ValidationError: a bad namespace or key. SessionNotFound.
        """
        ns = _namespace(namespace)
        k = check_record_name(key, "key", min_chars=1, max_chars=RECORD_KEY_CHARS)
        return self._reads.read(
            session_id, Principal(user_id, admin), lambda tx, s: tx.get_record(s.session_id, ns, k)
        )

    def list_records(
        self,
        *,
        session_id: str,
        user_id: str,
        namespace: str | None = None,
        prefix: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        descending: bool = False,
        admin: bool = False,
    ) -> list[Record]:
        """The session's records ordered by ``(namespace, key)`` in Unicode code-point
        order (the same on every store), or the reverse with ``descending``.

        Args:
            namespace: only this namespace; None = every namespace.
            prefix: only keys starting with it.
            after, before: only keys strictly greater / smaller (exclusive bounds, on
                the key). Page on with ``after=<last key>`` (``before`` when
                descending) within one namespace.
            limit: at most this many, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.

        Raises:
            ValidationError: a bad namespace, key bound, or limit. SessionNotFound.
        """
        ns = None if namespace is None else _namespace(namespace)
        bounds = {
            name: None if value is None else _key_bound(value, name)
            for name, value in (("prefix", prefix), ("after", after), ("before", before))
        }
        if type(descending) is not bool:
            raise ValidationError("descending must be a boolean", field="descending")
        size = self._page_size(limit)
        return self._reads.read(
            session_id,
            Principal(user_id, admin),
            lambda tx, s: tx.list_records(
                s.session_id, namespace=ns, limit=size, descending=descending, **bounds
            ),
        )

    def delete_records(
        self,
        *,
        session_id: str,
        user_id: str,
        namespace: str | None = None,
        prefix: str | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> DeleteRecordsResult:
        """Delete the session's records of ``namespace`` (None = every namespace) whose
        key starts with ``prefix`` (None = any), in one transaction.

        Removing something is one version step and one audit event
        ``records.deleted`` (count and namespace only); removing nothing changes
        nothing. Like a message removal this is not an erasure: deleted bytes can stay
        on the store's disk until a scrub (delete the session to erase).

        Returns:
            ``DeleteRecordsResult(removed, session_version)``; a retry with the same
            ``idempotency_key`` answers the first result again.

        Raises:
            ValidationError: a bad namespace or prefix.
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
        """
        ns = None if namespace is None else _namespace(namespace)
        pre = None if prefix is None else _key_bound(prefix, "prefix")

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Unchanged:
            removed = tx.delete_records(s.session_id, namespace=ns, prefix=pre)
            result = DeleteRecordsResult(removed=removed, session_version=s.version)
            if not removed:
                return Unchanged(result)
            details = {
                "count": removed,
                "namespace_given": ns is not None,
                "prefix_given": pre is not None,
            }
            return Change(s, "records.deleted", details, result)

        request = WriteRequest(
            scope="delete_records",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_DELETED,
            request=(ns, pre),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def _check_writes(self, records: Any) -> list[RecordWrite]:
        """The checked writes of a ``put_records`` call (see its Raises)."""
        if isinstance(records, Mapping | str | bytes) or not isinstance(records, Sequence):
            raise ValidationError("records must be a list of RecordWrite", field="records")
        if len(records) > self.limits.max_batch_messages:
            raise ValidationError(
                f"at most {self.limits.max_batch_messages} records per call", field="records"
            )
        writes = [self._check_write(w, f"records[{i}]") for i, w in enumerate(records)]
        # One (namespace, key) twice: the later write wins, as if sent one after another.
        last = {(w.namespace, w.key): w for w in writes}
        return [w for w in writes if last[(w.namespace, w.key)] is w]

    def _check_write(self, write: Any, field: str) -> RecordWrite:
        if not isinstance(write, RecordWrite):
            raise ValidationError(f"{field} must be a RecordWrite", field=field)
        _namespace(write.namespace, f"{field}.namespace")
        check_record_name(write.key, f"{field}.key", min_chars=1, max_chars=RECORD_KEY_CHARS)
        data = write.data
        if not isinstance(data, bytes | bytearray):
            raise ValidationError(f"{field}.data must be bytes", field=f"{field}.data")
        if len(data) > self.limits.max_record_bytes:
            raise PayloadTooLarge(
                field=f"{field}.data",
                limit_bytes=self.limits.max_record_bytes,
                size_bytes=len(data),
            )
        if type(write.if_absent) is not bool:
            raise ValidationError(
                f"{field}.if_absent must be a boolean", field=f"{field}.if_absent"
            )
        meta = check_object(write.meta, f"{field}.meta", limit_bytes=MAX_RECORD_META_BYTES)
        return RecordWrite(write.namespace, write.key, bytes(data), meta, write.if_absent)


def _namespace(value: Any, field: str = "namespace") -> str:
    return check_record_name(value, field, min_chars=0, max_chars=RECORD_NAMESPACE_CHARS)


def _key_bound(value: Any, field: str) -> str:
    """A ``prefix``, ``after`` or ``before``: like a key, but may be empty."""
    return check_record_name(value, field, min_chars=0, max_chars=RECORD_KEY_CHARS)
