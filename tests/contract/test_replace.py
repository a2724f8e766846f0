"""Replacing the newest messages: ``replace_messages`` removes every message above a seq
and appends others in their place in one transaction and one version step (a compaction
that a crash or an outage cannot leave half done)."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import (
    USER,
    ProxyStore,
    assistant_msg,
    audit_of,
    dump,
    every,
    snapshot,
    user_msg,
)

from agentsession import IdempotencyKeyReused, SessionManager, ValidationError
from agentsession.errors import StoreError
from agentsession.stores.base import SessionStore


def _history(m: SessionManager, sid: str) -> list[tuple[int, Any]]:
    return [
        (x.seq, x.content) for x in every(m.get_messages, session_id=sid, user_id=USER, after=0)
    ]


def _five(m: SessionManager, sid: str) -> int:
    """Append m1..m5; the session's version after it."""
    stored = m.append_messages(
        session_id=sid, user_id=USER, messages=[user_msg(f"m{i}") for i in range(1, 6)]
    )
    assert stored[-1].session_version is not None
    return stored[-1].session_version


def test_replace_swaps_the_newest_messages_in_one_version_step(
    manager: SessionManager, sid: str
) -> None:
    """The messages above ``after_seq`` go, the new ones take seqs from ``after_seq + 1``,
    all in one version step audited with counts and seqs only."""
    version = _five(manager, sid)
    stored = manager.replace_messages(
        session_id=sid,
        user_id=USER,
        after_seq=2,
        messages=[assistant_msg("summary"), user_msg("next")],
    )
    assert [(m.seq, m.session_version) for m in stored] == [(3, version + 1), (4, version + 1)]
    assert _history(manager, sid) == [(1, "m1"), (2, "m2"), (3, "summary"), (4, "next")]
    s = manager.get_session(session_id=sid, user_id=USER)
    assert (s.version, s.message_count) == (version + 1, 4)
    event = audit_of(manager, sid)[-1]
    assert (event.action, event.details) == (
        "message.replaced",
        {"removed": 3, "count": 2, "first_seq": 3, "last_seq": 4},
    )


def test_replace_of_everything_and_of_nothing(manager: SessionManager, sid: str) -> None:
    """``after_seq=0`` replaces the whole history (and the summaries of it); an
    ``after_seq`` at or above ``message_count`` removes nothing and appends."""
    _five(manager, sid)
    manager.add_summary(session_id=sid, user_id=USER, text="five", from_seq=1, to_seq=5)
    manager.replace_messages(
        session_id=sid, user_id=USER, after_seq=0, messages=[assistant_msg("compacted")]
    )
    assert _history(manager, sid) == [(1, "compacted")]
    assert manager.list_summaries(session_id=sid, user_id=USER) == []
    manager.replace_messages(session_id=sid, user_id=USER, after_seq=1, messages=[user_msg("q")])
    manager.replace_messages(session_id=sid, user_id=USER, after_seq=9, messages=[user_msg("r")])
    assert _history(manager, sid) == [(1, "compacted"), (2, "q"), (3, "r")]
    assert audit_of(manager, sid)[-1].details["removed"] == 0


@pytest.mark.parametrize("method", ["delete_messages", "insert_messages", "insert_audit"])
def test_c25_5_a_failure_after_the_removal_leaves_the_old_history(
    store: SessionStore, method: str
) -> None:
    """The store fails after the old messages were deleted in the transaction: it rolls
    back whole, so the old messages remain, never none; a retry then replaces them."""
    proxy = ProxyStore(store)
    m = SessionManager(proxy)
    sid = m.create_session(user_id=USER).session_id
    _five(m, sid)
    before = snapshot(m, sid)
    proxy.fail(method, StoreError(f"injected failure in {method}"))

    def replace() -> Any:
        return m.replace_messages(
            session_id=sid,
            user_id=USER,
            after_seq=0,
            messages=[assistant_msg("compacted")],
            idempotency_key="compact-1",
        )

    with pytest.raises(StoreError, match="injected"):
        replace()
    assert proxy.failures[0].fired
    assert snapshot(m, sid) == before
    assert dump(replace()) == dump(replace())
    assert _history(m, sid) == [(1, "compacted")]


@pytest.mark.store_independent
@pytest.mark.parametrize(
    ("after_seq", "messages"),
    [(-1, [user_msg("x")]), (None, [user_msg("x")]), (0, []), (0, [{"content": "no role"}])],
)
def test_bad_after_seq_or_batch_is_refused_and_writes_nothing(
    manager: SessionManager, sid: str, after_seq: Any, messages: Any
) -> None:
    """``after_seq`` not a seq, an empty batch, a bad message: ValidationError, and
    nothing changes."""
    _five(manager, sid)
    before = snapshot(manager, sid)
    with pytest.raises(ValidationError):
        manager.replace_messages(
            session_id=sid, user_id=USER, after_seq=after_seq, messages=messages
        )
    assert snapshot(manager, sid) == before


def test_a_replay_answers_the_first_result_and_another_request_is_refused(
    manager: SessionManager, sid: str
) -> None:
    """The same key and request answer the first result and write nothing more; the
    same key with other messages is IdempotencyKeyReused."""
    _five(manager, sid)
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER, "idempotency_key": "k"}
    first = manager.replace_messages(**kw, after_seq=3, messages=[user_msg("a")])
    assert dump(manager.replace_messages(**kw, after_seq=3, messages=[user_msg("a")])) == dump(
        first
    )
    assert _history(manager, sid)[-1] == (4, "a")
    with pytest.raises(IdempotencyKeyReused):
        manager.replace_messages(**kw, after_seq=3, messages=[user_msg("b")])
