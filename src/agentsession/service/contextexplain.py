"""The provenance of a context (``build_context(explain=True)``): where each part came
from, its tokens, and what the budget did with it and why.

Built from what :func:`~.contextwindow.select_window` already read, so explaining costs
no read of its own: the messages it counted are named one by one (kept, or left out
with the reason), the older ones it never read are one ``range`` item (left out for
the budget), and the messages the summary in use covers one ``range`` item too
(docs/semantics.md, "Context provenance").
"""

from __future__ import annotations

from ..models import ContextDecision, ContextItem, ContextReason
from .contextwindow import Window

__all__ = ["explain"]


def explain(
    window: Window,
    *,
    message_count: int,
    system_tokens: int,
    summary_tokens: int,
    memory_version: int,
) -> list[ContextItem]:
    """The explanation of a context built from ``window``, in seq order.

    Args:
        window: what the window rule chose and read.
        message_count: the session's number of messages (the newest seq).
        system_tokens, summary_tokens: the tokens of the system text and summary sent.
        memory_version: the working-memory version the system text was rendered from.

    Returns:
        The system text item, the summary item (if one is sent), the range the summary
        covers, the range left out unread, then every message counted, oldest first.
        Every seq ``1..message_count`` is in exactly one message or range item.
    """
    items = [
        ContextItem(
            kind="system",
            decision="kept",
            reason="memory",
            tokens=system_tokens,
            memory_version=memory_version,
        )
    ]
    floor = 0
    summary = window.summary
    if summary is not None:
        floor = summary.to_seq
        number = summary.number
        items.append(
            ContextItem(
                kind="summary",
                decision="kept",
                reason="summary",
                tokens=summary_tokens,
                from_seq=summary.from_seq,
                to_seq=summary.to_seq,
                summary_number=number,
            )
        )
        items.append(_range("summarised", "covered_by_summary", 1, floor, number))
    counted = sorted(window.counted, key=lambda pair: pair[0].seq)
    low = counted[0][0].seq if counted else message_count + 1
    if low > floor + 1:
        items.append(_range("dropped", "over_budget", floor + 1, low - 1, None))
    kept = {m.seq for m in window.messages}
    for m, tokens in counted:
        reason: ContextReason = "fits"
        if m.seq not in kept:
            if m.seq in window.candidates:
                reason = "unpaired"
            else:
                reason = "older_exchange" if window.turn_cut else "over_budget"
        decision: ContextDecision = "kept" if m.seq in kept else "dropped"
        items.append(
            ContextItem(kind="message", decision=decision, reason=reason, tokens=tokens, seq=m.seq)
        )
    return items


def _range(
    decision: ContextDecision, reason: ContextReason, first: int, last: int, number: int | None
) -> ContextItem:
    """The messages ``first..last``, left out whole."""
    return ContextItem(
        kind="range",
        decision=decision,
        reason=reason,
        from_seq=first,
        to_seq=last,
        summary_number=number,
    )
