"""Ownership: another user's session behaves exactly like a missing one on every method;
admins act across users; malformed ids are rejected before any lookup (C30)."""

from __future__ import annotations

import copy

import pytest
from contract_support import (
    ADMIN,
    ALL_SESSION_OPS,
    OTHER,
    USER,
    Ctx,
    ProxyStore,
    audit_of,
    missing_session_id,
    snapshot,
    user_msg,
)

from agentsession import Forbidden, SessionManager, SessionNotFound, ValidationError
from agentsession.stores.base import SessionStore

DESTRUCTIVE = {"delete_session"}


def _error(m: SessionManager, op: str, ctx: Ctx, user: str) -> SessionNotFound:
    with pytest.raises(SessionNotFound) as err:
        ALL_SESSION_OPS[op](m, ctx, user)
    assert type(err.value) is SessionNotFound
    return err.value


@pytest.mark.store_independent
@pytest.mark.parametrize("op", sorted(ALL_SESSION_OPS))
def test_c30_other_users_session_is_indistinguishable_from_missing(
    manager: SessionManager, op: str
) -> None:
    """C30: user B on A's session gets exactly what a missing id gets; nothing is written."""
    ctx = Ctx(manager, USER, running=op != "start_run")
    before = snapshot(manager, ctx.sid)
    foreign = _error(manager, op, ctx, OTHER)
    ghost = copy.copy(ctx)
    ghost.sid = missing_session_id()
    missing = _error(manager, op, ghost, USER)
    assert foreign.session_id == ctx.sid and missing.session_id == ghost.sid
    assert str(foreign).replace(ctx.sid, "<id>") == str(missing).replace(ghost.sid, "<id>")
    a, b = foreign.to_dict(), missing.to_dict()
    a["session_id"] = b["session_id"] = "<id>"
    assert a["message"].replace(ctx.sid, "<id>") == b["message"].replace(ghost.sid, "<id>")
    a["message"] = b["message"] = ""
    assert a == b
    assert snapshot(manager, ctx.sid) == before


@pytest.mark.store_independent
@pytest.mark.parametrize("op", sorted(ALL_SESSION_OPS))
def test_admin_acts_across_users(manager: SessionManager, op: str) -> None:
    """admin=True may call every method on another user's session; audited as the admin."""
    ctx = Ctx(manager, USER, running=op != "start_run")
    n_audit = len(audit_of(manager, ctx.sid))
    ALL_SESSION_OPS[op](manager, ctx, ADMIN, admin=True)
    if op in DESTRUCTIVE:
        with pytest.raises(SessionNotFound):
            manager.get_session(session_id=ctx.sid, user_id=USER)
        return
    events = audit_of(manager, ctx.sid)
    if len(events) > n_audit:
        assert {e.actor for e in events[n_audit:]} == {ADMIN}


def test_list_sessions_never_shows_another_users(manager: SessionManager) -> None:
    """list_sessions returns only the caller's sessions; all users only for an admin."""
    mine = {manager.create_session(user_id=USER).session_id for _ in range(3)}
    theirs = {manager.create_session(user_id=OTHER).session_id for _ in range(2)}
    assert {s.session_id for s in manager.list_sessions(user_id=USER).items} == mine
    assert {s.session_id for s in manager.list_sessions(user_id=OTHER).items} == theirs
    assert manager.list_sessions(user_id="carol").items == []
    with pytest.raises(Forbidden):
        manager.list_sessions(user_id=USER, all_users=True)
    everyone = manager.list_sessions(user_id=ADMIN, all_users=True, admin=True).items
    assert {s.session_id for s in everyone} == mine | theirs


