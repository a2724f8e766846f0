"""Idempotency keys: a retry returns the first result and writes nothing; a different
request with the same key is an error; keys are per user and expire (DESIGN.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from contract_support import (
    ADMIN,
    OTHER,
    USER,
    Ctx,
    ProxyStore,
    dump,
    run_threads,
    snapshot,
    user_msg,
)

from agentsession import (
    IdempotencyKeyReused,
    SessionManager,
    SessionNotFound,
    StoreBusy,
    StoreError,
)
from agentsession.service import write_report
from agentsession.stores.base import SessionStore


def _kw(c: Ctx, key: str) -> dict[str, Any]:
    return {"session_id": c.sid, "user_id": c.user, "idempotency_key": key}


#: name -> (call(manager, ctx, key, variant)); variant 0 is the request, 1 a different one.
KEYED: dict[str, Any] = {
    "update_session": lambda m, c, k, v: m.update_session(**_kw(c, k), title=f"title {v}"),
    "append_message": lambda m, c, k, v: m.append_message(
        **_kw(c, k), message=user_msg(f"body {v}")
    ),
    "append_messages": lambda m, c, k, v: m.append_messages(
        **_kw(c, k),
        messages=[user_msg("q"), user_msg(f"body {v}")],
        working_memory_patch={"counter": 2},
    ),
    "update_working_memory": lambda m, c, k, v: m.update_working_memory(
        **_kw(c, k), patch={"counter": 10 + v}
    ),
    "record_tool_call": lambda m, c, k, v: m.record_tool_call(
        **_kw(c, k), tool="grep", arguments={"pattern": f"p{v}"}, result=["a"]
    ),
    "start_run": lambda m, c, k, v: m.start_run(**_kw(c, k), input={"task": v}),
    "add_run_step": lambda m, c, k, v: m.add_run_step(
        **_kw(c, k), run_id=c.run_id, kind="tool", name=f"step{v}"
    ),
    "finish_run": lambda m, c, k, v: m.finish_run(
        **_kw(c, k), run_id=c.run_id, status=("SUCCEEDED", "FAILED")[v]
    ),
    "close_session": lambda m, c, k, v: m.close_session(**_kw(c, k), reason=f"r{v}"),
    "expire_session": lambda m, c, k, v: m.expire_session(**_kw(c, k), reason=f"r{v}"),
    # The RUNNING run makes a restore of the ACTIVE session a write (it interrupts it).
    "restore_session": lambda m, c, k, v: m.restore_session(**_kw(c, k), message_limit=10 + v),
}


def _result(value: Any) -> Any:
    return dump(value)


@pytest.mark.parametrize("op", sorted(KEYED))
def test_retry_returns_first_result_and_writes_nothing(manager: SessionManager, op: str) -> None:
    """A retry with the same key and request returns the same result; no write, no audit row."""
    ctx = Ctx(manager, running=op != "start_run")
    first = KEYED[op](manager, ctx, "key-1", 0)
    after_first = snapshot(manager, ctx.sid)
    assert after_first["session"]["version"] == ctx.version + 1
    for _ in range(3):
        assert _result(KEYED[op](manager, ctx, "key-1", 0)) == _result(first)
    assert snapshot(manager, ctx.sid) == after_first


@pytest.mark.parametrize("op", sorted(KEYED))
def test_write_report_tells_a_replay_from_a_first_write(manager: SessionManager, op: str) -> None:
    """The write pipeline reports each write in the open ``write_report()``: the first
    write of a key is not a replay, every retry is."""
    ctx = Ctx(manager, running=op != "start_run")
    with write_report() as first:
        KEYED[op](manager, ctx, "key-r", 0)
    assert (first.replayed, first.writes) == (False, 1)
    with write_report() as again:
        KEYED[op](manager, ctx, "key-r", 0)
    assert (again.replayed, again.writes) == (True, 1)


@pytest.mark.parametrize("op", sorted(KEYED))
def test_same_key_different_request_is_rejected(manager: SessionManager, op: str) -> None:
    """The same key with a different request raises IdempotencyKeyReused and writes nothing."""
    ctx = Ctx(manager, running=op != "start_run")
    KEYED[op](manager, ctx, "key-1", 0)
    after_first = snapshot(manager, ctx.sid)
    with pytest.raises(IdempotencyKeyReused) as err:
        KEYED[op](manager, ctx, "key-1", 1)
    assert err.value.idempotency_key == "key-1"
    assert snapshot(manager, ctx.sid) == after_first


def test_create_session_retry_returns_the_same_session(manager: SessionManager) -> None:
    """A retried create returns the same session and creates no second one."""
    a = manager.create_session(user_id=USER, title="x", idempotency_key="create-1")
    b = manager.create_session(user_id=USER, title="x", idempotency_key="create-1")
    assert dump(a) == dump(b)
    assert [s.session_id for s in manager.list_sessions(user_id=USER).items] == [a.session_id]
    with pytest.raises(IdempotencyKeyReused):
        manager.create_session(user_id=USER, title="y", idempotency_key="create-1")
    assert len(manager.list_sessions(user_id=USER).items) == 1


def test_another_users_same_key_does_not_touch_the_first_users_data(
    manager: SessionManager,
) -> None:
    """Keys are per user: B's same key writes to B's session; A's data is untouched."""
    a = Ctx(manager, USER)
    b = Ctx(manager, OTHER)
    ma = manager.append_message(
        session_id=a.sid, user_id=USER, message=user_msg("same"), idempotency_key="K"
    )
    a_state = snapshot(manager, a.sid)
    with pytest.raises(SessionNotFound):
        manager.append_message(
            session_id=a.sid, user_id=OTHER, message=user_msg("same"), idempotency_key="K"
        )
    mb = manager.append_message(
        session_id=b.sid, user_id=OTHER, message=user_msg("same"), idempotency_key="K"
    )
    assert mb.message_id != ma.message_id and mb.session_id == b.sid
    assert snapshot(manager, a.sid) == a_state


