"""Lifecycle (ACTIVE -> CLOSED / EXPIRED -> ACTIVE, delete), TTL, sweeping, runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from contract_support import (
    ADMIN,
    CONTENT_WRITES,
    OTHER,
    READS,
    USER,
    Ctx,
    ProxyStore,
    as_read,
    audit_of,
    dump,
    snapshot,
    user_msg,
)

from agentsession import (
    IllegalTransition,
    RunAlreadyRunning,
    RunNotRunning,
    RunStatus,
    Session,
    SessionManager,
    SessionNotActive,
    SessionNotFound,
    SessionStatus,
    ValidationError,
)
from agentsession.errors import StoreError
from agentsession.stores.base import SessionHead, SessionStore, StoreTransaction


def _close(m: SessionManager, ctx: Ctx) -> None:
    m.close_session(session_id=ctx.sid, user_id=USER, reason="user ended it")


def _expire(m: SessionManager, ctx: Ctx) -> None:
    m.expire_session(session_id=ctx.sid, user_id=USER)


ENDINGS = {"closed": _close, "expired": _expire}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize("op", sorted(CONTENT_WRITES))
def test_writes_to_closed_and_expired_sessions_fail(
    manager: SessionManager, ending: str, op: str
) -> None:
    """Every content write on a CLOSED or EXPIRED session: SessionNotActive, nothing written."""
    ctx = Ctx(manager, running=op != "start_run")
    ENDINGS[ending](manager, ctx)
    before = snapshot(manager, ctx.sid)
    with pytest.raises(SessionNotActive) as err:
        CONTENT_WRITES[op](manager, ctx)
    assert err.value.status == before["session"]["status"]
    assert snapshot(manager, ctx.sid) == before


@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize("op", sorted(READS))
def test_reads_work_in_every_state(manager: SessionManager, ending: str, op: str) -> None:
    """Every read works on ACTIVE, CLOSED and EXPIRED sessions and returns the same data."""
    ctx = Ctx(manager, running=False)
    active = READS[op](manager, ctx)
    ENDINGS[ending](manager, ctx)
    ended = READS[op](manager, ctx)
    if op == "get_working_memory":  # the same document; the session moved on
        assert ended.session_version > active.session_version
        assert dump(ended) == dump(active) | {"session_version": ended.session_version}
    elif op in (
        "get_messages",
        "get_messages.window",
        "get_tool_history",
        "find_tool_call",
        "get_run",
        "list_runs",
    ):
        assert dump(ended) == dump(active)


def test_close_and_expire_are_distinguishable(manager: SessionManager) -> None:
    """Closed and expired sessions differ in status, reason and timestamp fields."""
    a = manager.create_session(user_id=USER).session_id
    b = manager.create_session(user_id=USER).session_id
    closed = manager.close_session(session_id=a, user_id=USER, reason="finished")
    expired = manager.expire_session(session_id=b, user_id=USER, reason="policy")
    assert (closed.status, closed.status_reason) == (SessionStatus.CLOSED, "finished")
    assert closed.closed_at is not None and closed.expired_at is None
    assert (expired.status, expired.status_reason) == (SessionStatus.EXPIRED, "policy")
    assert expired.expired_at is not None and expired.closed_at is None
    assert manager.get_session(session_id=a, user_id=USER).status == SessionStatus.CLOSED
    by_status = {
        st: [s.session_id for s in manager.list_sessions(user_id=USER, status=st).items]
        for st in SessionStatus
    }
    assert by_status == {
        SessionStatus.ACTIVE: [],
        SessionStatus.CLOSED: [a],
        SessionStatus.EXPIRED: [b],
    }
    with pytest.raises(IllegalTransition):
        manager.close_session(session_id=b, user_id=USER)
    with pytest.raises(IllegalTransition):
        manager.expire_session(session_id=a, user_id=USER)


def test_close_twice_is_a_no_op(manager: SessionManager, sid: str) -> None:
    """Closing a CLOSED session changes nothing (no version bump, no audit row)."""
    manager.close_session(session_id=sid, user_id=USER)
    before = snapshot(manager, sid)
    manager.close_session(session_id=sid, user_id=USER)
    assert snapshot(manager, sid) == before


def test_close_cancels_a_running_run(manager: SessionManager) -> None:
    """A run RUNNING at close becomes CANCELLED."""
    ctx = Ctx(manager)
    _close(manager, ctx)
    run = manager.get_run(session_id=ctx.sid, user_id=USER, run_id=ctx.run_id)
    assert run.status == RunStatus.CANCELLED and run.ended_at is not None


def test_restore_reopens_closed(manager: SessionManager) -> None:
    """restore re-opens a CLOSED session; writes work again; history kept."""
    ctx = Ctx(manager, running=False)
    _close(manager, ctx)
    closed = manager.get_session(session_id=ctx.sid, user_id=USER)
    restored = manager.restore_session(session_id=ctx.sid, user_id=USER)
    s = restored.session
    assert s.status == SessionStatus.ACTIVE and s.version == closed.version + 1
    assert s.closed_at is None and s.status_reason is None
    assert [x.content for x in restored.messages] == ["hello", "hi"]
    assert restored.working_memory.data["goal"] == "g"
    assert len(restored.tool_calls) == 1 and len(restored.runs) == 1
    manager.append_message(session_id=ctx.sid, user_id=USER, message=user_msg("back"))


def test_restore_expired_within_window_only(frozen_manager: SessionManager, clock: Any) -> None:
    """EXPIRED restores within the policy window and not after it (IllegalTransition)."""
    m = frozen_manager
    window = m.policy.expired_restore_window_seconds
    assert window is not None
    a = m.create_session(user_id=USER).session_id
    b = m.create_session(user_id=USER).session_id
    m.expire_session(session_id=a, user_id=USER)
    m.expire_session(session_id=b, user_id=USER)
    clock.advance(window - 1)
    assert m.restore_session(session_id=a, user_id=USER).session.status == SessionStatus.ACTIVE
    clock.advance(2)
    before = snapshot(m, b)
    with pytest.raises(IllegalTransition):
        m.restore_session(session_id=b, user_id=USER)
    assert snapshot(m, b) == before


def test_restore_marks_crashed_workers_run_interrupted(manager: SessionManager) -> None:
    """A run left RUNNING (worker died without finish) is INTERRUPTED by restore."""
    ctx = Ctx(manager)
    v = ctx.version
    restored = manager.restore_session(session_id=ctx.sid, user_id=USER)
    assert restored.interrupted_run_ids == [ctx.running_run_id]
    run = manager.get_run(session_id=ctx.sid, user_id=USER, run_id=ctx.run_id)
    assert run.status == RunStatus.INTERRUPTED and run.ended_at is not None
    assert {r.run_id: r.status for r in restored.runs}[ctx.run_id] == RunStatus.INTERRUPTED
    assert restored.session.version == v + 1
    assert audit_of(manager, ctx.sid)[-1].action == "session.restored"
    new = manager.start_run(session_id=ctx.sid, user_id=USER)
    assert new.status == RunStatus.RUNNING
    again = manager.restore_session(session_id=ctx.sid, user_id=USER)
    assert again.interrupted_run_ids == [new.run_id]


def test_restore_of_an_idle_active_session_changes_nothing(manager: SessionManager) -> None:
    """Restoring an ACTIVE session with no RUNNING run keeps its version."""
    ctx = Ctx(manager, running=False)
    before = snapshot(manager, ctx.sid)
    restored = manager.restore_session(session_id=ctx.sid, user_id=USER)
    assert restored.interrupted_run_ids == []
    assert snapshot(manager, ctx.sid) == before


def test_restore_message_limit(manager: SessionManager, sid: str) -> None:
    """restore returns the newest message_limit messages, oldest first."""
    manager.append_messages(
        session_id=sid, user_id=USER, messages=[user_msg(str(i)) for i in range(10)]
    )
    r = manager.restore_session(session_id=sid, user_id=USER, message_limit=3)
    assert [x.content for x in r.messages] == ["7", "8", "9"]
    assert manager.restore_session(session_id=sid, user_id=USER, message_limit=0).messages == []


# ------------------------------------------------------------------------- TTL


def test_ttl_expires_lazily_on_access(frozen_manager: SessionManager, clock: Any) -> None:
    """An idle session past its TTL reads as EXPIRED ('ttl', expired at its deadline,
    not when the expiry was noticed) and rejects writes."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, ttl_seconds=60).session_id
    clock.advance(59)
    m.append_message(session_id=sid, user_id=USER, message=user_msg("touch"))
    deadline = clock.now + timedelta(seconds=60)
    clock.advance(59)
    assert m.get_session(session_id=sid, user_id=USER).status == SessionStatus.ACTIVE
    clock.advance(2)
    s = m.get_session(session_id=sid, user_id=USER)
    assert s.status == SessionStatus.EXPIRED and s.status_reason == "ttl"
    assert s.expired_at == deadline and s.closed_at is None
    with pytest.raises(SessionNotActive):
        m.append_message(session_id=sid, user_id=USER, message=user_msg("late"))
    events = audit_of(m, sid)
    assert [e.action for e in events].count("session.expired") == 1
    assert events[-1].actor == "system"


