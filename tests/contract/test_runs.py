"""Runs on every store: the run row keeps its step count, listings carry no steps, steps
are read in bounded pages, a run write never loads the run's steps, and a late writer of
a run that a take-over ended is refused (C35)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from contract_support import USER, ProxyStore, assistant_msg, snapshot

from agentsession import Limits, RunNotFound, RunNotRunning, SessionManager, ValidationError
from agentsession.models import Run, RunStatus, RunStep, Session
from agentsession.stores.base import SessionStore, StoreConflict

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _add_steps(m: SessionManager, sid: str, run_id: str, n: int) -> None:
    for i in range(n):
        m.add_run_step(session_id=sid, user_id=USER, run_id=run_id, kind="model", name=f"s{i}")


def _counts(runs: list[Run]) -> dict[str, tuple[int, int]]:
    """run_id -> (step_count, len(steps))."""
    return {r.run_id: (r.step_count, len(r.steps)) for r in runs}


def test_step_count_after_steps_finish_and_restore(manager: SessionManager, sid: str) -> None:
    """step_count follows every step, and survives finish, restore (INTERRUPTED) and
    close (CANCELLED)."""
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    first = manager.start_run(**kw, input="one")
    assert first.step_count == 0
    _add_steps(manager, sid, first.run_id, 3)
    assert manager.get_run(**kw, run_id=first.run_id).step_count == 3
    done = manager.finish_run(**kw, run_id=first.run_id, status="SUCCEEDED")
    assert (done.step_count, done.steps) == (3, [])
    second = manager.start_run(**kw, input="two")
    _add_steps(manager, sid, second.run_id, 2)
    restored = manager.restore_session(**kw)
    assert restored.interrupted_run_ids == [second.run_id]
    assert _counts(restored.runs) == {first.run_id: (3, 0), second.run_id: (2, 0)}
    interrupted = manager.get_run(**kw, run_id=second.run_id)
    assert (interrupted.status, interrupted.step_count) == (RunStatus.INTERRUPTED, 2)
    third = manager.start_run(**kw, input="three")
    _add_steps(manager, sid, third.run_id, 1)
    manager.close_session(**kw)
    cancelled = manager.get_run(**kw, run_id=third.run_id)
    assert (cancelled.status, cancelled.step_count, len(cancelled.steps)) == (
        RunStatus.CANCELLED,
        1,
        1,
    )


def test_list_runs_has_no_steps(manager: SessionManager, sid: str) -> None:
    """list_runs gives run rows only: steps == [], step_count says how many."""
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    ids = []
    for n in (2, 0, 5):
        run = manager.start_run(**kw)
        _add_steps(manager, sid, run.run_id, n)
        manager.finish_run(**kw, run_id=run.run_id, status="SUCCEEDED")
        ids.append(run.run_id)
    runs = manager.list_runs(**kw).items
    assert [r.run_id for r in runs] == ids
    assert _counts(runs) == {ids[0]: (2, 0), ids[1]: (0, 0), ids[2]: (5, 0)}
    assert _counts(manager.list_runs(**kw, after=1, limit=1).items) == {ids[1]: (0, 0)}


def test_get_run_window_and_list_run_steps_visit_every_step_once(store: SessionStore) -> None:
    """get_run shows the first default_page_size steps (truncation visible through
    step_count); list_run_steps pages through all of them, each exactly once."""
    m = SessionManager(store, limits=Limits(default_page_size=4, max_page_size=5))
    sid = m.create_session(user_id=USER).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    run = m.start_run(**kw)
    _add_steps(m, sid, run.run_id, 11)
    got = m.get_run(**kw, run_id=run.run_id)
    assert [s.index for s in got.steps] == [0, 1, 2, 3] and got.step_count == 11
    for limit, sizes in ((None, [4, 4, 3]), (5, [5, 5, 1]), (1, [1] * 11)):
        seen: list[int] = []
        page_sizes = []
        cursor = None
        while True:
            page = m.list_run_steps(**kw, run_id=run.run_id, cursor=cursor, limit=limit)
            seen += [s.index for s in page.items]
            page_sizes.append(len(page.items))
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == list(range(11)) and page_sizes == sizes, limit
    assert [s.name for s in got.steps] == ["s0", "s1", "s2", "s3"]
    tail = m.list_run_steps(**kw, run_id=run.run_id, after=6, limit=4)
    assert ([s.index for s in tail.items], tail.next_cursor) == ([7, 8, 9, 10], None)
    past = m.list_run_steps(**kw, run_id=run.run_id, after=20)
    assert (past.items, past.next_cursor) == ([], None)
    with pytest.raises(ValidationError):
        m.list_run_steps(**kw, run_id=run.run_id, limit=6)
    with pytest.raises(ValidationError):
        m.list_run_steps(**kw, run_id=run.run_id, limit=0)
    with pytest.raises(RunNotFound):
        m.list_run_steps(**kw, run_id="run_aaaaaaaaaaaaaaaaaaaaaaaaaa")


def test_store_keeps_step_count_and_refuses_a_step_out_of_turn(store: SessionStore) -> None:
    """insert_run_step adds 1 to step_count; an index other than step_count (duplicate,
    gap) or an unknown run is a StoreConflict; update_run leaves the count alone."""
    now = T0
    session = Session(
        session_id="ses_steps",
        user_id=USER,
        agent="a",
        created_at=now,
        updated_at=now,
        last_active_at=now,
    )
    run = Run(run_id="run_steps", session_id="ses_steps", seq=1, created_at=now, step_count=7)
    with store.transaction(write=True) as tx:
        tx.get_session("ses_steps")
        tx.insert_session(session)
        tx.insert_run(run)
        for i in range(3):
            tx.insert_run_step(
                "ses_steps", RunStep(run_id="run_steps", index=i, kind="k", started_at=now)
            )
        assert tx.get_run("ses_steps", "run_steps") == run.model_copy(update={"step_count": 3})
    for index, run_id in ((2, "run_steps"), (4, "run_steps"), (0, "run_other")):
        with pytest.raises(StoreConflict), store.transaction(write=True) as tx:
            tx.get_session("ses_steps")
            tx.insert_run_step(
                "ses_steps", RunStep(run_id=run_id, index=index, kind="k", started_at=now)
            )
    with store.transaction(write=True) as tx:
        tx.get_session("ses_steps")
        tx.update_run(run.model_copy(update={"status": RunStatus.SUCCEEDED, "step_count": 0}))
    with store.transaction(write=False) as tx:
        stored = tx.get_run("ses_steps", "run_steps")
        assert stored is not None and (stored.status, stored.step_count) == (RunStatus.SUCCEEDED, 3)
        assert [r.step_count for r in tx.list_runs("ses_steps")] == [3]
        assert [s.index for s in tx.list_run_steps("ses_steps", "run_steps")] == [0, 1, 2]
        assert [
            s.index for s in tx.list_run_steps("ses_steps", "run_steps", after_index=0, limit=1)
        ] == [1]
        assert tx.list_run_steps("ses_steps", "run_steps", after_index=2) == []
        assert tx.list_run_steps("ses_steps", "run_missing") == []


def test_run_writes_never_load_steps(store: SessionStore) -> None:
    """Every write tagged with a run (step, tool call, message, finish) makes the same
    store calls with 1 step as with 40, and none of them reads steps: its cost does not
    grow with the run."""
    proxy = ProxyStore(store)
    m = SessionManager(proxy)  # type: ignore[arg-type]
    made: list[list[str]] = []
    for size in (1, 40):
        sid = m.create_session(user_id=USER).session_id
        kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
        run_id = m.start_run(**kw).run_id
        _add_steps(m, sid, run_id, size)
        proxy.calls.clear()
        m.add_run_step(**kw, run_id=run_id, kind="model")
        m.record_tool_call(**kw, tool="t", run_id=run_id)
        m.append_messages(**kw, messages=[assistant_msg("x", run_id=run_id)])
        m.finish_run(**kw, run_id=run_id, status="SUCCEEDED")
        made.append(list(proxy.calls))
    assert made[0] == made[1]
    assert "get_run" in made[0] and "list_run_steps" not in made[0]


def test_c35_late_writer_after_takeover_is_refused(manager: SessionManager, sid: str) -> None:
    """C35: run R RUNNING; restore takes the session over (R INTERRUPTED); the old worker
    appends a message and records a tool call tagged with R -> both refused with
    RunNotRunning (409); nothing stored. Steps and finish are refused too."""
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    run_id = manager.start_run(**kw, input="task").run_id
    manager.add_run_step(**kw, run_id=run_id, kind="model")
    assert manager.restore_session(**kw).interrupted_run_ids == [run_id]
    before = snapshot(manager, sid)
    late_writes = [
        lambda: manager.append_message(**kw, message=assistant_msg("late", run_id=run_id)),
        lambda: manager.append_messages(
            **kw, messages=[assistant_msg("untagged"), assistant_msg("late", run_id=run_id)]
        ),
        lambda: manager.record_tool_call(
            **kw, tool="run_command", arguments={"c": "x"}, result="ok", run_id=run_id
        ),
        lambda: manager.add_run_step(**kw, run_id=run_id, kind="tool"),
        lambda: manager.finish_run(**kw, run_id=run_id, status="SUCCEEDED"),
    ]
    for write in late_writes:
        with pytest.raises(RunNotRunning) as err:
            write()
        assert err.value.http_status == 409 and err.value.status == "INTERRUPTED"
    assert snapshot(manager, sid) == before
    # The new worker carries on: a new run takes messages and tool calls.
    new_run = manager.start_run(**kw, input="continue").run_id
    manager.append_message(**kw, message=assistant_msg("resumed", run_id=new_run))
    manager.record_tool_call(**kw, tool="run_command", run_id=new_run)
