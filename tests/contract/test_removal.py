"""Removing messages from the end of the history: ``truncate_messages`` and
``pop_message`` (one version step, gapless seqs reused by later appends, audit of counts
only, idempotent replays, stale cursors refused). Stale ``expected_version``, ownership
and closed sessions are covered for both by the operation tables of contract_support."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from contract_support import (
    USER,
    Ctx,
    as_read,
    audit_of,
    dump,
    every,
    run_threads,
    snapshot,
    user_msg,
)

from agentsession import (
    AsyncSessionManager,
    IdempotencyKeyReused,
    Message,
    Role,
    Session,
    SessionManager,
    TruncateResult,
    ValidationError,
)
from agentsession.errors import StoreError
from agentsession.service import Policy
from agentsession.stores.base import SessionHead, SessionStore, StoreTransaction
from frozen_clock import FrozenClock


def _append(m: SessionManager, sid: str, n: int, prefix: str = "m") -> list[Message]:
    return m.append_messages(
        session_id=sid, user_id=USER, messages=[user_msg(f"{prefix}{i}") for i in range(1, n + 1)]
    )


def _history(m: SessionManager, sid: str) -> list[tuple[int, Any]]:
    messages = every(m.get_messages, session_id=sid, user_id=USER, after=0)
    return [(x.seq, x.content) for x in messages]


def _version(m: SessionManager, sid: str) -> int:
    return m.get_session(session_id=sid, user_id=USER).version


def test_pop_until_empty_then_pop_returns_none(manager: SessionManager, sid: str) -> None:
    """Pops return the newest message each time, as stored; an empty history gives None
    and changes nothing."""
    stored = _append(manager, sid, 3)
    popped = [manager.pop_message(session_id=sid, user_id=USER) for _ in range(3)]
    assert [p.seq if p else None for p in popped] == [3, 2, 1]
    assert [as_read(p) for p in popped if p] == [as_read(s) for s in reversed(stored)]
    v = stored[-1].session_version
    assert v is not None
    assert [p.session_version for p in popped if p] == [v + 1, v + 2, v + 3]
    before = snapshot(manager, sid)
    assert manager.pop_message(session_id=sid, user_id=USER) is None
    assert snapshot(manager, sid) == before
    assert before["session"]["message_count"] == 0 and before["messages"] == []


def test_truncate_then_append_reuses_the_freed_seqs(manager: SessionManager, sid: str) -> None:
    _append(manager, sid, 5)
    v = _version(manager, sid)
    result = manager.truncate_messages(session_id=sid, user_id=USER, after_seq=2)
    assert result == TruncateResult(removed=3, session_version=v + 1)
    s = manager.get_session(session_id=sid, user_id=USER)
    assert (s.version, s.message_count) == (v + 1, 2)
    [new] = _append(manager, sid, 1, prefix="new")
    assert new.seq == 3
    assert _history(manager, sid) == [(1, "m1"), (2, "m2"), (3, "new1")]


def test_truncate_to_zero_clears_history_but_keeps_tool_calls_runs_and_memory(
    manager: SessionManager,
) -> None:
    ctx = Ctx(manager, running=False)
    before = snapshot(manager, ctx.sid)
    result = manager.truncate_messages(session_id=ctx.sid, user_id=USER, after_seq=0)
    assert result.removed == 2
    after = snapshot(manager, ctx.sid)
    assert after["messages"] == [] and after["session"]["message_count"] == 0
    assert after["memory"]["data"] == before["memory"]["data"]
    for kept in ("tools", "runs"):
        assert after[kept] == before[kept], kept


@pytest.mark.parametrize("after_seq", [2, 3, 1000])
def test_removing_nothing_changes_nothing(
    manager: SessionManager, sid: str, after_seq: int
) -> None:
    _append(manager, sid, 2)
    before = snapshot(manager, sid)
    result = manager.truncate_messages(session_id=sid, user_id=USER, after_seq=after_seq)
    assert result == TruncateResult(removed=0, session_version=before["session"]["version"])
    assert snapshot(manager, sid) == before


def test_removal_moves_updated_at_and_the_ttl_clock(
    frozen_manager: SessionManager, clock: FrozenClock
) -> None:
    m = frozen_manager
    sid = m.create_session(user_id=USER, ttl_seconds=60).session_id
    _append(m, sid, 3)
    clock.advance(30)
    m.pop_message(session_id=sid, user_id=USER)
    s = m.get_session(session_id=sid, user_id=USER)
    assert s.updated_at == s.last_active_at == clock.now
    assert s.expires_at is not None and (s.expires_at - clock.now).total_seconds() == 60


def test_concurrent_pops_remove_distinct_messages(manager: SessionManager, sid: str) -> None:
    """4 threads pop at once: 4 different messages, the newest 4, each one version step."""
    _append(manager, sid, 6)
    v = _version(manager, sid)
    out = run_threads(4, lambda i: manager.pop_message(session_id=sid, user_id=USER))
    assert all(isinstance(x, Message) for x in out), out
    assert sorted(x.seq for x in out) == [3, 4, 5, 6]
    assert sorted(x.content for x in out) == ["m3", "m4", "m5", "m6"]
    assert sorted(x.session_version for x in out) == [v + 1, v + 2, v + 3, v + 4]
    assert _history(manager, sid) == [(1, "m1"), (2, "m2")]
    assert _version(manager, sid) == v + 4


def test_pop_replay_returns_the_removed_message_and_removes_nothing_more(
    manager: SessionManager, sid: str
) -> None:
    _append(manager, sid, 3)
    first = manager.pop_message(session_id=sid, user_id=USER, idempotency_key="pop-1")
    again = manager.pop_message(session_id=sid, user_id=USER, idempotency_key="pop-1")
    assert first is not None and again == first
    assert _history(manager, sid) == [(1, "m1"), (2, "m2")]


def test_replay_of_a_pop_of_an_empty_history_stays_none(manager: SessionManager, sid: str) -> None:
    """The first answer was None: a retry answers None again, even once messages exist."""
    assert manager.pop_message(session_id=sid, user_id=USER, idempotency_key="k") is None
    _append(manager, sid, 1)
    assert manager.pop_message(session_id=sid, user_id=USER, idempotency_key="k") is None
    assert _history(manager, sid) == [(1, "m1")]


def test_truncate_replay_returns_the_first_result(manager: SessionManager, sid: str) -> None:
    _append(manager, sid, 4)
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER, "idempotency_key": "cut"}
    first = manager.truncate_messages(**kw, after_seq=1)
    _append(manager, sid, 2, prefix="later")
    assert manager.truncate_messages(**kw, after_seq=1) == first
    assert _history(manager, sid) == [(1, "m1"), (2, "later1"), (3, "later2")]
    with pytest.raises(IdempotencyKeyReused):
        manager.truncate_messages(**kw, after_seq=0)


def test_audit_records_counts_and_seqs_never_content(manager: SessionManager, sid: str) -> None:
    _append(manager, sid, 5, prefix="SECRET-")
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=2)
    manager.pop_message(session_id=sid, user_id=USER)
    *_, cut, popped = audit_of(manager, sid)
    assert (cut.action, cut.details) == (
        "message.truncated",
        {"count": 3, "first_seq": 3, "last_seq": 5},
    )
    assert (popped.action, popped.details) == (
        "message.popped",
        {"count": 1, "first_seq": 2, "last_seq": 2},
    )
    assert "SECRET-" not in json.dumps(dump([cut, popped]))


@pytest.mark.parametrize("after_seq", [-1, None, True, 1.0, "1", 2**53])
@pytest.mark.store_independent
def test_bad_after_seq_is_refused_and_writes_nothing(
    manager: SessionManager, sid: str, after_seq: Any
) -> None:
    _append(manager, sid, 2)
    before = snapshot(manager, sid)
    with pytest.raises(ValidationError) as err:
        manager.truncate_messages(session_id=sid, user_id=USER, after_seq=after_seq)
    assert err.value.field == "after_seq"
    assert snapshot(manager, sid) == before


# ------------------------------------------------------------------ cursors and windows


def test_backward_cursor_past_a_truncation_is_refused(manager: SessionManager, sid: str) -> None:
    """A cursor whose page was cut away could now name other messages: a clear error."""
    _append(manager, sid, 10)
    page = manager.get_messages(session_id=sid, user_id=USER, limit=3)  # 8..10
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=5)
    _append(manager, sid, 5, prefix="new")  # seqs 6..10 again, other messages
    with pytest.raises(ValidationError) as err:
        manager.get_messages(session_id=sid, user_id=USER, cursor=page.next_cursor)
    assert (err.value.field, err.value.context.get("stale")) == ("cursor", True)


def test_forward_cursor_past_a_pop_is_refused(manager: SessionManager, sid: str) -> None:
    _append(manager, sid, 4)
    page = manager.get_messages(session_id=sid, user_id=USER, after=0, limit=2)  # 1..2
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=1)
    _append(manager, sid, 3, prefix="new")
    with pytest.raises(ValidationError, match="stale"):
        manager.get_messages(session_id=sid, user_id=USER, cursor=page.next_cursor)


def test_cursor_whose_page_survived_a_truncation_goes_on(manager: SessionManager, sid: str) -> None:
    """Only newer messages went: the older ones a backward cursor leads to are intact."""
    _append(manager, sid, 10)
    page = manager.get_messages(session_id=sid, user_id=USER, limit=3)  # 8..10
    manager.pop_message(session_id=sid, user_id=USER)
    rest = manager.get_messages(session_id=sid, user_id=USER, cursor=page.next_cursor, limit=3)
    assert [x.seq for x in rest.items] == [5, 6, 7]


def test_restore_cursor_of_an_empty_window_is_refused_after_a_pop(store: SessionStore) -> None:
    m = SessionManager(store, policy=Policy(restore_message_limit=0))
    sid = m.create_session(user_id=USER).session_id
    _append(m, sid, 3)
    restored = m.restore_session(session_id=sid, user_id=USER)
    assert restored.messages == [] and restored.messages_next_cursor is not None
    m.pop_message(session_id=sid, user_id=USER)
    with pytest.raises(ValidationError, match="stale"):
        m.get_messages(session_id=sid, user_id=USER, cursor=restored.messages_next_cursor)


def test_windows_after_a_pop_end_at_the_new_newest(manager: SessionManager, sid: str) -> None:
    """A restore and a plain read after removals see exactly the current history."""
    _append(manager, sid, 5)
    manager.pop_message(session_id=sid, user_id=USER)
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=3)
    page = manager.get_messages(session_id=sid, user_id=USER, limit=2)
    assert [x.content for x in page.items] == ["m2", "m3"]
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert [x.content for x in restored.messages] == ["m1", "m2", "m3"]


@pytest.mark.store_independent
def test_async_manager_mirrors_truncate_and_pop(manager: SessionManager, sid: str) -> None:
    _append(manager, sid, 3)

    async def main() -> tuple[TruncateResult, Message | None]:
        aio = AsyncSessionManager(manager)
        try:
            cut = await aio.truncate_messages(session_id=sid, user_id=USER, after_seq=2)
            return cut, await aio.pop_message(session_id=sid, user_id=USER)
        finally:
            aio.stop_threads()

    cut, popped = asyncio.run(main())
    assert cut.removed == 1 and popped is not None and popped.content == "m2"
    assert _history(manager, sid) == [(1, "m1")]


def test_store_reuses_seqs_freed_in_the_same_transaction(store: SessionStore) -> None:
    """delete_messages then insert_messages at the freed seqs in one transaction (a
    compaction): reads inside it and after the commit see the new messages only."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    session = Session(
        session_id="ses_cut",
        user_id=USER,
        agent="a",
        created_at=now,
        updated_at=now,
        last_active_at=now,
    )

    def msg(seq: int, text: str) -> Message:
        return Message(
            message_id=f"msg_{text}",
            session_id="ses_cut",
            seq=seq,
            created_at=now,
            role=Role.USER,
            content=text,
        )

    with store.transaction(write=True) as tx:
        tx.get_session("ses_cut")
        tx.insert_session(session)
        tx.insert_messages([msg(i, f"old{i}") for i in (1, 2, 3)])
    with store.transaction(write=True) as tx:
        tx.get_session("ses_cut")
        assert tx.delete_messages("ses_cut", after_seq=1) == 2
        tx.insert_messages([msg(2, "new2"), msg(3, "new3"), msg(4, "new4")])
        assert tx.delete_messages("ses_cut", after_seq=3) == 1
        inside = [m.content for m in tx.get_messages("ses_cut")]
    with store.transaction(write=False) as tx:
        after = [m.content for m in tx.get_messages("ses_cut")]
        newest = [m.content for m in tx.get_messages("ses_cut", limit=1)]
    assert inside == after == ["old1", "new2", "new3"] and newest == ["new3"]


