"""Window alignment: a window of history never splits a tool call from its result, nor a
Responses reasoning item from the item it was produced for.

In every message format (:mod:`agentsession.callgroups`: chat completions, Anthropic
content blocks, OpenAI Responses items) a window (``get_messages(limit=k)``, the
messages ``restore_session`` returns) is widened at the start back to the message that
made every call answered inside it, and at the end until every call made inside it has
its result (docs/semantics.md, "Window alignment"). A Responses reasoning item and
its successor (:func:`~agentsession.callgroups.produced_from`) are one unit, because a
provider refuses either without the other: a window that ends with a reasoning item
is widened to its successor, and one that starts with the successor of a reasoning
item is widened back to that item. A side at a seq bound (a page's ``before=`` or
``after=``) is not widened at all. A window may therefore hold a few more than
``limit`` messages; cursors taken from it still visit every message once.

Cost: the widening reads neighbours in steps of a few messages and only while a call or
a result is still missing; it stops at the first message that cannot stand between a
call and its result (a user or system message without results), and after
:data:`MAX_WIDENING` messages on either side, so a call or result whose partner is
missing from history costs at most that much, never a scan of the history. Whether a
window's first message follows a reasoning item costs one more message read, and only
when that message is a model output (an assistant message or a call).
"""

from __future__ import annotations

from collections import Counter

from ..callgroups import (
    answered_calls,
    in_tool_exchange,
    is_reasoning,
    model_output,
    opened_calls,
    produced_from,
    touches_calls,
)
from ..models import Message
from ..stores.base import StoreTransaction

__all__ = ["MAX_WIDENING", "align_window"]

#: How many neighbours one widening step reads.
_STEP = 8
#: The most messages one side of a window is widened by. A longer tool exchange is read
#: only up to here: a result whose call lies further back (a result stored without its
#: call, or under an id no earlier call made) would otherwise widen a page back to the
#: start of the agent loop, whatever its limit.
MAX_WIDENING = 64


def align_window(
    tx: StoreTransaction,
    session_id: str,
    rows: list[Message],
    message_count: int,
    *,
    keep_start: bool = False,
    keep_end: bool = False,
    neighbour: Message | None = None,
) -> list[Message]:
    """Widen ``rows`` (consecutive messages, oldest first) so no call is split from its
    result and no reasoning item from its successor.

    Args:
        rows: the window as read, consecutive seqs, oldest first (may be empty).
        message_count: the session's message count (the newest seq).
        keep_start / keep_end: that side is at a seq bound (``after=`` / ``before=``
            or a cursor standing for one) and is not widened, so the page next to it
            keeps every message once.
        neighbour: the message right before or right after ``rows`` if the caller
            read it already (in this transaction); a widening step over it takes it
            instead of reading it again (a step reads no more rows than before).

    Returns:
        The widened window: consecutive seqs, oldest first, ``rows`` in the middle.
    """
    # A side is blocked once its widening reached the history's edge or a message no
    # call or result crosses; reading there again would find the same. A side's
    # reasoning neighbour is asked for once: only that side's widening moves its edge,
    # and it asks again whenever it does.
    # What is missing is counted again only after a side took messages in: a widening
    # that took none leaves the same window (and the same count) behind.
    start_blocked, end_blocked = keep_start, keep_end
    start_checked = end_checked = False
    counted = -1
    while rows:
        if counted != len(rows):
            needed, pending = _missing(rows)
            counted = len(rows)
        if not start_blocked and (needed or not start_checked):
            rows, start_blocked = _widen_start(tx, session_id, rows, needed, neighbour)
            start_checked = True
        elif not end_blocked and (pending or not end_checked):
            rows, end_blocked = _widen_end(tx, session_id, rows, pending, message_count, neighbour)
            end_checked = True
        else:
            break
    return rows


