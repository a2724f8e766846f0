"""``build_context`` over the 20 real tau-bench airline conversations
(``tests/data/tau_bench``, chat-completions form): at budgets of 1,000, 4,000 and
16,000 tokens, with and without a summary of the first half, every context is one a
chat-completions provider accepts, fits its budget and holds the newest user message
(or the budget is refused with the figure the minimum needs), and a bigger budget never
gives fewer messages. Contexts are built as the conversation grows too, most of them in
the middle of a tool loop, where the newest turn alone can outgrow 1,000 tokens."""

from __future__ import annotations

from typing import Any

import pytest

from agentsession import ContextBudgetTooSmall, SessionManager
from agentsession.stores.memory.store import MemoryStore
from test_real_conversations import CONVERSATIONS, chat_window_problem

BUDGETS = (1_000, 4_000, 16_000)


def _contexts(manager: SessionManager, sid: str, user: str) -> list[int]:
    """Check the context at each budget; return the message counts (-1: refused)."""
    history = manager.get_messages(session_id=sid, user_id=user, limit=1000).items
    newest_user = max(m.seq for m in history if m.role == "user" and m.tool_call_id is None)
    sizes = []
    for budget in BUDGETS:
        try:
            ctx = manager.build_context(session_id=sid, user_id=user, budget_tokens=budget)
        except ContextBudgetTooSmall as err:
            assert err.needed_tokens > budget
            sizes.append(-1)
            continue
        payloads = [m.payload() for m in ctx.messages]
        assert chat_window_problem(payloads) is None, (budget, chat_window_problem(payloads))
        assert ctx.total_tokens <= budget
        assert newest_user in [m.seq for m in ctx.messages]
        after = [m.seq for m in ctx.messages if m.seq > newest_user]
        assert not after or after[-1] == history[-1].seq
        floor = 0 if ctx.summary is None else ctx.summary.to_seq
        assert ctx.omitted_messages == len(history) - floor - len(ctx.messages)
        sizes.append(len(ctx.messages))
    assert sizes == sorted(sizes), sizes
    return sizes


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=[c["case_id"] for c in CONVERSATIONS])
def test_tau_bench_contexts_are_valid_at_every_budget(conversation: dict[str, Any]) -> None:
    manager = SessionManager(MemoryStore())
    user = conversation["session"]["user_id"]
    sid = manager.create_session(user_id=user, agent="tau").session_id
    messages = conversation["messages"]
    # Turn by turn, as the agent held it: contexts at every fourth message, most of
    # them in the middle of a tool loop.
    for start in range(0, len(messages), 4):
        manager.append_messages(session_id=sid, user_id=user, messages=messages[start : start + 4])
        if any(m["role"] == "user" for m in messages[: start + 4]):
            assert min(_contexts(manager, sid, user)) > 0, "a newest user message fits 1,000"
    plain = _contexts(manager, sid, user)
    assert plain[-1] > 0, "16,000 tokens hold at least the newest turn"
    half = len(messages) // 2
    manager.add_summary(
        session_id=sid, user_id=user, text="The customer asked for help.", from_seq=1, to_seq=half
    )
    summarised = _contexts(manager, sid, user)
    assert summarised[-1] > 0
