"""Use cases on the working memory: read, replace, merge-patch, JSON Patch ops,
read-modify-write."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ..errors import ValidationError, VersionConflict
from ..models import MemoryVersion, Page, Session, WorkingMemory
from ..principal import Principal
from ..stores.base import SessionRow, StoreTransaction
from .changes.memory import apply_memory
from .changes.shared import apply_shared_ops, check_shared_ops
from .core import ServiceCore
from .modelcopy import updated
from .paging import Listing, Position
from .patchops import check_ops
from .pipeline import RowChange, RowWrite, request_parts
from .reads import memory_as_of, memory_of
from .validation import check_cursor_seq, check_memory, check_patch

__all__ = ["MemoryUseCases"]

_MEMORY: TypeAdapter[WorkingMemory] = TypeAdapter(WorkingMemory)


class MemoryUseCases(ServiceCore):
    """Working-memory use cases (part of :class:`SessionManager`)."""

    def get_working_memory(
        self, *, session_id: str, user_id: str, admin: bool = False, at_seq: int | None = None
    ) -> WorkingMemory:
        """Return the working memory (an empty document at version 0 if never written),
        or with ``at_seq`` the memory as it stood at message ``at_seq``: the newest
        write made while the history ended at or before that seq, i.e. the memory in
        effect when message ``at_seq + 1`` was appended (0: before the first message,
        i.e. the creation memory or the last update made before any message;
        ``message_count``: the current memory). A session stored before the history
        existed reads an empty document below the seq its history starts at (SQL: its
        ``message_count`` at the migration; Redis: it has no history). Its ``version``
        is the session version the write produced (docs/semantics.md,
        "Working-memory history").

        ``user_id`` names the caller (the principal).

        Raises:
            ValidationError: a malformed id, or ``at_seq`` not an integer from 0 to the
                session's ``message_count``.
            SessionNotFound.
        """
        seq = check_cursor_seq(at_seq, "at_seq")
        if seq is None:
            return self._reads.read(session_id, Principal(user_id, admin), memory_of)
        return self._reads.read(
            session_id, Principal(user_id, admin), lambda tx, s: memory_as_of(tx, s, seq)
        )

    def list_memory_versions(
        self,
        *,
        session_id: str,
        user_id: str,
        before: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[MemoryVersion]:
        """A page of the working memory's history, newest first: each version with the
        first message seq it was in effect at (so ``get_working_memory(at_seq=...)`` of
        any seq from it up to the next version's answers it). The history keeps one
        version per seq, the newest (docs/semantics.md, "Working-memory history"); a
        session stored before the history existed lists the versions written since.
        ``user_id`` names the caller (the principal).

        Args:
            before: only versions that came into effect before this seq (exclusive);
                None = from the newest.
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this listing (pages back to older
                versions).

        Returns:
            A page; ``next_cursor`` is None when no older version lies beyond it. A
            page costs its rows, whatever the history holds.

        Raises:
            SessionNotFound, ValidationError (a bad bound, or a cursor not of this
            listing, or both).
        """
        bound = check_cursor_seq(before, "before")
        size = self._page_size(limit)
        listing = Listing("memory_versions", session_id)
        start = listing.start(cursor, after=None, before=bound, newest_first=True)

        def read(tx: StoreTransaction, s: Session) -> Page[MemoryVersion]:
            if size == 0:
                return Page(items=[])
            rows = tx.list_memory_history(s.session_id, before_seq=start.seq, limit=size + 1)
            items = rows[:size]
            more = len(rows) > size
            cursor = listing.cursor(Position(older=True, seq=items[-1].seq)) if more else None
            return Page(items=items, next_cursor=cursor)

        return self._reads.read(session_id, Principal(user_id, admin), read)

    def update_working_memory(
        self,
        *,
        session_id: str,
        user_id: str,
        data: Mapping[str, Any] | None = None,
        patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        ops: Sequence[Mapping[str, Any]] | None = None,
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> WorkingMemory:
        """Replace the working memory (``data``), merge-patch it (``patch``, RFC 7396) or
        apply JSON Patch ``ops`` to it (RFC 6902: ``add``, ``remove``, ``replace``,
        ``move``, ``copy``, ``test``; paths are JSON Pointers, RFC 6901).

        Exactly one of ``data``, ``patch`` and ``ops``. ``ops`` can store ``null`` and
        replace a whole object, which a merge patch cannot; they apply all or none
        (a failed ``test`` writes nothing). ``shared_memory_ops`` changes shared memory
        in the same transaction (see :meth:`append_messages`). Standard keys are
        type-checked: ``goal``
        and ``next_action`` str or null, ``completed`` and ``errors`` lists, ``facts`` an
        object. The result is at most ``limits.max_working_memory_bytes``. ``user_id``
        names the caller (the principal).

        Returns:
            The new working memory; its ``version`` is the session's new version.

        Raises:
            ValidationError: a malformed argument; for ``ops``, ``field`` names the
                op's index (``ops[2]``).
            PatchConflict: an op does not apply to the stored document (nothing written).
            Forbidden: ``shared_memory_ops["app"]`` without admin.
            PayloadTooLarge, UnsupportedValue, SessionNotFound, SessionNotActive,
            VersionConflict, IdempotencyKeyReused.
        """
        if sum(arg is not None for arg in (data, patch, ops)) != 1:
            raise ValidationError("pass exactly one of data, patch and ops", field="data")
        limits = self.limits
        full = check_memory(data, limits) if data is not None else None
        merge = check_patch(patch, limits) if patch is not None else None
        checked_ops = None
        if ops is not None:
            checked_ops = check_ops(
                ops,
                field="ops",
                limit_bytes=limits.max_working_memory_bytes,
                max_ops=limits.max_patch_ops,
            )
        shared = None
        if shared_memory_ops is not None:
            shared = check_shared_ops(shared_memory_ops, limits, admin=admin)
        mode = "replace" if full is not None else "merge" if merge is not None else "ops"

        def change(
            tx: StoreTransaction, row: SessionRow, now: datetime
        ) -> RowChange[WorkingMemory]:
            memory = apply_memory(
                tx,
                row,
                now,
                limits,
                data=full,
                patch=merge,
                ops=checked_ops,
                at_seq=row.message_count,
            )
            details: dict[str, Any] = {"mode": mode}
            if shared:
                details["shared"] = apply_shared_ops(tx, row, now, limits, shared)
            answer = updated(memory, {"session_version": row.version + 1})
            return RowChange("memory.updated", details, answer, row.message_count)

        request = RowWrite(
            scope="update_working_memory",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_MEMORY,
            request=request_parts(full, merge, checked_ops, shared, required=2),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )
        return self._pipeline.write_row(request).value

    def modify_working_memory(
        self,
        *,
        session_id: str,
        user_id: str,
        fn: Callable[[dict[str, Any]], Mapping[str, Any]],
        max_attempts: int = 10,
        admin: bool = False,
    ) -> WorkingMemory:
        """Read-modify-write with optimistic locking, retried on VersionConflict.

        ``fn`` receives a copy of the current document and returns the new one; it may
        run more than once, so it must not have side effects. The read version is sent
        as ``expected_version``, so no concurrent update is ever lost. ``user_id`` names
        the caller (the principal).

        Any write to the session (an append too) bumps the version the write is checked
        against, so a busy session needs more attempts; between them this waits
        :meth:`VersionConflict.retry_delay` (exponential from 5 ms to 0.5 s, jittered).

        Args:
            max_attempts: how many read-modify-write attempts, at least 1.

        Raises:
            VersionConflict: still conflicting after ``max_attempts`` tries (its
                ``attempts`` says how many, and its message).
            ValidationError: ``max_attempts`` is not an integer >= 1.
            Everything :meth:`update_working_memory` raises.
        """
        if type(max_attempts) is not int or max_attempts < 1:
            raise ValidationError("max_attempts must be an integer >= 1", field="max_attempts")
        for attempt in range(1, max_attempts + 1):
            current = self.get_working_memory(session_id=session_id, user_id=user_id, admin=admin)
            try:
                return self.update_working_memory(
                    session_id=session_id,
                    user_id=user_id,
                    data=fn(dict(current.data)),
                    expected_version=current.session_version,
                    admin=admin,
                )
            except VersionConflict as exc:
                if attempt == max_attempts:
                    raise exc.gave_up(attempt) from exc
                time.sleep(VersionConflict.retry_delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover
