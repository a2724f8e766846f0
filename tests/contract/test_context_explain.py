"""``build_context(explain=True)``: the provenance of every part of a context and of
every message it left out, as a contract: every kept item accounted for (the kept
items are the system text, the summary sent and exactly the messages sent), the kept
tokens add up to the total, every seq of the history is named exactly once (a message
or a range), and what was left out is named with its reason. Checked on hand-made
histories for each reason and, as a Hypothesis property, over random histories in the
three message formats."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from contract_support import USER, new_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_formats import answer, calls, histories, results, user

from agentsession import Context, ContextBudgetTooSmall, SessionManager, ValidationError
from agentsession.tokens import DEFAULT_TOKENIZER, message_tokens

pytestmark = pytest.mark.store_independent


def explained(m: SessionManager, sid: str, budget: int) -> Context:
    """The explained context of ``sid`` for ``budget``, checked against the contract
    and against the same context built without the explanation."""
    ctx = m.build_context(session_id=sid, user_id=USER, budget_tokens=budget, explain=True)
    plain = m.build_context(session_id=sid, user_id=USER, budget_tokens=budget)
    assert plain.explanation is None
    assert ctx.model_copy(update={"explanation": None}) == plain
    check_explanation(m, sid, ctx)
    return ctx


def check_explanation(m: SessionManager, sid: str, ctx: Context) -> None:
    """The explanation's contract (see the module docstring)."""
    items = ctx.explanation
    assert items is not None
    history = m.get_messages(session_id=sid, user_id=USER, limit=1000).items
    tokens_of = {x.seq: message_tokens(DEFAULT_TOKENIZER, x) for x in history}
    memory = m.get_working_memory(session_id=sid, user_id=USER)
    system = items[0]
    assert (system.kind, system.decision, system.reason) == ("system", "kept", "memory")
    assert system.tokens == ctx.system_tokens and system.memory_version == memory.version
    summaries = [i for i in items if i.kind == "summary"]
    if ctx.summary is None:
        assert summaries == []
    else:
        [s] = summaries
        assert (s.decision, s.tokens, s.summary_number) == (
            "kept",
            ctx.summary_tokens,
            ctx.summary.number,
        )
        assert (s.from_seq, s.to_seq) == (ctx.summary.from_seq, ctx.summary.to_seq)
    kept = [i for i in items if i.decision == "kept"]
    assert sum(i.tokens or 0 for i in kept) == ctx.total_tokens
    assert [i.seq for i in kept if i.kind == "message"] == [x.seq for x in ctx.messages]
    named: list[int] = []
    left_out = 0
    for i in items:
        if i.kind == "message":
            assert i.seq is not None and i.tokens == tokens_of[i.seq]
            named.append(i.seq)
            left_out += i.decision == "dropped"
            assert (i.decision == "kept") == (i.reason == "fits")
        elif i.kind == "range":
            assert i.from_seq is not None and i.to_seq is not None and i.tokens is None
            named += range(i.from_seq, i.to_seq + 1)
            if i.decision == "summarised":
                assert ctx.summary is not None and i.reason == "covered_by_summary"
                assert (i.summary_number, i.to_seq) == (ctx.summary.number, ctx.summary.to_seq)
            else:
                assert (i.decision, i.reason) == ("dropped", "over_budget")
                left_out += i.to_seq - i.from_seq + 1
    assert named == list(range(1, len(history) + 1))
    assert left_out == ctx.omitted_messages


def reasons(ctx: Context) -> dict[int, str]:
    """Each message item's reason by seq."""
    return {i.seq: i.reason for i in ctx.explanation or [] if i.seq is not None}


def test_explanation_names_summary_budget_and_kept_messages(manager: SessionManager) -> None:
    sid = new_session(manager).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    chat = [user("chat", f"question {i} " + "x" * 40) for i in range(10)]
    manager.append_messages(**kw, messages=chat)
    manager.update_working_memory(**kw, data={"goal": "answer"})
    whole = explained(manager, sid, 10_000)
    assert set(reasons(whole).values()) == {"fits"} and whole.explanation is not None
    assert whole.explanation[0].memory_version == manager.get_session(**kw).version
    each = [i.tokens or 0 for i in whole.explanation]  # the system text, then 1..10
    tight = explained(manager, sid, each[0] + each[9] + each[10] + 1)
    assert [x.seq for x in tight.messages] == [9, 10]
    ranges = [i for i in tight.explanation or [] if i.kind == "range"]
    assert [(r.from_seq, r.to_seq) for r in ranges] == [(1, 7)]  # 8 was read, 1..7 not
    assert reasons(tight) == {8: "over_budget", 9: "fits", 10: "fits"}
    manager.add_summary(**kw, text="the first four", from_seq=1, to_seq=4)
    summed = explained(manager, sid, 10_000)
    assert [(i.kind, i.decision) for i in (summed.explanation or [])[:3]] == [
        ("system", "kept"),
        ("summary", "kept"),
        ("range", "summarised"),
    ]
    assert sorted(reasons(summed)) == list(range(5, 11))


def test_explanation_names_unpaired_and_older_exchanges(manager: SessionManager) -> None:
    sid = new_session(manager).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    # A call a crash left unanswered (seq 2) is dropped as unpaired.
    manager.append_messages(
        **kw, messages=[user("chat", "hi"), *calls("chat", ["c9"]), user("chat", "again")]
    )
    assert reasons(explained(manager, sid, 10_000)) == {1: "fits", 2: "unpaired", 3: "fits"}
    # A newest turn too long for the budget keeps its newest exchange only.
    sid = new_session(manager).session_id
    kw["session_id"] = sid
    turn = [user("chat", "go")]
    for n in range(4):
        turn += [*calls("chat", [f"c{n}"]), *results("chat", [f"c{n}"])]
    manager.append_messages(**kw, messages=[*turn, answer("chat", "done")])
    ctx = explained(manager, sid, 120)
    assert ctx.messages[0].seq == 1 and "older_exchange" in reasons(ctx).values()


def test_explain_is_checked(manager: SessionManager) -> None:
    sid = new_session(manager).session_id
    with pytest.raises(ValidationError):
        manager.build_context(
            session_id=sid,
            user_id=USER,
            budget_tokens=10,
            explain="yes",  # type: ignore[arg-type]
        )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories(), data=st.data())
def test_random_explanations_account_for_every_item(
    manager: SessionManager, history: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Property: over random histories in the three formats, with or without a summary
    and memory, at any budget the explanation keeps its contract."""
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
    for budget in data.draw(st.lists(st.integers(1, 600), min_size=1, max_size=4)):
        with contextlib.suppress(ContextBudgetTooSmall):
            explained(manager, sid, budget)
