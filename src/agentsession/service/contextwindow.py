"""Which messages a context sends: the newest that fit a token budget, whole exchanges.

The rule (docs/semantics.md, "Context assembly"):

* the window is the newest messages after a *floor* (the end of the summary in use, or
  the start of history), oldest first, cut only where no tool call is split from its
  result: walking back from the newest message, a cut is allowed once every result
  seen has met the message that made its call (:mod:`agentsession.callgroups`, every
  message format), and always at a user or system message that carries no result (no
  format puts one between a call and its result, so a result still unmatched there
  has no call at all); never just after a Responses reasoning item whose successor
  (the call or assistant message the model produced from it, seq + 1) it keeps
  (:func:`produced_from`): the two are one unit;
* it always holds the newest user message (a user message carrying no tool result);
  when that message and everything after it do not fit, it holds that message and the
  newest whole exchanges after it that fit (the turn's older exchanges are left out);
  when the message alone does not fit, ContextBudgetTooSmall;
* of the allowed cuts that fit, the oldest one wins (the most history);
* last, messages whose partner is outside the window or missing from history (a call
  never answered, a result without its call, a reasoning item without its successor
  right after it: a history a crash or a caller left broken) are dropped, repeatedly,
  until every call in it is answered, every result follows its call and every
  reasoning item is followed by its successor.

Cost: messages are read backwards a page at a time and the walk stops once the budget
is spent (or at the floor), so it reads about ``budget`` worth of messages, however
long the history. Only a newest turn longer than the budget makes it read on, back to
the newest user message it must hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from ..callgroups import (
    answered_calls,
    in_tool_exchange,
    is_reasoning,
    opened_calls,
    produced_from,
    touches_calls,
)
from ..errors import ContextBudgetTooSmall
from ..models import Message, Summary
from ..stores.base import StoreTransaction
from ..tokens import Tokenizer, message_tokens, text_tokens

__all__ = ["FIRST_PAGE", "LAST_PAGE", "Window", "is_user_turn", "select_window", "well_formed"]

#: Messages read by the first step of the backward walk; each further step reads twice
#: as many, up to :data:`LAST_PAGE`: a small budget reads little more than it keeps, a
#: large one a few steps.
FIRST_PAGE = 16
LAST_PAGE = 256


@dataclass(frozen=True, slots=True)
class Window:
    """What :func:`select_window` chose.

    Attributes:
        summary: the summary in use (its ``to_seq`` is the floor), or None.
        messages: the window, oldest first.
        message_tokens: the tokens of ``messages``.
        omitted: how many messages above the floor were left out.
        counted: every message whose tokens were counted, with them, newest first
            (the window's, and those read and left out).
        candidates: the seqs of the cut chosen, before :func:`well_formed` dropped
            the unpaired ones.
        turn_cut: whether the newest turn did not fit whole (its older exchanges
            were left out).
    """

    summary: Summary | None
    messages: list[Message]
    message_tokens: int
    omitted: int
    counted: list[tuple[Message, int]]
    candidates: frozenset[int]
    turn_cut: bool = False


def is_user_turn(m: Message) -> bool:
    """Whether ``m`` is a message a user wrote: role ``user``, carrying no tool result."""
    return m.role == "user" and not answered_calls(m)


def select_window(
    tx: StoreTransaction,
    session_id: str,
    message_count: int,
    *,
    system_tokens: int,
    budget: int,
    tokenizer: Tokenizer,
) -> Window:
    """Choose the summary and the messages of a context (see the module docstring).

    The summary is the newest whose ``to_seq`` is below the newest user message (and
    within the history): one that covers the newest user message is passed over for an
    older one, so the window always holds that message.

    Raises:
        ContextBudgetTooSmall: ``system_tokens``, the summary and the newest user
            message alone exceed ``budget``.
    """
    head, summary = _newest_turn(tx, session_id, message_count)
    floor = 0 if summary is None else summary.to_seq
    fixed = system_tokens + (0 if summary is None else text_tokens(tokenizer, summary.text))
    kept = [(m, message_tokens(tokenizer, m)) for m in head]  # newest first
    total = fixed + sum(t for _, t in kept)
    if total > budget:
        cut = _within_turn(kept, fixed, budget)
        chosen = well_formed(cut)
        omitted = message_count - floor - len(chosen)
        seqs = frozenset(m.seq for m in cut)
        return Window(summary, chosen, _tokens(chosen, kept), omitted, kept, seqs, turn_cut=True)
    best = len(kept)  # the newest user message is always a cut
    pending: int | None = None  # a cut waiting to learn the message before it
    needed_calls: Counter[str] = Counter()
    reached_floor = True
    below: Message | None = None  # the message the walk stopped at, not kept
    over: tuple[Message, int] | None = None  # the message that broke the budget
    for m in _walk(tx, session_id, head[-1].seq if head else message_count + 1):
        if pending is not None and not produced_from(m, kept[-1][0]):
            best = pending
        pending = None
        below = m
        if m.seq <= floor:
            break
        t = message_tokens(tokenizer, m)
        if total + t > budget:
            reached_floor = False
            over = (m, t)
            break
        total += t
        kept.append((m, t))
        below = None
        needed_calls = _step_back(needed_calls, m)
        if not needed_calls:
            pending = len(kept)
    paired = best  # the cut, the successor of a reasoning item the summary covers included
    if reached_floor:  # the floor (or the start of history) is always a cut
        best = paired = len(kept)
        if below is not None and kept and produced_from(below, kept[-1][0]):
            best -= 1  # but the successor of a reasoning item the summary covers goes
            # with it (and well_formed drops what that leaves without a partner)
    chosen = well_formed([m for m, _ in reversed(kept[:best])])
    counted = kept if over is None else [*kept, over]
    seqs = frozenset(m.seq for m, _ in kept[:paired])
    omitted = message_count - floor - len(chosen)
    return Window(summary, chosen, _tokens(chosen, kept), omitted, counted, seqs)


def _within_turn(turn: list[tuple[Message, int]], fixed: int, budget: int) -> list[Message]:
    """The cut (before :func:`well_formed`) when the newest turn (``turn``: the newest
    user message, last, and the messages after it, newest first, with their tokens) does
    not fit whole: that user
    message, then the newest whole exchanges after it that fit, oldest first; the older
    exchanges of the turn are left out (an agent deep in a long tool loop keeps going
    instead of failing).

    Raises:
        ContextBudgetTooSmall: ``fixed`` and the user message alone exceed ``budget``.
    """
    user, user_tokens = turn[-1]
    total = fixed + user_tokens
    if total > budget:
        raise ContextBudgetTooSmall(needed_tokens=total, budget_tokens=budget)
    best = 0
    needed_calls: Counter[str] = Counter()
    for i, (m, t) in enumerate(turn[:-1]):
        if total + t > budget:
            break
        total += t
        needed_calls = _step_back(needed_calls, m)
        if not needed_calls and not produced_from(turn[i + 1][0], m):
            best = i + 1
    return [user] + [m for m, _ in reversed(turn[:best])]


def _newest_turn(
    tx: StoreTransaction, session_id: str, message_count: int
) -> tuple[list[Message], Summary | None]:
    """The messages from the newest down to the newest user message (newest first) and
    the newest summary below it. Without a user message: ``[]`` and the newest summary
    within the history (the whole history was read to find none)."""
    summaries = _summaries(tx, session_id, message_count)
    newest = summary = next(summaries, None)
    head: list[Message] = []
    for m in _walk(tx, session_id, message_count + 1):
        while summary is not None and m.seq <= summary.to_seq:
            summary = next((s for s in summaries if s.to_seq < m.seq), None)
        head.append(m)
        if is_user_turn(m):
            return head, summary
    return [], newest


def well_formed(window: list[Message]) -> list[Message]:
    """``window`` (oldest first) without the messages that make a call not answered in
    it or answer a call not made before them in it, and the reasoning items not right
    before their successor in it (:func:`produced_from`), repeated until none is left
    (a dropped call orphans its results and its reasoning item). A result answers the
    nearest earlier call with its id (providers reuse ids). A well-formed window comes
    back as it is."""
    while True:
        bad: set[int] = set()
        open_calls: dict[str, list[int]] = {}
        for i, m in enumerate(window):
            if not touches_calls(m):
                continue
            if is_reasoning(m):
                if i + 1 == len(window) or not produced_from(m, window[i + 1]):
                    bad.add(i)
                continue
            for call in answered_calls(m):
                makers = open_calls.get(call)
                if makers:
                    makers.pop()
                else:
                    bad.add(i)
            for call in opened_calls(m):
                open_calls.setdefault(call, []).append(i)
        bad.update(i for makers in open_calls.values() for i in makers)
        if not bad:
            return window
        window = [m for i, m in enumerate(window) if i not in bad]


def _summaries(tx: StoreTransaction, session_id: str, message_count: int) -> Iterator[Summary]:
    """The session's summaries a context may use, newest first, read a few at a time:
    those within the history that cover it from its start (``from_seq`` 1). A summary
    of a middle range says nothing of the messages before it, so using it would drop
    them unseen; it stays stored and listed."""
    before = None
    while True:
        page = tx.list_summaries(session_id, before_number=before, limit=8, newest=True)
        for s in reversed(page):
            if s.from_seq == 1 and s.to_seq <= message_count:
                yield s
        if len(page) < 8:
            return
        before = page[0].number


def _walk(tx: StoreTransaction, session_id: str, before: int) -> Iterator[Message]:
    """The session's messages below seq ``before``, newest first, in pages of
    :data:`FIRST_PAGE` doubling up to :data:`LAST_PAGE`."""
    size = FIRST_PAGE
    while before > 1:
        page = tx.get_messages(session_id, before_seq=before, limit=size)
        if not page:
            return
        yield from reversed(page)
        before = page[0].seq
        size = min(2 * size, LAST_PAGE)


def _step_back(needed: Counter[str], m: Message) -> Counter[str]:
    """``needed`` once the walk back has taken in ``m``: its calls answer results after
    it, its results need calls before it; a user or system message without results
    clears it (a result still unmatched there has no call: :func:`well_formed` drops
    it)."""
    if not in_tool_exchange(m):
        return Counter()
    if touches_calls(m):
        needed = +(needed - Counter(opened_calls(m)))
        needed.update(answered_calls(m))
    return needed


def _tokens(window: list[Message], counted: list[tuple[Message, int]]) -> int:
    """The tokens of ``window``, from the counts already taken in ``counted``."""
    by_seq = {m.seq: t for m, t in counted}
    return sum(by_seq[m.seq] for m in window)
