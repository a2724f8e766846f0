"""Forks on every store: ``fork_session`` copies a session's state as of a seq into a
new session of the same owner and agent (messages, summaries, working memory as of the
seq and its history), the parent stays as it was, and from then on the two never see
each other's writes; ``list_sessions(parent_session_id=...)`` lists the forks."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import (
    ADMIN,
    OTHER,
    USER,
    assistant_msg,
    audit_of,
    drop_history,
    new_session,
    user_msg,
)
from message_formats import answer, calls, results, user

from agentsession import (
    IdempotencyKeyReused,
    RunNotFound,
    SessionExists,
    SessionManager,
    SessionNotFound,
    SessionStatus,
    ValidationError,
    VersionConflict,
)
from agentsession.ids import ID_PATTERN
from agentsession.stores.base import SessionStore
from agentsession.stores.sql.store import SQLStore


def _kw(sid: str, user_id: str = USER) -> dict[str, Any]:
    return {"session_id": sid, "user_id": user_id}


def _chat(m: SessionManager, sid: str, turns: int, first: int = 0) -> None:
    """Append ``turns`` user/assistant pairs, numbered from ``first``."""
    msgs: list[dict[str, Any]] = []
    for i in range(first, first + turns):
        msgs += [user_msg(f"q{i}"), assistant_msg(f"a{i}")]
    m.append_messages(**_kw(sid), messages=msgs)


def _payloads(m: SessionManager, sid: str, user_id: str = USER) -> list[dict[str, Any]]:
    return [x.payload() for x in m.get_messages(**_kw(sid, user_id), limit=1000).items]


def test_fork_copies_messages_up_to_the_seq_and_leaves_the_parent(manager: SessionManager) -> None:
    """Messages 1..N keep seq, role, payload, created_at and run_id under new ids of the
    id pattern; the fork has the parent's owner and agent, version parent + 1, its own
    title, metadata and key; the parent keeps its version; one audit event."""
    parent = new_session(manager, ttl_seconds=600)
    _chat(manager, parent.session_id, 3)
    before = manager.get_session(**_kw(parent.session_id))
    fork = manager.fork_session(
        **_kw(parent.session_id),
        at_seq=4,
        title="branch",
        metadata={"why": "try"},
        external_key="k-1",
    )
    assert (fork.user_id, fork.agent, fork.status) == (USER, "coding", SessionStatus.ACTIVE)
    assert (fork.parent_session_id, fork.fork_seq, fork.message_count) == (parent.session_id, 4, 4)
    assert (fork.version, fork.title) == (before.version + 1, "branch")
    assert fork.metadata == {"why": "try"}
    assert (fork.external_key, fork.ttl_seconds, fork.run_count) == ("k-1", 600, 0)
    assert manager.get_session(**_kw(fork.session_id)) == fork
    assert manager.get_session(**_kw(parent.session_id)) == before
    assert before.parent_session_id is None and before.fork_seq is None
    old = manager.get_messages(**_kw(parent.session_id), limit=100).items[:4]
    new = manager.get_messages(**_kw(fork.session_id), limit=100).items
    assert [x.seq for x in new] == [1, 2, 3, 4]
    for a, b in zip(old, new, strict=True):
        assert (b.payload(), b.created_at, b.role, b.run_id) == (
            a.payload(),
            a.created_at,
            a.role,
            a.run_id,
        )
        assert b.session_id == fork.session_id and ID_PATTERN.fullmatch(b.message_id)
        assert b.message_id != a.message_id and b.message_id[17:] == a.message_id[17:]
    assert len({x.message_id[4:17] for x in new}) == 1  # one fresh part per fork
    events = audit_of(manager, fork.session_id)
    assert [(e.action, e.version_before, e.version_after, e.details) for e in events] == [
        (
            "session.forked",
            None,
            fork.version,
            {"parent_session_id": parent.session_id, "fork_seq": 4, "messages": 4, "summaries": 0},
        )
    ]
    assert "q0" not in repr(events)


def test_fork_defaults_to_the_whole_history_and_zero_forks_nothing(manager: SessionManager) -> None:
    """``at_seq`` None forks at message_count; 0 makes an empty fork whose first append
    is seq 1; past the history or negative is a ValidationError, nothing made."""
    sid = new_session(manager).session_id
    _chat(manager, sid, 2)
    whole = manager.fork_session(**_kw(sid))
    assert (whole.fork_seq, len(_payloads(manager, whole.session_id))) == (4, 4)
    empty = manager.fork_session(**_kw(sid), at_seq=0)
    assert (empty.fork_seq, empty.message_count, _payloads(manager, empty.session_id)) == (0, 0, [])
    written = manager.append_message(**_kw(empty.session_id), message=user_msg("fresh"))
    assert written.seq == 1
    for bad in (5, -1, True, "2"):
        with pytest.raises(ValidationError):
            manager.fork_session(**_kw(sid), at_seq=bad)
    listed = manager.list_sessions(user_id=USER, parent_session_id=sid).items
    assert {s.session_id for s in listed} == {whole.session_id, empty.session_id}


def test_appends_continue_after_the_fork_seq_and_stay_apart(manager: SessionManager) -> None:
    """Appends, truncation and summaries in one session never show in the other."""
    sid = new_session(manager).session_id
    _chat(manager, sid, 3)
    fork = manager.fork_session(**_kw(sid), at_seq=2).session_id
    appended = manager.append_message(**_kw(fork), message=user_msg("fork only"))
    assert appended.seq == 3
    manager.append_message(**_kw(sid), message=user_msg("parent only"))
    assert _payloads(manager, fork)[2:] == [user_msg("fork only")]
    assert _payloads(manager, sid)[6:] == [user_msg("parent only")]
    manager.truncate_messages(**_kw(sid), after_seq=1)
    assert len(_payloads(manager, fork)) == 3
    manager.truncate_messages(**_kw(fork), after_seq=0)
    assert len(_payloads(manager, sid)) == 1
    manager.append_message(**_kw(fork), message=user_msg("again"))
    manager.add_summary(**_kw(fork), text="fork gist", from_seq=1, to_seq=1)
    assert manager.list_summaries(**_kw(sid)) == []


def test_summaries_within_the_seq_are_copied_with_their_numbers(manager: SessionManager) -> None:
    """A summary with to_seq <= N is copied (number, range, text); later ones are not."""
    sid = new_session(manager).session_id
    _chat(manager, sid, 4)
    manager.add_summary(**_kw(sid), text="first gist", from_seq=1, to_seq=2)
    manager.add_summary(**_kw(sid), text="late gist", from_seq=1, to_seq=6)
    manager.add_summary(**_kw(sid), text="second gist", from_seq=3, to_seq=4, supersedes=1)
    fork = manager.fork_session(**_kw(sid), at_seq=5)
    copied = manager.list_summaries(**_kw(fork.session_id))
    kept = [s for s in manager.list_summaries(**_kw(sid)) if s.to_seq <= 5]
    assert [s.number for s in copied] == [1, 3]
    assert [s.model_copy(update={"session_id": sid}) for s in copied] == kept
    assert audit_of(manager, fork.session_id)[0].details["summaries"] == 2
    added = manager.add_summary(**_kw(fork.session_id), text="fork's own", from_seq=1, to_seq=5)
    assert added.number == 4
    assert [s.number for s in manager.list_summaries(**_kw(sid))] == [1, 2, 3]


def test_a_seq_past_message_count_is_refused_alike_everywhere(manager: SessionManager) -> None:
    """Fork, rewind, memory-as-of and summary refuse a seq above ``message_count`` with
    the one message of one check."""
    sid = new_session(manager).session_id
    _chat(manager, sid, 1)
    calls = [
        lambda: manager.fork_session(**_kw(sid), at_seq=3),
        lambda: manager.rewind_session(**_kw(sid), to_seq=3),
        lambda: manager.get_working_memory(**_kw(sid), at_seq=3),
        lambda: manager.add_summary(**_kw(sid), from_seq=1, to_seq=3, text="s"),
    ]
    said = set()
    for call in calls:
        with pytest.raises(ValidationError) as err:
            call()
        said.add(str(err.value).split(": ", 1)[-1].replace("to_seq", "at_seq"))
    assert said == {"at_seq must be at most the session's message_count (2)"}


def test_memory_of_the_fork_is_the_parent_memory_as_of_the_seq(manager: SessionManager) -> None:
    """Memory written at several points: the fork's memory is the parent's as of N, its
    history as of earlier seqs too; memory writes in either do not reach the other."""
    sid = new_session(manager, working_memory={"goal": "start"}).session_id
    m = manager
    m.append_messages(
        **_kw(sid), messages=[user_msg("1"), assistant_msg("2")], working_memory_patch={"step": 2}
    )
    m.append_messages(**_kw(sid), messages=[user_msg("3")], working_memory_patch={"step": 3})
    m.update_working_memory(**_kw(sid), data={"goal": "later", "step": 3})
    m.append_messages(**_kw(sid), messages=[user_msg("4")], working_memory_patch={"step": 4})
    fork = m.fork_session(**_kw(sid), at_seq=3)
    memory = m.get_working_memory(**_kw(fork.session_id))
    assert memory.data == m.get_working_memory(**_kw(sid), at_seq=3).data
    assert memory.data == {"goal": "later", "step": 3}
    assert memory.version == fork.version
    for seq, data in [(0, {"goal": "start"}), (2, {"goal": "start", "step": 2})]:
        assert m.get_working_memory(**_kw(fork.session_id), at_seq=seq).data == data
    m.update_working_memory(**_kw(fork.session_id), data={"goal": "fork"})
    m.update_working_memory(**_kw(sid), data={"goal": "parent"})
    assert m.get_working_memory(**_kw(fork.session_id)).data == {"goal": "fork"}
    assert m.get_working_memory(**_kw(fork.session_id), at_seq=3).data == {"goal": "fork"}
    assert m.get_working_memory(**_kw(sid), at_seq=3).data == {"goal": "later", "step": 3}
    at_zero = m.fork_session(**_kw(sid), at_seq=0)
    assert m.get_working_memory(**_kw(at_zero.session_id)).data == {"goal": "start"}
    bare = new_session(m).session_id
    m.append_message(**_kw(bare), message=user_msg("x"))
    blank = m.fork_session(**_kw(bare))
    assert m.get_working_memory(**_kw(blank.session_id)).version == 0


def test_a_session_without_history_rows_forks_its_current_memory(
    store: SessionStore, manager: SessionManager
) -> None:
    """A session stored before the history existed has no history rows: a fork at its
    ``message_count`` still gets its current memory (the memory as of that seq)."""
    sid = new_session(manager, working_memory={"goal": "old"}).session_id
    _chat(manager, sid, 2)
    manager.update_working_memory(**_kw(sid), data={"goal": "now"})
    drop_history(store, sid)
    fork = manager.fork_session(**_kw(sid))
    assert manager.get_working_memory(**_kw(fork.session_id)).data == {"goal": "now"}


def test_deleting_the_parent_leaves_the_fork_whole(manager: SessionManager) -> None:
    """The fork keeps its messages, memory and summaries, and its parent_session_id,
    when the parent is deleted; a fork of a fork names its own parent."""
    sid = new_session(manager, working_memory={"goal": "g"}).session_id
    _chat(manager, sid, 2)
    manager.add_summary(**_kw(sid), text="gist", from_seq=1, to_seq=2)
    fork = manager.fork_session(**_kw(sid))
    grand = manager.fork_session(**_kw(fork.session_id), at_seq=3)
    assert (grand.parent_session_id, grand.fork_seq, grand.version) == (
        fork.session_id,
        3,
        fork.version + 1,
    )
    manager.delete_session(**_kw(sid))
    for child, count in ((fork, 4), (grand, 3)):
        kept = manager.get_session(**_kw(child.session_id))
        assert kept.parent_session_id == child.parent_session_id
        assert len(_payloads(manager, child.session_id)) == count
        assert manager.get_working_memory(**_kw(child.session_id)).data == {"goal": "g"}
        assert len(manager.list_summaries(**_kw(child.session_id))) == 1
    listed = manager.list_sessions(user_id=USER, parent_session_id=sid).items
    assert [s.session_id for s in listed] == [fork.session_id]
    assert _payloads(manager, grand.session_id) == _payloads(manager, fork.session_id)[:3]


def test_closed_and_expired_parents_fork_and_stay_as_they_are(manager: SessionManager) -> None:
    """A CLOSED or EXPIRED parent forks into an ACTIVE session, unchanged itself."""
    sid = new_session(manager).session_id
    _chat(manager, sid, 1)
    closed = manager.close_session(**_kw(sid))
    fork = manager.fork_session(**_kw(sid), at_seq=1)
    assert fork.status == SessionStatus.ACTIVE and fork.version == closed.version + 1
    assert manager.get_session(**_kw(sid)) == closed
    other = new_session(manager).session_id
    expired = manager.expire_session(**_kw(other))
    assert manager.fork_session(**_kw(other)).status == SessionStatus.ACTIVE
    assert manager.get_session(**_kw(other)) == expired


def test_only_the_owner_or_an_admin_forks(manager: SessionManager) -> None:
    """Another user's parent is SessionNotFound (as every read); an admin's fork belongs
    to the parent's owner; a missing parent is SessionNotFound."""
    sid = new_session(manager).session_id
    with pytest.raises(SessionNotFound):
        manager.fork_session(**_kw(sid, OTHER))
    assert manager.list_sessions(user_id=OTHER).items == []
    fork = manager.fork_session(**_kw(sid, ADMIN), admin=True)
    assert fork.user_id == USER
    assert audit_of(manager, fork.session_id)[0].actor == ADMIN
    manager.delete_session(**_kw(sid))
    with pytest.raises(SessionNotFound):
        manager.fork_session(**_kw(sid))


