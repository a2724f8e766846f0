"""Window alignment: a window of history never splits a tool call from its result.

In every message format (:mod:`agentsession.callgroups`: chat completions, Anthropic
content blocks, OpenAI Responses items) a window (``get_messages(limit=k)``, the
messages ``restore_session`` returns) is widened at the start back to the message that
made every call answered inside it, and at the end until every call made inside it has
its result (docs/architecture.md, "Window alignment"). It may therefore hold a few more
than ``limit`` messages; cursors taken from it still visit every message once.

Cost: the widening reads neighbours in steps of a few messages and only while a call or
a result is still missing; it stops at the first message that cannot stand between a
call and its result (a user or system message without results), and after
:data:`MAX_WIDENING` messages on either side, so a call or result whose partner is
missing from history costs at most that much, never a scan of the history.
"""

from __future__ import annotations

from collections import Counter

from ..callgroups import answered_calls, in_tool_exchange, opened_calls, touches_calls
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
    tx: StoreTransaction, session_id: str, rows: list[Message], message_count: int
) -> list[Message]:
    """Widen ``rows`` (consecutive messages, oldest first) so no call is split from its
    result.

    Args:
        rows: the window as read, consecutive seqs, oldest first (may be empty).
        message_count: the session's message count (the newest seq).

    Returns:
        The widened window: consecutive seqs, oldest first, ``rows`` in the middle.
    """
    # A side is blocked once its widening reached the history's edge or a message no
    # call or result crosses; reading there again would find the same.
    start_blocked = end_blocked = False
    while rows:
        needed, pending = _missing(rows)
        if needed and not start_blocked:
            rows, start_blocked = _widen_start(tx, session_id, rows, needed)
        elif pending and not end_blocked:
            rows, end_blocked = _widen_end(tx, session_id, rows, pending, message_count)
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
    for m in rows:
        if not touches_calls(m):  # most messages: nothing to match
            continue
        for call in answered_calls(m):
            if pending[call] > 0:
                pending[call] -= 1
            else:
                needed[call] += 1
        opened = opened_calls(m)
        if opened:  # most messages open none; Counter.update costs even when empty
            pending.update(opened)
    return +needed, +pending


def _widen_start(
    tx: StoreTransaction, session_id: str, rows: list[Message], needed: Counter[str]
) -> tuple[list[Message], bool]:
    """Prepend older messages until the calls ``needed`` are made; return the window and
    whether it stopped short (blocked)."""
    first = rows[0].seq
    while needed:
        if rows[0].seq <= 1 or first - rows[0].seq >= MAX_WIDENING:
            return rows, True
        older = tx.get_messages(session_id, before_seq=rows[0].seq, limit=_STEP)
        for i in range(len(older) - 1, -1, -1):
            m = older[i]
            if not in_tool_exchange(m):
                return older[i + 1 :] + rows, True
            # Walking back: m's calls answer the results after it, m's results need
            # calls before it.
            needed = +(needed - Counter(opened_calls(m)))
            needed.update(answered_calls(m))
            if not needed:
                return older[i:] + rows, False
        if not older:
            return rows, True
        rows = older + rows
    return rows, False


def _widen_end(
    tx: StoreTransaction,
    session_id: str,
    rows: list[Message],
    pending: Counter[str],
    message_count: int,
) -> tuple[list[Message], bool]:
    """Append newer messages until the calls ``pending`` are answered; return the window
    and whether it stopped short (blocked)."""
    last = rows[-1].seq
    while pending:
        if rows[-1].seq >= message_count or rows[-1].seq - last >= MAX_WIDENING:
            return rows, True
        newer = tx.get_messages(session_id, after_seq=rows[-1].seq, limit=_STEP, newest=False)
        for i, m in enumerate(newer):
            if not in_tool_exchange(m):
                return rows + newer[:i], True
            pending = +(pending - Counter(answered_calls(m)))
            pending.update(opened_calls(m))
            if not pending:
                return rows + newer[: i + 1], False
        if not newer:
            return rows, True
        rows = rows + newer
    return rows, False
