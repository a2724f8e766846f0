"""Runs on every store: the usage ledger's sums equal the finished runs' usage, grouped
by session, agent, model and day, never another user's; a budget of a session or a
user refuses the run (or step) past it, audits the refusal and writes nothing else; the
ledger and budgets go with the session and the user's erasure."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from contract_support import ADMIN, OTHER, USER, audit_of, snapshot

from agentsession import BudgetExceeded, Forbidden, Policy, SessionManager, SessionNotFound
from agentsession.models import UsageTotal
from agentsession.stores.base import SessionStore
from agentsession.usage import KINDS, ModelPrice

#: Prices per million tokens; "free" has none, so its cost is unknown.
PRICES = {"m-a": ModelPrice(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5)}


def _run(
    m: SessionManager, sid: str, user: str = USER, *, admin: bool = False, **finish: Any
) -> Any:
    kw: dict[str, Any] = {"session_id": sid, "user_id": user, "admin": admin}
    run = m.start_run(**kw)
    return m.finish_run(**kw, run_id=run.run_id, status="SUCCEEDED", **finish)


def _expected(m: SessionManager, user: str | None, group_by: str) -> dict[Any, dict[str, int]]:
    """The sums per group of every run's ``usage_entries``, read run by run."""
    sums: dict[Any, Counter[str]] = {}
    sessions = m.list_sessions(user_id=ADMIN, admin=True, all_users=True, limit=1000).items
    for s in sessions:
        if user is not None and s.user_id != user:
            continue
        for run in m.list_runs(session_id=s.session_id, user_id=ADMIN, admin=True).items:
            assert run.ended_at is not None or not run.usage_entries
            for entry in run.usage_entries:
                group = {
                    "session": s.session_id,
                    "agent": s.agent,
                    "model": entry.model,
                    "day": run.ended_at.date().isoformat() if run.ended_at else None,
                }[group_by]
                total = sums.setdefault(group, Counter())
                for kind in KINDS:
                    total[kind] += getattr(entry, kind)
    return {g: {k: c[k] for k in KINDS} for g, c in sums.items()}


def _got(totals: list[UsageTotal]) -> dict[Any, dict[str, int]]:
    return {t.group: {k: getattr(t, k) for k in KINDS} for t in totals}


