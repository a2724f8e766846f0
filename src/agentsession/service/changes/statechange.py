"""The state an append changes besides its messages, in the append's transaction: the
working memory (an RFC 7396 merge patch or RFC 6902 ops) and shared-memory documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...errors import ValidationError
from ...models import Scope, Session
from ...stores.base import SessionRow, StoreTransaction
from ..patchops import check_ops
from ..pipeline import request_parts
from ..policy import Limits
from ..validation import check_patch
from .memory import apply_memory
from .shared import apply_shared_ops, check_shared_ops

__all__ = ["StateChange"]

#: The argument of ``append_messages`` that carries JSON Patch ops, as errors name it.
_OPS_FIELD = "working_memory_ops"


@dataclass(frozen=True, slots=True)
class StateChange:
    """A checked state change (every part optional).

    Attributes:
        patch: a working-memory merge patch; ops: working-memory JSON Patch ops (not
            both); shared: JSON Patch ops by shared-memory scope.
    """

    patch: dict[str, Any] | None = None
    ops: list[dict[str, Any]] | None = None
    shared: dict[Scope, list[dict[str, Any]]] | None = None

    @classmethod
    def check(
        cls,
        patch: Mapping[str, Any] | None,
        ops: Sequence[Mapping[str, Any]] | None,
        shared: Mapping[str, Any] | None,
        limits: Limits,
        *,
        admin: bool,
    ) -> StateChange:
        """Check an append's ``working_memory_patch``, ``working_memory_ops`` and
        ``shared_memory_ops``.

        Raises:
            ValidationError: both memory forms, or a malformed one. Forbidden: the
                ``app`` scope without admin.
        """
        if patch is not None and ops is not None:
            raise ValidationError(
                "pass at most one of working_memory_patch and working_memory_ops", field=_OPS_FIELD
            )
        limit = limits.max_working_memory_bytes
        return cls(
            check_patch(patch, limits) if patch is not None else None,
            check_ops(ops, field=_OPS_FIELD, limit_bytes=limit, max_ops=limits.max_patch_ops)
            if ops is not None
            else None,
            check_shared_ops(shared, limits, admin=admin) if shared is not None else None,
        )

    def apply(
        self,
        tx: StoreTransaction,
        s: Session | SessionRow,
        now: datetime,
        limits: Limits,
        details: dict[str, Any],
        *,
        at_seq: int,
    ) -> None:
        """Write the change for the session ``s`` (as it was before the write) and
        note in the audit ``details`` what changed: ``memory`` (``merge``/``ops``),
        ``shared`` (the scopes), never values. ``at_seq``: the append's last seq, the
        memory history row's position (see :func:`apply_memory`).

        Raises:
            PatchConflict, ValidationError, PayloadTooLarge: see :func:`apply_memory`.
        """
        if self.patch is not None or self.ops is not None:
            apply_memory(
                tx,
                s,
                now,
                limits,
                patch=self.patch,
                ops=self.ops,
                ops_field=_OPS_FIELD,
                at_seq=at_seq,
            )
            details["memory"] = "merge" if self.patch is not None else "ops"
        if self.shared:
            details["shared"] = apply_shared_ops(tx, s, now, limits, self.shared)

    def request(self) -> tuple[Any, ...]:
        """The parts for the idempotency fingerprint: ``(patch,)`` as before ops and
        shared memory existed, longer only when those are sent, so keys recorded by
        older versions keep their fingerprints."""
        return request_parts(self.patch, self.ops, self.shared, required=1)