def test_idempotency_key_replays_the_first_fork(manager: SessionManager) -> None:
    """A retry with the same key answers the same fork (nothing more made); the key with
    other arguments is IdempotencyKeyReused."""
    sid = new_session(manager).session_id
    _chat(manager, sid, 1)
    first = manager.fork_session(**_kw(sid), at_seq=1, idempotency_key="fork-1")
    again = manager.fork_session(**_kw(sid), at_seq=1, idempotency_key="fork-1")
    assert again == first
    assert len(manager.list_sessions(user_id=USER, parent_session_id=sid).items) == 1
    with pytest.raises(IdempotencyKeyReused):
        manager.fork_session(**_kw(sid), at_seq=0, idempotency_key="fork-1")


def test_expected_version_is_compared_in_the_forks_transaction(manager: SessionManager) -> None:
    """``expected_version`` is the parent's version: a stale one is VersionConflict and
    makes no fork; the current one forks; a retry of the key after the parent moved on
    still answers the first fork (the replay comes before the comparison)."""
    sid = new_session(manager).session_id
    _chat(manager, sid, 1)
    v = manager.get_session(**_kw(sid)).version
    with pytest.raises(VersionConflict) as err:
        manager.fork_session(**_kw(sid), at_seq=1, expected_version=v - 1)
    assert err.value.current_version == v
    assert not manager.list_sessions(user_id=USER, parent_session_id=sid).items
    fork = manager.fork_session(**_kw(sid), expected_version=v, idempotency_key="fork-v")
    _chat(manager, sid, 1, first=1)
    again = manager.fork_session(**_kw(sid), expected_version=v, idempotency_key="fork-v")
    assert again == fork
    with pytest.raises(VersionConflict):
        manager.fork_session(**_kw(sid), expected_version=v)
    assert len(manager.list_sessions(user_id=USER, parent_session_id=sid).items) == 1


