"""Window alignment: a window of history never splits a tool call from its result.

In every message format (:mod:`agentsession.callgroups`: chat completions, Anthropic
content blocks, OpenAI Responses items) a window (``get_messages(limit=k)``, the
messages ``restore_session`` returns) is widened at the start back to the message that
made every call answered inside it, and at the end until every call made inside it has
its result (docs/architecture.md, "Window alignment"). It may therefore hold a few more
than ``limit`` messages; cursors taken from it still visit every message once.

Cost: the widening reads neighbours in steps of a few messages and only while a call or
a result is still missing; it stops at the first message that cannot stand between a
call and its result (a user or system message without results), so a call or result
whose partner is missing from history costs a step, never a scan of the history.
"""

from __future__ import annotations

from ..callgroups import answered_calls, in_tool_exchange, opened_calls
from ..models import Message
from ..stores.base import StoreTransaction

__all__ = ["align_window"]

#: How many neighbours one widening step reads.
_STEP = 8


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
    while rows:
        wider = _widen_end(tx, session_id, _widen_start(tx, session_id, rows), message_count)
        if len(wider) == len(rows):
            return rows
        rows = wider  # newly added messages may need partners of their own
    return rows


def _missing(rows: list[Message]) -> tuple[set[str], set[str]]:
    """(calls answered in ``rows`` but made before them, calls made in ``rows`` and not
    answered in them)."""
    opened = {c for m in rows for c in opened_calls(m)}
    answered = {c for m in rows for c in answered_calls(m)}
    return answered - opened, opened - answered


def _widen_start(tx: StoreTransaction, session_id: str, rows: list[Message]) -> list[Message]:
    """Prepend older messages until every result in the window has its call."""
    needed, _ = _missing(rows)
    while needed and rows[0].seq > 1:
        older = tx.get_messages(session_id, before_seq=rows[0].seq, limit=_STEP)
        for i in range(len(older) - 1, -1, -1):
            m = older[i]
            if not needed or not in_tool_exchange(m):
                return older[i + 1 :] + rows
            needed = (needed | set(answered_calls(m))) - set(opened_calls(m))
        if not older:
            break
        rows = older + rows
    return rows


def _widen_end(
    tx: StoreTransaction, session_id: str, rows: list[Message], message_count: int
) -> list[Message]:
    """Append newer messages until every call in the window has its result."""
    _, pending = _missing(rows)
    while pending and rows[-1].seq < message_count:
        newer = tx.get_messages(session_id, after_seq=rows[-1].seq, limit=_STEP, newest=False)
        for i, m in enumerate(newer):
            if not pending or not in_tool_exchange(m):
                return rows + newer[:i]
            pending = (pending - set(answered_calls(m))) | set(opened_calls(m))
        if not newer:
            break
        rows = rows + newer
    return rows
