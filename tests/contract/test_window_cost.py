"""Bounded cost of window alignment and of restore's synthetic results: both read a few
neighbours, never the whole history, even when a call or result has no partner.

Counts the message rows the store hands out (no timing)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from contract_support import USER
from message_formats import answer, calls, reasoning, user

from agentsession import SessionManager
from agentsession.service.window import MAX_WIDENING
from agentsession.stores.base import SessionStore, StoreTransaction

pytestmark = pytest.mark.store_independent

HISTORY = 2000


class RowCountingStore:
    """Wraps a store and counts the message rows its ``get_messages`` returns."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.rows = 0

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[StoreTransaction]:
        with self.inner.transaction(write=write) as tx:
            yield _Counting(self, tx)  # type: ignore[misc]

    def close(self) -> None:
        """The wrapped store belongs to the fixture."""


class _Counting:
    def __init__(self, counter: RowCountingStore, tx: StoreTransaction) -> None:
        self._counter, self._tx = counter, tx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    def get_messages(self, *args: Any, **kwargs: Any) -> Any:
        rows = self._tx.get_messages(*args, **kwargs)
        self._counter.rows += len(rows)
        return rows


def _chatter(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


@pytest.fixture
def counted(store: SessionStore) -> tuple[SessionManager, RowCountingStore]:
    counter = RowCountingStore(store)
    return SessionManager(counter), counter  # type: ignore[arg-type]


def _fill(m: SessionManager, sid: str, messages: list[dict[str, Any]]) -> None:
    for start in range(0, len(messages), 1000):
        m.append_messages(session_id=sid, user_id=USER, messages=messages[start : start + 1000])


def test_partnerless_call_and_result_cost_a_step(
    counted: tuple[SessionManager, RowCountingStore],
) -> None:
    """A result whose call is nowhere, and a call never answered, in the middle of a
    long history: a window of 1 at either reads at most one step more."""
    m, counter = counted
    sid = m.create_session(user_id=USER).session_id
    ghost_result = {"role": "tool", "tool_call_id": "ghost", "content": "?"}
    _fill(
        m,
        sid,
        [
            *_chatter(HISTORY // 2),
            ghost_result,
            *calls("anthropic", ["open"]),
            *_chatter(HISTORY // 2),
        ],
    )
    result_seq = HISTORY // 2 + 1
    counter.rows = 0
    window = m.get_messages(session_id=sid, user_id=USER, limit=1, before=result_seq + 1).items
    # Widened over the assistant message before it, up to the user message: no call.
    assert [x.seq for x in window] == [result_seq - 1, result_seq]
    assert counter.rows <= 1 + 8
    counter.rows = 0
    window = m.get_messages(session_id=sid, user_id=USER, limit=1, after=result_seq).items
    assert [x.seq for x in window] == [result_seq + 1]
    assert counter.rows <= 1 + 1 + 8  # a forward page also reads the row above it


def test_orphan_result_after_a_long_tool_loop_widens_a_bounded_amount(
    counted: tuple[SessionManager, RowCountingStore],
) -> None:
    """One user message, then 500 rounds of ``call_0`` and its result (a provider
    reusing the id), then a result of ``call_0`` that no call made: a window of 1 there,
    and a restore, read and return at most MAX_WIDENING messages more, not the loop."""
    m, counter = counted
    sid = m.create_session(user_id=USER).session_id
    rounds = [
        x
        for _ in range(500)
        for x in (*calls("chat", ["call_0"]), {"role": "tool", "tool_call_id": "call_0"})
    ]
    orphan = {"role": "tool", "tool_call_id": "call_0", "content": "again"}
    _fill(m, sid, [user("chat", "go"), *rounds, orphan])
    bound = 1 + MAX_WIDENING + 8
    counter.rows = 0
    window = m.get_messages(session_id=sid, user_id=USER, limit=1).items
    assert window[-1].seq == 1002 and len(window) <= bound
    assert counter.rows <= 2 * bound
    m.close_session(session_id=sid, user_id=USER)
    restored = m.restore_session(session_id=sid, user_id=USER, message_limit=5)
    assert restored.messages[-1].seq == 1002 and len(restored.messages) <= 5 + MAX_WIDENING + 8


def test_a_reasoning_neighbour_costs_one_row(
    counted: tuple[SessionManager, RowCountingStore],
) -> None:
    """A long Responses history of turns ``[user, reasoning, message]``: a window of 1
    at a message widened back to its reasoning item, or at a reasoning item widened on
    to its message, reads that one neighbour more, not a step; the newest window of a
    chat history, starting with an assistant message, reads the message before it."""
    m, counter = counted
    sid = m.create_session(user_id=USER).session_id
    turn = [user("responses", "q"), reasoning("rs"), answer("responses", "a")]
    _fill(m, sid, turn * (HISTORY // 3))
    message = 3 * (HISTORY // 6)  # a turn's answer, in the middle
    counter.rows = 0
    window = m.get_messages(session_id=sid, user_id=USER, limit=1, before=message + 1).items
    assert [x.seq for x in window] == [message - 1, message]
    assert counter.rows <= 1 + 1
    counter.rows = 0
    window = m.get_messages(session_id=sid, user_id=USER, limit=1, after=message - 2).items
    assert [x.seq for x in window] == [message - 1, message]
    # A forward page also reads the row above it, and asks whether one lies above the
    # widened page.
    assert counter.rows <= 1 + 1 + 1 + 1
    chat = m.create_session(user_id=USER).session_id
    _fill(m, chat, _chatter(HISTORY))
    counter.rows = 0
    window = m.get_messages(session_id=chat, user_id=USER, limit=1).items
    assert [x.seq for x in window] == [HISTORY] and counter.rows <= 1 + 1


def test_restore_reads_only_the_tail(counted: tuple[SessionManager, RowCountingStore]) -> None:
    """A crash after a call at the end of a long history: restore answers it reading the
    tail (its window of 3 messages and a few steps), not the history."""
    m, counter = counted
    sid = m.create_session(user_id=USER).session_id
    _fill(m, sid, _chatter(HISTORY))
    m.start_run(session_id=sid, user_id=USER)
    m.append_messages(
        session_id=sid, user_id=USER, messages=[user("chat", "go"), *calls("chat", ["c1", "c2"])]
    )
    counter.rows = 0
    restored = m.restore_session(session_id=sid, user_id=USER, message_limit=3)
    assert restored.interrupted_call_ids == ["c1", "c2"]
    assert counter.rows <= 3 + 3 * 8