def test_key_expires_after_retention(frozen_manager: SessionManager, clock: Any) -> None:
    """Within the retention a retry replays; after it the key is new again."""
    m = frozen_manager
    retention = m.policy.idempotency_retention_seconds
    sid = m.create_session(user_id=USER).session_id

    def send() -> Any:
        return m.append_message(
            session_id=sid, user_id=USER, message=user_msg("x"), idempotency_key="K"
        )

    first = send()
    clock.advance(retention - 1)
    assert send().message_id == first.message_id
    clock.advance(2)
    second = send()
    assert second.message_id != first.message_id and second.seq == first.seq + 1
    assert send().message_id == second.message_id


def test_sweep_purges_expired_keys_only(frozen_manager: SessionManager, clock: Any) -> None:
    """sweep_expired deletes keys past the retention and keeps younger ones."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, idempotency_key="c").session_id
    m.append_message(session_id=sid, user_id=USER, message=user_msg("1"), idempotency_key="a")
    clock.advance(m.policy.idempotency_retention_seconds + 1)
    young = m.append_message(
        session_id=sid, user_id=USER, message=user_msg("2"), idempotency_key="b"
    )
    result = m.sweep_expired()
    assert result.purged_idempotency_keys == 2
    assert m.sweep_expired().purged_idempotency_keys == 0
    again = m.append_message(
        session_id=sid, user_id=USER, message=user_msg("2"), idempotency_key="b"
    )
    assert again.message_id == young.message_id


def test_deleted_session_keys_are_gone(manager: SessionManager) -> None:
    """A retry after delete does not replay the deleted session's data."""
    s = manager.create_session(user_id=USER, idempotency_key="create")
    manager.append_message(
        session_id=s.session_id, user_id=USER, message=user_msg("x"), idempotency_key="K"
    )
    manager.delete_session(session_id=s.session_id, user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.append_message(
            session_id=s.session_id, user_id=USER, message=user_msg("x"), idempotency_key="K"
        )
    again = manager.create_session(user_id=USER, idempotency_key="create")
    assert again.session_id != s.session_id


# ------------------------------------------------------------------------- C03, C04


@pytest.mark.parametrize(
    "method",
    ["insert_messages", "put_working_memory", "advance_session", "insert_audit", "put_idempotency"],
)
def test_c03_failure_mid_transaction_then_retry(store: SessionStore, method: str) -> None:
    """C03: the store fails mid-append (+ memory 1->2): nothing changes; retry applies once."""
    proxy = ProxyStore(store)
    m = SessionManager(proxy)
    sid = m.create_session(user_id=USER, working_memory={"counter": 1}).session_id
    before = snapshot(m, sid)
    proxy.fail(method, StoreError(f"injected failure in {method}"))

    def turn() -> Any:
        return m.append_messages(
            session_id=sid,
            user_id=USER,
            messages=[user_msg("run the tests"), {"role": "assistant", "content": "ok"}],
            working_memory_patch={"counter": 2},
            idempotency_key="turn-1",
        )

    with pytest.raises(StoreError, match="injected"):
        turn()
    assert proxy.failures[0].fired
    assert snapshot(m, sid) == before
    assert m.get_working_memory(session_id=sid, user_id=USER).data == {"counter": 1}
    first = turn()
    retried = turn()
    assert dump(first) == dump(retried)
    after = snapshot(m, sid)
    assert [x["content"] for x in after["messages"]] == ["run the tests", "ok"]
    assert after["memory"]["data"] == {"counter": 2}
    assert after["session"]["version"] == before["session"]["version"] + 1
    assert len(after["audit"]) == len(before["audit"]) + 1


def test_c03_transient_failure_is_retried_without_double_write(store: SessionStore) -> None:
    """C03: a StoreBusy mid-transaction is retried by the manager; the turn lands once."""
    proxy = ProxyStore(store)
    m = SessionManager(proxy)
    sid = m.create_session(user_id=USER, working_memory={"counter": 1}).session_id
    proxy.fail("insert_audit", StoreBusy("injected lock timeout"))
    m.append_messages(
        session_id=sid,
        user_id=USER,
        messages=[user_msg("x")],
        working_memory_patch={"counter": 2},
        idempotency_key="t",
    )
    state = snapshot(m, sid)
    assert [x["content"] for x in state["messages"]] == ["x"]
    assert state["memory"]["data"] == {"counter": 2}
    assert state["session"]["version"] == 3


@pytest.mark.parametrize("retries", [1, 5, 50])
def test_c04_sequential_retries_store_one_copy(manager: SessionManager, retries: int) -> None:
    """C04: M with key K repeated N times: one stored copy, every retry the original ids/seq."""
    sid = manager.create_session(user_id=USER).session_id
    first = manager.append_message(
        session_id=sid, user_id=USER, message=user_msg("M"), idempotency_key="K"
    )
    state = snapshot(manager, sid)
    for _ in range(retries):
        again = manager.append_message(
            session_id=sid, user_id=USER, message=user_msg("M"), idempotency_key="K"
        )
        assert (again.message_id, again.seq) == (first.message_id, first.seq)
    assert snapshot(manager, sid) == state
    assert len(state["messages"]) == 1


def test_c04_concurrent_retries_store_one_copy(manager: SessionManager) -> None:
    """C04: 8 threads sending M with key K at once: one copy, all get the same message."""
    for n in range(3):
        sid = manager.create_session(user_id=USER).session_id
        out = run_threads(
            8,
            lambda i, s=sid, n=n: manager.append_message(
                session_id=s, user_id=USER, message=user_msg("M"), idempotency_key=f"K{n}"
            ),
        )
        assert not [r for r in out if isinstance(r, BaseException)], out
        assert len({(r.message_id, r.seq) for r in out}) == 1
        msgs = manager.get_messages(session_id=sid, user_id=USER).items
        assert len(msgs) == 1 and msgs[0].message_id == out[0].message_id
        assert manager.get_session(session_id=sid, user_id=USER).version == 2


def test_c04_different_body_and_other_user(manager: SessionManager) -> None:
    """C04: K with a different body is rejected; K from another user leaves A's data alone."""
    sid = manager.create_session(user_id=USER).session_id
    manager.append_message(session_id=sid, user_id=USER, message=user_msg("M"), idempotency_key="K")
    state = snapshot(manager, sid)
    with pytest.raises(IdempotencyKeyReused):
        manager.append_message(
            session_id=sid, user_id=USER, message=user_msg("M2"), idempotency_key="K"
        )
    with pytest.raises(SessionNotFound):
        manager.append_message(
            session_id=sid, user_id=OTHER, message=user_msg("M"), idempotency_key="K"
        )
    other = manager.create_session(user_id=OTHER).session_id
    manager.append_message(
        session_id=other, user_id=OTHER, message=user_msg("M"), idempotency_key="K"
    )
    assert snapshot(manager, sid) == state
    assert len(manager.get_messages(session_id=other, user_id=OTHER).items) == 1
    assert snapshot(manager, sid)["session"]["version"] == state["session"]["version"]
    assert ADMIN  # admin reads in snapshot() are side-effect free


def test_key_is_bound_to_its_session(manager: SessionManager) -> None:
    """The same key and body sent to a different session of the same user is a reuse error."""
    a = manager.create_session(user_id=USER).session_id
    b = manager.create_session(user_id=USER).session_id
    manager.append_message(session_id=a, user_id=USER, message=user_msg("M"), idempotency_key="K")
    b_state = snapshot(manager, b)
    with pytest.raises(IdempotencyKeyReused):
        manager.append_message(
            session_id=b, user_id=USER, message=user_msg("M"), idempotency_key="K"
        )
    assert snapshot(manager, b) == b_state


def test_retention_boundary_uses_timedelta(frozen_manager: SessionManager, clock: Any) -> None:
    """Exactly at the retention the key still replays (older than it, it is new)."""
    m = frozen_manager
    sid = m.create_session(user_id=USER).session_id
    first = m.append_message(
        session_id=sid, user_id=USER, message=user_msg("x"), idempotency_key="K"
    )
    clock.now += timedelta(seconds=m.policy.idempotency_retention_seconds)
    again = m.append_message(
        session_id=sid, user_id=USER, message=user_msg("x"), idempotency_key="K"
    )
    assert again.message_id == first.message_id


def test_concurrent_creates_with_one_key_make_one_session(manager: SessionManager) -> None:
    """8 threads creating with the same key at once: one session, all get its id."""
    out = run_threads(
        8,
        lambda i: manager.create_session(
            user_id=USER, agent="coding", idempotency_key="create-race"
        ),
    )
    assert not [r for r in out if isinstance(r, BaseException)], out
    assert len({r.session_id for r in out}) == 1
    assert [s.session_id for s in manager.list_sessions(user_id=USER).items] == [out[0].session_id]


def test_a_retried_delete_answers_as_the_first_and_the_key_is_bound(
    manager: SessionManager,
) -> None:
    """A delete retried with its key answers None again (the session is gone; without
    the key a second delete is SessionNotFound); the key on another session is
    IdempotencyKeyReused and deletes nothing; another user's same key is their own."""
    ctx, other = Ctx(manager), Ctx(manager)
    a = {"session_id": ctx.sid, "user_id": USER}
    manager.delete_session(**a, expected_version=ctx.version, idempotency_key="del-1")
    with write_report() as again:
        assert (
            manager.delete_session(**a, expected_version=ctx.version, idempotency_key="del-1")
            is None
        )
    assert again.replayed
    with pytest.raises(SessionNotFound):
        manager.delete_session(**a)
    with pytest.raises(SessionNotFound):
        manager.delete_session(**a, idempotency_key="del-2")
    with pytest.raises(IdempotencyKeyReused):
        manager.delete_session(session_id=other.sid, user_id=USER, idempotency_key="del-1")
    assert manager.get_session(session_id=other.sid, user_id=USER).version == other.version
    with pytest.raises(SessionNotFound):
        manager.delete_session(session_id=ctx.sid, user_id=OTHER, idempotency_key="del-1")


def test_a_delete_key_goes_with_the_owners_erasure(manager: SessionManager) -> None:
    """The record of a delete's key names the owner: erasing the owner purges it, so
    the retry then finds the session gone (SessionNotFound), never a stale answer."""
    ctx = Ctx(manager)
    manager.delete_session(session_id=ctx.sid, user_id=USER, idempotency_key="del-e")
    manager.erase_user(user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.delete_session(session_id=ctx.sid, user_id=USER, idempotency_key="del-e")