@pytest.mark.store_independent
def test_cursor_issued_before_anchors_still_pages(manager: SessionManager, sid: str) -> None:
    """A cursor of the earlier format (no anchor) goes on where it pointed."""
    _append(manager, sid, 5)
    digest = hashlib.sha256(b"true").hexdigest()[:12]  # of align_tool_calls=True
    raw = json.dumps(["messages", sid, digest, True, 4])
    old = base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")
    page = manager.get_messages(session_id=sid, user_id=USER, cursor=old, limit=2)
    assert [m.seq for m in page.items] == [2, 3]


def _cursor_parts(cursor: str | None) -> list[Any]:
    assert cursor is not None
    decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    assert isinstance(decoded, list)
    return decoded


@pytest.mark.store_independent
def test_listings_without_an_anchor_issue_five_part_cursors(
    manager: SessionManager, sid: str
) -> None:
    """Rolling upgrades: a cursor without an anchor keeps the form older versions read;
    message cursors carry the anchor as a sixth part."""
    _append(manager, sid, 3)
    audit = manager.get_audit_log(session_id=sid, user_id=USER, limit=1)
    assert len(_cursor_parts(audit.next_cursor)) == 5
    page = manager.get_messages(session_id=sid, user_id=USER, limit=1)
    assert _cursor_parts(page.next_cursor)[5] == [3, page.items[0].message_id]


