"""Shared-memory documents inside a write: the scopes, the checks of a document and of
ops by scope, and the versioned write that the shared-memory use cases and the session
writes carrying ``shared_memory_ops`` share."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...errors import Forbidden, ValidationError
from ...jsonvalues import check_json
from ...models import Scope, Session, SharedMemory
from ...stores.base import SessionRow, StoreTransaction
from ..patchops import apply_ops, check_ops
from ..policy import Limits

__all__ = [
    "SCOPES",
    "apply_shared_ops",
    "check_document",
    "check_shared_ops",
    "current_document",
    "write_document",
]

#: The scopes, in the order a session write applies them.
SCOPES: tuple[Scope, ...] = ("app", "user")


def check_document(data: Any, limits: Limits, *, field: str) -> dict[str, Any]:
    """A whole shared document: a JSON object within the memory size limit."""
    if not isinstance(data, Mapping):
        raise ValidationError(f"{field} must be a JSON object", field=field)
    document = dict(data)
    check_json(document, field=field, limit_bytes=limits.max_working_memory_bytes)
    return document


def current_document(
    tx: StoreTransaction, scope: Scope, agent: str, owner: str | None
) -> SharedMemory:
    doc = tx.get_shared_memory(agent, owner)
    return doc if doc is not None else SharedMemory(scope=scope, agent=agent, user_id=owner)


def write_document(
    tx: StoreTransaction,
    current: SharedMemory,
    now: datetime,
    limits: Limits,
    *,
    data: dict[str, Any] | None = None,
    ops: list[dict[str, Any]] | None = None,
    field: str = "ops",
) -> SharedMemory:
    """Store ``data`` (or ``current`` changed by ``ops``) one version above ``current``,
    compare-and-set against its version."""
    if ops is not None:
        data = check_document(
            apply_ops(current.data, ops, field=field, limit_bytes=limits.max_working_memory_bytes),
            limits,
            field=field,
        )
    doc = current.model_copy(
        update={"version": current.version + 1, "updated_at": now, "data": data or {}}
    )
    tx.put_shared_memory(doc, expected_version=current.version)
    return doc


def check_shared_ops(
    value: Any, limits: Limits, *, admin: bool, field: str = "shared_memory_ops"
) -> dict[Scope, list[dict[str, Any]]]:
    """``{"app": [...ops], "user": [...ops]}`` (either key may be left out) checked:
    each list as :func:`~.patchops.check_ops`; the ``app`` key needs ``admin``.

    Raises:
        ValidationError: not an object, an unknown scope, malformed ops
            (``field`` e.g. ``shared_memory_ops.user[1].path``). Forbidden: ``app``
            without admin.
    """
    if not isinstance(value, Mapping):
        raise ValidationError(f"{field} must be an object of op lists by scope", field=field)
    unknown = sorted(str(k) for k in value if k not in SCOPES)
    if unknown:
        raise ValidationError(
            f"{field} takes the scopes 'app' and 'user', not {unknown[0][:40]!r}", field=field
        )
    if "app" in value and not admin:
        raise Forbidden("the app scope of shared memory is shared by every user: needs admin=True")
    limit = limits.max_working_memory_bytes
    return {
        scope: check_ops(
            value[scope], field=f"{field}.{scope}", limit_bytes=limit, max_ops=limits.max_patch_ops
        )
        for scope in SCOPES
        if scope in value
    }


def apply_shared_ops(
    tx: StoreTransaction,
    s: Session | SessionRow,
    now: datetime,
    limits: Limits,
    ops: Mapping[Scope, list[dict[str, Any]]],
    *,
    field: str = "shared_memory_ops",
) -> list[str]:
    """Apply checked ``ops`` to the documents of ``s``'s agent (``app``) and of its
    owner and agent (``user``), in the session write's transaction.

    Returns:
        The scopes written, for the session's audit event (no values).

    Raises:
        PatchConflict, ValidationError, PayloadTooLarge: an op does not apply, or the
            result is not an object within the limit.
    """
    for scope, scope_ops in ops.items():
        owner = None if scope == "app" else s.user_id
        current = current_document(tx, scope, s.agent, owner)
        write_document(tx, current, now, limits, ops=scope_ops, field=f"{field}.{scope}")
    return list(ops)
