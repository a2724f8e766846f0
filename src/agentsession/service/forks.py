"""Use case of forking: a new session that starts where another one stood at a seq.

A fork is an ordinary ACTIVE session of the same owner and agent as its parent, made
in one write transaction from copies of the parent's state as of seq N: messages
``1..N``, the summaries within them, the working-memory history up to N and the
working memory as of N. Parent and fork share nothing afterwards (docs/semantics.md,
"Forks").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import SessionExists
from ..ids import new_id
from ..models import Session, WorkingMemory
from ..principal import Principal
from ..sessionchain import CREATED, append_links
from ..stores.base import StoreTransaction
from ..unset import UNSET
from .core import ServiceCore
from .pipeline import check_version, request_parts
from .reads import memory_as_of
from .transitions import expires_at, next_version
from .validation import (
    check_cursor_seq,
    check_expected_version,
    check_external_key,
    check_metadata,
    check_title,
    check_ttl,
    check_within,
)

__all__ = ["ForkUseCases"]

_SCOPE = "fork_session"
#: How many characters of a fresh id's random part start a copied message's id.
_ID_PART = 13


class ForkUseCases(ServiceCore):
    """Forks (part of :class:`SessionManager`)."""

    def fork_session(
        self,
        *,
        session_id: str,
        user_id: str,
        at_seq: int | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        external_key: str | None = None,
        ttl_seconds: float | None = UNSET,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Session:
        """Make a new ACTIVE session that starts from ``session_id`` as it stood at
        seq ``at_seq``: a *fork*, owned by the parent's owner, of the parent's agent.

        The fork holds copies of the parent's messages ``1..at_seq`` (same seq, role,
        payload, ``created_at`` and ``run_id``; new message ids), of its summaries
        within them (``to_seq <= at_seq``, same numbers) and of its working-memory
        history rows in effect up to that seq; its working memory is the parent's
        memory as of ``at_seq`` (``get_working_memory(at_seq=...)``), written at the
        fork's first version. Runs and tool calls are not copied: they record what ran in the parent
        (a copied message's ``run_id`` still names the parent's run). The next append to
        the fork gets seq ``at_seq + 1``.

        The parent may be ACTIVE, CLOSED or EXPIRED and is not changed (no version
        step). The fork's first version is the parent's version + 1, so every copied
        memory-history row (written at a parent version) is older than every write in
        the fork, and memory-as-of in the fork stays right. ``parent_session_id`` and
        ``fork_seq`` name the parent and ``at_seq`` (kept when the parent is deleted).
        Writes to either session never show in the other. One audit event on the fork:
        ``session.forked`` with ``parent_session_id``, ``fork_seq``, ``messages``,
        ``summaries`` (ids and counts). Copying costs one bulk statement per table (SQL)
        or one server-side copy (Redis), never a round trip per message.

        Args:
            session_id: the parent. user_id: the caller, who must own the parent
                (or be ``admin``).
            at_seq: the seq to fork at, ``0..message_count`` (0: no messages); None =
                the parent's ``message_count``.
            title, metadata, external_key: of the fork, as for ``create_session``
                (None: no title, ``{}``, no key).
            ttl_seconds: the fork's idle timeout in seconds (None = never expires);
                left out = the parent's.
            expected_version: the parent's version the caller saw (``If-Match``):
                compared in the fork's transaction, under the parent's row lock, so a
                fork never starts from a parent that changed since; None = any.
            idempotency_key: makes a retried fork answer the first fork (before the
                version is compared: a retry after the parent moved on still answers it).

        Returns:
            The fork (``version``: the parent's + 1, ``message_count``: ``at_seq``).

        Raises:
            ValidationError: a malformed argument, ``at_seq`` past ``message_count``.
            SessionNotFound: the parent is missing, deleted, or not the caller's.
            SessionExists: a session of the owner and agent has ``external_key``.
            VersionConflict: the parent's version is not ``expected_version``.
            IdempotencyKeyReused: the key's first call forked with other arguments.
        """
        check_expected_version(expected_version)
        seq = check_cursor_seq(at_seq, "at_seq")
        title = check_title(title, self.limits)
        meta = check_metadata(metadata, "metadata", self.limits)
        key = None if external_key is None else check_external_key(external_key)
        ttl = UNSET if ttl_seconds is UNSET else check_ttl(ttl_seconds)
        principal = Principal(user_id, admin)
        pipeline = self._pipeline

        def build(tx: StoreTransaction, now: datetime) -> Session:
            parent = self._uow.load(tx, session_id, principal)
            check_version(parent, expected_version)
            n = _fork_point(tx, parent, seq, key)
            lifetime = parent.ttl_seconds if ttl is UNSET else ttl
            fork = _fork_of(parent, n, now, title=title, metadata=meta, key=key, ttl=lifetime)
            tx.insert_session(fork)
            details = _copy_state(tx, parent, fork, now)
            versions = (None, fork.version)
            fork = pipeline.audit(tx, fork, principal, "session.forked", versions, details, now)
            append_links(tx, [(fork.session_id, CREATED, str(fork.audit_head))])
            return fork

        # An unset TTL (the parent's) is its own request part, apart from None (none).
        parts = (session_id, seq, title, meta, "parent" if ttl is UNSET else ttl, key)
        request = request_parts(*parts, required=5)
        written = pipeline.create(principal, idempotency_key, request, build, scope=_SCOPE)
        return written.value


def _fork_point(tx: StoreTransaction, parent: Session, seq: int | None, key: str | None) -> int:
    """The seq to fork ``parent`` at (``seq``, None: its ``message_count``).

    Raises:
        ValidationError: ``seq`` above the parent's ``message_count``.
        SessionExists: a session of the parent's owner and agent has ``key``.
    """
    n = parent.message_count if seq is None else check_within(parent, seq, "at_seq")
    if key is not None:
        found = tx.find_session_by_key(parent.user_id, parent.agent, key)
        if found is not None:
            raise SessionExists(session_id=found)
    return n


def _fork_of(
    parent: Session,
    n: int,
    now: datetime,
    *,
    title: str | None,
    metadata: dict[str, Any],
    key: str | None,
    ttl: float | None,
) -> Session:
    """The new session row of a fork of ``parent`` at seq ``n``: the parent's owner and
    agent, its first version the parent's + 1, ``message_count`` ``n``."""
    return Session(
        session_id=new_id("ses"),
        user_id=parent.user_id,
        agent=parent.agent,
        external_key=key,
        title=title,
        metadata=metadata,
        version=next_version(parent),
        created_at=now,
        updated_at=now,
        last_active_at=now,
        ttl_seconds=ttl,
        expires_at=expires_at(now, ttl),
        message_count=n,
        parent_session_id=parent.session_id,
        fork_seq=n,
    )


def _copy_state(
    tx: StoreTransaction, parent: Session, fork: Session, now: datetime
) -> dict[str, Any]:
    """Copy ``parent``'s state as of ``fork.fork_seq`` into the inserted ``fork``: its
    history rows (:meth:`~StoreTransaction.copy_history`), and its working memory as of
    that seq written as the fork's memory at the fork's version. Returns the audit
    details (ids and counts)."""
    n = fork.message_count
    id_part = new_id("msg")[4 : 4 + _ID_PART]
    copied = tx.copy_history(parent.session_id, fork.session_id, upto_seq=n, id_part=id_part)
    memory = memory_as_of(tx, parent, n)
    if memory.version:
        own = WorkingMemory(
            session_id=fork.session_id, version=fork.version, updated_at=now, data=memory.data
        )
        tx.put_working_memory(own, at_seq=n)
    return {
        "parent_session_id": parent.session_id,
        "fork_seq": n,
        "messages": copied[0],
        "summaries": copied[1],
    }
