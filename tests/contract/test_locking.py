"""Optimistic locking: a stale ``expected_version`` is rejected and writes nothing;
racing writers with the same version never both succeed (DESIGN.md, "Concurrency")."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import USER, VERSIONED_WRITES, Ctx, run_threads, snapshot, user_msg

from agentsession import SessionManager, SessionNotFound, VersionConflict

NEEDS_NO_RUNNING_RUN = {"start_run"}


@pytest.mark.parametrize("op", sorted(VERSIONED_WRITES))
@pytest.mark.parametrize("offset", [-1, +1])
def test_stale_expected_version_is_rejected_and_writes_nothing(
    manager: SessionManager, op: str, offset: int
) -> None:
    """Every mutation with a stale or future version raises VersionConflict, writes nothing."""
    ctx = Ctx(manager, running=op not in NEEDS_NO_RUNNING_RUN)
    before = snapshot(manager, ctx.sid)
    stale = ctx.version + offset
    with pytest.raises(VersionConflict) as err:
        VERSIONED_WRITES[op](manager, ctx, expected_version=stale)
    assert err.value.current_version == ctx.version
    assert err.value.expected_version == stale
    assert err.value.session_id == ctx.sid
    assert snapshot(manager, ctx.sid) == before


@pytest.mark.parametrize("op", sorted(set(VERSIONED_WRITES) - {"delete_session"}))
def test_current_expected_version_succeeds_and_bumps_by_one(
    manager: SessionManager, op: str
) -> None:
    """With the current version every mutation succeeds and the version rises by exactly 1."""
    ctx = Ctx(manager, running=op not in NEEDS_NO_RUNNING_RUN)
    VERSIONED_WRITES[op](manager, ctx, expected_version=ctx.version)
    after = manager.get_session(session_id=ctx.sid, user_id=USER)
    assert after.version == ctx.version + 1
    assert type(after.version) is int


def test_delete_with_current_expected_version_deletes(manager: SessionManager) -> None:
    """delete_session with the current version deletes the session."""
    ctx = Ctx(manager)
    manager.delete_session(session_id=ctx.sid, user_id=USER, expected_version=ctx.version)
    with pytest.raises(SessionNotFound):
        manager.get_session(session_id=ctx.sid, user_id=USER)


RACES = [
    "append_message",
    "update_working_memory.patch",
    "record_tool_call",
    "update_session",
    "start_run",
    "close_session",
    "pop_message",
]


@pytest.mark.parametrize("op", RACES)
def test_two_writers_same_expected_version_exactly_one_wins(
    manager: SessionManager, op: str
) -> None:
    """Two threads sending the same expected_version: one succeeds, one VersionConflict."""
    for _ in range(5):
        ctx = Ctx(manager, running=op not in NEEDS_NO_RUNNING_RUN)
        v = ctx.version
        out = run_threads(
            2, lambda i, c=ctx, v=v: VERSIONED_WRITES[op](manager, c, expected_version=v)
        )
        conflicts = [r for r in out if isinstance(r, VersionConflict)]
        wins = [r for r in out if not isinstance(r, BaseException)]
        assert len(wins) == 1 and len(conflicts) == 1, out
        assert conflicts[0].current_version == v + 1
        assert manager.get_session(session_id=ctx.sid, user_id=USER).version == v + 1


def test_racing_appends_with_different_writers_store_one_message(manager: SessionManager) -> None:
    """Two different appends racing on one version: exactly one message is stored."""
    for _ in range(5):
        ctx = Ctx(manager)
        count = ctx_count(manager, ctx)

        def write(i: int, c: Ctx = ctx) -> Any:
            return manager.append_message(
                session_id=c.sid,
                user_id=USER,
                message=user_msg(f"writer {i}"),
                expected_version=c.version,
            )

        out = run_threads(2, write)
        wins = [r for r in out if not isinstance(r, BaseException)]
        assert len(wins) == 1, out
        msgs = manager.get_messages(session_id=ctx.sid, user_id=USER).items
        assert len(msgs) == count + 1
        assert msgs[-1].content == wins[0].content


def ctx_count(m: SessionManager, ctx: Ctx) -> int:
    """Message count of the ctx session."""
    return m.get_session(session_id=ctx.sid, user_id=USER).message_count


def test_c01_stale_writer_gets_conflict_and_writes_nothing(manager: SessionManager) -> None:
    """C01: A and B read v; A appends with v (v+1); B appends with v and is rejected."""
    sid = manager.create_session(user_id=USER).session_id
    v = manager.get_session(session_id=sid, user_id=USER).version
    a = manager.append_message(
        session_id=sid, user_id=USER, message=user_msg("from A"), expected_version=v
    )
    after_a = snapshot(manager, sid)
    assert after_a["session"]["version"] == v + 1
    with pytest.raises(VersionConflict) as err:
        manager.append_message(
            session_id=sid, user_id=USER, message=user_msg("from B"), expected_version=v
        )
    assert err.value.current_version == v + 1
    assert snapshot(manager, sid) == after_a
    msgs = manager.get_messages(session_id=sid, user_id=USER).items
    assert [(x.message_id, x.content) for x in msgs] == [(a.message_id, "from A")]


def test_c02_back_to_back_appends_on_frozen_clock_never_conflict(
    frozen_manager: SessionManager,
) -> None:
    """C02: same-instant appends each using the previous version never conflict; +1 each."""
    m = frozen_manager
    sid = m.create_session(user_id=USER).session_id
    v = m.get_session(session_id=sid, user_id=USER).version
    for i in range(20):
        m.append_message(
            session_id=sid, user_id=USER, message=user_msg(f"E{i}"), expected_version=v
        )
        s = m.get_session(session_id=sid, user_id=USER)
        assert type(s.version) is int
        assert s.version == v + 1
        v = s.version
    assert [x.content for x in m.get_messages(session_id=sid, user_id=USER).items] == [
        f"E{i}" for i in range(20)
    ]


def test_modify_working_memory_reapplies_after_a_concurrent_write(
    manager: SessionManager, sid: str
) -> None:
    """The retry helper re-reads and re-applies fn when another writer got in first."""
    manager.update_working_memory(session_id=sid, user_id=USER, data={"n": 0, "log": []})
    interfered = []

    def fn(doc: dict[str, Any]) -> dict[str, Any]:
        if not interfered:
            interfered.append(1)
            manager.update_working_memory(
                session_id=sid, user_id=USER, patch={"log": ["other writer"]}
            )
        return {**doc, "n": doc["n"] + 1}

    result = manager.modify_working_memory(session_id=sid, user_id=USER, fn=fn)
    assert result.data == {"n": 1, "log": ["other writer"]}


def test_modify_working_memory_gives_up_after_max_attempts(
    manager: SessionManager, sid: str
) -> None:
    """Bounded retries: a writer that always loses gets VersionConflict saying how many
    attempts it made, nothing lost."""
    manager.update_working_memory(session_id=sid, user_id=USER, data={"n": 0, "other": 0})

    def fn(doc: dict[str, Any]) -> dict[str, Any]:
        other = manager.get_working_memory(session_id=sid, user_id=USER).data["other"]
        manager.update_working_memory(session_id=sid, user_id=USER, patch={"other": other + 1})
        return {**doc, "n": doc["n"] + 1}

    with pytest.raises(VersionConflict) as raised:
        manager.modify_working_memory(session_id=sid, user_id=USER, fn=fn, max_attempts=3)
    data = manager.get_working_memory(session_id=sid, user_id=USER).data
    assert data == {"n": 0, "other": 3}
    # it says it already tried, and how to try longer
    assert raised.value.attempts == 3
    assert "gave up after 3 attempts" in str(raised.value) and "max_attempts" in str(raised.value)
    assert raised.value.to_dict()["attempts"] == 3
