"""A store seeded for the inspector's tests: alice's session with XSS canaries in every
content field, in the three message formats, with runs, a summary, a rewind, memory
history and a synthetic "interrupted" result; and bob's session, which alice must
never see.

Every canary tries to run script if a page printed it as markup: each sets
``window.__xss`` or opens a dialog. A page that escapes it shows it as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentsession import RecordWrite, SessionManager

#: Markup that runs script when not escaped (as an element, in an attribute, in a URL).
CANARY = (
    '<script>window.__xss=1</script><img src=x onerror="window.__xss=1;alert(1)">'
    "\"'><svg onload=alert(1)>"
)


def canary(field: str) -> str:
    """The canary text of one field (its name first, to tell them apart)."""
    return f"{field}:{CANARY}"


@dataclass
class Seeded:
    """The ids the tests open: alice's session (every view), bob's, a fork."""

    alice_session: str
    bob_session: str
    fork_session: str
    rewind_number: int
    run_id: str
    message_count: int


def _formats(sm: SessionManager, sid: str, run_id: str) -> None:
    """One exchange per format, each with a call and its result, all canaried."""
    a: dict[str, Any] = {"session_id": sid, "user_id": "alice"}
    args = {"query": canary("chat_tool_arguments")}
    sm.append_messages(
        **a,
        messages=[
            {"role": "system", "content": canary("system_text")},
            {"role": "user", "content": canary("chat_text"), "metadata": {"k": canary("meta")}},
            {
                "role": "assistant",
                "content": None,
                "run_id": run_id,
                "tool_calls": [
                    {
                        "id": "call_chat1",
                        "type": "function",
                        "function": {"name": "search", "arguments": _json(args)},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_chat1", "content": canary("chat_tool_result")},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": canary("anthropic_text")},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read_file",
                        "input": {"path": canary("anthropic_tool_input")},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": canary("anthropic_tool_result"),
                    }
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": canary("responses_reasoning")}],
            },
            {
                "type": "function_call",
                "call_id": "fc_1",
                "name": "lookup",
                "arguments": _json({"id": canary("responses_arguments")}),
            },
            {
                "type": "function_call_output",
                "call_id": "fc_1",
                "output": canary("responses_output"),
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": canary("responses_text")}],
            },
        ],
        working_memory_patch={"note": canary("memory_v1")},
    )


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def seed(sm: SessionManager) -> Seeded:
    """Fill ``sm`` (an empty store) with the sessions the inspector's tests open."""
    s = sm.create_session(
        user_id="alice",
        agent=canary("agent")[:5] + "bot",
        title=canary("title"),
        metadata={"m": canary("session_metadata")},
        working_memory={"plan": canary("initial_memory")},
    )
    sid = s.session_id
    a: dict[str, Any] = {"session_id": sid, "user_id": "alice"}
    run = sm.start_run(**a, input={"task": canary("run_input")}, lease_seconds=300)
    sm.add_run_step(
        **a,
        run_id=run.run_id,
        kind="tool",
        name=canary("step_name"),
        output={"o": canary("step_output")},
        status="error",
        error=canary("step_error"),
    )
    _formats(sm, sid, run.run_id)
    sm.update_working_memory(**a, patch={"note": canary("memory_v2"), "count": 2})
    sm.finish_run(**a, run_id=run.run_id, status="SUCCEEDED", output=canary("run_output"))
    sm.put_records(**a, records=[RecordWrite("ns", "k", b"data", {"meta": canary("record_meta")})])
    sm.add_summary(**a, text=canary("summary_text"), from_seq=1, to_seq=4)
    sm.append_messages(
        **a, messages=[{"role": "user", "content": canary(f"to_be_hidden_{i}")} for i in range(3)]
    )
    count = sm.get_session(**a).message_count
    rewind = sm.rewind_session(**a, to_seq=count - 3)
    # A call a crash leaves unanswered: restore answers it with a synthetic result.
    crashed = sm.start_run(**a, input="second run", lease_seconds=300)
    sm.append_message(
        **a,
        message={
            "role": "assistant",
            "run_id": crashed.run_id,
            "tool_calls": [
                {
                    "id": "call_lost",
                    "type": "function",
                    "function": {
                        "name": "deploy",
                        "arguments": _json({"env": canary("lost_call")}),
                    },
                }
            ],
        },
    )
    sm.close_session(**a, reason=canary("close_reason"))
    sm.restore_session(**a)
    sm.append_message(
        **a,
        message={
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_open",
                    "type": "function",
                    "function": {"name": "wait", "arguments": "{}"},
                }
            ],
        },
    )
    sm.update_shared_memory(
        scope="user", agent=s.agent, user_id="alice", data={"pref": canary("shared_memory")}
    )
    fork = sm.fork_session(**a, at_seq=2, title=canary("fork_title"))
    bob = sm.create_session(user_id="bob", agent="bobbot", title="bob's private session")
    sm.append_message(
        session_id=bob.session_id,
        user_id="bob",
        message={"role": "user", "content": "bob's secret"},
    )
    assert rewind.number is not None
    count = sm.get_session(**a).message_count
    return Seeded(sid, bob.session_id, fork.session_id, rewind.number, run.run_id, count)
