"""Run leases on every store: a run started with ``lease_seconds`` holds a lease that
heartbeats extend (no version step); once it lapses the run is INTERRUPTED on the next
access (a write or a read) or by the sweep, its unanswered calls are answered, and every
write tagged with it is refused; runs without a lease behave as before."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from contract_support import OTHER, USER

from agentsession import (
    IdempotencyKeyReused,
    RunLeaseExpired,
    RunNotRunning,
    SessionManager,
    SessionNotFound,
    ValidationError,
)
from agentsession.models import RunStatus
from agentsession.service.changes.interrupted import SYNTHETIC
from agentsession.service.transitions import LEASE_LAPSED
from frozen_clock import FrozenClock

LEASE = 30.0


def _kw(sid: str) -> dict[str, Any]:
    return {"session_id": sid, "user_id": USER}


def _call(run_id: str, call_id: str = "call_1") -> dict[str, Any]:
    """An assistant message making one chat-completions tool call, tagged with the run."""
    function = {"name": "run_command", "arguments": json.dumps({"command": "ls"})}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        "run_id": run_id,
    }


def _actions(m: SessionManager, sid: str) -> list[str]:
    return [e.action for e in m.get_audit_log(**_kw(sid)).items]


@pytest.fixture
def leased(frozen_manager: SessionManager, sid: str) -> str:
    """The id of a RUNNING run of ``sid`` started with a lease of LEASE seconds."""
    return frozen_manager.start_run(**_kw(sid), input="task", lease_seconds=LEASE).run_id


def test_start_run_sets_the_lease(
    frozen_manager: SessionManager, sid: str, clock: FrozenClock
) -> None:
    """The run holds its lease until started_at + lease_seconds; the session row carries
    the same deadline, and the audit event says a lease was taken."""
    m = frozen_manager
    run = m.start_run(**_kw(sid), lease_seconds=LEASE)
    deadline = clock.now + timedelta(seconds=LEASE)
    assert (run.lease_seconds, run.lease_expires_at) == (LEASE, deadline)
    assert m.get_run(**_kw(sid), run_id=run.run_id).lease_expires_at == deadline
    assert m.get_session(**_kw(sid)).lease_expires_at == deadline
    started = m.get_audit_log(**_kw(sid)).items[-1]
    assert started.action == "run.started" and started.details["lease_seconds"] == LEASE


def test_heartbeat_extends_the_lease_without_a_version_step(
    frozen_manager: SessionManager, sid: str, leased: str, clock: FrozenClock
) -> None:
    """A heartbeat moves the deadline to now + the lease (or a new one), and nothing
    else: the version, the audit log and another writer's expected_version stay."""
    m = frozen_manager
    before = m.get_session(**_kw(sid))
    audit = _actions(m, sid)
    clock.advance(20)
    beat = m.heartbeat_run(**_kw(sid), run_id=leased)
    assert beat.lease_expires_at == clock.now + timedelta(seconds=LEASE)
    assert beat.status == RunStatus.RUNNING and beat.session_version == before.version
    clock.advance(25)  # past the first deadline, within the extended one
    longer = m.heartbeat_run(**_kw(sid), run_id=leased, lease_seconds=120)
    assert (longer.lease_seconds, longer.lease_expires_at) == (
        120,
        clock.now + timedelta(seconds=120),
    )
    after = m.get_session(**_kw(sid))
    assert after.version == before.version and after.lease_expires_at == longer.lease_expires_at
    assert _actions(m, sid) == audit
    m.append_message(
        **_kw(sid), message={"role": "user", "content": "hi"}, expected_version=before.version
    )
    assert m.get_run(**_kw(sid), run_id=leased).status == RunStatus.RUNNING


def test_lapse_interrupts_on_the_next_write_and_answers_open_calls(
    frozen_manager: SessionManager, sid: str, leased: str, clock: FrozenClock
) -> None:
    """The next write after the deadline first stores the lapse (actor system, its own
    version step): the run INTERRUPTED at its deadline, its open call answered with a
    synthetic result; then the write itself runs."""
    m = frozen_manager
    m.append_message(**_kw(sid), message=_call(leased))
    deadline = m.get_run(**_kw(sid), run_id=leased).lease_expires_at
    version = m.get_session(**_kw(sid)).version
    clock.advance(LEASE + 1)
    written = m.append_message(**_kw(sid), message={"role": "user", "content": "anyone?"})
    run = m.get_run(**_kw(sid), run_id=leased)
    assert (run.status, run.ended_at, run.error) == (RunStatus.INTERRUPTED, deadline, LEASE_LAPSED)
    history = m.get_messages(**_kw(sid)).items
    synthetic = history[-2]
    assert (synthetic.role, synthetic.tool_call_id, synthetic.run_id) == ("tool", "call_1", leased)
    assert synthetic.metadata == SYNTHETIC and history[-1].content == "anyone?"
    assert written.session_version == version + 2
    lapse = [e for e in m.get_audit_log(**_kw(sid)).items if e.action == "run.lease_expired"]
    assert [(e.actor, e.details) for e in lapse] == [
        ("system", {"run_id": leased, "interrupted_calls": ["call_1"]})
    ]
    assert m.get_session(**_kw(sid)).lease_expires_at is None


