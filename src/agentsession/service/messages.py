"""Use cases on the message history: append (one, or a batch), replace the newest
messages, read a window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ..errors import ValidationError
from ..models import Message, Page, Session
from ..principal import Principal
from ..stores.base import SessionHead, SessionRow, StoreTransaction
from .changes.messages import insert_messages
from .changes.removal import removal_change
from .changes.statechange import StateChange
from .core import ServiceCore
from .modelcopy import updated
from .paging import Listing, Position
from .pipeline import Change, RowChange, RowWrite, WriteRequest
from .transitions import running_run
from .validation import check_cursor_seq, check_message
from .window import align_window

__all__ = ["MessageUseCases", "message_page"]

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


class MessageUseCases(ServiceCore):
    """Message use cases (part of :class:`SessionManager`)."""

    def append_message(
        self,
        *,
        session_id: str,
        user_id: str,
        message: Mapping[str, Any],
        working_memory_patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        working_memory_ops: Sequence[Mapping[str, Any]] | None = None,
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> Message:
        """Append one message; see :meth:`append_messages` for every rule.

        Returns:
            The stored message with its ``message_id``, ``seq`` and ``created_at``.
        """
        return self.append_messages(
            session_id=session_id,
            user_id=user_id,
            messages=[message],
            working_memory_patch=working_memory_patch,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            admin=admin,
            working_memory_ops=working_memory_ops,
            shared_memory_ops=shared_memory_ops,
        )[0]

    def append_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        messages: Sequence[Mapping[str, Any]],
        working_memory_patch: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
        working_memory_ops: Sequence[Mapping[str, Any]] | None = None,
        shared_memory_ops: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> list[Message]:
        """Append messages atomically: all get consecutive seqs, or none is stored.

        Each message is a mapping with ``role`` (``system|developer|user|assistant|tool``) and
        optionally ``content`` (str, list of parts, or None), ``name``, ``tool_calls``,
        ``tool_call_id``, ``run_id`` (a RUNNING run of this session), ``metadata``, and any
        further JSON fields, which are kept and returned unchanged. An OpenAI Responses
        item may leave ``role`` out: ``function_call`` / ``custom_tool_call`` (with a
        ``call_id``) and ``reasoning`` read as ``assistant``, ``function_call_output`` /
        ``custom_tool_call_output`` (with a ``call_id``) as ``tool``; the stored
        payload stays without a role (:mod:`agentsession.callgroups`). The whole batch is
        one version step. With ``working_memory_patch`` (RFC 7396) the working memory
        changes in the same transaction, so an agent turn is stored whole or not at all;
        ``working_memory_ops`` (RFC 6902 JSON Patch) does so instead (not both), and
        ``shared_memory_ops`` (``{"app": [ops], "user": [ops]}``) changes the session's
        shared memory too (:meth:`update_shared_memory`). ``user_id`` names the caller.

        Returns:
            The stored messages in seq order.

        Raises:
            ValidationError / PayloadTooLarge / UnsupportedValue: a bad message, over
                ``limits.max_message_bytes``, or more than ``limits.max_batch_messages``.
            RunNotFound / RunNotRunning: a ``run_id`` that is not a RUNNING run of the
                session (nothing is stored).
            PatchConflict: an op does not apply (nothing stored).
            Forbidden: ``shared_memory_ops["app"]`` without admin.
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
        """
        payloads, texts = self._checked_batch(messages)
        state = StateChange.check(
            working_memory_patch, working_memory_ops, shared_memory_ops, self.limits, admin=admin
        )

        def change(
            tx: StoreTransaction, row: SessionRow, now: datetime
        ) -> RowChange[list[Message]]:
            _check_runs(tx, row, payloads)
            stored = insert_messages(tx, row, now, payloads, texts)
            count = row.message_count + len(stored)
            details: dict[str, Any] = {
                "count": len(stored),
                "first_seq": stored[0].seq,
                "last_seq": stored[-1].seq,
            }
            state.apply(tx, row, now, self.limits, details, at_seq=count)
            version = {"session_version": row.version + 1}
            answer = [updated(m, version) for m in stored]
            return RowChange("message.appended", details, answer, count)

        request = RowWrite(
            scope="append_messages",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_MESSAGES,
            request=(payloads, *state.request()),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )
        return self._pipeline.write_row(request).value

    def replace_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        after_seq: int,
        messages: Sequence[Mapping[str, Any]],
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> list[Message]:
        """Remove every message with ``seq > after_seq`` and append ``messages`` in their
        place, in one transaction and one version step: a reader, a crash or an outage
        sees the history before or after, never the removal alone (``after_seq=0``
        replaces the whole history, e.g. with a compacted one).

        The removal is :meth:`truncate_messages`'s (the summaries reaching past
        ``after_seq`` go too; tool calls, runs and working memory stay; an ``after_seq``
        at or above ``message_count`` removes nothing); the messages follow
        :meth:`append_messages`'s rules and get the seqs after the ones kept.
        One audit event ``message.replaced`` with counts and seqs only (``removed``,
        ``count``, ``first_seq``, ``last_seq``, and ``summaries_removed`` when the
        removal took summaries, as :meth:`truncate_messages` records it). ``user_id``
        names the caller.

        Returns:
            The stored messages in seq order, each with the session's new version.

        Raises:
            ValidationError / PayloadTooLarge / UnsupportedValue: a bad message, an
                empty list or more than ``limits.max_batch_messages`` (to remove only,
                call :meth:`truncate_messages`), ``after_seq`` not an integer from 0 to
                2**53-1.
            RunNotFound / RunNotRunning: a ``run_id`` that is not a RUNNING run.
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
            StoreError: the store's messages disagree with the session's count.
        """
        after = check_cursor_seq(after_seq, "after_seq")
        if after is None:
            raise ValidationError("after_seq is required (0 replaces all)", field="after_seq")
        payloads, texts = self._checked_batch(messages)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
            _check_runs(tx, s, payloads)
            kept, removed, summaries = s, 0, {}
            if after < s.message_count:
                cut = removal_change(tx, s, after, "message.replaced", None)
                kept, removed = cut.session, cut.details["count"]
                # As truncate_messages and pop_message audit it (only when some went).
                summaries = {k: v for k, v in cut.details.items() if k == "summaries_removed"}
            stored = insert_messages(tx, kept, now, payloads, texts)
            new = updated(kept, {"message_count": kept.message_count + len(stored)})
            details = {
                "removed": removed,
                **summaries,
                "count": len(stored),
                "first_seq": stored[0].seq,
                "last_seq": stored[-1].seq,
            }
            return Change(new, "message.replaced", details, stored)

        request = WriteRequest(
            scope="replace_messages",
            session_id=session_id,
            principal=Principal(user_id, admin),
            change=change,
            result_type=_MESSAGES,
            request=(after, payloads),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def _checked_batch(
        self, messages: Sequence[Mapping[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """The checked payloads of a batch of 1..``limits.max_batch_messages`` messages,
        and their JSON texts (:func:`~.validation.check_message`).

        Raises:
            ValidationError / PayloadTooLarge / UnsupportedValue: as ``append_messages``.
        """
        if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
            raise ValidationError("messages must be a list of message objects", field="messages")
        if not messages:
            raise ValidationError("messages must not be empty", field="messages")
        if len(messages) > self.limits.max_batch_messages:
            raise ValidationError(
                f"at most {self.limits.max_batch_messages} messages per call", field="messages"
            )
        checked = [check_message(m, f"messages[{i}]", self.limits) for i, m in enumerate(messages)]
        return [c[0] for c in checked], [c[1] for c in checked]

    def get_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
        cursor: str | None = None,
        align_tool_calls: bool = True,
        admin: bool = False,
    ) -> Page[Message]:
        """Read a page of history, oldest first, in ``seq`` order (never by timestamp,
        which two messages may share).

        Without a cursor or bound, the page is the newest ``limit`` messages and its
        ``next_cursor`` goes back to older ones. ``before=seq`` starts back there (the
        newest older than that seq, paging on backwards), ``after=seq`` pages forwards
        (the oldest newer than it). Both are exclusive seqs, e.g. ``before=page[0].seq``.
        ``user_id`` names the caller (the principal).

        With ``align_tool_calls`` (the default) a page never holds a tool result without
        the message that made its call, nor a call without its results, in the
        chat-completions, Anthropic and Responses formats, nor a Responses reasoning
        item without the item after it or that item without its reasoning item: it is
        widened to the whole exchange (but never past its seq bound, so a page after the
        first may end with a call whose results the previous page holds), so it may hold
        a few more than ``limit`` messages (docs/semantics.md, "Window alignment").
        Following the cursors visits every message exactly once.

        Args:
            limit: page size, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``; 0 = an empty page.
            cursor: ``next_cursor`` of a page of this listing (same session and
                ``align_tool_calls``), or ``messages_next_cursor`` of a restore.

        Returns:
            A page; ``next_cursor`` (and ``has_more``) say whether more messages lie
            beyond it in its direction.

        Raises:
            ValidationError: a bad limit or seq bound, both bounds at once, a bound
                with a cursor, a cursor not of this listing.
            SessionNotFound.
        """
        size = self._page_size(limit)
        listing = Listing("messages", session_id, align_tool_calls)
        start = listing.start(
            cursor,
            after=check_cursor_seq(after, "after"),
            before=check_cursor_seq(before, "before"),
            newest_first=True,
        )

        def read(tx: StoreTransaction, s: SessionHead) -> Page[Message]:
            return message_page(tx, s, start, size, listing, align=align_tool_calls)

        return self._reads.read_head(session_id, Principal(user_id, admin), read)


def message_page(
    tx: StoreTransaction,
    s: Session | SessionHead,
    start: Position,
    size: int,
    listing: Listing,
    *,
    align: bool,
) -> Page[Message]:
    """The page of the history of ``s`` (a session or its head) at ``start``: ``size``
    messages (more if aligned to whole tool-call groups and reasoning items), with the
    cursor of the next one in the same direction.

    Seqs are gapless from 1 to ``s.message_count``, so more exist backwards when the
    page starts above seq 1, and forwards when a message above its end was read.
    Alignment (:func:`~agentsession.service.window.align_window`) widens a page only
    away from its bound, never across it: the next page starts right where this one
    ended, so cursors visit every message exactly once, even around a tool result that
    does not follow its call. A cursor is anchored on the message at its
    bound and refused once that message is removed (:func:`_check_anchor`).
    """
    if size == 0:
        _check_anchor(tx, s.session_id, start.anchor)  # a stale cursor is refused here too
        return Page(items=[])
    # Forwards, one more tells if more exist; backwards and aligned, the one before the
    # page is what alignment asks of a page starting with a model output (does it
    # follow a reasoning item?), read here rather than by a statement of its own.
    extra = 1 if align or not start.older else 0
    read = tx.get_messages(
        s.session_id,
        after_seq=None if start.older else start.seq,
        before_seq=start.seq if start.older else None,
        limit=size + extra,
        newest=start.older,
    )
    rows = read[-size:] if start.older else read[:size]
    if align and rows:
        bounded = start.seq is not None
        beyond = read[0] if start.older else read[-1]
        rows = align_window(
            tx,
            s.session_id,
            rows,
            s.message_count,
            keep_start=bounded and not start.older,
            keep_end=bounded and start.older,
            neighbour=beyond if len(read) > size else None,
        )
    # Checked after the read: message ids are never reused, so the anchor still there
    # now proves no removal (nor a re-append at its seqs) reached it before the read.
    _check_anchor(tx, s.session_id, start.anchor)
    if not rows:
        return Page(items=[])
    edge = rows[0] if start.older else rows[-1]
    # Backwards, seqs are gapless down to 1 and removals only cut the top. Forwards,
    # ``message_count`` was read before the rows and a removal since may have cut all
    # after them: only a row read above the edge means the next page is not empty.
    more = edge.seq > 1 if start.older else _exists_after(tx, s.session_id, edge.seq, read)
    position = Position(older=start.older, seq=edge.seq, anchor=(edge.seq, edge.message_id))
    return Page(items=rows, next_cursor=listing.cursor(position) if more else None)


def _exists_after(tx: StoreTransaction, session_id: str, seq: int, read: list[Message]) -> bool:
    """Whether the history holds a message above ``seq``: seen in ``read`` (the rows
    read for the page, oldest first), else asked of the store (an aligned page that
    widened past them)."""
    if read and read[-1].seq > seq:
        return True
    return bool(tx.get_messages(session_id, after_seq=seq, limit=1))


def _check_anchor(tx: StoreTransaction, session_id: str, anchor: tuple[int, str] | None) -> None:
    """A messages cursor is valid while the message it was anchored on is still there:
    removals only cut the newest messages, so then every message up to it is too. No
    anchor (a caller's seq bound, a cursor issued before anchors): nothing to check.

    Raises:
        ValidationError: the message is gone (the history was truncated or popped past
            it since the cursor was issued; context ``stale=True``): read again without
            the cursor.
    """
    if anchor is None:
        return
    seq, message_id = anchor
    found = tx.get_messages(session_id, after_seq=seq - 1, before_seq=seq + 1)
    if not found or found[0].message_id != message_id:
        raise ValidationError(
            "cursor is stale: messages were removed since it was issued; read again without it",
            field="cursor",
            stale=True,
        )


def _check_runs(
    tx: StoreTransaction, s: Session | SessionRow, payloads: list[dict[str, Any]]
) -> None:
    """Every ``run_id`` the payloads name must be a RUNNING run of ``s``.

    Raises:
        RunNotFound: a message names a run the session does not have.
        RunNotRunning: a message names a run that is not RUNNING.
    """
    for run_id in {p["run_id"] for p in payloads if p.get("run_id") is not None}:
        running_run(tx, s, run_id)
