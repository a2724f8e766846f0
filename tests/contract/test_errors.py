"""Errors: every exception the public API raises is an AgentSessionError (also enforced
for the whole suite by the autouse fixture in conftest.py); bad argument types are
ValidationErrors, and nothing is written by a rejected call."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from contract_support import PUBLIC_METHODS, USER, Ctx, snapshot, user_msg

from agentsession import AgentSessionError, SessionManager, ValidationError

# Every call here is rejected by the manager before it reaches the store.
pytestmark = pytest.mark.store_independent

#: name -> call(manager, ctx) that must raise ValidationError.
BAD_ARGUMENTS: list[Any] = [
    pytest.param(
        lambda m, c: m.update_session(session_id=c.sid, user_id=USER, metadata=[1]),
        id="update_session.metadata-list",
    ),
    pytest.param(
        lambda m, c: m.update_session(session_id=c.sid, user_id=USER, title=5),
        id="update_session.title-int",
    ),
    pytest.param(
        lambda m, c: m.update_session(session_id=c.sid, user_id=USER, ttl_seconds=-1),
        id="update_session.ttl-negative",
    ),
    pytest.param(
        lambda m, c: m.append_message(session_id=c.sid, user_id=USER, message="hi"),
        id="append_message.message-str",
    ),
    pytest.param(
        lambda m, c: m.append_messages(session_id=c.sid, user_id=USER, messages={"role": "user"}),
        id="append_messages.messages-dict",
    ),
    pytest.param(
        lambda m, c: m.append_messages(session_id=c.sid, user_id=USER, messages=[]),
        id="append_messages.empty",
    ),
    pytest.param(
        lambda m, c: m.append_message(
            session_id=c.sid, user_id=USER, message=user_msg("x"), working_memory_patch=[1]
        ),
        id="append_message.patch-list",
    ),
    pytest.param(
        lambda m, c: m.append_message(
            session_id=c.sid, user_id=USER, message={"role": "user", "content": 5}
        ),
        id="append_message.content-int",
    ),
    pytest.param(
        lambda m, c: m.append_message(
            session_id=c.sid, user_id=USER, message={"role": "user", "tool_calls": "x"}
        ),
        id="append_message.tool_calls-str",
    ),
    pytest.param(
        lambda m, c: m.append_message(
            session_id=c.sid, user_id=USER, message=user_msg("x"), expected_version="1"
        ),
        id="append_message.expected_version-str",
    ),
    pytest.param(
        lambda m, c: m.append_message(
            session_id=c.sid, user_id=USER, message=user_msg("x"), idempotency_key=""
        ),
        id="append_message.key-empty",
    ),
    pytest.param(
        lambda m, c: m.append_message(
            session_id=c.sid, user_id=USER, message=user_msg("x"), idempotency_key="k\n"
        ),
        id="append_message.key-newline",
    ),
    pytest.param(
        lambda m, c: m.update_working_memory(session_id=c.sid, user_id=USER, patch=[1]),
        id="update_working_memory.patch-list",
    ),
    pytest.param(
        lambda m, c: m.update_working_memory(session_id=c.sid, user_id=USER, data=[1]),
        id="update_working_memory.data-list",
    ),
    pytest.param(
        lambda m, c: m.update_working_memory(session_id=c.sid, user_id=USER, data="x"),
        id="update_working_memory.data-str",
    ),
    pytest.param(
        lambda m, c: m.create_session(user_id=USER, working_memory=[1]),
        id="create_session.working_memory-list",
    ),
    pytest.param(
        lambda m, c: m.modify_working_memory(
            session_id=c.sid, user_id=USER, fn=lambda d: ["not", "an", "object"]
        ),
        id="modify_working_memory.fn-returns-list",
    ),
    pytest.param(
        lambda m, c: m.modify_working_memory(
            session_id=c.sid, user_id=USER, fn=lambda d: d, max_attempts=0
        ),
        id="modify_working_memory.max_attempts-0",
    ),
    pytest.param(
        lambda m, c: m.record_tool_call(session_id=c.sid, user_id=USER, tool="t", arguments=[1, 2]),
        id="record_tool_call.arguments-list",
    ),
    pytest.param(
        lambda m, c: m.record_tool_call(session_id=c.sid, user_id=USER, tool="t", status=None),
        id="record_tool_call.status-None",
    ),
    pytest.param(
        lambda m, c: m.record_tool_call(session_id=c.sid, user_id=USER, tool="t", status="maybe"),
        id="record_tool_call.status-unknown",
    ),
    pytest.param(
        lambda m, c: m.record_tool_call(session_id=c.sid, user_id=USER, tool="a/b"),
        id="record_tool_call.tool-slash",
    ),
    pytest.param(
        lambda m, c: m.record_tool_call(session_id=c.sid, user_id=USER, tool="t", error=5),
        id="record_tool_call.error-int",
    ),
    pytest.param(
        lambda m, c: m.find_tool_call(session_id=c.sid, user_id=USER, tool="t", arguments="x"),
        id="find_tool_call.arguments-str",
    ),
    pytest.param(
        lambda m, c: m.record_tool_call(
            session_id=c.sid, user_id=USER, tool="t", provider_call_id="a b"
        ),
        id="record_tool_call.provider_call_id-space",
    ),
    pytest.param(
        lambda m, c: m.find_tool_call(session_id=c.sid, user_id=USER),
        id="find_tool_call.neither-tool-nor-provider-id",
    ),
    pytest.param(
        lambda m, c: m.find_tool_call(
            session_id=c.sid, user_id=USER, tool="t", provider_call_id="call_0"
        ),
        id="find_tool_call.tool-and-provider-id",
    ),
    pytest.param(
        lambda m, c: m.find_tool_call(session_id=c.sid, user_id=USER, provider_call_id=""),
        id="find_tool_call.provider_call_id-empty",
    ),
    pytest.param(
        lambda m, c: m.start_run(session_id=c.sid, user_id=USER, metadata="x"),
        id="start_run.metadata-str",
    ),
    pytest.param(
        lambda m, c: m.add_run_step(
            session_id=c.sid, user_id=USER, run_id=c.run_id, kind="model", error=5
        ),
        id="add_run_step.error-int",
    ),
    pytest.param(
        lambda m, c: m.add_run_step(
            session_id=c.sid, user_id=USER, run_id=c.run_id, kind="model", status=None
        ),
        id="add_run_step.status-None",
    ),
    pytest.param(
        lambda m, c: m.add_run_step(session_id=c.sid, user_id=USER, run_id=c.run_id, kind="a b"),
        id="add_run_step.kind-space",
    ),
    pytest.param(
        lambda m, c: m.finish_run(
            session_id=c.sid, user_id=USER, run_id=c.run_id, status="FAILED", error=123
        ),
        id="finish_run.error-int",
    ),
    pytest.param(
        lambda m, c: m.finish_run(
            session_id=c.sid, user_id=USER, run_id=c.run_id, status="SUCCEEDED", usage={"t": -1}
        ),
        id="finish_run.usage-negative",
    ),
    pytest.param(
        lambda m, c: m.close_session(session_id=c.sid, user_id=USER, reason=5),
        id="close_session.reason-int",
    ),
    pytest.param(
        lambda m, c: m.get_messages(session_id=c.sid, user_id=USER, before=1.5).items,
        id="get_messages.before-float",
    ),
    pytest.param(
        lambda m, c: m.list_sessions(user_id=USER, status="GONE"), id="list_sessions.status-unknown"
    ),
    pytest.param(lambda m, c: m.sweep_expired(limit=-1), id="sweep_expired.limit-negative"),
    # Values past what a store's integer or datetime can hold (found by a review; were
    # OverflowError or a 500 over HTTP on SQLite, and accepted by the memory store).
    pytest.param(
        lambda m, c: m.get_messages(session_id=c.sid, user_id=USER, before=2**63).items,
        id="get_messages.before-2**63",
    ),
    pytest.param(
        lambda m, c: m.get_messages(session_id=c.sid, user_id=USER, limit=2**64).items,
        id="get_messages.limit-2**64",
    ),
    pytest.param(
        lambda m, c: m.restore_session(session_id=c.sid, user_id=USER, message_limit=2**63),
        id="restore_session.message_limit-2**63",
    ),
    pytest.param(lambda m, c: m.sweep_expired(limit=2**64), id="sweep_expired.limit-2**64"),
    pytest.param(
        lambda m, c: m.record_tool_call(
            session_id=c.sid,
            user_id=USER,
            tool="t",
            ended_at=datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
        ),
        id="record_tool_call.ended_at-past-9999-utc",
    ),
    pytest.param(
        lambda m, c: m.list_sessions(
            user_id=USER,
            cursor=_cursor(["9999-12-31T23:59:59-14:00", "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa"]),
        ),
        id="list_sessions.cursor-past-9999-utc",
    ),
    pytest.param(
        lambda m, c: m.append_message(
            session_id=c.sid, user_id=USER, message={"role": "user", "n": 10**5000}
        ),
        id="append_message.int-over-64-bits",
    ),
    pytest.param(
        lambda m, c: m.create_session(user_id="alice\n"),
        id="create_session.user_id-trailing-newline",
    ),
    pytest.param(
        lambda m, c: m.get_session(session_id=c.sid + "\n", user_id=USER),
        id="get_session.session_id-trailing-newline",
    ),
]


def _cursor(value: Any) -> str:
    """A list cursor forged from ``value`` (the encoding the service uses)."""
    raw = json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_surrogate_in_a_key_is_reported_with_an_encodable_field(manager: SessionManager) -> None:
    """A lone surrogate in an object key is rejected, and the error's field path can be
    encoded as UTF-8 (so an HTTP problem body can carry it)."""
    ctx = Ctx(manager)
    with pytest.raises(ValidationError) as err:
        manager.append_message(
            session_id=ctx.sid, user_id=USER, message={"role": "user", "\udc00": 1}
        )
    assert err.value.field is not None
    err.value.field.encode("utf-8")
    str(err.value).encode("utf-8")


@pytest.mark.parametrize("call", BAD_ARGUMENTS)
def test_bad_arguments_are_validation_errors(manager: SessionManager, call: Any) -> None:
    """A wrongly typed argument is a ValidationError (never TypeError etc.); nothing written."""
    ctx = Ctx(manager)
    before = snapshot(manager, ctx.sid)
    n_sessions = len(manager.list_sessions(user_id=USER).items)
    with pytest.raises(ValidationError):
        call(manager, ctx)
    assert snapshot(manager, ctx.sid) == before
    assert len(manager.list_sessions(user_id=USER).items) == n_sessions


def test_error_hierarchy_has_one_root() -> None:
    """Every error class agentsession exports derives from AgentSessionError."""
    import agentsession

    errors = [
        getattr(agentsession, n)
        for n in agentsession.__all__
        if isinstance(getattr(agentsession, n), type)
        and issubclass(getattr(agentsession, n), BaseException)
    ]
    assert errors and all(issubclass(e, AgentSessionError) for e in errors)
    assert all(isinstance(e.http_status, int) for e in errors)


def test_guard_fixture_sees_every_public_method(only_agentsession_errors: list[Any]) -> None:
    """The autouse guard wraps every public method, so an escaping exception is recorded."""
    assert {
        "create_session",
        "append_messages",
        "restore_session",
        "sweep_expired",
        "delete_user_data",
        "get_audit_log",
    } <= set(PUBLIC_METHODS)
    for name in PUBLIC_METHODS:
        assert hasattr(getattr(SessionManager, name), "__wrapped__"), name
    assert only_agentsession_errors == []