def _missing(rows: list[Message]) -> tuple[Counter[str], Counter[str]]:
    """(calls answered in ``rows`` but made before them, calls made in ``rows`` and not
    answered in them), counted per id.

    Matched by position, not as sets: a result answers the nearest earlier call with its
    id, because providers reuse ids within one conversation (``call_0`` every turn), so a
    result at the window's start may share its id with a later call inside the window.
    """
    needed: Counter[str] = Counter()
    pending: Counter[str] = Counter()
    touched = False
    for m in rows:
        if not touches_calls(m):  # most messages: nothing to match
            continue
        touched = True
        for call in answered_calls(m):
            if pending[call] > 0:
                pending[call] -= 1
            else:
                needed[call] += 1
        opened = opened_calls(m)
        if opened:  # most messages open none; Counter.update costs even when empty
            pending.update(opened)
    if not touched:  # most windows: nothing counted, nothing to drop
        return needed, pending
    return +needed, +pending


def _widen_start(
    tx: StoreTransaction,
    session_id: str,
    rows: list[Message],
    needed: Counter[str],
    neighbour: Message | None,
) -> tuple[list[Message], bool]:
    """Prepend older messages until the calls ``needed`` are made and the first message
    is not the successor of a reasoning item left out; return the window and whether it
    stopped short (blocked)."""
    first = rows[0].seq
    while needed or model_output(rows[0]):
        if rows[0].seq <= 1 or first - rows[0].seq >= MAX_WIDENING:
            return rows, True
        # Without a call missing, only the message right before can be wanted.
        older = _older(tx, session_id, rows[0].seq, _STEP if needed else 1, neighbour)
        if not older:
            return rows, True
        for i in range(len(older) - 1, -1, -1):
            m, head = older[i], (older[i + 1] if i + 1 < len(older) else rows[0])
            if needed and not in_tool_exchange(m):
                return older[i + 1 :] + rows, True
            if not needed and not produced_from(m, head):
                return older[i + 1 :] + rows, False
            # Walking back: m's calls answer the results after it, m's results need
            # calls before it.
            needed = +(needed - Counter(opened_calls(m)))
            needed.update(answered_calls(m))
        rows = older + rows
    return rows, False


def _widen_end(
    tx: StoreTransaction,
    session_id: str,
    rows: list[Message],
    pending: Counter[str],
    message_count: int,
    neighbour: Message | None,
) -> tuple[list[Message], bool]:
    """Append newer messages until the calls ``pending`` are answered and the last
    message is no reasoning item whose successor is left out; return the window and
    whether it stopped short (blocked)."""
    last = rows[-1].seq
    while pending or is_reasoning(rows[-1]):
        if rows[-1].seq >= message_count or rows[-1].seq - last >= MAX_WIDENING:
            return rows, True
        newer = _newer(tx, session_id, rows[-1].seq, _STEP if pending else 1, neighbour)
        if not newer:
            return rows, True
        for i, m in enumerate(newer):
            tail = newer[i - 1] if i else rows[-1]
            if pending and not in_tool_exchange(m):
                return rows + newer[:i], True
            if not pending and not produced_from(tail, m):
                # A reasoning item followed by anything else has no successor.
                return rows + newer[:i], False
            pending = +(pending - Counter(answered_calls(m)))
            pending.update(opened_calls(m))
        rows = rows + newer
    return rows, False


def _older(
    tx: StoreTransaction, session_id: str, seq: int, limit: int, known: Message | None
) -> list[Message]:
    """The ``limit`` messages right before ``seq``, oldest first; ``known``, the one at
    ``seq - 1`` if the caller read it already, is not read again."""
    if known is None or known.seq != seq - 1:
        return tx.get_messages(session_id, before_seq=seq, limit=limit)
    if limit == 1:
        return [known]
    return [*tx.get_messages(session_id, before_seq=known.seq, limit=limit - 1), known]


def _newer(
    tx: StoreTransaction, session_id: str, seq: int, limit: int, known: Message | None
) -> list[Message]:
    """The ``limit`` messages right after ``seq``, oldest first; ``known``, the one at
    ``seq + 1`` if the caller read it already, is not read again."""
    if known is None or known.seq != seq + 1:
        return tx.get_messages(session_id, after_seq=seq, limit=limit, newest=False)
    if limit == 1:
        return [known]
    return [known, *tx.get_messages(session_id, after_seq=known.seq, limit=limit - 1, newest=False)]