def test_stale_cursor_is_refused_even_with_limit_zero(manager: SessionManager, sid: str) -> None:
    _append(manager, sid, 4)
    page = manager.get_messages(session_id=sid, user_id=USER, after=0, limit=2)
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=1)
    with pytest.raises(ValidationError, match="stale"):
        manager.get_messages(session_id=sid, user_id=USER, cursor=page.next_cursor, limit=0)


class _ReadCommitted:
    """A read transaction that sees ``old`` (the session and its messages before a
    removal) until its first page read (a ``get_messages`` with a limit), and the store
    as it is from then on: the removal committed between two statements, as READ
    COMMITTED allows. Everything else goes to the real transaction."""

    def __init__(self, tx: StoreTransaction, old: Session, old_messages: list[Message]) -> None:
        self._tx, self._old, self._old_messages = tx, old, old_messages
        self._committed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    def get_session(self, session_id: str) -> Session | None:
        return self._old if session_id == self._old.session_id else self._tx.get_session(session_id)

    def get_session_head(self, session_id: str) -> SessionHead | None:
        s = self.get_session(session_id)
        return None if s is None else SessionHead.of(s)

    def get_messages(self, session_id: str, **kw: Any) -> list[Message]:
        self._committed = self._committed or kw.get("limit") is not None
        if self._committed:
            return self._tx.get_messages(session_id, **kw)
        low, high = kw.get("after_seq"), kw.get("before_seq")
        return [
            m
            for m in self._old_messages
            if (low is None or m.seq > low) and (high is None or m.seq < high)
        ]