def test_reads_never_show_a_lapsed_run_running(
    frozen_manager: SessionManager, sid: str, leased: str, clock: FrozenClock
) -> None:
    """Reads store the lapse first, as they do a due TTL expiry: whichever read comes
    first, the run reads INTERRUPTED, and the lapse is stored once."""
    m = frozen_manager
    clock.advance(LEASE)  # the deadline itself counts as lapsed
    for read in (
        lambda: m.get_run(**_kw(sid), run_id=leased),
        lambda: m.list_runs(**_kw(sid)).items[-1],
        lambda: m.list_runs(**_kw(sid), status="RUNNING").items,
    ):
        got = read()
        assert got == [] or got.status == RunStatus.INTERRUPTED  # type: ignore[union-attr]
    assert _actions(m, sid).count("run.lease_expired") == 1


def test_sweep_interrupts_lapsed_runs_only(
    frozen_manager: SessionManager, clock: FrozenClock
) -> None:
    """sweep_expired interrupts the runs whose lease lapsed, oldest deadline first, and
    leaves live leases and runs without one alone."""
    m = frozen_manager
    sids = [m.create_session(user_id=USER).session_id for _ in range(4)]
    first = m.start_run(**_kw(sids[0]), lease_seconds=10).run_id
    second = m.start_run(**_kw(sids[1]), lease_seconds=5).run_id
    live = m.start_run(**_kw(sids[2]), lease_seconds=100).run_id
    plain = m.start_run(**_kw(sids[3])).run_id
    clock.advance(11)
    result = m.sweep_expired()
    assert result.interrupted_run_ids == [second, first]
    assert result.expired_session_ids == [] and result.failed_session_ids == []
    assert m.sweep_expired().interrupted_run_ids == []
    runs = zip(sids, [first, second, live, plain], strict=True)
    statuses = [m.get_run(**_kw(s), run_id=r).status for s, r in runs]
    assert statuses == [RunStatus.INTERRUPTED] * 2 + [RunStatus.RUNNING] * 2


def test_writes_tagged_with_a_lapsed_run_are_refused(
    frozen_manager: SessionManager, sid: str, leased: str, clock: FrozenClock
) -> None:
    """After the lapse, a heartbeat, a step, a finish, a message and a tool call tagged
    with the run get RunLeaseExpired (a RunNotRunning, 409) and store nothing; a new
    run may start."""
    m = frozen_manager
    clock.advance(LEASE + 1)
    with pytest.raises(RunLeaseExpired) as refused:
        m.heartbeat_run(**_kw(sid), run_id=leased)
    assert isinstance(refused.value, RunNotRunning) and refused.value.http_status == 409
    assert m.get_run(**_kw(sid), run_id=leased).status == RunStatus.INTERRUPTED
    version = m.get_session(**_kw(sid)).version
    late = [
        lambda: m.add_run_step(**_kw(sid), run_id=leased, kind="model"),
        lambda: m.finish_run(**_kw(sid), run_id=leased, status="SUCCEEDED"),
        lambda: m.append_message(
            **_kw(sid), message={"role": "assistant", "content": "x", "run_id": leased}
        ),
        lambda: m.record_tool_call(**_kw(sid), tool="t", arguments={}, run_id=leased),
        lambda: m.heartbeat_run(**_kw(sid), run_id=leased, lease_seconds=60),
    ]
    for write in late:
        with pytest.raises(RunLeaseExpired):
            write()
    assert m.get_session(**_kw(sid)).version == version
    fresh = m.start_run(**_kw(sid), lease_seconds=LEASE)
    assert fresh.status == RunStatus.RUNNING and fresh.seq == 2


def test_a_restored_run_is_not_a_lapsed_one(
    frozen_manager: SessionManager, sid: str, leased: str
) -> None:
    """restore interrupts a leased run as any other (RunNotRunning, not
    RunLeaseExpired) and clears the session's lease; so do finish and close."""
    m = frozen_manager
    assert m.restore_session(**_kw(sid)).interrupted_run_ids == [leased]
    assert m.get_session(**_kw(sid)).lease_expires_at is None
    with pytest.raises(RunNotRunning) as refused:
        m.heartbeat_run(**_kw(sid), run_id=leased)
    assert not isinstance(refused.value, RunLeaseExpired)
    finished = m.start_run(**_kw(sid), lease_seconds=LEASE).run_id
    m.finish_run(**_kw(sid), run_id=finished, status="SUCCEEDED")
    assert m.get_session(**_kw(sid)).lease_expires_at is None
    m.start_run(**_kw(sid), lease_seconds=LEASE)
    assert m.close_session(**_kw(sid)).lease_expires_at is None


