"""Use cases of compaction: store a summary of a seq range, list the summaries.

A summary covers the messages ``from_seq..to_seq`` of a session; it deletes nothing
(the full history stays readable and exportable), and ``build_context`` sends it in
place of the messages it covers. Summaries are numbered 1, 2, 3... per session; a new
one may name an older one in ``supersedes`` (which stays readable). Adding one is a
write through the pipeline like any other (ACTIVE only, ownership,
``expected_version``, idempotency keys, one version step, one audit event
``summary.added`` with numbers only, never the text).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ..errors import ValidationError
from ..fieldlimits import SUMMARY_LABEL_CHARS, TEXT_CHARS
from ..jsonvalues import check_json
from ..models import Session, Summary
from ..principal import Principal
from ..stores.base import StoreTransaction
from ..tokens import Tokenizer, message_tokens, text_tokens
from .core import ServiceCore
from .pipeline import Change, WriteRequest
from .transitions import next_version
from .validation import (
    check_cursor_seq,
    check_limit,
    check_record_name,
    check_tokenizer,
    check_within,
)

__all__ = ["SummaryUseCases"]

_SUMMARY: TypeAdapter[Summary] = TypeAdapter(Summary)
#: Messages read per page while counting the tokens a summary replaces.
_COUNT_PAGE = 500


class SummaryUseCases(ServiceCore):
    """Compaction: stored summaries (part of :class:`SessionManager`)."""

    def add_summary(
        self,
        *,
        session_id: str,
        user_id: str,
        text: str,
        from_seq: int,
        to_seq: int,
        author: str | None = None,
        model: str | None = None,
        summary_tokens: int | None = None,
        replaced_tokens: int | None = None,
        tokenizer: Tokenizer | None = None,
        supersedes: int | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        admin: bool = False,
    ) -> Summary:
        """Store a summary of the messages ``from_seq..to_seq`` (inclusive).

        Args:
            text: the summary, 1-100,000 characters.
            from_seq, to_seq: the range it covers, ``1 <= from_seq <= to_seq <=``
                the session's ``message_count``.
            author: who wrote it (1-255 characters, no control characters); None =
                ``user_id``.
            model: the model that wrote it (same rules), or None.
            summary_tokens, replaced_tokens: the tokens of ``text`` and of the messages
                it covers, as counted by ``tokenizer``; None = counted here with
                ``tokenizer`` (the replaced range is then read, O(its length)).
            tokenizer: what counts tokens (:mod:`agentsession.tokens`); None = the
                default byte estimate. Its ``name`` is stored.
            supersedes: the ``number`` of an earlier summary this one replaces.

        Returns:
            The stored :class:`Summary` (``number`` = the session's newest + 1) with
            ``session_version``; a retry with the same ``idempotency_key`` answers the
            first result again and writes nothing.

        Raises:
            ValidationError: a bad text, range (outside the history, from > to),
                author, model, token count, or a ``supersedes`` naming no summary.
            SessionNotFound, SessionNotActive, VersionConflict, IdempotencyKeyReused.
        """
        tok = check_tokenizer(tokenizer)
        fields = _check_fields(text, from_seq, to_seq, author, model, supersedes)
        counts = [
            _check_count(summary_tokens, "summary_tokens"),
            _check_count(replaced_tokens, "replaced_tokens"),
        ]
        principal = Principal(user_id, admin)

        def change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
            newest = tx.list_summaries(s.session_id, limit=1, newest=True)
            number = newest[0].number + 1 if newest else 1
            _check_against(s, fields, number)
            replaced = counts[1]
            if replaced is None:
                replaced = _range_tokens(tx, s.session_id, from_seq, to_seq, tok)
            summary = Summary(
                **{**fields, "author": fields["author"] or principal.user_id},
                session_id=s.session_id,
                number=number,
                tokenizer=tok.name,
                summary_tokens=text_tokens(tok, text) if counts[0] is None else counts[0],
                replaced_tokens=replaced,
                created_at=now,
                version=next_version(s),
            )
            tx.insert_summary(summary)
            details = {
                "number": number,
                "from_seq": from_seq,
                "to_seq": to_seq,
                "supersedes": supersedes,
            }
            return Change(s, "summary.added", details, summary)

        request = WriteRequest(
            scope="add_summary",
            session_id=session_id,
            principal=principal,
            change=change,
            result_type=_SUMMARY,
            request=(fields, counts, tok.name),
            expected_version=expected_version,
            idempotency_key=idempotency_key,
            touch=True,
        )
        return self._pipeline.write(request).value

    def list_summaries(
        self,
        *,
        session_id: str,
        user_id: str,
        after: int | None = None,
        limit: int | None = None,
        admin: bool = False,
    ) -> list[Summary]:
        """The session's summaries, oldest first (superseded ones included).

        Args:
            after: only numbers greater than this; page on with ``after=<last number>``.
            limit: at most this many, 0..``limits.max_page_size``; None =
                ``limits.default_page_size``.

        Raises:
            ValidationError: a bad ``after`` or ``limit``. SessionNotFound.
        """
        start = check_cursor_seq(after, "after")
        size = self._page_size(limit)
        return self._reads.read(
            session_id,
            Principal(user_id, admin),
            lambda tx, s: tx.list_summaries(s.session_id, after_number=start, limit=size),
        )


def _check_fields(
    text: Any, from_seq: Any, to_seq: Any, author: Any, model: Any, supersedes: Any
) -> dict[str, Any]:
    """The checks that need no stored state (see ``add_summary``'s Raises)."""
    if type(text) is not str or not 1 <= len(text) <= TEXT_CHARS:
        raise ValidationError(f"text must be a string of 1-{TEXT_CHARS} characters", field="text")
    check_json(text, field="text")
    for name, value in (("from_seq", from_seq), ("to_seq", to_seq), ("supersedes", supersedes)):
        if name == "supersedes" and value is None:
            continue
        if type(value) is not int or value < 1:
            raise ValidationError(f"{name} must be an integer >= 1", field=name)
    if from_seq > to_seq:
        raise ValidationError("from_seq must not be greater than to_seq", field="from_seq")
    for name, value in (("author", author), ("model", model)):
        if value is not None:
            check_record_name(value, name, min_chars=1, max_chars=SUMMARY_LABEL_CHARS)
    return {
        "text": text,
        "from_seq": from_seq,
        "to_seq": to_seq,
        "author": author,
        "model": model,
        "supersedes": supersedes,
    }


def _check_count(value: Any, field: str) -> int | None:
    return check_limit(value, field, allow_none=True, maximum=None)


def _check_against(s: Session, fields: dict[str, Any], number: int) -> None:
    """The checks against the stored session: the range lies in its history, and a
    ``supersedes`` names an existing summary."""
    check_within(s, fields["to_seq"], "to_seq")
    target = fields["supersedes"]
    if target is not None and target >= number:
        raise ValidationError(f"supersedes names no summary ({target})", field="supersedes")


def _range_tokens(
    tx: StoreTransaction, session_id: str, from_seq: int, to_seq: int, tokenizer: Tokenizer
) -> int:
    """Tokens of the messages ``from_seq..to_seq``, read a page at a time."""
    total, after = 0, from_seq - 1
    while after < to_seq:
        page = tx.get_messages(
            session_id, after_seq=after, before_seq=to_seq + 1, limit=_COUNT_PAGE, newest=False
        )
        if not page:
            break
        total += sum(message_tokens(tokenizer, m) for m in page)
        after = page[-1].seq
    return total
