"""Checking the audit chains of the store (:mod:`agentsession.auditchain`)."""

from __future__ import annotations

import functools
from collections.abc import Iterator

from ..auditchain import find_break
from ..errors import Forbidden, SessionNotFound
from ..ids import check_id, check_name
from ..models import AuditEvent, AuditReport
from ..principal import Principal
from ..sessionchain import HEAD, find_chain_break, find_link_break
from ..stores.base import ChainLink, StoreTransaction
from .core import ServiceCore

__all__ = ["AuditCheckUseCases"]

_BATCH = 500


class AuditCheckUseCases(ServiceCore):
    """The audit chain check (part of :class:`SessionManager`)."""

    def verify_audit(
        self, *, user_id: str, session_id: str | None = None, admin: bool = False
    ) -> AuditReport:
        """Walk the audit chain of every session (or of ``session_id``): each event's
        hash against its content, each link against the event before it, and each live
        session's ``audit_head`` against its newest event; then the session chain
        (:mod:`agentsession.sessionchain`): for the whole store, every link and its
        head; for ``session_id`` gone (no row), its links, so a session created and
        gone without a tombstone is named. Reads the audit log through the change
        feed, in batches; shared-memory deletions (``shm_`` ids) carry no chain and are
        skipped.

        Args:
            user_id: the caller (the principal). session_id: check this session only.

        Returns:
            An :class:`~agentsession.models.AuditReport`; ``broken`` names the first broken link.

        Raises:
            Forbidden: without admin, or the whole store by a key limited to agents
                (it reaches every agent's sessions, as the store-wide change feed).
            SessionNotFound: ``session_id`` has no row, no audit event and no link of
                the session chain (never existed), or it is not the caller's to see
                (another agent's session for a key limited to agents; a deleted one,
                whose tombstone keeps no agent, for any key limited to agents).
            ValidationError: a malformed id.
        """
        check_name(user_id, field="user_id")
        if session_id is not None:
            check_id(session_id, field="session_id", prefix="ses")
        if not admin:
            raise Forbidden("verifying the audit log needs admin=True")
        principal = Principal(user_id, admin)
        if session_id is None:
            principal.check_every_agent("verifying every session's audit chain")
        # The chain's head first, then the sessions and events, then the links: a link
        # at or below the head was committed before the others were read.
        chain_head = self._uow.run(_chain_head, write=False)
        chains = self._audit_events(session_id)
        heads = self._audit_heads(session_id, principal)
        for sid in heads:
            chains.setdefault(sid, [])
        events = 0
        for sid, kept in chains.items():
            events += len(kept)
            broken = find_break(sid, kept, heads.get(sid))
            if broken is not None:
                return AuditReport(sessions=len(chains), events=events, broken=broken)
        if session_id is None:
            links = list(self._chain_links())
            head_after = self._uow.run(_chain_head, write=False)
            broken = find_chain_break(links, chain_head, heads, chains, head_after=head_after)
        elif session_id not in heads:  # deleted, or removed by hand
            links = [k for k in self._chain_links() if k.session_id == session_id]
            if not links and not chains:
                raise SessionNotFound(session_id=session_id)
            broken = find_link_break(links, chain_head, heads, chains)
            return AuditReport(sessions=1, events=events, broken=broken)
        else:
            broken = None
        return AuditReport(sessions=len(chains), events=events, broken=broken)

    def _chain_links(self) -> Iterator[ChainLink]:
        """Every link of the session chain (:mod:`agentsession.sessionchain`), in seq
        order, read in batches."""
        after = 0
        while True:
            page = self._uow.run(functools.partial(_chain_page, after=after), write=False)
            yield from page
            if len(page) < _BATCH:
                return
            after = page[-1].seq

    def _audit_events(self, session_id: str | None) -> dict[str, list[AuditEvent]]:
        """Every kept audit event of a session (or of ``session_id``), by session, each
        list in seq order (the order a chain is stored in)."""
        store = self._uow.store
        chains: dict[str, list[AuditEvent]] = {}
        after: str | None = None
        while True:
            read = store.read_changes(
                after=after, user_ids=None, session_id=session_id, limit=_BATCH
            )
            for _, event in read.changes:
                if event.session_id.startswith("ses_"):
                    chains.setdefault(event.session_id, []).append(event)
            after = read.resume if read.resume is not None else after
            if not read.changes and not read.more:
                break
        for kept in chains.values():
            kept.sort(key=lambda e: e.seq)
        return chains

    def _audit_heads(self, session_id: str | None, principal: Principal) -> dict[str, str | None]:
        """The ``audit_head`` of every live session (or of ``session_id``: none when it
        has no row).

        Raises:
            SessionNotFound: ``session_id`` is not ``principal``'s to see (see
                :meth:`verify_audit`).
        """

        def body(tx: StoreTransaction) -> dict[str, str | None]:
            if session_id is not None:
                s = tx.get_session(session_id)
                if s is None and principal.agents is None:
                    return {}
                if s is None or not principal.may_see(s.user_id, s.agent):
                    raise SessionNotFound(session_id=session_id)
                return {session_id: s.audit_head}
            heads: dict[str, str | None] = {}
            after = None
            now = self._uow.now()
            while True:
                page = tx.list_sessions(
                    user_id=None, status=None, agent=None, after=after, limit=_BATCH, now=now
                )
                heads.update((s.session_id, s.audit_head) for s in page)
                if len(page) < _BATCH:
                    return heads
                after = (page[-1].updated_at, page[-1].session_id)

        return self._uow.run(body, write=False)


def _chain_head(tx: StoreTransaction) -> str | None:
    return tx.get_store_meta(HEAD)


def _chain_page(tx: StoreTransaction, *, after: int) -> list[ChainLink]:
    return tx.list_chain_links(after_seq=after, limit=_BATCH)
