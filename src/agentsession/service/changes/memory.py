"""Writing the working memory inside a write: the state change that the memory use
cases, session writes carrying memory (:mod:`.statechange`) and rewinds share."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...models import Session, WorkingMemory
from ...stores.base import SessionRow, StoreTransaction
from ..mergepatch import merge_patch
from ..patchops import apply_ops
from ..policy import Limits
from ..transitions import next_version
from ..validation import check_memory

__all__ = ["apply_memory"]


def apply_memory(
    tx: StoreTransaction,
    s: Session | SessionRow,
    now: datetime,
    limits: Limits,
    *,
    data: dict[str, Any] | None = None,
    patch: dict[str, Any] | None = None,
    ops: list[dict[str, Any]] | None = None,
    ops_field: str = "ops",
    at_seq: int,
) -> WorkingMemory:
    """Write the working memory (``data``, or the current one merge-patched with
    ``patch`` or changed by the checked JSON Patch ``ops``) at the version ``s`` (the
    session before this change) will have once the change is stored; the write
    pipeline sets ``session_version`` on the answer. ``ops_field`` names the ops'
    argument in errors. ``at_seq`` is the session's ``message_count`` once the change
    is stored (an append's last seq): the history row's position
    (docs/semantics.md, "Working-memory history").

    Raises:
        PatchConflict: an op does not apply to the current document.
        PayloadTooLarge, ValidationError: the new document breaks ``limits``.
    """
    if patch is not None or ops is not None:
        current = tx.get_working_memory(s.session_id)
        base = current.data if current else {}
        if patch is not None:
            new = merge_patch(base, patch)
        else:
            new = apply_ops(
                base, ops or [], field=ops_field, limit_bytes=limits.max_working_memory_bytes
            )
        data = check_memory(new, limits)
    memory = WorkingMemory(
        session_id=s.session_id, version=next_version(s), updated_at=now, data=data or {}
    )
    tx.put_working_memory(memory, at_seq=at_seq)
    return memory
