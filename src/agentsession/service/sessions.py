"""Use cases on the session itself: create, read, list, update; open by external key."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import Forbidden, SessionExists, SessionNotFound, StoreBusy
from ..ids import check_id, check_name, new_id
from ..metafilter import check_filter
from ..models import Page, Scope, Session, SessionStatus, WorkingMemory
from ..principal import Principal
from ..sessionchain import CREATED, append_links
from ..stores.base import StoreTransaction
from ..unset import UNSET
from .changes.shared import apply_shared_ops, check_shared_ops
from .core import ServiceCore
from .pipeline import SESSION, Change, WritePipeline, WriteRequest, request_parts
from .transitions import as_of, expires_at, next_version
from .validation import (
    check_enum,
    check_external_key,
    check_memory,
    check_metadata,
    check_title,
    check_ttl,
    decode_cursor,
    encode_cursor,
)

__all__ = ["SessionUseCases"]


class SessionUseCases(ServiceCore):
    """Create, read, list and update sessions (part of :class:`SessionManager`)."""

    def create_session(
        self,
        *,
        user_id: str,
        agent: str = "default",
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: float | None = None,
        working_memory: Mapping[str, Any] | None = None,
        external_key: str | None = None,
        idempotency_key: str | None = None,
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        admin: bool = False,
    ) -> Session:
        """Create an ACTIVE session owned by the caller ``user_id``.

        Args:
            user_id: the caller, who becomes the owner (1-128 chars of ``A-Za-z0-9._:@+-``).
            agent: which agent the session belongs to, e.g. ``"coding"``.
            title: free text, at most ``limits.max_title_chars`` characters.
            metadata: a JSON object of at most ``limits.max_metadata_bytes``.
            ttl_seconds: idle timeout in seconds (None = never expires).
            working_memory: the initial working-memory document, if any.
            external_key: the caller's own name for the session (a framework's session
                or thread id): 1-256 characters of any text but control characters (so
                at most 1024 bytes of UTF-8), compared exactly (nothing trimmed or folded).
                Unique per ``(user_id, agent)`` among existing sessions.
            idempotency_key: makes a retried create return the same session.
            shared_memory_ops: JSON Patch ops by scope for the shared memory of the
                agent (``app``, needs ``admin``) and of the user and agent (``user``),
                applied in the creating transaction (see
                :meth:`~SessionManager.update_shared_memory`).
            admin: the caller is trusted; needed only for the ``app`` scope.

        Returns:
            The new session at version 1 (2 if ``working_memory`` was given).

        Raises:
            ValidationError, IdempotencyKeyReused. Forbidden: ``app`` ops without admin.
            PatchConflict: a shared-memory op does not apply (nothing is created).
            SessionExists: a session of this user and agent has ``external_key``
                (its ``session_id`` is in the error).
        """
        shared = None
        if shared_memory_ops is not None:
            shared = check_shared_ops(shared_memory_ops, self.limits, admin=admin)
        request, build = self._builder(
            user_id, agent, title, metadata, ttl_seconds, working_memory, external_key, shared
        )

        def build_new(tx: StoreTransaction, now: datetime) -> Session:
            if external_key is not None:
                found = tx.find_session_by_key(user_id, agent, external_key)
                if found is not None:
                    raise SessionExists(session_id=found)
            return build(tx, now)

        return self._pipeline.create(Principal(user_id), idempotency_key, request, build_new).value

    def get_session_by_key(self, *, user_id: str, agent: str, external_key: str) -> Session:
        """Return ``user_id``'s session of ``agent`` whose ``external_key`` is this one.

        The key is looked up and the session read in one read transaction. Keys are
        looked up among the caller's own sessions only (there is no ``admin``): an admin
        reads another user's session by its id (:meth:`get_session`).

        Args:
            user_id: the owner whose keys are searched, and the caller.
            agent: the agent the session belongs to.
            external_key: compared exactly (see :meth:`create_session`).

        Raises:
            SessionNotFound: no such session (never created, or deleted).
            ValidationError: a malformed user id, agent or key.
        """
        check_name(user_id, field="user_id")
        check_name(agent, field="agent")
        return self._by_key(user_id, agent, check_external_key(external_key))

    def _by_key(self, user_id: str, agent: str, key: str) -> Session:
        """The session of a checked key, found and read in one read transaction.

        Raises:
            SessionNotFound: no session has the key.
        """

        def find(tx: StoreTransaction) -> str:
            found = tx.find_session_by_key(user_id, agent, key)
            if found is None:
                raise SessionNotFound("no session has this external_key", session_id="")
            return found

        return self._reads.read_found(find, Principal(user_id), lambda tx, s: s)

    def open_session(
        self,
        *,
        user_id: str,
        agent: str,
        external_key: str,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: float | None = None,
        working_memory: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[Session, bool]:
        """Get ``user_id``'s session of ``agent`` with this ``external_key``, or create it.

        Race-safe: of any number of concurrent calls for one key, exactly one creates
        the session and every call returns that session. A found session is returned in
        whatever status it has (CLOSED, EXPIRED): nothing is restored or re-activated,
        and ``title``, ``metadata``, ``ttl_seconds`` and ``working_memory`` (used only
        to create it) are ignored.

        Args:
            user_id, agent, external_key: as for :meth:`create_session`; the key is
                required.
            title, metadata, ttl_seconds, working_memory: of a session created here.
            idempotency_key: makes a retry of a call that created the session answer
                ``(first session, True)`` again, not ``created=False``. Only a creating
                call records it (a call that found the session answers the same on a
                retry anyway). With a key the call starts with a write transaction, to
                check the key's record before looking the session up.

        Returns:
            ``(session, created)``: ``created`` is True only for the call that created it
            (and its retries with the same ``idempotency_key``).

        Raises:
            ValidationError: a malformed argument (checked even when the session exists).
            IdempotencyKeyReused: the key's first call created a session from other
                arguments.
            StoreBusy: the key's session was created or deleted concurrently on each of
                ``policy.max_retries`` attempts.
        """
        key = check_external_key(external_key)
        request, build = self._builder(
            user_id, agent, title, metadata, ttl_seconds, working_memory, key
        )

        def build_unless_taken(tx: StoreTransaction, now: datetime) -> Session:
            found = tx.find_session_by_key(user_id, agent, key)
            if found is not None:
                raise SessionExists(session_id=found)  # nothing written, nothing recorded
            # A racing create of the key makes this insert a StoreConflict; the unit of
            # work runs it again, and then the lookup finds the winner.
            return build(tx, now)

        create_first = idempotency_key is not None
        for _ in range(self.policy.max_retries):
            if not create_first:
                try:
                    return self._by_key(user_id, agent, key), False
                except SessionNotFound:
                    pass  # absent, or deleted since: create it
            create_first = False
            try:
                written = self._pipeline.create(
                    Principal(user_id),
                    idempotency_key,
                    request,
                    build_unless_taken,
                    scope="open_session",
                )
                return written.value, True
            except SessionExists:
                continue  # created since the lookup: read it
        raise StoreBusy(
            "the session of this external_key was created or deleted concurrently on "
            f"each of {self.policy.max_retries} attempts; retry"
        )

    def _builder(
        self,
        user_id: str,
        agent: str,
        title: str | None,
        metadata: Mapping[str, Any] | None,
        ttl_seconds: float | None,
        working_memory: Mapping[str, Any] | None,
        external_key: str | None,
        shared: dict[Scope, list[dict[str, Any]]] | None = None,
    ) -> tuple[tuple[Any, ...], Callable[[StoreTransaction, datetime], Session]]:
        """Check a new session's arguments; return its idempotency request parts and
        ``build(tx, now)``, which inserts it (audited, with its initial memory and
        its checked ``shared`` memory ops).

        Raises:
            ValidationError: a malformed argument.
        """
        check_name(user_id, field="user_id")
        check_name(agent, field="agent")
        key = None if external_key is None else check_external_key(external_key)
        title = check_title(title, self.limits)
        meta = check_metadata(metadata, "metadata", self.limits)
        ttl = check_ttl(ttl_seconds)
        memory = None
        if working_memory is not None:
            memory = check_memory(working_memory, self.limits)
        principal = Principal(user_id)
        principal.check_agent(agent)  # a key limited to agents creates only theirs
        pipeline = self._pipeline
        limits = self.limits

        def build(tx: StoreTransaction, now: datetime) -> Session:
            session = Session(
                session_id=new_id("ses"),
                user_id=user_id,
                agent=agent,
                external_key=key,
                title=title,
                metadata=meta,
                version=1,
                created_at=now,
                updated_at=now,
                last_active_at=now,
                ttl_seconds=ttl,
                expires_at=expires_at(now, ttl),
            )
            tx.insert_session(session)
            details: dict[str, Any] = {"agent": agent}
            if key is not None:
                details["external_key"] = True  # that one was given; the text stays out
            if shared:
                details["shared"] = apply_shared_ops(tx, session, now, limits, shared)
            created = "session.created"
            session = pipeline.audit(tx, session, principal, created, (None, 1), details, now)
            append_links(tx, [(session.session_id, CREATED, str(session.audit_head))])
            if memory is None:
                return session
            return _with_memory(tx, pipeline, session, principal, memory, now)

        # The key and shared ops join the request only when given: older fingerprints
        # stay valid.
        request = request_parts(agent, title, meta, ttl, memory, key, shared, required=5)
        return request, build

    def get_session(self, *, session_id: str, user_id: str, admin: bool = False) -> Session:
        """Return the session; ``user_id`` names the caller (the principal).

        Raises:
            SessionNotFound: missing, deleted, or not the caller's (unless ``admin``).
            ValidationError: a malformed ``session_id``.
        """
        return self._reads.read(session_id, Principal(user_id, admin), lambda tx, s: s)

    def list_sessions(
        self,
        *,
        user_id: str,
        status: SessionStatus | str | None = None,
        agent: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        all_users: bool = False,
        admin: bool = False,
        parent_session_id: str | None = None,
        metadata: Mapping[str, str | int | float | bool] | None = None,
    ) -> Page[Session]:
        """List the caller's sessions, most recently updated first.

        Order: ``updated_at`` descending, then ``session_id`` descending (a unique
        tie-breaker, so pages never repeat or skip a session that did not change).

        A pure read: the status is the one a read at this moment reports. A session
        idle past its TTL lists as EXPIRED (``status_reason`` ``"ttl"``, ``expired_at``
        its deadline) under ``status=EXPIRED`` and never under ``ACTIVE``, before its row
        is expired by the next access or sweep (which then raises its version by one).

        Args:
            user_id: the caller (the principal), whose sessions are listed.
            status, agent: filters; None = any.
            parent_session_id: only the forks made from this session (still listed
                when it is gone: :meth:`fork_session`); None = any.
            metadata: only sessions whose metadata has each of these top-level keys
                with this value, exactly (an AND; at most 8 keys; a number or boolean
                matches its text, ``"3"`` a stored ``3``: docs/semantics.md, "Metadata
                filters"); None or empty = any.
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of the previous page of this listing (same
                filters, same user; another one's is a ValidationError).
            all_users: list every user's sessions; needs ``admin=True``.

        Returns:
            A page; ``next_cursor`` is None on the last page.

        Raises:
            ValidationError: bad limit, status, cursor or metadata filter (too many
                keys, a bad key, a value too long or not a string, number or boolean).
            Forbidden: ``all_users`` without admin.
        """
        owner, wanted_status, agent = _listing_filters(
            "listing", user_id, status, agent, parent_session_id, all_users, admin
        )
        wanted = check_filter(metadata)
        parent = parent_session_id
        size = self._page_size(limit)
        scope: list[Any] = [owner, None if wanted_status is None else wanted_status.value, agent]
        if parent is not None or wanted is not None:  # an unfiltered cursor keeps its scope
            scope.append(parent)
        if wanted is not None:
            scope.append(sorted(wanted.items()))
        after = decode_cursor(cursor, scope)
        now = self._uow.now()
        rows: list[Session] = self._uow.run(
            lambda tx: tx.list_sessions(
                user_id=owner,
                status=wanted_status,
                agent=agent,
                after=after,
                limit=size + 1,
                now=now,
                parent_session_id=parent,
                metadata=wanted,
            ),
            write=False,
        )
        more = len(rows) > size
        rows = rows[:size]
        next_cursor = encode_cursor(rows[-1], scope) if more and rows else None
        return Page[Session](items=[as_of(r, now) for r in rows], next_cursor=next_cursor)

    def count_sessions(
        self,
        *,
        user_id: str,
        status: SessionStatus | str | None = None,
        agent: str | None = None,
        parent_session_id: str | None = None,
        all_users: bool = False,
        admin: bool = False,
        metadata: Mapping[str, str | int | float | bool] | None = None,
    ) -> int:
        """Count the sessions :meth:`list_sessions` lists with the same filters: the
        number of items over all its pages, at this moment.

        A pure read, with the listing's rules: the status is the one a read at this
        moment reports (a session idle past its TTL counts as EXPIRED, never as ACTIVE,
        before its row is expired); the caller counts their own sessions unless
        ``all_users`` (admin only).

        Cost (each store's ``count_sessions`` says more): SQL counts on the indexes
        its listing reads (``COUNT(*)``, no row sent); Redis takes the cardinality or
        the intersection of its index sets, and reads only the due sessions for an
        ACTIVE or EXPIRED count, as its listing does; the memory store scans its
        sessions. Nothing grows with the sessions' content.

        Args:
            user_id: the caller (the principal), whose sessions are counted.
            status, agent: filters; None = any.
            parent_session_id: only the forks made from this session; None = any.
            all_users: count every user's sessions; needs ``admin=True``.
            metadata: as :meth:`list_sessions`' (counted on the store's metadata index:
                the cost grows with the sessions matching it, not with the caller's).

        Returns:
            The number of sessions, >= 0.

        Raises:
            ValidationError: a bad user id, status, agent, parent id or metadata filter.
            Forbidden: ``all_users`` without admin.
        """
        owner, wanted_status, agent = _listing_filters(
            "counting", user_id, status, agent, parent_session_id, all_users, admin
        )
        wanted = check_filter(metadata)
        now = self._uow.now()
        count: int = self._uow.run(
            lambda tx: tx.count_sessions(
                user_id=owner,
                status=wanted_status,
                agent=agent,
                now=now,
                parent_session_id=parent_session_id,
                metadata=wanted,
            ),
            write=False,
        )
        return count

    def update_session(
        self,
        *,
        session_id: str,
        user_id: str,
        title: str | None = UNSET,
        metadata: Mapping[str, Any] = UNSET,
        ttl_seconds: float | None = UNSET,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Session:
        """Change a session's title, metadata (replaced whole) or TTL; needs ACTIVE.

        Arguments left out stay as they are; ``title=None`` / ``ttl_seconds=None`` clear.
        ``user_id`` names the caller (the principal).

        Raises:
            SessionNotFound, SessionNotActive, VersionConflict, ValidationError,
            IdempotencyKeyReused.
        """
        update: dict[str, Any] = {}
        if title is not UNSET:
            update["title"] = check_title(title, self.limits)
        if metadata is not UNSET:
            update["metadata"] = check_metadata(metadata, "metadata", self.limits)
        if ttl_seconds is not UNSET:
            update["ttl_seconds"] = check_ttl(ttl_seconds)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
            new = s.model_copy(update=update)
            if "ttl_seconds" in update:
                new = new.model_copy(
                    update={"expires_at": expires_at(s.last_active_at, new.ttl_seconds)}
                )
            return Change(new, "session.updated", {"fields": sorted(update)})

        request = WriteRequest(
            scope="update_session",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=SESSION,
            request=(sorted(update.items()),),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            returns_session=True,
        )
        return self._pipeline.write(request).value


def _listing_filters(
    verb: str,
    user_id: str,
    status: SessionStatus | str | None,
    agent: str | None,
    parent_session_id: str | None,
    all_users: bool,
    admin: bool,
) -> tuple[str | None, SessionStatus | None, str | None]:
    """Check the filters of a session listing or count (``verb``: what the caller
    does, for the error): the owner whose sessions it reads (None: every user's), the
    status, and the agent (a caller limited to agents reads only theirs:
    :meth:`~agentsession.principal.Principal.agent_filter`).

    Raises:
        ValidationError: a bad user id, status, agent or parent id.
        Forbidden: ``all_users`` without ``admin``; an agent outside the caller's.
    """
    check_name(user_id, field="user_id")
    if all_users and not admin:
        raise Forbidden(
            f"{verb} every user's sessions needs an admin caller (an admin API key, "
            "--admin in the CLI, admin=True in the library)"
        )
    wanted_status = check_enum(SessionStatus, status, "status")
    if agent is not None:
        check_name(agent, field="agent")
    if parent_session_id is not None:
        check_id(parent_session_id, field="parent_session_id", prefix="ses")
    agent = Principal(user_id, admin).agent_filter(agent)
    return (None if all_users else user_id), wanted_status, agent


def _with_memory(
    tx: StoreTransaction,
    pipeline: WritePipeline,
    session: Session,
    principal: Principal,
    memory: dict[str, Any],
    now: datetime,
) -> Session:
    """Store the initial working memory of a new session as its second version (the
    memory as of seq 0 until an update before the first message replaces it there)."""
    tx.put_working_memory(
        WorkingMemory(
            session_id=session.session_id,
            version=next_version(session),
            updated_at=now,
            data=memory,
        ),
        at_seq=0,
    )
    change = Change(session, "memory.updated", {"mode": "replace"})
    return pipeline.store_change(tx, session, change, principal, now)
