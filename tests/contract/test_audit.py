"""Audit: one event per change, contiguous version chain, request ids, and never any
message content."""

from __future__ import annotations

import json
from typing import Any

import pytest
from contract_support import (
    ADMIN,
    USER,
    VERSIONED_WRITES,
    Ctx,
    assert_version_chain,
    audit_of,
    dump,
    user_msg,
)

from agentsession import SessionManager, VersionConflict, request_id_context


def test_one_event_per_change(manager: SessionManager) -> None:
    """Every mutation adds exactly one audit event from version v to v+1, naming the actor."""
    for op in sorted(set(VERSIONED_WRITES) - {"delete_session"}):
        ctx = Ctx(manager, running=op != "start_run")
        n = len(audit_of(manager, ctx.sid))
        VERSIONED_WRITES[op](manager, ctx)
        events = audit_of(manager, ctx.sid)
        assert len(events) == n + 1, op
        new = events[-1]
        assert (new.version_before, new.version_after) == (ctx.version, ctx.version + 1), op
        assert (new.actor, new.user_id, new.session_id) == (USER, USER, ctx.sid)
        assert new.action and new.at is not None
        assert_version_chain(events)


def test_reads_and_rejected_writes_add_no_events(manager: SessionManager) -> None:
    """Reads and failed writes leave the audit log alone."""
    ctx = Ctx(manager)
    before = dump(audit_of(manager, ctx.sid))
    kw = {"session_id": ctx.sid, "user_id": USER}
    manager.get_session(**kw)
    manager.get_messages(**kw, limit=1)
    manager.list_runs(**kw)
    manager.get_audit_log(**kw)
    with pytest.raises(VersionConflict):
        manager.append_message(**kw, message=user_msg("x"), expected_version=1)
    assert dump(audit_of(manager, ctx.sid)) == before


def test_version_chain_is_contiguous_over_a_session_life(manager: SessionManager) -> None:
    """Across create, writes, close, restore and expire the chain has no gap or overlap."""
    ctx = Ctx(manager)
    kw = {"session_id": ctx.sid, "user_id": USER}
    manager.close_session(**kw)
    manager.restore_session(**kw)
    manager.append_messages(
        **kw, messages=[user_msg("a"), user_msg("b")], working_memory_patch={"n": 1}
    )
    manager.expire_session(**kw)
    manager.restore_session(**kw)
    events = audit_of(manager, ctx.sid)
    assert_version_chain(events)
    assert events[-1].version_after == manager.get_session(**kw).version
    actions = [e.action for e in events]
    assert actions[0] == "session.created"
    assert len(actions) == manager.get_session(**kw).version


def test_audit_paging(manager: SessionManager) -> None:
    """get_audit_log pages with after= and limit=, oldest first."""
    ctx = Ctx(manager)
    full = audit_of(manager, ctx.sid)
    kw = {"session_id": ctx.sid, "user_id": USER}
    first = manager.get_audit_log(**kw, limit=2).items
    rest = manager.get_audit_log(**kw, after=first[-1].seq).items
    assert dump(first + rest) == dump(full)


def test_request_id_is_recorded(manager: SessionManager, sid: str) -> None:
    """Events written inside request_id_context carry that request id."""
    with request_id_context("req-123"):
        manager.append_message(session_id=sid, user_id=USER, message=user_msg("x"))
    manager.append_message(session_id=sid, user_id=USER, message=user_msg("y"))
    events = audit_of(manager, sid)
    assert [e.request_id for e in events[-2:]] == ["req-123", None]


def test_no_content_in_any_audit_event(manager: SessionManager) -> None:
    """Message, memory, tool and run content never appears in the audit log (nor tombstone)."""
    secret = "SECRET-c0ntent-7f3a9"
    sid = manager.create_session(
        user_id=USER, title="plain", working_memory={"goal": secret + "-goal"}
    ).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    manager.append_message(**kw, message=user_msg(secret + "-msg", name="n"))
    manager.append_messages(
        **kw,
        messages=[
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "f", "arguments": secret + "-args"}}
                ],
            }
        ],
        working_memory_patch={"facts": {"k": secret + "-patch"}},
    )
    manager.update_working_memory(**kw, patch={"next_action": secret + "-next"})
    manager.record_tool_call(
        **kw,
        tool="grep",
        arguments={"q": secret + "-targs"},
        result=secret + "-result",
        status="error",
        error=secret + "-err",
    )
    run = manager.start_run(**kw, input=secret + "-input")
    manager.add_run_step(
        **kw, run_id=run.run_id, kind="model", input=secret + "-si", output=secret + "-so"
    )
    manager.finish_run(
        **kw, run_id=run.run_id, status="FAILED", error=secret + "-rerr", output=secret + "-out"
    )
    text = json.dumps(dump(audit_of(manager, sid)), ensure_ascii=False)
    assert secret not in text
    manager.delete_session(**kw)
    tomb = manager.get_audit_log(session_id=sid, user_id=ADMIN, admin=True).items
    assert secret not in json.dumps(dump(tomb), ensure_ascii=False)
