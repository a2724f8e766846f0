"""Window alignment: a window of history never splits a tool-call group.

An assistant message that makes tool calls and the tool results that answer it form a
group. A window (``get_messages(limit=k)``, the messages ``restore_session`` returns) is
widened so it never starts with a tool result whose call lies outside it, nor ends
inside a group (docs/architecture.md, "Window alignment"). It may therefore hold a few
more than ``limit`` messages; cursors taken from it still visit every message once.
"""

from __future__ import annotations

from ..models import Message, Role
from ..stores.base import StoreTransaction

__all__ = ["align_window"]

#: How many neighbours one widening step reads.
_STEP = 8


def align_window(
    tx: StoreTransaction, session_id: str, rows: list[Message], message_count: int
) -> list[Message]:
    """Widen ``rows`` (consecutive messages, oldest first) to whole tool-call groups.

    At the start: while the first message is a tool result, pull in older messages down
    to the assistant message that made the call. At the end: if the window ends inside a
    group of tool results (or right after the assistant call), pull in the rest of the
    group's results that follow it.
    """
    return _widen_end(tx, session_id, _widen_start(tx, session_id, rows), message_count)


def _widen_start(tx: StoreTransaction, session_id: str, rows: list[Message]) -> list[Message]:
    while rows and rows[0].role == Role.TOOL and rows[0].seq > 1:
        older = tx.get_messages(session_id, before_seq=rows[0].seq, limit=_STEP)
        if not older:
            break
        rows = older + rows
        # Stop once an assistant message that made tool calls is the first one in.
        idx = next(
            (i for i in range(len(older) - 1, -1, -1) if older[i].role != Role.TOOL),
            None,
        )
        if idx is not None:
            rows = rows[idx:]
            break
    return rows


def _widen_end(
    tx: StoreTransaction, session_id: str, rows: list[Message], message_count: int
) -> list[Message]:
    while rows and rows[-1].seq < message_count:
        last = rows[-1]
        opens_group = last.role == Role.ASSISTANT and bool(last.tool_calls)
        if not (opens_group or last.role == Role.TOOL):
            break
        newer = tx.get_messages(session_id, after_seq=last.seq, limit=_STEP, newest=False)
        results = []
        for m in newer:
            if m.role != Role.TOOL:
                break
            results.append(m)
        rows = rows + results
        if len(results) < len(newer) or not results:
            break
    return rows
