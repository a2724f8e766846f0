"""The longest value of each bounded field (C31): stored and read back whole on every
store, one character more refused by validation before any write; keys that differ
only past an old column width never collide."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from contract_support import audit_of, snapshot

from agentsession import SessionManager, ValidationError, request_id_context
from agentsession.fieldlimits import (
    CALL_ID_CHARS,
    IDEMPOTENCY_KEY_CHARS,
    NAME_CHARS,
    REASON_CHARS,
    REQUEST_ID_CHARS,
    STEP_KIND_CHARS,
    STEP_NAME_CHARS,
    STEP_STATUS_CHARS,
    TITLE_CHARS,
    TOOL_NAME_CHARS,
)


def _fill(pattern: str, n: int) -> str:
    return (pattern * n)[:n]


# The longest accepted values, with the costliest characters each field allows: 4-byte
# UTF-8, and backslashes (stored escaped on PostgreSQL) in free text.
USER = _fill("a.b_c:d@e+f-9", NAME_CHARS)
AGENT = _fill("Agent-", NAME_CHARS)
TITLE = _fill("😀\\中'\"", TITLE_CHARS)
KEY = _fill("Key~ !", IDEMPOTENCY_KEY_CHARS)
KIND = _fill("kind.", STEP_KIND_CHARS)
STATUS = _fill("st@tus", STEP_STATUS_CHARS)
STEP_NAME = _fill("\\😀", STEP_NAME_CHARS)
TOOL = _fill("tool:x.", TOOL_NAME_CHARS)
CALL_ID = _fill("call_", CALL_ID_CHARS)
REASON = _fill("😀", REASON_CHARS)
REQUEST_ID = _fill("req/=", REQUEST_ID_CHARS)
# Two keys sharing their first 128 characters, the width keys were stored in before.
KEY_A, KEY_B = "x" * 128 + "a" * 127, "x" * 128 + "b" * 127


def test_c31_longest_accepted_value_of_each_field(manager: SessionManager) -> None:
    """C31: user id, agent, title, idempotency key, step kind/status/name, tool name,
    call id, request id, close reason at their longest: stored and read back exactly;
    two keys differing only past 128 characters stay two keys."""
    m = manager
    s = m.create_session(user_id=USER, agent=AGENT, title=TITLE, idempotency_key=KEY)
    sid = s.session_id
    got = m.get_session(session_id=sid, user_id=USER)
    assert (got.user_id, got.agent, got.title) == (USER, AGENT, TITLE)
    again = m.create_session(user_id=USER, agent=AGENT, title=TITLE, idempotency_key=KEY)
    assert again.session_id == sid  # the full key was stored and found again
    a = m.append_message(
        session_id=sid,
        user_id=USER,
        message={"role": "user", "content": "a"},
        idempotency_key=KEY_A,
    )
    b = m.append_message(
        session_id=sid,
        user_id=USER,
        message={"role": "user", "content": "b"},
        idempotency_key=KEY_B,
    )
    assert (a.seq, b.seq) == (1, 2)
    replay = m.append_message(
        session_id=sid,
        user_id=USER,
        message={"role": "user", "content": "b"},
        idempotency_key=KEY_B,
    )
    assert replay.message_id == b.message_id
    run = m.start_run(session_id=sid, user_id=USER)
    with request_id_context(REQUEST_ID):
        m.add_run_step(
            session_id=sid,
            user_id=USER,
            run_id=run.run_id,
            kind=KIND,
            status=STATUS,
            name=STEP_NAME,
        )
    step = m.get_run(session_id=sid, user_id=USER, run_id=run.run_id).steps[0]
    assert (step.kind, step.status, step.name) == (KIND, STATUS, STEP_NAME)
    event = audit_of(m, sid)[-1]
    assert (event.request_id, event.actor, event.user_id) == (REQUEST_ID, USER, USER)
    m.record_tool_call(session_id=sid, user_id=USER, tool=TOOL, call_id=CALL_ID)
    call = m.get_tool_history(session_id=sid, user_id=USER).items[0]
    assert (call.tool, call.call_id) == (TOOL, CALL_ID)
    m.close_session(session_id=sid, user_id=USER, reason=REASON)
    assert m.get_session(session_id=sid, user_id=USER).status_reason == REASON


def _too_long(m: SessionManager, sid: str, run_id: str) -> list[tuple[str, Callable[[], Any]]]:
    """Each field one character past its limit, as the call that sends it."""
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    msg = {"role": "user", "content": "x"}
    step = {**kw, "run_id": run_id, "kind": KIND, "status": STATUS}
    return [
        ("user_id", lambda: m.create_session(user_id=USER + "a")),
        ("agent", lambda: m.create_session(user_id=USER, agent=AGENT + "a")),
        ("title", lambda: m.create_session(user_id=USER, title=TITLE + "a")),
        ("idempotency_key", lambda: m.append_message(**kw, message=msg, idempotency_key=KEY + "a")),
        ("kind", lambda: m.add_run_step(**{**step, "kind": KIND + "a"})),
        ("status", lambda: m.add_run_step(**{**step, "status": STATUS + "a"})),
        ("name", lambda: m.add_run_step(**step, name=STEP_NAME + "a")),
        ("tool", lambda: m.record_tool_call(**kw, tool=TOOL + "a")),
        ("call_id", lambda: m.record_tool_call(**kw, tool="t", call_id=CALL_ID + "a")),
        ("reason", lambda: m.close_session(**kw, reason=REASON + "a")),
        ("request_id", lambda: request_id_context(REQUEST_ID + "a").__enter__()),
    ]


def test_c31_one_character_more_is_refused_before_any_write(manager: SessionManager) -> None:
    """C31: one character past each limit is a ValidationError naming the field, and
    nothing is written (never a database error, never a value cut short)."""
    sid = manager.create_session(user_id=USER).session_id
    run_id = manager.start_run(session_id=sid, user_id=USER).run_id
    before = snapshot(manager, sid)
    for field, call in _too_long(manager, sid, run_id):
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.context["field"] == field, field
    assert snapshot(manager, sid) == before
    assert [s.session_id for s in manager.list_sessions(user_id=USER).items] == [sid]