def test_ttl_expiry_before_the_lease_wins(
    frozen_manager: SessionManager, clock: FrozenClock
) -> None:
    """A session whose TTL ran out before its run's lease is expired (the run
    INTERRUPTED by the expiry), not lapsed."""
    m = frozen_manager
    sid = m.create_session(user_id=USER, ttl_seconds=10).session_id
    run = m.start_run(**_kw(sid), lease_seconds=60).run_id
    clock.advance(100)
    result = m.sweep_expired()
    assert (result.interrupted_run_ids, result.expired_session_ids) == ([], [sid])
    stopped = m.get_run(**_kw(sid), run_id=run)
    assert stopped.status == RunStatus.INTERRUPTED and stopped.error != LEASE_LAPSED
    assert m.get_session(**_kw(sid)).lease_expires_at is None


def test_start_run_and_heartbeat_replay_with_a_key(
    frozen_manager: SessionManager, sid: str, clock: FrozenClock
) -> None:
    """A retried key answers the first result (a heartbeat does not extend again); the
    same key with another lease is IdempotencyKeyReused."""
    m = frozen_manager
    run = m.start_run(**_kw(sid), lease_seconds=LEASE, idempotency_key="start-1")
    assert m.start_run(**_kw(sid), lease_seconds=LEASE, idempotency_key="start-1") == run
    with pytest.raises(IdempotencyKeyReused):
        m.start_run(**_kw(sid), lease_seconds=LEASE + 1, idempotency_key="start-1")
    clock.advance(5)
    beat = m.heartbeat_run(**_kw(sid), run_id=run.run_id, idempotency_key="beat-1")
    clock.advance(5)
    assert m.heartbeat_run(**_kw(sid), run_id=run.run_id, idempotency_key="beat-1") == beat
    assert m.get_run(**_kw(sid), run_id=run.run_id).lease_expires_at == beat.lease_expires_at
    with pytest.raises(IdempotencyKeyReused):
        m.heartbeat_run(**_kw(sid), run_id=run.run_id, lease_seconds=9, idempotency_key="beat-1")


def test_another_users_heartbeat_is_not_found(
    frozen_manager: SessionManager, sid: str, leased: str
) -> None:
    """Another user's heartbeat or leased start is reported like a missing session."""
    m = frozen_manager
    with pytest.raises(SessionNotFound):
        m.heartbeat_run(session_id=sid, user_id=OTHER, run_id=leased)
    with pytest.raises(SessionNotFound):
        m.start_run(session_id=sid, user_id=OTHER, lease_seconds=LEASE)
    admin = m.heartbeat_run(session_id=sid, user_id=OTHER, run_id=leased, admin=True)
    assert admin.run_id == leased


def test_runs_without_a_lease_are_unchanged(
    frozen_manager: SessionManager, sid: str, clock: FrozenClock
) -> None:
    """No lease: no deadline anywhere, the run stays RUNNING however long; a heartbeat
    needs lease_seconds, and then grants one."""
    m = frozen_manager
    run = m.start_run(**_kw(sid))
    assert (run.lease_seconds, run.lease_expires_at) == (None, None)
    clock.advance(10**6)
    assert m.get_run(**_kw(sid), run_id=run.run_id).status == RunStatus.RUNNING
    assert m.sweep_expired().interrupted_run_ids == []
    assert m.get_session(**_kw(sid)).lease_expires_at is None
    with pytest.raises(ValidationError):
        m.heartbeat_run(**_kw(sid), run_id=run.run_id)
    granted = m.heartbeat_run(**_kw(sid), run_id=run.run_id, lease_seconds=LEASE)
    assert granted.lease_expires_at == clock.now + timedelta(seconds=LEASE)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "5", 86400.5])
def test_lease_seconds_is_validated(manager: SessionManager, sid: str, bad: Any) -> None:
    """A lease is a positive, finite number of seconds of at most a day."""
    with pytest.raises(ValidationError):
        manager.start_run(**_kw(sid), lease_seconds=bad)
    run = manager.start_run(**_kw(sid), lease_seconds=86400)
    with pytest.raises(ValidationError):
        manager.heartbeat_run(**_kw(sid), run_id=run.run_id, lease_seconds=bad)


def test_deleting_a_session_drops_its_lease(
    frozen_manager: SessionManager, sid: str, leased: str, clock: FrozenClock
) -> None:
    """A deleted session leaves no lease behind for the sweep to find."""
    m = frozen_manager
    m.delete_session(**_kw(sid))
    clock.advance(LEASE + 1)
    with m.store.transaction(write=False) as tx:
        assert tx.list_lapsed_leases(now=clock.now, limit=10) == []
    assert m.sweep_expired().interrupted_run_ids == []


def test_a_clock_stepped_back_never_ends_a_run_before_it_started(
    frozen_manager: SessionManager, sid: str, leased: str, clock: FrozenClock
) -> None:
    """A heartbeat after the clock stepped back sets a deadline before the run's start;
    when that lapses, the run ends at its start, not before it."""
    m = frozen_manager
    started = m.get_run(**_kw(sid), run_id=leased).started_at
    clock.advance(-2 * LEASE)
    m.heartbeat_run(**_kw(sid), run_id=leased)
    clock.advance(LEASE + 1)
    run = m.get_run(**_kw(sid), run_id=leased)
    assert run.status == RunStatus.INTERRUPTED
    assert run.started_at is not None and run.ended_at == started == run.started_at