def test_external_key_and_ttl_of_the_fork(manager: SessionManager) -> None:
    """The fork's key is unique per owner and agent as on create; its TTL is the
    parent's unless given (None: no TTL)."""
    sid = new_session(manager, external_key="taken", ttl_seconds=60).session_id
    with pytest.raises(SessionExists) as raised:
        manager.fork_session(**_kw(sid), external_key="taken")
    assert raised.value.session_id == sid
    assert manager.fork_session(**_kw(sid)).ttl_seconds == 60
    assert manager.fork_session(**_kw(sid), ttl_seconds=None).expires_at is None
    assert manager.fork_session(**_kw(sid), ttl_seconds=5).ttl_seconds == 5


def test_list_sessions_by_parent_pages_and_filters(manager: SessionManager) -> None:
    """Only the parent's forks, newest first, paged by cursor; other filters combine."""
    sid = new_session(manager).session_id
    other = new_session(manager).session_id
    forks = [manager.fork_session(**_kw(sid)).session_id for _ in range(3)]
    manager.fork_session(**_kw(other))
    manager.close_session(**_kw(forks[0]))
    first = manager.list_sessions(user_id=USER, parent_session_id=sid, limit=2)
    rest = manager.list_sessions(user_id=USER, parent_session_id=sid, cursor=first.next_cursor)
    listed = first.items + rest.items
    assert sorted(s.session_id for s in listed) == sorted(forks)
    order = [(s.updated_at, s.session_id) for s in listed]
    assert order == sorted(order, reverse=True)
    closed = manager.list_sessions(user_id=USER, parent_session_id=sid, status="CLOSED")
    assert [s.session_id for s in closed.items] == [forks[0]]
    assert manager.list_sessions(user_id=OTHER, parent_session_id=sid).items == []
    every = manager.list_sessions(user_id=ADMIN, all_users=True, admin=True, parent_session_id=sid)
    assert len(every.items) == 3
    with pytest.raises(ValidationError):
        manager.list_sessions(user_id=USER, parent_session_id="nope")
    with pytest.raises(ValidationError):  # a cursor of another listing
        manager.list_sessions(user_id=USER, cursor=first.next_cursor)