def _reads_before(monkeypatch: pytest.MonkeyPatch, manager: SessionManager, sid: str) -> Any:
    """Freeze ``sid`` as it is now; returns a function that, called after a removal,
    makes every later read see that removal only from its first page read on."""
    old = manager.store.transaction
    with old(write=False) as tx:
        session = tx.get_session(sid)
        messages = tx.get_messages(sid)
    assert session is not None

    def install() -> None:
        @contextmanager
        def transaction(*, write: bool) -> Iterator[Any]:
            with old(write=write) as real:
                yield real if write else _ReadCommitted(real, session, messages)

        monkeypatch.setattr(manager.store, "transaction", transaction)

    return install


@pytest.mark.store_independent
def test_a_removal_between_anchor_check_and_page_read_is_refused(
    manager: SessionManager, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncate and re-append that commit after the cursor's anchor was first seen
    but before the page's rows were read: the page would be other messages at the old
    seqs, so the cursor is refused instead."""
    _append(manager, sid, 4)
    page = manager.get_messages(session_id=sid, user_id=USER, after=0, limit=2)  # 1..2
    install = _reads_before(monkeypatch, manager, sid)
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=1)
    _append(manager, sid, 3, prefix="new")  # seqs 2..4, other messages
    install()
    with pytest.raises(ValidationError, match="stale"):
        manager.get_messages(session_id=sid, user_id=USER, cursor=page.next_cursor, limit=2)


@pytest.mark.store_independent
def test_a_removal_after_the_count_was_read_gives_no_cursor_to_an_empty_page(
    manager: SessionManager, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session said four messages, but the two after the page went before its rows
    were read: the page is the last one (no cursor leading to an empty page)."""
    _append(manager, sid, 4)
    install = _reads_before(monkeypatch, manager, sid)
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=2)
    install()
    page = manager.get_messages(session_id=sid, user_id=USER, after=0, limit=2)
    assert ([m.seq for m in page.items], page.next_cursor) == ([1, 2], None)


@pytest.mark.store_independent
def test_pop_of_a_store_missing_the_newest_message_is_a_store_error(
    manager: SessionManager, sid: str
) -> None:
    """The session counts a message the store does not hold: a StoreError, and the
    session is left as it was."""
    _append(manager, sid, 2)
    with manager.store.transaction(write=True) as tx:
        assert tx.delete_messages(sid, after_seq=1) == 1
    before = _version(manager, sid)
    with pytest.raises(StoreError, match="seq 2"):
        manager.pop_message(session_id=sid, user_id=USER)
    assert _version(manager, sid) == before


@pytest.mark.store_independent
def test_removal_is_no_erasure_and_leaves_the_store_disk_alone(
    manager: SessionManager, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removing messages edits the conversation; it runs no scrub (a WAL checkpoint or
    AOF rewrite per pop). Erasure is delete_session or the scrub itself."""
    scrubs: list[Any] = []
    monkeypatch.setattr(manager.store, "scrub", lambda **kw: scrubs.append(kw))
    _append(manager, sid, 3)
    manager.pop_message(session_id=sid, user_id=USER)
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=0)
    assert scrubs == []
