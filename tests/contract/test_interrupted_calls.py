"""Tool calls a crash left unanswered: restore answers each with a synthetic result in
the call's own format (chat completions, Anthropic, OpenAI Responses), in the same
write, so no window holds a call without its result."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import USER, audit_of, seqs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_formats import FORMATS, answer, calls, histories, results, user, window_problem

from agentsession import Message, RunStatus, SessionManager

SYNTHETIC = {"agentsession": {"synthetic": "interrupted"}}


def _crash(m: SessionManager, fmt: str, *messages: dict[str, Any], tag: bool = True) -> Any:
    """A session whose run made the calls in ``messages`` and then died (no finish)."""
    sid = m.create_session(user_id=USER).session_id
    run = m.start_run(session_id=sid, user_id=USER)
    extra = {"run_id": run.run_id} if tag else {}
    m.append_messages(
        session_id=sid,
        user_id=USER,
        messages=[user(fmt, "fix it"), *({**x, **extra} for x in messages)],
    )
    return sid, run.run_id


def _result_ids(fmt: str, msg: Message) -> list[str]:
    """The call ids a synthetic result answers, checking it is in ``fmt``'s shape."""
    p = msg.payload()
    assert p["metadata"] == SYNTHETIC and "interrupted" in str(p)
    if fmt == "chat":
        assert p["role"] == "tool"
        return [p["tool_call_id"]]
    if fmt == "anthropic":
        assert p["role"] == "user"
        assert all(b["type"] == "tool_result" and b["is_error"] is True for b in p["content"])
        return [b["tool_use_id"] for b in p["content"]]
    assert "role" not in p and p["type"] == "function_call_output"
    return [p["call_id"]]


def _all_windows_valid(m: SessionManager, sid: str) -> None:
    n = m.get_session(session_id=sid, user_id=USER).message_count
    for k in range(1, n + 1):
        window = m.get_messages(session_id=sid, user_id=USER, limit=k).items
        assert window_problem(window) is None, (k, window_problem(window))


@pytest.mark.parametrize("fmt", FORMATS)
def test_restore_answers_the_call_a_crash_left_open(manager: SessionManager, fmt: str) -> None:
    """Crash right after the call message: restore appends one synthetic result, marked,
    tagged with the run, in the same version step; every window is valid again."""
    sid, run_id = _crash(manager, fmt, *calls(fmt, ["c1"]))
    before = manager.get_session(session_id=sid, user_id=USER)
    assert window_problem(manager.get_messages(session_id=sid, user_id=USER).items) is not None
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_run_ids == [run_id]
    assert restored.interrupted_call_ids == ["c1"]
    after = manager.get_session(session_id=sid, user_id=USER)
    assert after.version == before.version + 1
    assert after.message_count == before.message_count + 1
    last = manager.get_messages(session_id=sid, user_id=USER, limit=1, align_tool_calls=False).items
    assert last[0].seq == after.message_count and last[0].run_id == run_id
    assert _result_ids(fmt, last[0]) == ["c1"]
    assert window_problem(restored.messages) is None and restored.messages[-1] == last[0]
    assert audit_of(manager, sid)[-1].details["interrupted_calls"] == ["c1"]
    _all_windows_valid(manager, sid)
    again = manager.restore_session(session_id=sid, user_id=USER)
    assert again.interrupted_call_ids == []
    assert manager.get_session(session_id=sid, user_id=USER).message_count == after.message_count


@pytest.mark.parametrize("fmt", FORMATS)
def test_answered_call_gets_nothing_synthetic(manager: SessionManager, fmt: str) -> None:
    """A call answered before the crash gets no synthetic result."""
    sid, run_id = _crash(manager, fmt, *calls(fmt, ["c1"]), *results(fmt, ["c1"]))
    count = manager.get_session(session_id=sid, user_id=USER).message_count
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_run_ids == [run_id] and restored.interrupted_call_ids == []
    assert manager.get_session(session_id=sid, user_id=USER).message_count == count


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("done", "open_"), [("c1", "c2"), ("c2", "c1")])
def test_parallel_calls_with_one_answered(
    manager: SessionManager, fmt: str, done: str, open_: str
) -> None:
    """Two parallel calls, one answered before the crash (and an earlier round fully
    answered): only the other one gets a synthetic result."""
    sid, _ = _crash(
        manager,
        fmt,
        *calls(fmt, ["c0"]),
        *results(fmt, ["c0"]),
        *calls(fmt, ["c1", "c2"]),
        *results(fmt, [done]),
    )
    count = manager.get_session(session_id=sid, user_id=USER).message_count
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_call_ids == [open_]
    added = manager.get_messages(session_id=sid, user_id=USER, after=count).items
    assert [i for x in added for i in _result_ids(fmt, x)] == [open_]
    _all_windows_valid(manager, sid)


def test_untagged_messages_and_several_calls(manager: SessionManager) -> None:
    """Messages without a run_id: the tail is read back to the last answered call; calls
    after it get results in order, each in its own message's format."""
    sid, run_id = _crash(
        manager,
        "chat",
        *calls("chat", ["c0"]),
        *results("chat", ["c0"]),
        *calls("chat", ["c1", "c2"]),
        *calls("responses", ["c3"]),
        tag=False,
    )
    count = manager.get_session(session_id=sid, user_id=USER).message_count
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_call_ids == ["c1", "c2", "c3"]
    added = manager.get_messages(session_id=sid, user_id=USER, after=count).items
    assert [x.payload().get("tool_call_id") or x.payload()["call_id"] for x in added] == [
        "c1",
        "c2",
        "c3",
    ]
    assert [x.payload().get("type") for x in added] == [None, None, "function_call_output"]
    assert all(x.run_id == run_id for x in added)
    _all_windows_valid(manager, sid)