def test_ttl_expiry_on_a_write_persists(frozen_manager: SessionManager, clock: Any) -> None:
    """A write that finds the session due fails, and the expiry it found is stored."""
    m = frozen_manager
    ctx_sid = m.create_session(user_id=USER, ttl_seconds=10).session_id
    run = m.start_run(session_id=ctx_sid, user_id=USER)
    clock.advance(11)
    with pytest.raises(SessionNotActive):
        m.append_message(session_id=ctx_sid, user_id=USER, message=user_msg("late"))
    s = m.get_session(session_id=ctx_sid, user_id=USER)
    assert s.status == SessionStatus.EXPIRED and s.message_count == 0
    got = m.get_run(session_id=ctx_sid, user_id=USER, run_id=run.run_id)
    assert got.status == RunStatus.INTERRUPTED


def test_ttl_expiry_shows_in_listing(frozen_manager: SessionManager, clock: Any) -> None:
    """list_sessions reports a session past its TTL as EXPIRED."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, ttl_seconds=5).session_id
    clock.advance(6)
    [s] = m.list_sessions(user_id=USER).items
    assert (s.session_id, s.status) == (sid, SessionStatus.EXPIRED)
    assert m.list_sessions(user_id=USER, status="ACTIVE").items == []


def test_sweep_expires_due_sessions(frozen_manager: SessionManager, clock: Any) -> None:
    """sweep_expired expires exactly the ACTIVE sessions idle past their TTL."""
    m = frozen_manager
    due = {m.create_session(user_id=USER, ttl_seconds=30).session_id for _ in range(3)}
    later = m.create_session(user_id=USER, ttl_seconds=3600).session_id
    forever = m.create_session(user_id=OTHER).session_id
    closed = m.create_session(user_id=USER, ttl_seconds=30).session_id
    m.close_session(session_id=closed, user_id=USER)
    deadline = clock.now + timedelta(seconds=30)
    clock.advance(31)
    result = m.sweep_expired()
    assert set(result.expired_session_ids) == due
    assert m.sweep_expired().expired_session_ids == []
    for sid in due:
        s = m.get_session(session_id=sid, user_id=USER)
        assert (s.status, s.expired_at) == (SessionStatus.EXPIRED, deadline)
    assert m.get_session(session_id=later, user_id=USER).status == SessionStatus.ACTIVE
    assert m.get_session(session_id=forever, user_id=OTHER).status == SessionStatus.ACTIVE
    assert m.get_session(session_id=closed, user_id=USER).status == SessionStatus.CLOSED


def test_c34_listing_past_ttl(
    store: SessionStore, frozen_manager: SessionManager, clock: Any
) -> None:
    """C34: a session with ttl 60 s, clock +120 s: listed by status EXPIRED, ACTIVE,
    EXPIRED... it is EXPIRED every time (as it will be once expired: reason "ttl",
    expired_at its deadline) and never ACTIVE, whatever the order; listing writes
    nothing; no page is empty while its cursor says more exist."""
    m = frozen_manager
    kw: dict[str, Any] = {"user_id": USER}
    gone = m.create_session(**kw, agent="coding").session_id
    m.expire_session(session_id=gone, user_id=USER, reason="by hand")
    clock.advance(1)
    due = m.create_session(**kw, agent="coding", ttl_seconds=60)
    deadline = clock.now + timedelta(seconds=60)
    clock.advance(1)
    live = m.create_session(**kw, agent="coding", ttl_seconds=3600).session_id
    clock.advance(1)
    other_agent = m.create_session(**kw, agent="other", ttl_seconds=60).session_id
    m.create_session(user_id=OTHER, agent="coding", ttl_seconds=60)
    clock.advance(120)

    def listed(status: str | None, **more: Any) -> list[str]:
        page = m.list_sessions(**kw, status=status, **more)
        assert page.next_cursor is None
        return [s.session_id for s in page.items]

    for status in ["EXPIRED", "ACTIVE", "EXPIRED", None, "ACTIVE", "EXPIRED"]:
        expired = listed("EXPIRED")
        assert expired == [other_agent, due.session_id, gone]
        assert listed("ACTIVE") == [live]
        assert listed(status) == {"EXPIRED": expired, "ACTIVE": [live]}.get(
            status, [other_agent, live, due.session_id, gone]
        )
        assert listed("EXPIRED", agent="coding") == [due.session_id, gone]
        assert listed("ACTIVE", agent="other") == []
    everyone = m.list_sessions(user_id=ADMIN, admin=True, all_users=True, status="EXPIRED")
    assert len(everyone.items) == 4
    shown = next(
        s for s in m.list_sessions(**kw, status="EXPIRED").items if s.session_id == due.session_id
    )
    assert (shown.status, shown.status_reason, shown.expired_at, shown.expires_at) == (
        SessionStatus.EXPIRED,
        "ttl",
        deadline,
        None,
    )
    assert shown.version == due.version and shown.updated_at == due.updated_at
    with store.transaction(write=False) as tx:  # listing wrote nothing
        stored = tx.get_session(due.session_id)
    assert stored is not None and stored.status == SessionStatus.ACTIVE
    assert stored.version == due.version

    pages, cursor = [], None
    while True:
        page = m.list_sessions(**kw, status="EXPIRED", limit=1, cursor=cursor)
        assert page.items, "an empty page while the cursor said more exist"
        pages += [s.session_id for s in page.items]
        if (cursor := page.next_cursor) is None:
            break
    assert pages == [other_agent, due.session_id, gone]
    only = m.list_sessions(**kw, status="ACTIVE", limit=1)
    assert [s.session_id for s in only.items] == [live] and only.next_cursor is None

    # The next access stores the expiry (version + 1); it reads as it was listed.
    got = m.get_session(session_id=due.session_id, user_id=USER)
    assert (got.status, got.status_reason, got.expired_at) == (
        SessionStatus.EXPIRED,
        "ttl",
        deadline,
    )
    assert got.version == due.version + 1
    assert due.session_id in listed("EXPIRED") and due.session_id not in listed("ACTIVE")


class _RacingStore(ProxyStore):
    """Counts write transactions, and runs ``before_write`` once before the next one
    opens (a writer racing the sweep between its listing of due sessions and a batch)."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.writes = 0
        self.before_write: Callable[[], object] | None = None

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[StoreTransaction]:
        if write:
            self.writes += 1
            race, self.before_write = self.before_write, None
            if race is not None:
                race()
        with super().transaction(write=write) as tx:
            yield tx


