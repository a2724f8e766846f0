"""Deleting sessions and a user's data (right to erasure), and reading the audit log.

A deleted session leaves one content-free tombstone audit event (``session.deleted``)
whose ``user_id`` (and ``actor``, when the owner deleted it) is a keyed hash
(HMAC-SHA256 under ``Policy.tombstone_key``), never the raw user id; everything else of
it goes, idempotency records included. Once the erasing transaction has committed, the
store's :meth:`~agentsession.stores.base.SessionStore.scrub` gets the deleted rows off
its disk as far as it can (docs/security.md, "Erasure").
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from datetime import timedelta

from ..errors import Forbidden, SessionNotFound, StoreError
from ..ids import check_id, check_name, is_id
from ..models import AuditEvent, Page, Session
from ..principal import Principal
from ..sessionchain import DELETED, append_links
from ..stores.base import ScrubReport, StoreTransaction
from ..stores.sealed import SealedStore
from .context import request_id_context
from .core import ServiceCore
from .paging import Listing, read_forward
from .pipeline import WritePipeline, check_version
from .validation import check_cursor_seq, check_expected_version

__all__ = ["OPERATOR_STEPS", "Erasure", "ErasureUseCases", "tombstone_id"]

logger = logging.getLogger(__name__)

#: Purging a user's idempotency keys takes every record created before this far ahead.
_FOREVER = timedelta(days=36500)

#: What still holds erased data on every store, beyond the store's reach.
OPERATOR_STEPS = (
    "backups, and file-system, volume or VM snapshots taken before the erasure still "
    "hold the erased data: expire them, or erase it from each restored copy",
    "replicas and standby servers hold their own copies and logs: run the store's steps there too",
    "API keys of the user: `agentsession erase` removes them from the one key file it "
    "finds; after an HTTP erasure, and in other key files, revoke them "
    "(`agentsession keys revoke`)",
    "the file system and the disk may keep the old blocks of rewritten, truncated or "
    "deleted files (copy-on-write file systems, SSD wear levelling) until they are "
    "reused: keep the store on encrypted storage to be sure",
)


@dataclass(frozen=True, slots=True)
class Erasure:
    """What :meth:`ErasureUseCases.erase_user` did.

    Attributes:
        sessions_deleted: how many sessions of the user were deleted.
        idempotency_keys_purged: the idempotency records purged beyond those deleted
            with their sessions: the user's own, and those of writes to the user's data
            by others (an admin's, on their behalf).
        shared_memory_deleted: the user's ``user``-scope shared-memory documents
            deleted (one per agent the user had one for).
        store: what the store did to get the deleted rows off its disk, and what it
            could not reach (:meth:`~agentsession.stores.base.SessionStore.scrub`).
        operator_steps: what the operator must still do on every store
            (:data:`OPERATOR_STEPS`).
    """

    sessions_deleted: int
    idempotency_keys_purged: int
    shared_memory_deleted: int
    store: ScrubReport
    operator_steps: tuple[str, ...] = OPERATOR_STEPS


def tombstone_id(key: bytes, user_id: str) -> str:
    """The keyed hash that stands for ``user_id`` in a tombstone.

    Args:
        key: the secret (``Policy.tombstone_key``, or the manager's random key).
        user_id: the raw user id.

    Returns:
        ``"hmac-sha256:"`` followed by 64 hex digits.
    """
    digest = hmac.new(key, user_id.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{digest}"


class ErasureUseCases(ServiceCore):
    """Deletion and audit use cases (part of :class:`SessionManager`)."""

    def delete_session(
        self,
        *,
        session_id: str,
        user_id: str,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> None:
        """Delete the session and everything in it, for good, in any status.

        Messages, working memory, tool calls, runs, idempotency records and audit
        events go; one content-free tombstone audit event (``session.deleted``) stays.
        Then the store gets the deleted rows off its disk (its ``scrub``; a failure
        there is logged, the deletion stays). Afterwards every call on the id raises
        SessionNotFound, including a second delete, except a retry with the first
        call's ``idempotency_key``: it answers as the first did and writes nothing.
        ``user_id`` names the caller (the principal).

        Raises:
            SessionNotFound, VersionConflict, ValidationError, IdempotencyKeyReused
            (the key's first call deleted another session).
        """
        check_expected_version(expected_version)
        principal = Principal(user_id, admin)

        def remove(tx: StoreTransaction, s: Session) -> None:
            check_version(s, expected_version)
            append_links(tx, [self._delete(tx, s, principal)])

        written = self._pipeline.write_removal(
            principal, "delete_session", session_id, idempotency_key, remove
        )
        if not written.replayed:
            self._scrub(compact=False)

    def delete_user_data(
        self, *, user_id: str, target_user_id: str | None = None, admin: bool = False
    ) -> int:
        """Erase every session of a user (right to erasure), their ``user``-scope
        shared-memory documents (every agent's) and the idempotency records of their
        writes and of writes to their data (an admin's too);
        :meth:`erase_user` without its report.

        Args:
            user_id: the caller (the principal). target_user_id: the owner whose data to
                erase; defaults to the caller; another user's needs ``admin=True``.

        Returns:
            How many sessions were deleted.

        Raises:
            Forbidden: another user's data without admin.
        """
        return self.erase_user(
            user_id=user_id, target_user_id=target_user_id, admin=admin
        ).sessions_deleted

    def erase_user(
        self,
        *,
        user_id: str,
        target_user_id: str | None = None,
        admin: bool = False,
        compact: bool = False,
    ) -> Erasure:
        """Erase every session of a user (their usage ledger and budgets with them), their
        ``user``-scope shared-memory documents, their user budget and every idempotency
        record of their data in one transaction, then have the
        store get the deleted rows off its disk (its ``scrub``).

        An idempotency record holds the first answer of a keyed write, so the records of
        the user's writes and of writes to their data by anyone (an admin's for them:
        the record's ``owner_id``) all go; the same keyed request sent again later finds
        no record and runs again (a session write: SessionNotFound), never replaying
        erased content.

        Args:
            user_id: the caller (the principal). target_user_id: the owner whose data to
                erase; defaults to the caller; another user's needs ``admin=True``.
            compact: also run the store's table rewrites (``VACUUM FULL``, ``OPTIMIZE
                TABLE``, SQLite ``VACUUM``, Redis ``BGREWRITEAOF``), which block writers
                while they run.

        Returns:
            Counts, the store's report, and the steps left to the operator. A failed
            disk step is reported in ``store.pending`` (and logged); the erasure itself
            stays committed, and calling again re-runs the disk step.

        Raises:
            Forbidden: another user's data without admin, or a caller limited to
            agents. ValidationError: bad ids.
        """
        check_name(user_id, field="user_id")
        target = user_id if target_user_id is None else target_user_id
        check_name(target, field="target_user_id")
        principal = Principal(user_id, admin)
        principal.check_every_agent("erasing a user's data")
        if not principal.may_act_for(target):
            raise Forbidden(
                "erasing another user's data needs an admin caller (an admin API key, "
                "--admin in the CLI, admin=True in the library)"
            )

        def body(tx: StoreTransaction) -> tuple[int, int, int]:
            ids = tx.list_user_session_ids(target)
            links = []
            for sid in ids:
                s = tx.get_session(sid)
                if s is not None:
                    links.append(self._delete(tx, s, principal))
            shared = tx.delete_user_shared_memory(target)
            tx.delete_budget(target, None)
            horizon = self._uow.now() + _FOREVER
            keys = tx.purge_idempotency(created_before=horizon, user_id=target)
            append_links(tx, links)  # last: the chain's head is held until the commit
            return len(ids), keys, shared

        sessions, keys, shared = self._uow.run(body, write=True)
        return Erasure(sessions, keys, shared, self._shred(target, self._scrub(compact=compact)))

    def get_audit_log(
        self,
        *,
        session_id: str,
        user_id: str,
        after: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[AuditEvent]:
        """A page of the session's audit events, oldest first. ``user_id`` names the
        caller (the principal). An admin may also read the tombstone of a deleted session,
        and the deletions of a shared document (``session_id`` its
        :meth:`~.shared.SharedMemoryUseCases.shared_memory_audit_id`).

        Args:
            after: start after this event seq (exclusive); None = from the first event.
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this listing.

        Returns:
            A page; ``next_cursor`` is None when no more events lie beyond it.

        Raises:
            SessionNotFound, ValidationError (also: a cursor with ``after``, or a cursor
            not of this listing).
        """
        size = self._page_size(limit)
        if not (admin and is_id(session_id, "shm")):
            check_id(session_id, field="session_id", prefix="ses")
        check_name(user_id, field="user_id")
        listing = Listing("audit", session_id, older_ok=False)
        start = listing.start(cursor, after=check_cursor_seq(after, "after"), newest_first=False)
        principal = Principal(user_id, admin)

        def body(tx: StoreTransaction) -> Page[AuditEvent]:
            s = tx.get_session(session_id)
            tombstone_only = (
                s is None
                and principal.agents is None
                and admin
                and tx.list_audit(session_id, limit=1)
            )
            if not tombstone_only and (s is None or not principal.may_see(s.user_id, s.agent)):
                raise SessionNotFound(session_id=session_id)
            return read_forward(
                lambda after_seq, n: tx.list_audit(session_id, after_seq=after_seq, limit=n),
                start.seq,
                size,
                listing,
            )

        return self._uow.run(body, write=False)

    def _delete(
        self, tx: StoreTransaction, s: Session, principal: Principal
    ) -> tuple[str, str, str]:
        """Delete ``s`` and leave its tombstone audit event: the owner as its keyed hash,
        the actor too when it is the owner (else the admin's id), counts only, and no
        request id (the client chooses it: it could name the user). Returns the
        session-chain entry of the deletion (:func:`~agentsession.sessionchain.append_links`)."""
        tx.delete_session(s.session_id)
        owner = tombstone_id(self._tombstone_key, s.user_id)
        actor = owner if principal.user_id == s.user_id else principal.user_id
        details = {
            "message_count": s.message_count,
            "run_count": s.run_count,
            "tool_call_count": s.tool_call_count,
        }
        with request_id_context(None):
            tombstone = WritePipeline.audit(
                tx,
                s.model_copy(update={"user_id": owner}),
                Principal(actor, principal.admin),
                "session.deleted",
                (s.version, None),
                details,
                self._uow.now(),
            )
        return s.session_id, DELETED, str(tombstone.audit_head)

    def _shred(self, user_id: str, report: ScrubReport) -> ScrubReport:
        """With a keyring, destroy the user's data keys once the erasure committed
        (crypto-shredding: every copy of their content, in the database's logs, backups
        and replicas, can no longer be opened); a failure is reported as pending."""
        store = self._uow.store
        if not isinstance(store, SealedStore):
            return report
        try:
            store.keyring.destroy_user(user_id)
        except StoreError as exc:
            logger.warning("destroying an erased user's data keys failed: %s", exc.message)
            pending = (
                "the user's data keys could not be destroyed: copies of their content "
                "(backups, logs, replicas) may still be opened; run `agentsession erase` again",
            )
            return ScrubReport(report.done, report.pending + pending)
        done = "destroyed the user's data keys: no copy of their content can be opened"
        return ScrubReport((*report.done, done), report.pending)

    def _scrub(self, *, compact: bool) -> ScrubReport:
        """The store's disk step after a committed erasure; a failure is logged and
        reported as pending, never raised (the erasure is done)."""
        try:
            return self._uow.store.scrub(compact=compact)
        except StoreError as exc:
            logger.warning("the store's disk step after an erasure failed: %s", exc.message)
            return ScrubReport(
                pending=(
                    f"the store's disk step failed ({exc.message}): the deleted rows may "
                    "still be on its disk; run `agentsession erase` again",
                )
            )
