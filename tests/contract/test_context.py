"""``build_context`` on every store: the system text from working memory, the budget,
the newest user message always in, a too-small budget, determinism; and, as Hypothesis
properties over random histories in the three message formats (with and without a
summary), that every context is provider-valid, fits its budget and holds the newest
user message."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import USER, new_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_formats import (
    answer,
    calls,
    calls_and_results,
    histories,
    provider_problem,
    reasoning,
    results,
    user,
    window_problem,
)

from agentsession import ContextBudgetTooSmall, Message, SessionManager, ValidationError
from agentsession.service.contextbuild import render_memory
from agentsession.tokens import DEFAULT_TOKENIZER, ByteEstimate, message_tokens


def newest_user_seq(messages: list[Message]) -> int | None:
    """The seq of the newest message a user wrote (not a carrier of tool results),
    judged from the payloads alone."""
    for m in reversed(messages):
        if m.role == "user" and not calls_and_results(m.payload())[1]:
            return m.seq
    return None


def check_context(m: SessionManager, sid: str, budget: int) -> Any:
    """Build a context and check the properties every context has; return it (None when
    the budget is too small, after checking the error's figure)."""
    history = m.get_messages(session_id=sid, user_id=USER, limit=1000).items
    try:
        ctx = m.build_context(session_id=sid, user_id=USER, budget_tokens=budget)
    except ContextBudgetTooSmall as err:
        assert err.needed_tokens > budget and err.field == "budget_tokens"
        return None
    problem = provider_problem(ctx.messages, history)
    assert problem is None, problem
    user_seq = newest_user_seq(history)
    if ctx.summary is None:  # without a summary, nothing is dropped from a valid history
        # but the older exchanges of a newest turn too long for the budget
        seqs = [x.seq for x in ctx.messages]
        cut = seqs.index(user_seq) + 1 if user_seq in seqs else len(seqs)
        for part in (ctx.messages[:cut], ctx.messages[cut:]):
            assert window_problem(part) is None, window_problem(part)
    assert ctx.total_tokens <= budget
    assert ctx.total_tokens == ctx.system_tokens + ctx.summary_tokens + ctx.message_tokens
    if user_seq is not None:
        assert user_seq in [x.seq for x in ctx.messages]
    after = [x.seq for x in ctx.messages if user_seq is not None and x.seq > user_seq]
    if after:  # what follows the newest user message is the newest exchanges
        assert after[-1] == history[-1].seq
    elif user_seq is None and ctx.messages:
        assert ctx.messages[-1].seq == history[-1].seq
    floor = 0 if ctx.summary is None else ctx.summary.to_seq
    assert all(x.seq > floor for x in ctx.messages)
    assert ctx == m.build_context(session_id=sid, user_id=USER, budget_tokens=budget)
    return ctx


def test_system_text_renders_working_memory() -> None:
    data = {
        "goal": "book a flight",
        "completed": ["found user", {"id": 1}],
        "errors": [],
        "next_action": "ask for dates",
        "facts": {"b": 2, "a": "x"},
        "other": "no",
    }
    assert render_memory(data) == (
        'Goal: book a flight\nCompleted:\n- found user\n- {"id":1}\n'
        "Next action: ask for dates\nFacts:\n- a: x\n- b: 2"
    )
    assert render_memory({"other": 1}) == ""


def test_context_parts_and_budget(manager: SessionManager) -> None:
    """The working memory becomes the system text; a tight budget keeps the newest
    messages from the newest user message on and counts what it left out."""
    sid = new_session(manager).session_id
    kw = {"session_id": sid, "user_id": USER}
    manager.update_working_memory(**kw, data={"goal": "help"})
    msgs = [
        {"role": "user", "content": "x" * 400},
        {"role": "assistant", "content": "y" * 400},
        {"role": "user", "content": "short"},
        {"role": "assistant", "content": "ok"},
    ]
    manager.append_messages(**kw, messages=msgs)
    full = manager.build_context(**kw, budget_tokens=1000)
    assert full.system == "Goal: help" and [x.seq for x in full.messages] == [1, 2, 3, 4]
    assert (full.omitted_messages, full.tokenizer, full.budget_tokens) == (0, "bytes/4", 1000)
    tight = manager.build_context(**kw, budget_tokens=full.total_tokens - 1)
    assert [x.seq for x in tight.messages] == [2, 3, 4] and tight.omitted_messages == 1
    with pytest.raises(ContextBudgetTooSmall) as err:
        manager.build_context(**kw, budget_tokens=10)
    smallest = manager.build_context(**kw, budget_tokens=err.value.needed_tokens)
    assert [x.seq for x in smallest.messages] == [3]  # the newest user message alone
    assert smallest.total_tokens == err.value.needed_tokens
    newest = message_tokens(DEFAULT_TOKENIZER, full.messages[3])
    turn = manager.build_context(**kw, budget_tokens=err.value.needed_tokens + newest)
    assert [x.seq for x in turn.messages] == [3, 4]


def test_a_turn_longer_than_the_budget_keeps_its_user_message_and_newest_exchanges(
    manager: SessionManager,
) -> None:
    """An agent deep in a tool loop: the newest user message, then the newest whole
    call-and-result exchanges that fit; the turn's older exchanges are left out."""
    sid = new_session(manager).session_id
    kw = {"session_id": sid, "user_id": USER}
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "find my booking"}]
    for i in range(6):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "r" * 200},
        ]
    manager.append_messages(**kw, messages=msgs)
    whole = manager.build_context(**kw, budget_tokens=10_000)
    assert len(whole.messages) == 13
    ctx = manager.build_context(**kw, budget_tokens=whole.total_tokens // 2)
    seqs = [x.seq for x in ctx.messages]
    assert seqs[0] == 1 and seqs[-1] == 13 and 1 < len(seqs) < 13
    assert seqs[1:] == list(range(seqs[1], 14)) and seqs[1] % 2 == 0  # starts at a call
    assert provider_problem(ctx.messages) is None
    assert ctx.omitted_messages == 13 - len(seqs)


def test_context_never_ends_with_an_unanswered_call(manager: SessionManager) -> None:
    """A call left without its result (a crashed worker) is not sent."""
    sid = new_session(manager).session_id
    kw = {"session_id": sid, "user_id": USER}
    manager.append_messages(
        **kw,
        messages=[
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        ],
    )
    ctx = manager.build_context(**kw, budget_tokens=1000)
    assert [x.seq for x in ctx.messages] == [1]


def test_responses_reasoning_item_is_never_sent_without_its_following_item(
    manager: SessionManager,
) -> None:
    """A Responses reasoning item and the item after it (the call or message the model
    produced from it) are one unit: OpenAI refuses a reasoning item "provided without
    its required following item", and a call without the reasoning before it. A call in
    flight takes its reasoning item out with it; no cut, floor or pinned turn falls
    between the two; a reasoning item a crash left without its successor is dropped."""
    kw: dict[str, Any] = {"user_id": USER}
    call = calls("responses", ["c1"])  # [reasoning, function_call]
    # A call in flight: the unanswered call and its reasoning item both stay out.
    sid = new_session(manager).session_id
    manager.append_messages(**kw, session_id=sid, messages=[user("responses", "hi"), *call])
    ctx = manager.build_context(**kw, session_id=sid, budget_tokens=100_000)
    assert [x.seq for x in ctx.messages] == [1]
    # A crash after the reasoning item, then a new question: the reasoning item is dropped.
    sid = new_session(manager).session_id
    manager.append_messages(
        **kw,
        session_id=sid,
        messages=[user("responses", "hi"), call[0], user("responses", "again")],
    )
    ctx = manager.build_context(**kw, session_id=sid, budget_tokens=100_000)
    assert [x.seq for x in ctx.messages] == [1, 3]
    # Every budget, with the reasoning item at a cut, at the floor, in a pinned turn.
    sid = new_session(manager).session_id
    history = [
        user("responses", "hi"),
        *call,
        *results("responses", ["c1"]),
        reasoning("rs_a"),
        answer("responses", "ok"),
        user("responses", "again"),
        *call,
        *results("responses", ["c1"]),
        *calls("responses", ["c2"]),
        *results("responses", ["c2"]),
        reasoning("rs_b"),
        answer("responses", "x"),
    ]
    manager.append_messages(**kw, session_id=sid, messages=history)
    stored = manager.get_messages(**kw, session_id=sid, limit=100).items
    for summary_to in (None, 1, 2, 5, 6):
        if summary_to is not None:
            manager.add_summary(**kw, session_id=sid, text="s", from_seq=1, to_seq=summary_to)
        for budget in range(1, 400):
            try:
                ctx = manager.build_context(**kw, session_id=sid, budget_tokens=budget)
            except ContextBudgetTooSmall:
                continue
            problem = provider_problem(ctx.messages, stored)
            assert problem is None, (summary_to, budget, problem)
            assert 7 in [x.seq for x in ctx.messages]  # the newest user message
    # The reviewer's case: budget 108 used to cut between seq 2 (reasoning) and 3.
    sid = new_session(manager).session_id
    manager.append_messages(
        **kw,
        session_id=sid,
        messages=[
            user("responses", "hi"),
            *call,
            *results("responses", ["c1"]),
            answer("responses", "ok"),
            user("responses", "again"),
            answer("responses", "x"),
        ],
    )
    ctx = manager.build_context(**kw, session_id=sid, budget_tokens=108)
    assert [x.seq for x in ctx.messages] == [5, 6, 7]


def test_context_takes_a_tokenizer_and_checks_its_arguments(manager: SessionManager) -> None:
    sid = new_session(manager).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    manager.append_message(**kw, message={"role": "user", "content": "hello there"})

    class Words(ByteEstimate):
        name = "words"

        def count(self, text: str) -> int:
            return len(text.split())

    ctx = manager.build_context(**kw, budget_tokens=100, tokenizer=Words())
    assert ctx.tokenizer == "words" and ctx.message_tokens == 2 + 4
    for bad in (0, -1, "10", None):
        with pytest.raises(ValidationError):
            manager.build_context(**kw, budget_tokens=bad)
    with pytest.raises(ValidationError):
        manager.build_context(**kw, budget_tokens=10, tokenizer=object())  # type: ignore[arg-type]


@pytest.mark.store_independent
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories(), data=st.data())
def test_random_contexts_are_valid_fit_and_hold_the_newest_user_message(
    manager: SessionManager, history: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Property: over random histories mixing the three formats, with or without a
    summary of a random prefix, every context at any budget is provider-valid, fits the
    budget, holds the newest user message (or the budget is refused with a figure
    above it), and a bigger budget never gives fewer messages."""
    sid = manager.create_session(user_id=USER).session_id
    manager.append_messages(session_id=sid, user_id=USER, messages=history)
    if data.draw(st.booleans(), label="summary"):
        end = data.draw(st.integers(1, len(history)), label="to_seq")
        manager.add_summary(
            session_id=sid,
            user_id=USER,
            text="s" * data.draw(st.integers(1, 200)),
            from_seq=1,
            to_seq=end,
        )
    if data.draw(st.booleans(), label="memory"):
        manager.update_working_memory(session_id=sid, user_id=USER, data={"goal": "g" * 50})
    budgets = sorted(data.draw(st.lists(st.integers(1, 600), min_size=1, max_size=4)))
    sizes = []
    for budget in budgets:
        ctx = check_context(manager, sid, budget)
        sizes.append(-1 if ctx is None else len(ctx.messages))
    assert sizes == sorted(sizes)
