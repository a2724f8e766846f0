"""The change feed: every committed write, as its content-free audit event, in commit
order, from a cursor (docs/semantics.md, "Change feed").

A read is owner-scoped like every read: a user reads the events of their own sessions
(and the tombstone of a session of theirs that was deleted, whose ``user_id`` is their
keyed hash), an admin any user's or, with ``all_users``, everyone's. Which events are
final, and so may be returned without ever letting a later commit land behind the
cursor, is each store's business (:meth:`~agentsession.stores.base.SessionStore.read_changes`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator

from ..errors import Forbidden, SessionNotFound, ValidationError
from ..feedwatch import check_poll_interval, follow
from ..ids import check_id, check_name
from ..models import AuditEvent, Change, ChangePage
from ..principal import Principal
from ..stores.base import StoreTransaction
from ..stores.changefeed import NOT_ISSUED, selected
from .core import ServiceCore
from .erasure import tombstone_id

__all__ = ["ChangeFeedUseCases", "FeedQuery", "feed_query"]


class FeedQuery:
    """One checked feed query: whose events and which session's.

    Attributes:
        user_ids: the ``user_id`` values of the events to return; None = every user's.
        session_id: only this session's events; None = every session's.
    """

    def __init__(self, user_ids: list[str] | None, session_id: str | None) -> None:
        self.user_ids = user_ids
        self.session_id = session_id

    def selects(self, event: AuditEvent) -> bool:
        """Whether a read of this query returns ``event``."""
        return selected(event, self.user_ids, self.session_id)


def feed_query(
    manager: ChangeFeedUseCases,
    *,
    user_id: str,
    session_id: str | None = None,
    all_users: bool = False,
    admin: bool = False,
) -> FeedQuery:
    """The query :meth:`ChangeFeedUseCases.changes` would run for these arguments, for
    a reader that fans one read of every user's changes out to many callers (the
    service's Server-Sent Events). Reads the session to check the caller's right to it.

    Raises:
        ValidationError, Forbidden, SessionNotFound: as :meth:`~ChangeFeedUseCases.changes`.
    """
    return manager._feed_query(user_id, session_id, all_users=all_users, admin=admin)


class ChangeFeedUseCases(ServiceCore):
    """The change feed (part of :class:`SessionManager`)."""

    def changes(
        self,
        *,
        user_id: str,
        after: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        all_users: bool = False,
        admin: bool = False,
    ) -> ChangePage:
        """A page of the change feed: the audit events of committed writes after the
        cursor ``after``, oldest first, in commit order (version order per session).

        Every committed write's events appear exactly once in the feed, none of a write
        that did not commit, and an event committed later never lands before a cursor
        already handed out, so resuming from ``next_cursor`` (even after a disconnect,
        or with a new manager on the same store) misses nothing.

        Args:
            user_id: the caller (the principal), whose sessions' events are read (an
                admin may name any user).
            after: a ``cursor`` (``next_cursor``) of this store's feed; None = from the
                oldest event kept.
            session_id: only this session's events (the caller's; another user's is
                SessionNotFound, as a missing one). A deleted session's tombstone stays
                readable by its owner.
            limit: most events, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``. 0 returns no events and ``after`` as
                ``next_cursor``, once the caller, session and cursor are checked.
            all_users: every user's events; needs ``admin=True``.

        Returns:
            A :class:`ChangePage`; its ``next_cursor`` always says where to resume
            (the ``after`` given when nothing is new).

        Raises:
            ValidationError: a bad id, limit or cursor (one this store's feed never
            issued: not of its form, or past its newest event). Forbidden: ``all_users``
            without admin, or no ``session_id`` from a caller limited to agents
            (:mod:`agentsession.principal`). SessionNotFound: ``session_id`` is not the
            caller's (or of an agent it is not limited to).
        """
        size = self._page_size(limit)
        query = self._feed_query(user_id, session_id, all_users=all_users, admin=admin)
        if after is not None and (not isinstance(after, str) or not after):
            raise ValidationError(NOT_ISSUED, field="after")
        if self._uow.guard is not None:  # as every unit of work
            self._uow.guard()
        found = self._uow.store.read_changes(  # limit=0 too: the store checks the cursor
            after=after, user_ids=query.user_ids, session_id=query.session_id, limit=size or 1
        )
        if size == 0:
            return ChangePage(items=[], next_cursor=after, has_more=False)
        items = [
            Change.model_validate({**event.model_dump(), "cursor": cursor})
            for cursor, event in found.changes
        ]
        return ChangePage(items=items, next_cursor=found.resume or after, has_more=found.more)

    def watch(
        self,
        *,
        user_id: str,
        after: str | None = None,
        session_id: str | None = None,
        all_users: bool = False,
        admin: bool = False,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        stop: threading.Event | None = None,
    ) -> Iterator[Change]:
        """Follow the change feed: yield each change after ``after`` as it commits.

        Reads pages of :meth:`changes` while there are any; once caught up it waits
        (from :data:`~agentsession.feedwatch.FIRST_PAUSE` seconds, doubling each empty
        read up to ``poll_interval``). To resume after the iterator ended, pass the
        ``cursor`` of the last change it gave as ``after``.

        Args:
            user_id, after, session_id, all_users, admin: as :meth:`changes` (checked
                before this returns).
            timeout: end after this many seconds; None = never.
            poll_interval: the longest wait between two reads, in seconds (> 0).
            stop: end as soon as this event is set (also cuts a wait short).

        Returns:
            An iterator of :class:`Change`.

        Raises:
            As :meth:`changes`; ValidationError: ``poll_interval`` not > 0.
        """
        check_poll_interval(poll_interval)
        self._feed_query(user_id, session_id, all_users=all_users, admin=admin)
        read = functools.partial(
            self.changes, user_id=user_id, session_id=session_id, all_users=all_users, admin=admin
        )
        return follow(
            lambda cursor: read(after=cursor),
            after=after,
            timeout=timeout,
            poll_interval=poll_interval,
            stop=stop,
        )

    def _feed_query(
        self, user_id: str, session_id: str | None, *, all_users: bool, admin: bool
    ) -> FeedQuery:
        """Check a feed query's arguments and the caller's right to it.

        Raises:
            ValidationError, Forbidden, SessionNotFound: see :meth:`changes`.
        """
        check_name(user_id, field="user_id")
        if all_users and not admin:
            raise Forbidden("reading every user's changes needs admin=True")
        principal = Principal(user_id, admin)
        hashed = tombstone_id(self._tombstone_key, user_id)
        user_ids = None if all_users else [user_id, hashed]
        if session_id is None:
            if principal.agents is not None:  # the feed's events carry no agent
                raise Forbidden(
                    "a key limited to agents reads the change feed of one session at a "
                    "time: pass session_id"
                )
            return FeedQuery(user_ids, None)
        check_id(session_id, field="session_id", prefix="ses")

        def body(tx: StoreTransaction) -> None:
            s = tx.get_session(session_id)
            if s is not None and principal.may_see(s.user_id, s.agent):
                return
            if (
                s is None
                and principal.agents is None
                and any(admin or e.user_id == hashed for e in tx.list_audit(session_id))
            ):
                return  # the tombstone of a deleted session, read by its owner or an admin
            raise SessionNotFound(session_id=session_id)

        self._uow.run(body, write=False)
        return FeedQuery(None if admin else user_ids, session_id)
