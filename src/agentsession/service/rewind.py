"""Use cases that move a session back to an earlier message: rewind, and the reads of
what rewinds kept (docs/semantics.md, "Rewind").

A rewind is a removal of the newest messages (:mod:`.removal`, so seqs stay gapless and
the next append gets ``to_seq + 1``) that also puts the working memory back as it stood
at ``to_seq`` (docs/semantics.md, "Working-memory history"), and records itself as a
numbered rewind. ``remove=False`` keeps the messages out of the history but readable
by the rewind's number; ``remove=True`` deletes them. Tool calls and runs stay: they
record what really ran.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import TypeAdapter

from ..errors import RewindNotFound, ValidationError
from ..models import Message, Page, Rewind, RewindResult, Session
from ..principal import Principal
from ..stores.base import StoreTransaction
from .changes.memory import apply_memory
from .changes.removal import removal_change
from .core import ServiceCore
from .paging import Listing, read_forward
from .pipeline import Change, Unchanged, WriteRequest
from .policy import Limits
from .reads import memory_as_of
from .validation import check_cursor_seq, check_within

__all__ = ["RewindUseCases"]

_REWOUND: TypeAdapter[RewindResult] = TypeAdapter(RewindResult)


class RewindUseCases(ServiceCore):
    """Rewinding a session (part of :class:`SessionManager`)."""

    def rewind_session(
        self,
        *,
        session_id: str,
        user_id: str,
        to_seq: int,
        remove: bool = False,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> RewindResult:
        """Move the session back to message ``to_seq`` (0..``message_count``) in one
        transaction and one version step.

        The messages with ``seq > to_seq`` leave the history (reads, windows,
        ``build_context`` and restore no longer see them; the next append gets
        ``to_seq + 1``), the summaries reaching past ``to_seq`` go (as
        :meth:`truncate_messages`), and the working memory becomes the memory as of
        ``to_seq`` (read before the removal), written as a new version. ``remove=False``
        keeps the messages, hidden: :meth:`get_rewound_messages` reads them by the
        rewind's number; ``remove=True`` deletes them. Either way the rewind is recorded
        (:meth:`list_rewinds`) and audited as ``session.rewound`` with ``to_seq``,
        ``count``, ``mode``, ``memory_version`` and ``summaries_removed`` when some went
        (numbers only). Tool calls and runs stay: they record what really ran. A rewind
        to 0 gives back the memory in effect before the first message: the one given
        to :meth:`create_session`, or the last one written before any message; for a
        session stored before the history existed, a seq below the one its history
        starts at (SQL: its ``message_count`` at the migration; Redis: none) reads an
        empty memory. A rewind that would change nothing (``to_seq ==
        message_count``: the memory as of it is the current one) is a no-op: no version
        step, no audit event, no rewind recorded. Not an erasure (see
        :meth:`truncate_messages`). ``user_id`` names the caller.

        Returns:
            ``RewindResult(number, to_seq, count, mode, memory_version,
            session_version)``; ``number`` None for the no-op. A retry with the same
            ``idempotency_key`` answers the first result again.

        Raises:
            ValidationError: ``to_seq`` not an integer from 0 to ``message_count``, or
                ``remove`` not a bool.
            SessionNotFound, SessionNotActive (a CLOSED or EXPIRED session),
            VersionConflict (a stale ``expected_version``), IdempotencyKeyReused.
        """
        to = check_cursor_seq(to_seq, "to_seq")
        if to is None:
            raise ValidationError("to_seq is required (0 goes back to the start)", field="to_seq")
        if type(remove) is not bool:
            raise ValidationError("remove must be true or false", field="remove")
        mode: Literal["hide", "remove"] = "remove" if remove else "hide"
        limits = self.limits

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change | Unchanged:
            return _rewind(tx, s, now, limits, to, mode)

        request = WriteRequest(
            scope="rewind_session",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_REWOUND,
            request=(to, remove),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def list_rewinds(
        self,
        *,
        session_id: str,
        user_id: str,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[Rewind]:
        """A page of the session's rewinds, oldest first (numbers 1, 2, 3...).

        Args:
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this listing.

        Returns:
            A page; ``next_cursor`` is None when no more rewinds lie beyond it.

        Raises:
            SessionNotFound, ValidationError (a cursor not of this listing).
        """
        size = self._page_size(limit)
        listing = Listing("rewinds", session_id, older_ok=False)
        start = listing.start(cursor, after=None, newest_first=False)

        def read(tx: StoreTransaction, s: Session) -> Page[Rewind]:
            def fetch(after: int | None, n: int) -> list[Rewind]:
                return tx.list_rewinds(s.session_id, after_number=after, limit=n)

            return read_forward(fetch, start.seq, size, listing)

        return self._reads.read(session_id, Principal(user_id, admin), read)

    def get_rewound_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        number: int,
        limit: int | None = None,
        cursor: str | None = None,
        admin: bool = False,
    ) -> Page[Message]:
        """A page of the messages rewind ``number`` hid, oldest first, as they were
        stored (their seqs those they had; a removing rewind kept none: an empty page).

        Args:
            number: the rewind's number (:meth:`list_rewinds`).
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.
            cursor: ``next_cursor`` of a page of this listing.

        Raises:
            RewindNotFound: the session has no rewind ``number``.
            SessionNotFound, ValidationError (a bad ``number`` or cursor).
        """
        if type(number) is not int or number < 1:
            raise ValidationError("number must be an integer >= 1", field="number")
        size = self._page_size(limit)
        listing = Listing("rewound_messages", session_id, number, older_ok=False)
        start = listing.start(cursor, after=None, newest_first=False)

        def read(tx: StoreTransaction, s: Session) -> Page[Message]:
            found = tx.list_rewinds(s.session_id, after_number=number - 1, limit=1)
            if not found or found[0].number != number:
                raise RewindNotFound(session_id=s.session_id, number=number)

            def fetch(after: int | None, n: int) -> list[Message]:
                return tx.get_rewound_messages(s.session_id, number, after_seq=after, limit=n)

            return read_forward(fetch, start.seq, size, listing)

        return self._reads.read(session_id, Principal(user_id, admin), read)


def _rewind(
    tx: StoreTransaction,
    s: Session,
    now: datetime,
    limits: Limits,
    to: int,
    mode: Literal["hide", "remove"],
) -> Change | Unchanged:
    """The change of a rewind of ``s`` to ``to`` (see :meth:`~RewindUseCases.rewind_session`).

    Raises:
        ValidationError: ``to`` above the session's ``message_count``.
    """
    if check_within(s, to, "to_seq") == s.message_count:  # the memory as of it is the current one
        current = memory_as_of(tx, s, to)
        return Unchanged(
            RewindResult(
                number=None,
                to_seq=to,
                count=0,
                mode=mode,
                memory_version=current.version,
                session_version=s.version,
            )
        )
    target = memory_as_of(tx, s, to)  # before the removal clamps the history
    newest = tx.list_rewinds(s.session_id, limit=1, newest=True)
    number = newest[0].number + 1 if newest else 1
    if mode == "hide":
        tx.hide_messages(s.session_id, after_seq=to, number=number)
    removed = removal_change(tx, s, to, "session.rewound", None)
    memory = apply_memory(tx, s, now, limits, data=dict(target.data), at_seq=to)
    count = s.message_count - to
    tx.insert_rewind(
        Rewind(
            session_id=s.session_id,
            number=number,
            to_seq=to,
            count=count,
            mode=mode,
            memory_version=memory.version,
            created_at=now,
        )
    )
    details: dict[str, Any] = {"to_seq": to, "count": count, "mode": mode}
    if "summaries_removed" in removed.details:
        details["summaries_removed"] = removed.details["summaries_removed"]
    details["memory_version"] = memory.version
    result = RewindResult(
        number=number,
        to_seq=to,
        count=count,
        mode=mode,
        memory_version=memory.version,
        session_version=memory.version,
    )
    return Change(removed.session, "session.rewound", details, result)