def _seed(m: SessionManager) -> dict[str, str]:
    """Sessions of two users and two agents with runs of one model, several models, no
    model, and none."""
    a1 = m.create_session(user_id=USER, agent="coder").session_id
    a2 = m.create_session(user_id=USER, agent="writer").session_id
    b1 = m.create_session(user_id=OTHER, agent="coder").session_id
    _run(m, a1, usage={"input_tokens": 100, "output_tokens": 20}, model="m-a")
    _run(m, a1, usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
    _run(
        m,
        a2,
        usage_by_model={
            "m-a": {"input_tokens": 50, "cache_read_input_tokens": 400},
            "free": {"output_tokens": 9, "reasoning_tokens": 4, "cache_creation_input_tokens": 2},
        },
    )
    _run(m, a2)  # reports nothing
    _run(m, b1, OTHER, usage={"input_tokens": 1000, "output_tokens": 1000}, model="m-a")
    return {"a1": a1, "a2": a2, "b1": b1}


@pytest.mark.parametrize("group_by", ["session", "agent", "model", "day"])
def test_usage_sums_equal_the_runs_usage(manager: SessionManager, group_by: str) -> None:
    """Per group, get_usage's counts are the sums of the runs' usage_entries; only the
    caller's runs count, an admin's all_users counts everyone's."""
    _seed(manager)
    mine = manager.get_usage(user_id=USER, group_by=group_by)
    assert _got(mine) == _expected(manager, USER, group_by)
    everyone = manager.get_usage(user_id=ADMIN, admin=True, all_users=True, group_by=group_by)
    assert _got(everyone) == _expected(manager, None, group_by)
    assert sum(t.input_tokens for t in everyone) == sum(t.input_tokens for t in mine) + 1000
    for t in mine:
        assert t.total_tokens == sum(getattr(t, k) for k in KINDS[:4])


def test_usage_runs_and_costs(store: SessionStore) -> None:
    """runs counts each run once (a model's group: the runs of that model); cost by the
    price table, None when a model of the group has no price."""
    m = SessionManager(store, policy=Policy(prices=PRICES))
    ids = _seed(m)
    by_session = {t.group: t for t in m.get_usage(user_id=USER, group_by="session")}
    assert (by_session[ids["a1"]].runs, by_session[ids["a2"]].runs) == (2, 1)
    # a1: m-a priced, 10 tokens of no model: no price -> cost unknown.
    assert by_session[ids["a1"]].cost is None
    by_model = {t.group: t for t in m.get_usage(user_id=USER, group_by="model")}
    assert (by_model["m-a"].runs, by_model["free"].runs, by_model[None].runs) == (2, 1, 1)
    expected = (150 * 2.0 + 20 * 8.0 + 400 * 0.5) / 1_000_000
    assert by_model["m-a"].cost == pytest.approx(expected)
    assert by_model["free"].cost is None
    plain = SessionManager(store).get_usage(user_id=USER, group_by="model")
    assert all(t.cost is None for t in plain)


def test_usage_since_until_and_filters(frozen_manager: SessionManager, clock: Any) -> None:
    """since/until bound the runs' finish time (since inclusive, until exclusive);
    session_id and agent filter; another user's session sums nothing."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, agent="coder").session_id
    first = clock()
    _run(m, sid, usage={"input_tokens": 1}, model="m-a")
    clock.advance(86400)
    _run(m, sid, usage={"input_tokens": 10}, model="m-a")
    later = clock()
    clock.advance(86400)
    _run(m, sid, usage={"input_tokens": 100}, model="m-a")

    def total(**kw: Any) -> int:
        return sum(t.input_tokens for t in m.get_usage(user_id=USER, group_by="day", **kw))

    assert total() == 111
    assert total(since=first) == 111
    assert total(since=later) == 110
    assert total(until=later) == 1
    assert total(since=first, until=later + timedelta(seconds=1)) == 11
    assert len(m.get_usage(user_id=USER, group_by="day")) == 3
    assert total(session_id=sid) == 111 and total(agent="coder") == 111 and total(agent="x") == 0
    assert m.get_usage(user_id=OTHER, session_id=sid) == []


def test_budget_refuses_the_run_that_would_exceed_it(manager: SessionManager, sid: str) -> None:
    """A session token budget: runs start until the used tokens reach it; the next
    start_run raises BudgetExceeded, writes only its run.refused audit event, and the
    session (version, runs, history) is as before."""
    manager.set_budget(user_id=ADMIN, admin=True, session_id=sid, max_tokens=100)
    _run(manager, sid, usage={"input_tokens": 60}, model="m-a")
    _run(manager, sid, usage={"input_tokens": 30, "output_tokens": 10}, model="m-a")
    before = snapshot(manager, sid)
    with pytest.raises(BudgetExceeded) as refused:
        manager.start_run(session_id=sid, user_id=USER, input="one more")
    err = refused.value
    assert (err.scope, err.limit, err.maximum, err.used, err.http_status) == (
        "session",
        "tokens",
        100,
        100,
        409,
    )
    after = snapshot(manager, sid)
    event = after["audit"][-1]
    assert event["action"] == "run.refused"
    assert event["details"]["operation"] == "start_run"
    assert event["version_before"] == event["version_after"] == before["session"]["version"]
    assert after["audit"][:-1] == before["audit"]
    # The refusal's event is the audit chain's new head, on the row without a version
    # step; nothing else changed.
    assert after["session"]["audit_head"] == event["hash"]
    headless = {"audit": before["audit"], "session": before["session"]}
    assert after | headless == before
    assert after["session"] | {"audit_head": None} == before["session"] | {"audit_head": None}
    budget = manager.get_budget(user_id=USER, session_id=sid)
    assert (budget.max_tokens, budget.used_tokens) == (100, 100)
    # Another session of the user is not bound by this session's budget.
    other = manager.create_session(user_id=USER, agent="coding").session_id
    manager.start_run(session_id=other, user_id=USER)
    # Cleared: the session runs again.
    manager.clear_budget(user_id=ADMIN, admin=True, session_id=sid)
    assert manager.start_run(session_id=sid, user_id=USER).status == "RUNNING"


def test_user_cost_budget_refuses_a_step_and_the_run_finishes(store: SessionStore) -> None:
    """A user's cost budget spent by another session's run refuses add_run_step (the
    step is not stored) and start_run in every session of the user; finish_run still
    records what was spent; another user is not bound."""
    m = SessionManager(store, policy=Policy(prices=PRICES))
    s1 = m.create_session(user_id=USER, agent="coder").session_id
    s2 = m.create_session(user_id=USER, agent="coder").session_id
    kw: dict[str, Any] = {"session_id": s2, "user_id": USER}
    running = m.start_run(**kw)
    m.add_run_step(**kw, run_id=running.run_id, kind="model")
    m.set_budget(user_id=ADMIN, admin=True, target_user_id=USER, max_cost=0.001)
    _run(m, s1, usage={"input_tokens": 500}, model="m-a")  # 0.001
    with pytest.raises(BudgetExceeded) as refused:
        m.add_run_step(**kw, run_id=running.run_id, kind="tool")
    assert (refused.value.scope, refused.value.limit) == ("user", "cost")
    assert m.get_run(**kw, run_id=running.run_id).step_count == 1
    refusal = audit_of(m, s2)[-1]
    assert (refusal.action, refusal.details["operation"]) == ("run.refused", "add_run_step")
    assert refusal.details["run_id"] == running.run_id
    with pytest.raises(BudgetExceeded):
        m.start_run(session_id=s1, user_id=USER)
    done = m.finish_run(
        **kw, run_id=running.run_id, status="SUCCEEDED", usage={"output_tokens": 1}, model="m-a"
    )
    assert done.usage_entries[0].output_tokens == 1
    assert m.get_budget(user_id=USER).used_cost == pytest.approx(0.001 + 8.0 / 1_000_000)
    other = m.create_session(user_id=OTHER, agent="coder").session_id
    m.start_run(session_id=other, user_id=OTHER)


def test_budgets_need_admin_and_stay_owner_scoped(manager: SessionManager, sid: str) -> None:
    """Setting or clearing needs admin; another user's budget or session is not
    readable; all_users needs admin."""
    with pytest.raises(Forbidden):
        manager.set_budget(user_id=USER, max_tokens=1)
    with pytest.raises(Forbidden):
        manager.clear_budget(user_id=USER)
    with pytest.raises(Forbidden):
        manager.get_budget(user_id=OTHER, target_user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.get_budget(user_id=OTHER, session_id=sid)
    with pytest.raises(Forbidden):
        manager.get_usage(user_id=USER, all_users=True)
    unset = manager.get_budget(user_id=USER)
    assert (unset.max_tokens, unset.max_cost, unset.updated_at) == (None, None, None)


def test_ledger_and_budgets_go_with_the_session_and_the_user(
    manager: SessionManager, sid: str
) -> None:
    """Deleting a session takes its usage and budget; erasing the user takes the rest
    and the user's budget."""
    other = manager.create_session(user_id=USER, agent="coding").session_id
    _run(manager, sid, usage={"input_tokens": 5})
    _run(manager, other, usage={"input_tokens": 7})
    manager.set_budget(user_id=ADMIN, admin=True, session_id=sid, max_tokens=50)
    manager.set_budget(user_id=ADMIN, admin=True, target_user_id=USER, max_tokens=50)
    manager.delete_session(session_id=sid, user_id=USER)
    assert [t.group for t in manager.get_usage(user_id=USER)] == [other]
    manager.delete_user_data(user_id=USER)
    assert manager.get_usage(user_id=USER) == []
    assert manager.get_budget(user_id=USER).max_tokens is None