def _expired_once_each(m: SessionManager, session_ids: set[str]) -> None:
    """Each session has exactly one expiry event, by the system, one version step."""
    for sid in session_ids:
        [event] = [e for e in audit_of(m, sid) if e.action == "session.expired"]
        assert (event.actor, event.version_before, event.version_after) == ("system", 1, 2)
        assert event.details["reason"] == "ttl"


@pytest.mark.servers_slow  # 250 sessions: seconds per server store
def test_sweep_expires_in_batches(store: SessionStore, clock: Any) -> None:
    """250 due sessions are expired in 3 write transactions (batches of 100) plus the
    purge, each with its own audit event and version step; a session restored between
    the sweep's listing and its batch is skipped, not expired again."""
    racing = _RacingStore(store)
    m = SessionManager(racing, clock=clock)
    due = {m.create_session(user_id=USER, ttl_seconds=30).session_id for _ in range(250)}
    clock.advance(31)
    racer = min(due)  # equal deadlines: due in session_id order, so in the first batch
    other = SessionManager(store, clock=clock)
    racing.before_write = lambda: other.restore_session(session_id=racer, user_id=USER)
    racing.writes = 0
    result = m.sweep_expired()
    assert racing.writes == 3 + 1
    assert sorted(result.expired_session_ids) == sorted(due - {racer})
    assert result.failed_session_ids == []
    _expired_once_each(m, due - {racer})
    assert m.get_session(session_id=racer, user_id=USER).status == SessionStatus.ACTIVE


