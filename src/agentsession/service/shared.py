"""Shared memory: JSON documents shared by sessions, per agent (the ``app`` scope, every
user of the agent) or per user and agent (the ``user`` scope, one user's sessions).

A document has its own version (the number of writes), is written alone
(:meth:`SharedMemoryUseCases.update_shared_memory`) or by a session write in that
write's transaction (``shared_memory_ops`` of ``append_messages``,
``update_working_memory`` and ``create_session``: :func:`apply_shared_ops`). The app
scope crosses users, so it needs an admin principal (a trusted adapter).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from pydantic import TypeAdapter

from ..errors import Forbidden, ValidationError, VersionConflict
from ..ids import check_name, derived_id
from ..models import AuditEvent, Scope, SharedMemory
from ..principal import Principal
from ..stores.base import StoreTransaction
from .changes.shared import SCOPES, check_document, current_document, write_document
from .core import ServiceCore
from .erasure import tombstone_id
from .patchops import check_ops
from .validation import check_expected_version

__all__ = ["SharedMemoryUseCases"]


_SHARED: TypeAdapter[SharedMemory] = TypeAdapter(SharedMemory)


class SharedMemoryUseCases(ServiceCore):
    """Shared-memory use cases (part of :class:`SessionManager`)."""

    def get_shared_memory(
        self,
        *,
        scope: Scope,
        agent: str,
        user_id: str,
        target_user_id: str | None = None,
        admin: bool = False,
    ) -> SharedMemory:
        """Read a shared document: ``scope="user"`` is the caller's own (``user_id``,
        ``agent``), or with ``target_user_id`` that user's (another user's needs
        ``admin=True``); ``scope="app"`` is the agent's, shared by all its users, and
        needs ``admin=True``. A document never written reads as ``{}`` at version 0.

        Raises:
            ValidationError: a bad scope, agent or user id; a ``target_user_id`` with
                ``scope="app"`` (the app document belongs to no user). Forbidden: the
                app scope, or another user's document, without admin (raised before any
                read, so it says nothing of whether the document exists).
        """
        owner = _owner(scope, agent, user_id, target_user_id, admin)
        doc = self._uow.run(lambda tx: tx.get_shared_memory(agent, owner), write=False)
        return doc if doc is not None else SharedMemory(scope=scope, agent=agent, user_id=owner)

    def update_shared_memory(
        self,
        *,
        scope: Scope,
        agent: str,
        user_id: str,
        target_user_id: str | None = None,
        ops: Sequence[Mapping[str, Any]] | None = None,
        data: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> SharedMemory:
        """Replace a shared document (``data``, a JSON object) or apply RFC 6902 JSON
        Patch ``ops`` to it, exactly one of them; the scope and ``target_user_id``
        rules are :meth:`get_shared_memory`'s. The document is at most
        ``limits.max_working_memory_bytes``. Concurrent writers never lose an update:
        each write is a compare-and-set on the document's version, re-run when
        another writer got there first.

        Args:
            expected_version: optimistic locking on the document's own version (0 =
                never written); None = no precondition.
            idempotency_key: a retry with the same request answers the first result.

        Returns:
            The document as written; ``version`` one above the one it replaced.

        Raises:
            ValidationError, PayloadTooLarge, UnsupportedValue: bad arguments or result.
            Forbidden: the app scope or another user's document without admin.
            PatchConflict: an op does not apply. VersionConflict: ``expected_version``
            is stale (its ``session_id`` names the document as
            ``shared:<scope>:<agent>``). IdempotencyKeyReused.
        """
        owner = _owner(scope, agent, user_id, target_user_id, admin)
        check_expected_version(expected_version)
        if (ops is None) == (data is None):
            raise ValidationError("pass exactly one of ops and data", field="ops")
        limits = self.limits
        checked: list[dict[str, Any]] | dict[str, Any]
        if ops is not None:
            checked = check_ops(
                ops,
                field="ops",
                limit_bytes=limits.max_working_memory_bytes,
                max_ops=limits.max_patch_ops,
            )
        else:
            checked = check_document(data, limits, field="data")

        def change(tx: StoreTransaction, now: datetime) -> SharedMemory:
            current = current_document(tx, scope, agent, owner)
            _check_version(current, expected_version)
            if isinstance(checked, list):
                return write_document(tx, current, now, limits, ops=checked, field="ops")
            return write_document(tx, current, now, limits, data=checked)

        return self._pipeline.write_sessionless(
            Principal(user_id, admin),
            "update_shared_memory",
            idempotency_key,
            (scope, agent, owner, checked, expected_version),
            _SHARED,
            change,
            owner=owner,
        ).value

    def delete_shared_memory(
        self,
        *,
        scope: Scope,
        agent: str,
        user_id: str,
        target_user_id: str | None = None,
        expected_version: int | None = None,
        admin: bool = False,
    ) -> bool:
        """Delete one shared document (admin only): the agent's app document, or the
        user document of ``target_user_id`` (default: the caller) and ``agent``. A
        deletion leaves one content-free audit event (``shared_memory.deleted``:
        the owner as its keyed hash, the scope, the version deleted) under
        :meth:`shared_memory_audit_id`, readable with ``get_audit_log(admin=True)``.

        The document's version restarts: it reads as ``{}`` at version 0 and its next
        write is version 1, as if never written (a deleted row keeps nothing, and
        keeping a counter per deleted document would keep a trace of the user). So an
        ``expected_version`` read before the delete may match again after as many
        writes: re-read the document after deleting it.

        Args:
            expected_version: optimistic locking on the document's version (0 = never
                written); None = no precondition.

        Returns:
            Whether it existed.

        Raises:
            Forbidden: without admin. ValidationError: a bad scope, agent, user id or
                ``expected_version``; a ``target_user_id`` with ``scope="app"`` (the
                app document has no user). VersionConflict: ``expected_version`` is
                not the document's version.
        """
        if not admin:
            raise Forbidden("deleting a shared-memory document needs admin=True")
        owner = _owner(scope, agent, user_id, target_user_id, admin)
        check_expected_version(expected_version, minimum=0)
        audit_id = self._audit_id(scope, agent, owner)
        hashed_owner = "" if owner is None else tombstone_id(self._tombstone_key, owner)

        def body(tx: StoreTransaction) -> bool:
            current = current_document(tx, scope, agent, owner)
            _check_version(current, expected_version)
            if current.version == 0:
                return False
            tx.delete_shared_memory(agent, owner)
            tx.insert_audit(
                AuditEvent(
                    seq=0,
                    session_id=audit_id,
                    user_id=hashed_owner,
                    actor=user_id,
                    action="shared_memory.deleted",
                    at=self._uow.now(),
                    version_before=current.version,
                    details={"scope": scope},
                )
            )
            return True

        return self._uow.run(body, write=True)

    def shared_memory_audit_id(
        self, *, scope: Scope, agent: str, user_id: str, target_user_id: str | None = None
    ) -> str:
        """The id (``shm_`` and 26 base32 characters) under which the audit log keeps
        the deletions of one shared document (arguments as
        :meth:`delete_shared_memory`'s): a keyed hash of scope, agent and owner, so
        the same document always has the same id and the id names no user.

        Raises:
            ValidationError: bad arguments, as :meth:`get_shared_memory`.
        """
        owner = _owner(scope, agent, user_id, target_user_id, admin=True)
        return self._audit_id(scope, agent, owner)

    def _audit_id(self, scope: Scope, agent: str, owner: str | None) -> str:
        message = "\x00".join((scope, agent, owner or "")).encode("utf-8")
        return derived_id("shm", hmac.new(self._tombstone_key, message, "sha256").digest())


def _owner(scope: Any, agent: Any, user_id: Any, target_user_id: Any, admin: bool) -> str | None:
    """The document's ``user_id`` key (None for the app scope), after the checks: the
    app scope needs admin; a user document is the caller's, or ``target_user_id``'s
    (another user's needs admin; checked before any read, so a refusal says nothing of
    whether the document exists); a caller limited to agents touches only theirs
    (Forbidden otherwise)."""
    check_name(user_id, field="user_id")
    check_name(agent, field="agent")
    principal = Principal(user_id, admin)
    principal.check_agent(agent)
    if scope not in SCOPES:
        raise ValidationError("scope must be 'app' or 'user'", field="scope")
    if scope == "app":
        if not admin:
            raise Forbidden(
                "the app scope of shared memory is shared by every user: needs admin=True"
            )
        if target_user_id is not None:
            raise ValidationError(
                "the app document belongs to no user: pass no target_user_id with scope app",
                field="target_user_id",
            )
        return None
    if target_user_id is None:
        return cast(str, user_id)
    check_name(target_user_id, field="target_user_id")
    if not principal.may_act_for(target_user_id):
        raise Forbidden("another user's shared memory needs admin=True")
    return cast(str, target_user_id)


def _check_version(current: SharedMemory, expected_version: int | None) -> None:
    """Optimistic locking on a document: VersionConflict unless ``expected_version``
    (None: no precondition) is its version."""
    if expected_version is not None and expected_version != current.version:
        raise VersionConflict(
            session_id=f"shared:{current.scope}:{current.agent}",
            current_version=current.version,
            expected_version=expected_version,
        )
