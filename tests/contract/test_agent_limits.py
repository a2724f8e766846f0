"""A principal limited to agents (:func:`agentsession.principal.limited_to_agents`, set
by the HTTP service from a key made with ``--agent``): a session of another agent is
exactly a missing one on every method, nothing is written; creating one is Forbidden;
listings, counts, search and usage read only the allowed agents' sessions."""

from __future__ import annotations

import copy

import pytest
from contract_support import ALL_SESSION_OPS, USER, Ctx, missing_session_id, snapshot

from agentsession import Forbidden, SessionManager, SessionNotFound
from agentsession.principal import Principal, limited_to_agents

pytestmark = pytest.mark.store_independent


@pytest.mark.parametrize("op", sorted(ALL_SESSION_OPS))
def test_c31_another_agents_session_is_indistinguishable_from_missing(
    manager: SessionManager, op: str
) -> None:
    ctx = Ctx(manager, USER, running=op != "start_run")  # of the agent "coding"
    before = snapshot(manager, ctx.sid)
    with limited_to_agents(["support"]), pytest.raises(SessionNotFound) as foreign:
        ALL_SESSION_OPS[op](manager, ctx, USER)
    ghost = copy.copy(ctx)
    ghost.sid = missing_session_id()
    with pytest.raises(SessionNotFound) as missing:
        ALL_SESSION_OPS[op](manager, ghost, USER)
    a, b = foreign.value.to_dict(), missing.value.to_dict()
    assert a["message"].replace(ctx.sid, "<id>") == b["message"].replace(ghost.sid, "<id>")
    assert snapshot(manager, ctx.sid) == before


@pytest.mark.parametrize("op", sorted(ALL_SESSION_OPS))
def test_c31_the_allowed_agents_session_works(manager: SessionManager, op: str) -> None:
    ctx = Ctx(manager, USER, running=op != "start_run")
    with limited_to_agents(["coding", "support"]):
        ALL_SESSION_OPS[op](manager, ctx, USER)


def test_c31_creating_and_listing_stay_within_the_agents(manager: SessionManager) -> None:
    mine = manager.create_session(user_id=USER, agent="support", title="hello there")
    theirs = manager.create_session(user_id=USER, agent="billing", title="hello again")
    with limited_to_agents(["support"]):
        with pytest.raises(Forbidden):
            manager.create_session(user_id=USER, agent="billing")
        listed = manager.list_sessions(user_id=USER).items
        assert [s.session_id for s in listed] == [mine.session_id]
        assert manager.count_sessions(user_id=USER) == 1
        hits = manager.search(user_id=USER, query="hello").items
        assert {h.session_id for h in hits} == {mine.session_id}
        for call in (manager.list_sessions, manager.count_sessions, manager.get_usage):
            with pytest.raises(Forbidden):
                call(user_id=USER, agent="billing")  # type: ignore[operator]
        with pytest.raises(Forbidden):
            manager.changes(user_id=USER)
        with pytest.raises(Forbidden):
            manager.delete_user_data(user_id=USER)
        with pytest.raises(Forbidden):
            manager.set_budget(user_id=USER, admin=True, max_tokens=10)
        with pytest.raises(Forbidden):
            manager.get_shared_memory(scope="user", agent="billing", user_id=USER)
        assert manager.changes(user_id=USER, session_id=mine.session_id).items
        with pytest.raises(SessionNotFound):
            manager.changes(user_id=USER, session_id=theirs.session_id)
    with limited_to_agents(["support", "billing"]), pytest.raises(Forbidden):
        manager.list_sessions(user_id=USER)  # several agents: name one
    assert manager.count_sessions(user_id=USER) == 2  # the limit ends with the block


def test_c31_a_principal_takes_the_limit_of_its_context() -> None:
    assert Principal("alice").agents is None
    with limited_to_agents(["b", "a"]):
        assert Principal("alice").agents == frozenset({"a", "b"})
        assert Principal("alice", agents=None).agents is None
        assert Principal("alice").may_see("alice", "a")
        assert not Principal("alice").may_see("alice", "c")
        assert not Principal("alice").may_see("bob", "a")