@pytest.mark.servers_slow  # 250 sessions: seconds per server store
def test_sweep_failure_in_one_batch_loses_no_other(store: SessionStore, clock: Any) -> None:
    """A store failure inside the second batch: that batch is retried one session per
    transaction, the first and third batches stand; the one session that fails again is
    reported, and the next sweep expires it."""
    proxy = ProxyStore(store)
    m = SessionManager(proxy, clock=clock)
    due = {m.create_session(user_id=USER, ttl_seconds=30).session_id for _ in range(250)}
    clock.advance(31)
    proxy.fail("update_session", StoreError("injected"), nth=150)  # inside batch 2
    proxy.fail("update_session", StoreError("injected again"), nth=1)  # its first, alone
    result = m.sweep_expired()
    [failed] = result.failed_session_ids
    assert sorted(result.expired_session_ids) == sorted(due - {failed})
    assert m.sweep_expired().expired_session_ids == [failed]
    _expired_once_each(m, due)


def test_ttl_restore_restarts_the_clock(frozen_manager: SessionManager, clock: Any) -> None:
    """A restored TTL session gets a fresh expires_at from the restore time."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, ttl_seconds=60).session_id
    clock.advance(61)
    s = m.restore_session(session_id=sid, user_id=USER).session
    assert s.status == SessionStatus.ACTIVE
    assert s.expires_at == clock.now + timedelta(seconds=60)


# ---------------------------------------------------------------------- delete


def test_delete_removes_everything(manager: SessionManager) -> None:
    """After delete every call on the id is SessionNotFound, a second delete too."""
    ctx = Ctx(manager)
    manager.delete_session(session_id=ctx.sid, user_id=USER)
    for name, read in READS.items():
        if name == "get_audit_log":
            continue
        with pytest.raises(SessionNotFound):
            read(manager, ctx)
        with pytest.raises(SessionNotFound):
            read(manager, ctx, ADMIN, admin=True)
    with pytest.raises(SessionNotFound):
        manager.delete_session(session_id=ctx.sid, user_id=USER)
    assert manager.list_sessions(user_id=USER).items == []


def test_delete_leaves_a_tombstone_for_admins_only(manager: SessionManager) -> None:
    """One content-free session.deleted event stays, readable by an admin only."""
    ctx = Ctx(manager)
    manager.delete_session(session_id=ctx.sid, user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.get_audit_log(session_id=ctx.sid, user_id=USER)
    [tomb] = manager.get_audit_log(session_id=ctx.sid, user_id=ADMIN, admin=True).items
    assert tomb.action == "session.deleted" and tomb.actor == tomb.user_id != USER
    assert tomb.version_before == ctx.version and tomb.version_after is None
    assert "hello" not in str(dump(tomb))


@pytest.mark.parametrize("ending", ["active", "closed", "expired"])
def test_delete_works_in_every_status(manager: SessionManager, ending: str) -> None:
    """delete works on ACTIVE, CLOSED and EXPIRED sessions."""
    ctx = Ctx(manager)
    if ending != "active":
        ENDINGS[ending](manager, ctx)
    manager.delete_session(session_id=ctx.sid, user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.get_session(session_id=ctx.sid, user_id=USER)


def test_delete_user_data_erases_only_that_user(manager: SessionManager) -> None:
    """delete_user_data removes every session of the user, in any status, and their keys."""
    mine = [Ctx(manager, USER) for _ in range(3)]
    _close(manager, mine[1])
    theirs = Ctx(manager, OTHER)
    before = snapshot(manager, theirs.sid)
    manager.create_session(user_id=USER, idempotency_key="create-k")
    assert manager.delete_user_data(user_id=USER) == 4
    assert manager.list_sessions(user_id=USER).items == []
    for c in mine:
        with pytest.raises(SessionNotFound):
            manager.get_session(session_id=c.sid, user_id=USER)
        [tomb] = manager.get_audit_log(session_id=c.sid, user_id=ADMIN, admin=True).items
        assert tomb.action == "session.deleted"
    assert snapshot(manager, theirs.sid) == before
    fresh = manager.create_session(user_id=USER, idempotency_key="create-k")
    assert [s.session_id for s in manager.list_sessions(user_id=USER).items] == [fresh.session_id]
    assert manager.delete_user_data(user_id=USER, target_user_id="nobody", admin=True) == 0


def test_c25_delete_cascade_leaves_nothing_in_the_store(store: SessionStore) -> None:
    """C25: after delete the store protocol finds no child rows; reusing the id shows it empty."""
    m = SessionManager(store)
    ctx = Ctx(m)
    kw = {"session_id": ctx.sid, "user_id": USER}
    m.append_message(**kw, message=user_msg("x"), idempotency_key="k1")
    call = m.record_tool_call(**kw, tool="t", arguments={"a": 1}, call_id="c1")
    m.add_run_step(**kw, run_id=ctx.run_id, kind="model")
    original: Session = m.get_session(**kw)
    m.delete_session(**kw)
    with store.transaction(write=False) as tx:
        assert tx.get_session(ctx.sid) is None
        assert tx.get_messages(ctx.sid) == []
        assert tx.get_working_memory(ctx.sid) is None
        assert tx.list_tool_calls(ctx.sid) == []
        assert tx.get_tool_call(ctx.sid, call.call_id) is None
        assert tx.find_tool_call(ctx.sid, tool="t", arguments_hash=call.arguments_hash) is None
        assert tx.list_runs(ctx.sid) == []
        assert tx.get_run(ctx.sid, ctx.run_id) is None
        assert tx.get_run(ctx.sid, ctx.finished_run_id) is None
        assert tx.get_idempotency(USER, "append_messages", "k1") is None
        assert [e.action for e in tx.list_audit(ctx.sid)] == ["session.deleted"]
    # Reuse the id at the store level: the new session must start empty.
    reborn = original.model_copy(
        update={"version": 1, "message_count": 0, "run_count": 0, "tool_call_count": 0}
    )
    with store.transaction(write=True) as tx:
        tx.insert_session(reborn)
    assert m.get_messages(**kw).items == []
    assert m.get_working_memory(**kw).data == {}
    assert m.get_tool_history(**kw).items == []
    assert m.list_runs(**kw).items == []
    assert m.find_tool_call(**kw, tool="t", arguments={"a": 1}) is None
    m.append_message(**kw, message=user_msg("new life"))
    assert [x.seq for x in m.get_messages(**kw).items] == [1]
    m.delete_session(**kw)
    with pytest.raises(SessionNotFound):
        m.delete_session(**kw)


# ------------------------------------------------------------------------ runs


def test_at_most_one_running_run(manager: SessionManager, sid: str) -> None:
    """A second start_run while one is RUNNING raises RunAlreadyRunning and writes nothing."""
    first = manager.start_run(session_id=sid, user_id=USER, input="a")
    before = snapshot(manager, sid)
    with pytest.raises(RunAlreadyRunning) as err:
        manager.start_run(session_id=sid, user_id=USER, input="b")
    assert err.value.run_id == first.run_id
    assert snapshot(manager, sid) == before
    manager.finish_run(session_id=sid, user_id=USER, run_id=first.run_id, status="SUCCEEDED")
    second = manager.start_run(session_id=sid, user_id=USER, input="b")
    assert (first.seq, second.seq) == (1, 2)
    runs = manager.list_runs(session_id=sid, user_id=USER).items
    assert [(r.run_id, r.status) for r in runs] == [
        (first.run_id, RunStatus.SUCCEEDED),
        (second.run_id, RunStatus.RUNNING),
    ]
    assert [
        r.run_id for r in manager.list_runs(session_id=sid, user_id=USER, status="RUNNING").items
    ] == [second.run_id]


def test_concurrent_start_run_only_one_wins(manager: SessionManager) -> None:
    """Eight threads starting a run at once: exactly one RUNNING run exists afterwards."""
    from contract_support import run_threads

    sid = manager.create_session(user_id=USER).session_id
    out = run_threads(8, lambda i: manager.start_run(session_id=sid, user_id=USER, input=i))
    wins = [r for r in out if not isinstance(r, BaseException)]
    assert len(wins) == 1, out
    assert all(isinstance(r, RunAlreadyRunning) for r in out if r is not wins[0])
    assert len(manager.list_runs(session_id=sid, user_id=USER, status="RUNNING").items) == 1


def test_steps_are_numbered_and_kept(manager: SessionManager, sid: str) -> None:
    """Steps are numbered 0, 1, 2... and returned with the run, in order."""
    run = manager.start_run(session_id=sid, user_id=USER, input={"task": "fix"})
    kinds = ["model", "tool", "message", "model"]
    steps = [
        manager.add_run_step(
            session_id=sid,
            user_id=USER,
            run_id=run.run_id,
            kind=k,
            name=f"n{i}",
            input={"i": i},
            output=[i],
        )
        for i, k in enumerate(kinds)
    ]
    assert [s.index for s in steps] == [0, 1, 2, 3]
    got = manager.get_run(session_id=sid, user_id=USER, run_id=run.run_id)
    assert [(s.index, s.kind, s.name, s.input, s.output) for s in got.steps] == [
        (i, k, f"n{i}", {"i": i}, [i]) for i, k in enumerate(kinds)
    ]
    assert got.input == {"task": "fix"}


@pytest.mark.parametrize("final", ["SUCCEEDED", "FAILED", "CANCELLED"])
def test_finish_statuses_and_usage(manager: SessionManager, sid: str, final: str) -> None:
    """finish_run stores the status, error, output and usage; the run cannot be finished twice."""
    run = manager.start_run(session_id=sid, user_id=USER)
    usage = {"input_tokens": 812, "output_tokens": 95, "total_tokens": 907}
    done = manager.finish_run(
        session_id=sid,
        user_id=USER,
        run_id=run.run_id,
        status=final,
        error="boom" if final == "FAILED" else None,
        output={"answer": 42},
        usage=usage,
    )
    got = manager.get_run(session_id=sid, user_id=USER, run_id=run.run_id)
    assert dump(got) == dump(as_read(done)) and done.session_version == 3
    assert (got.status, got.usage, got.output) == (RunStatus(final), usage, {"answer": 42})
    assert got.ended_at is not None and got.ended_at >= got.started_at
    assert got.error == ("boom" if final == "FAILED" else None)
    before = snapshot(manager, sid)
    with pytest.raises(RunNotRunning):
        manager.finish_run(session_id=sid, user_id=USER, run_id=run.run_id, status="SUCCEEDED")
    with pytest.raises(RunNotRunning):
        manager.add_run_step(session_id=sid, user_id=USER, run_id=run.run_id, kind="model")
    assert snapshot(manager, sid) == before


@pytest.mark.store_independent
@pytest.mark.parametrize("bad", ["RUNNING", "PENDING", "INTERRUPTED", "done"])
def test_finish_rejects_non_final_statuses(manager: SessionManager, sid: str, bad: str) -> None:
    """finish_run accepts only SUCCEEDED, FAILED, CANCELLED."""
    run = manager.start_run(session_id=sid, user_id=USER)
    with pytest.raises(ValidationError):
        manager.finish_run(session_id=sid, user_id=USER, run_id=run.run_id, status=bad)
    got = manager.get_run(session_id=sid, user_id=USER, run_id=run.run_id)
    assert got.status == RunStatus.RUNNING


# ------------------------------------------- TTL changes, restore windows, due sessions


def test_update_session_ttl_takes_effect(frozen_manager: SessionManager, clock: Any) -> None:
    """Setting a TTL later makes the session expire; clearing it keeps the session ACTIVE."""
    m = frozen_manager
    a = m.create_session(user_id=USER).session_id
    b = m.create_session(user_id=USER, ttl_seconds=60).session_id
    m.update_session(session_id=a, user_id=USER, ttl_seconds=60)
    m.update_session(session_id=b, user_id=USER, ttl_seconds=None)
    clock.advance(61)
    assert m.get_session(session_id=a, user_id=USER).status == SessionStatus.EXPIRED
    assert m.get_session(session_id=b, user_id=USER).status == SessionStatus.ACTIVE


def test_restore_window_zero_means_never(store: SessionStore, clock: Any) -> None:
    """Policy(expired_restore_window_seconds=0): an EXPIRED session is never restored."""
    from agentsession import Policy

    m = SessionManager(store, clock=clock, policy=Policy(expired_restore_window_seconds=0))
    sid = m.create_session(user_id=USER).session_id
    m.expire_session(session_id=sid, user_id=USER)
    with pytest.raises(IllegalTransition):
        m.restore_session(session_id=sid, user_id=USER)


def test_restore_window_none_means_always(store: SessionStore, clock: Any) -> None:
    """Policy(expired_restore_window_seconds=None): an EXPIRED session restores at any age."""
    from agentsession import Policy

    m = SessionManager(store, clock=clock, policy=Policy(expired_restore_window_seconds=None))
    sid = m.create_session(user_id=USER).session_id
    m.expire_session(session_id=sid, user_id=USER)
    clock.advance(400 * 86400)
    assert m.restore_session(session_id=sid, user_id=USER).session.status == SessionStatus.ACTIVE


@pytest.mark.parametrize("action", ["expire", "close"])
def test_lifecycle_call_on_a_due_session_acts_as_on_expired(
    frozen_manager: SessionManager, clock: Any, action: str
) -> None:
    """On a session past its TTL, expire is a no-op and close is an IllegalTransition,
    exactly as on a session that was already marked EXPIRED."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, ttl_seconds=10).session_id
    clock.advance(11)
    if action == "expire":
        assert m.expire_session(session_id=sid, user_id=USER).status == SessionStatus.EXPIRED
    else:
        with pytest.raises(IllegalTransition):
            m.close_session(session_id=sid, user_id=USER)


def test_a_session_head_is_the_head_of_the_session(store: SessionStore, clock: Any) -> None:
    """get_session_head answers what SessionHead.of(get_session) answers, field for field
    and of the same types: with a TTL and a leased run, closed, with messages, and
    None for a session that is not there."""
    m = SessionManager(store, clock=clock)
    leased = m.create_session(user_id=USER, ttl_seconds=60).session_id
    m.append_messages(session_id=leased, user_id=USER, messages=[user_msg("a"), user_msg("b")])
    m.start_run(session_id=leased, user_id=USER, input="task", lease_seconds=30)
    closed = m.create_session(user_id=OTHER).session_id
    m.close_session(session_id=closed, user_id=OTHER)
    with store.transaction(write=False) as tx:
        for sid in (leased, closed):
            s = tx.get_session(sid)
            head = tx.get_session_head(sid)
            assert s is not None and head == SessionHead.of(s)
            assert [type(v) for v in head] == [type(v) for v in SessionHead.of(s)]
        assert tx.get_session_head("ses_" + "0" * 26) is None
    assert head is not None and head.status is SessionStatus.CLOSED