@pytest.mark.store_independent
@pytest.mark.parametrize("bad_user", ["", " ", "a/b", "x" * 129, None, "al\x00ice"])
def test_malformed_user_ids_are_rejected(manager: SessionManager, bad_user: object) -> None:
    """An empty or malformed user id is a ValidationError, never 'every user'."""
    manager.create_session(user_id=USER)
    with pytest.raises(ValidationError):
        manager.list_sessions(user_id=bad_user)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        manager.create_session(user_id=bad_user)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        manager.delete_user_data(user_id=bad_user)  # type: ignore[arg-type]
    assert len(manager.list_sessions(user_id=USER).items) == 1


def test_delete_user_data_of_another_user_needs_admin(manager: SessionManager) -> None:
    """Erasing another user's data without admin is rejected and deletes nothing."""
    b = Ctx(manager, OTHER)
    before = snapshot(manager, b.sid)
    with pytest.raises(Forbidden):
        manager.delete_user_data(user_id=USER, target_user_id=OTHER)
    assert snapshot(manager, b.sid) == before
    assert manager.delete_user_data(user_id=ADMIN, target_user_id=OTHER, admin=True) == 1
    with pytest.raises(SessionNotFound):
        manager.get_session(session_id=b.sid, user_id=OTHER)


BAD_IDS = [
    "../x",
    "ses_%2F..",
    "ses_%2e%2e%2fetc",
    "ses_../../etc/passwd",
    "ses_" + "a" * 10_240,
    "x" * 10_240,
    "",
    " ses_aaaaaaaaaaaaaaaaaaaaaaaaaa",
    "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa\x00",
    "SES_AAAAAAAAAAAAAAAAAAAAAAAAAA",
    "run_aaaaaaaaaaaaaaaaaaaaaaaaaa",
    "ses_aaaaaaaaaaaaaaaaaaaaaaaaa'",
    "ses_*",
    "ses_%",
]


@pytest.mark.store_independent
@pytest.mark.parametrize("op", sorted(ALL_SESSION_OPS))
def test_c30_malformed_ids_rejected_before_any_lookup(store: SessionStore, op: str) -> None:
    """C30: ids like ../x, url-encoded /, 10 kB: ValidationError, no store call, nothing written."""
    proxy = ProxyStore(store)
    m = SessionManager(proxy)
    ctx = Ctx(m, USER, running=op != "start_run")
    before = snapshot(m, ctx.sid)
    for bad in BAD_IDS:
        ghost = copy.copy(ctx)
        ghost.sid = bad
        proxy.calls.clear()
        with pytest.raises(ValidationError) as err:
            ALL_SESSION_OPS[op](m, ghost, USER)
        assert err.value.field == "session_id", (bad, err.value)
        assert proxy.calls == [], (bad, proxy.calls)
    assert snapshot(m, ctx.sid) == before


@pytest.mark.store_independent
def test_c30_full_matrix_from_the_case(manager: SessionManager) -> None:
    """C30: B's get, list, memory update, append, run, close, delete, key reuse all look missing."""
    a = Ctx(manager, USER)
    key = "shared-key"
    manager.append_message(
        session_id=a.sid, user_id=USER, message=user_msg("m"), idempotency_key=key
    )
    before = snapshot(manager, a.sid)
    attempts = [
        lambda: manager.get_session(session_id=a.sid, user_id=OTHER),
        lambda: manager.get_messages(session_id=a.sid, user_id=OTHER).items,
        lambda: manager.update_working_memory(session_id=a.sid, user_id=OTHER, data={"x": 1}),
        lambda: manager.append_message(
            session_id=a.sid, user_id=OTHER, message=user_msg("m"), idempotency_key=key
        ),
        lambda: manager.start_run(session_id=a.sid, user_id=OTHER),
        lambda: manager.close_session(session_id=a.sid, user_id=OTHER),
        lambda: manager.delete_session(session_id=a.sid, user_id=OTHER),
    ]
    for attempt in attempts:
        with pytest.raises(SessionNotFound):
            attempt()
    assert a.sid not in {s.session_id for s in manager.list_sessions(user_id=OTHER).items}
    assert snapshot(manager, a.sid) == before