def test_a_due_fork_lists_once_among_the_expired_forks(
    frozen_manager: SessionManager, clock: Any
) -> None:
    """A fork idle past its TTL (EXPIRED to a read, not swept yet) is listed once, not
    twice, by status EXPIRED and parent; a fork expired for real is listed with it."""
    m = frozen_manager
    sid = new_session(m).session_id
    due = m.fork_session(**_kw(sid), ttl_seconds=60).session_id
    gone = m.fork_session(**_kw(sid)).session_id
    m.expire_session(**_kw(gone))
    m.fork_session(**_kw(sid))
    clock.advance(120)
    for kw in ({"user_id": USER}, {"user_id": ADMIN, "admin": True, "all_users": True}):
        listed = m.list_sessions(**kw, status="EXPIRED", parent_session_id=sid).items
        assert sorted(s.session_id for s in listed) == sorted([due, gone])


@pytest.mark.parametrize("fmt", ["responses", "chat"])
def test_tool_call_sessions_fork_their_messages_not_their_runs(
    manager: SessionManager, fmt: str
) -> None:
    """Call and result messages (Responses items without a role too) are copied as they
    were; the parent's runs and tool calls stay the parent's (run_id still names one)."""
    sid = new_session(manager).session_id
    run = manager.start_run(**_kw(sid), input="task")
    history = [
        user(fmt, "look"),
        *calls(fmt, ["call_0"]),
        *results(fmt, ["call_0"]),
        answer(fmt, "done"),
    ]
    manager.append_messages(**_kw(sid), messages=[{**p, "run_id": run.run_id} for p in history])
    manager.record_tool_call(**_kw(sid), tool="f", arguments={}, result="out", run_id=run.run_id)
    fork = manager.fork_session(**_kw(sid))
    assert _payloads(manager, fork.session_id) == _payloads(manager, sid)
    plain = [{k: v for k, v in p.items() if k != "run_id"} for p in _payloads(manager, sid)]
    assert plain == history
    copied = manager.get_messages(**_kw(fork.session_id), limit=100).items
    assert {x.run_id for x in copied} == {run.run_id}
    assert (fork.run_count, fork.tool_call_count) == (0, 0)
    assert manager.list_runs(**_kw(fork.session_id)).items == []
    assert manager.get_tool_history(**_kw(fork.session_id)).items == []
    with pytest.raises(RunNotFound):
        manager.get_run(**_kw(fork.session_id), run_id=run.run_id)


def _statements(store: SessionStore, manager: SessionManager, size: int) -> int:
    """The statements a fork of a ``size``-message session sends to the driver."""
    from sqlcapture import captured_sql

    assert isinstance(store, SQLStore)
    sid = new_session(manager).session_id
    for start in range(0, size, 500):
        batch = [user_msg(f"m{i}") for i in range(start, min(size, start + 500))]
        manager.append_messages(**_kw(sid), messages=batch)
    with captured_sql(store) as seen:
        fork = manager.fork_session(**_kw(sid))
    assert fork.message_count == size
    assert len(_payloads(manager, fork.session_id)) == min(size, 1000)
    inserts = [s for s, _ in seen if s.lstrip().upper().startswith("INSERT INTO MESSAGES")]
    assert len(inserts) == 1 and "SELECT" in inserts[0].upper()
    return len(seen)


def test_sql_fork_costs_the_same_statements_at_any_size(
    store: SessionStore, manager: SessionManager
) -> None:
    """One INSERT ... SELECT for the messages, and as many statements in all for a
    fork of 10 messages as for one of 1,000."""
    if not isinstance(store, SQLStore):
        pytest.skip("counts SQL statements")
    assert _statements(store, manager, 10) == _statements(store, manager, 1000)