def test_calls_of_another_run_are_left_alone(manager: SessionManager) -> None:
    """A call an earlier, finished run left unanswered is not the interrupted run's."""
    sid = manager.create_session(user_id=USER).session_id
    done = manager.start_run(session_id=sid, user_id=USER)
    manager.append_messages(
        session_id=sid,
        user_id=USER,
        messages=[{**x, "run_id": done.run_id} for x in calls("chat", ["old"])],
    )
    manager.finish_run(session_id=sid, user_id=USER, run_id=done.run_id, status="SUCCEEDED")
    manager.start_run(session_id=sid, user_id=USER)
    count = manager.get_session(session_id=sid, user_id=USER).message_count
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_call_ids == []
    assert manager.get_session(session_id=sid, user_id=USER).message_count == count


@pytest.mark.parametrize("ending", ["expire", "ttl"])
def test_restore_after_expiry_answers_the_interrupted_run(
    frozen_manager: SessionManager, clock: Any, ending: str
) -> None:
    """The crash is noticed by expiry (explicit, or lazily by the TTL), which marks the
    run INTERRUPTED; restoring the EXPIRED session answers the call all the same."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, ttl_seconds=60).session_id
    run = m.start_run(session_id=sid, user_id=USER)
    m.append_messages(
        session_id=sid,
        user_id=USER,
        messages=[
            {**x, "run_id": run.run_id}
            for x in [user("anthropic", "go"), *calls("anthropic", ["t1", "t2"])]
        ],
    )
    if ending == "expire":
        m.expire_session(session_id=sid, user_id=USER)
    else:
        clock.advance(61)
    assert m.get_run(session_id=sid, user_id=USER, run_id=run.run_id).status == (
        RunStatus.INTERRUPTED
    )
    restored = m.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_run_ids == [] and restored.interrupted_call_ids == ["t1", "t2"]
    assert seqs(restored.messages)[-1] == 3
    assert _result_ids("anthropic", restored.messages[-1]) == ["t1", "t2"]
    _all_windows_valid(m, sid)
    m.close_session(session_id=sid, user_id=USER)
    assert m.restore_session(session_id=sid, user_id=USER).interrupted_call_ids == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_restore_after_close_answers_the_cancelled_run(manager: SessionManager, fmt: str) -> None:
    """A close while the run waits for its tool (the run is CANCELLED) leaves the call
    open too: restoring the CLOSED session answers it; a second close and restore, with
    nothing open any more, appends nothing."""
    sid, run_id = _crash(manager, fmt, *calls(fmt, ["c1", "c2"]))
    manager.close_session(session_id=sid, user_id=USER)
    assert manager.get_run(session_id=sid, user_id=USER, run_id=run_id).status == (
        RunStatus.CANCELLED
    )
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_run_ids == [] and restored.interrupted_call_ids == ["c1", "c2"]
    synthetic = [m for m in restored.messages if m.metadata == SYNTHETIC]
    answered = [c for m in synthetic for c in _result_ids(fmt, m)]
    assert sorted(answered) == ["c1", "c2"]
    _all_windows_valid(manager, sid)
    manager.close_session(session_id=sid, user_id=USER)
    again = manager.restore_session(session_id=sid, user_id=USER)
    assert again.interrupted_call_ids == []
    assert again.session.message_count == restored.session.message_count


def test_a_final_answer_after_the_calls_needs_nothing(manager: SessionManager) -> None:
    """The run answered its call and its final message was stored before the crash."""
    sid, _ = _crash(
        manager,
        "responses",
        *calls("responses", ["c1"]),
        *results("responses", ["c1"]),
        answer("responses", "done"),
    )
    assert manager.restore_session(session_id=sid, user_id=USER).interrupted_call_ids == []


@pytest.mark.store_independent
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(earlier=histories(), data=st.data())
def test_random_crash_points_leave_valid_windows(
    manager: SessionManager, earlier: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Property: after complete turns in random formats, a run makes 1-3 parallel calls
    in a random format and dies after answering a random part of them. Restore answers
    exactly the rest, in call order, and every window is valid again."""
    fmt = data.draw(st.sampled_from(FORMATS), label="format")
    ids = [f"x{i}" for i in range(data.draw(st.integers(1, 3), label="calls"))]
    done = data.draw(st.lists(st.sampled_from(ids), unique=True), label="answered")
    sid = manager.create_session(user_id=USER).session_id
    manager.append_messages(session_id=sid, user_id=USER, messages=earlier)
    manager.start_run(session_id=sid, user_id=USER)
    crash = [user(fmt, "go"), *calls(fmt, ids), *(results(fmt, done) if done else [])]
    manager.append_messages(session_id=sid, user_id=USER, messages=crash)
    restored = manager.restore_session(session_id=sid, user_id=USER)
    assert restored.interrupted_call_ids == [i for i in ids if i not in done]
    _all_windows_valid(manager, sid)
