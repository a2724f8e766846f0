"""Fork and rewind over the 20 real tau-bench airline conversations
(``tests/data/tau_bench``): each conversation is stored in chunks of four messages, each
chunk with a working-memory merge patch (as an agent notes progress), then forked and
rewound at random points (seeded per conversation). Every fork holds exactly the parent's
first N messages and the parent's working memory as of N, also as of every earlier
point; writes to the parent or the fork never show in the other; every rewind leaves
exactly the first M messages, the memory as of M, the hidden messages readable under
its number, and the forks untouched; rewinding to 0 gives back the memory set at
creation. Contexts built after a rewind stay provider-valid and hold nothing past M."""

from __future__ import annotations

import random
from typing import Any

import pytest

from agentsession import SessionManager
from agentsession.service.mergepatch import merge_patch
from agentsession.stores.base import SessionStore
from test_real_conversations import CONVERSATIONS, chat_window_problem

pytestmark = pytest.mark.store_independent

CREATED = {"goal": "help the airline customer", "facts": {"channel": "chat"}}
FORKS = 3
REWINDS = 3


def _store_conversation(
    manager: SessionManager, user: str, messages: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """Store ``messages`` in chunks of 4 with a memory patch each; return the session id
    and the expected memory as of every seq 0..len(messages)."""
    sid = manager.create_session(user_id=user, agent="tau", working_memory=CREATED).session_id
    memory = dict(CREATED)
    as_of = [memory]
    for k, start in enumerate(range(0, len(messages), 4)):
        chunk = messages[start : start + 4]
        patch = {"facts": {f"chunk{k}": len(chunk)}, "next_action": f"after chunk {k}"}
        manager.append_messages(
            session_id=sid, user_id=user, messages=chunk, working_memory_patch=patch
        )
        # The patch lands with the chunk's last message: seqs inside the chunk still
        # see the memory of the chunk before.
        as_of.extend([memory] * (len(chunk) - 1))
        memory = merge_patch(memory, patch)
        as_of.append(memory)
    assert len(as_of) == len(messages) + 1
    return sid, as_of


def _payloads(manager: SessionManager, sid: str, user: str) -> list[dict[str, Any]]:
    page = manager.get_messages(session_id=sid, user_id=user, limit=1000, align_tool_calls=False)
    assert [m.seq for m in page.items] == list(range(1, len(page.items) + 1))
    return [m.payload() for m in page.items]


def _memory(manager: SessionManager, sid: str, user: str, at: int | None = None) -> Any:
    return manager.get_working_memory(session_id=sid, user_id=user, at_seq=at).data


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=[c["case_id"] for c in CONVERSATIONS])
def test_forks_and_rewinds_at_random_points_are_isolated_and_restore_memory(
    store: SessionStore, conversation: dict[str, Any]
) -> None:
    manager = SessionManager(store)
    user = conversation["session"]["user_id"]
    messages = conversation["messages"]
    rng = random.Random(conversation["case_id"])
    sid, as_of = _store_conversation(manager, user, messages)
    original = _payloads(manager, sid, user)

    forks: dict[str, list[dict[str, Any]]] = {}
    for _ in range(FORKS):
        n = rng.randint(0, len(messages))
        fork = manager.fork_session(session_id=sid, user_id=user, at_seq=n)
        assert (fork.parent_session_id, fork.fork_seq, fork.message_count) == (sid, n, n)
        assert _payloads(manager, fork.session_id, user) == original[:n]
        assert _memory(manager, fork.session_id, user) == as_of[n]
        for j in sorted(rng.sample(range(n + 1), min(3, n + 1))):
            assert _memory(manager, fork.session_id, user, at=j) == as_of[j], j
        # Writes to the fork stay in the fork.
        note = {"role": "user", "content": f"fork {fork.session_id} only"}
        manager.append_messages(
            session_id=fork.session_id,
            user_id=user,
            messages=[note],
            working_memory_patch={"next_action": "explore the fork"},
        )
        forks[fork.session_id] = [*original[:n], note]
        assert _payloads(manager, sid, user) == original
        assert _memory(manager, sid, user) == as_of[-1]

    listed = manager.list_sessions(user_id=user, parent_session_id=sid, limit=100).items
    assert {s.session_id for s in listed} == set(forks)

    history = list(original)
    for _ in range(REWINDS):
        m = rng.randint(0, len(history))
        hidden = history[m:]
        result = manager.rewind_session(session_id=sid, user_id=user, to_seq=m)
        history = history[:m]
        assert _payloads(manager, sid, user) == history
        # Each rewind here goes back within the original history, so the memory as of
        # m is the one the conversation had there.
        assert _memory(manager, sid, user) == as_of[m]
        if hidden:
            kept = manager.get_rewound_messages(
                session_id=sid, user_id=user, number=result.number, limit=1000
            ).items
            assert [x.payload() for x in kept] == hidden
        context = manager.build_context(session_id=sid, user_id=user, budget_tokens=16_000)
        assert all(x.seq <= m for x in context.messages)
        assert chat_window_problem([x.payload() for x in context.messages]) is None
    for fork_id, expected in forks.items():  # a rewind of the parent never reaches a fork
        assert _payloads(manager, fork_id, user) == expected

    manager.rewind_session(session_id=sid, user_id=user, to_seq=0)
    assert _memory(manager, sid, user) == CREATED
    assert _payloads(manager, sid, user) == []
