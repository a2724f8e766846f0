"""The timeline of a page of history (``agentsession.ui.timeline``): formats told apart,
each call paired with its result in every format, results folded only when everything
they carry is shown beside a call, orphan results kept, markers placed on the seq axis."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentsession.models import Message, Rewind, Summary
from agentsession.ui.timeline import message_format, timeline

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _history(*payloads: dict[str, Any]) -> list[Message]:
    return [
        Message.model_validate(
            {**p, "message_id": f"msg_{n}", "session_id": "ses_x", "seq": n, "created_at": NOW}
        )
        for n, p in enumerate(payloads, 1)
    ]


def test_formats_are_told_apart() -> None:
    chat, anthropic, responses, plain_list = _history(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]},
        {"type": "function_call", "call_id": "c", "name": "x", "arguments": "{}"},
        {"role": "user", "content": [{"type": "text", "text": "chat parts"}]},
    )
    assert [message_format(m) for m in (chat, anthropic, responses, plain_list)] == [
        "chat",
        "anthropic",
        "responses",
        "chat",
    ]


def test_every_format_pairs_its_calls_and_folds_only_pure_results() -> None:
    messages = _history(
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "g"}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "b", "content": "B", "is_error": True},
                {"type": "text", "text": "and a remark"},
            ],
        },
        {"type": "custom_tool_call", "call_id": "c", "name": "h", "input": "raw"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": "C"},
        {"role": "tool", "tool_call_id": "orphan", "content": "no call on this page"},
    )
    entries = timeline(messages, runs={}, summaries=[], rewinds=[])
    shown = [e.message for e in entries if e.message is not None]
    calls = [p for s in shown for p in s.parts if p.kind == "call"]
    assert [(c.label, c.result and c.result.text, c.result and c.result.seq) for c in calls] == [
        ("f", "A", 2),
        ("g", "B", 4),
        ("h", "C", 6),
    ]
    assert calls[1].result is not None and calls[1].result.error
    # Folded: the chat and Responses results; not the Anthropic message that also
    # carries text, nor the result whose call is not on the page.
    assert [s.folded for s in shown] == [False, True, False, False, False, True, False]


def test_markers_are_placed_on_the_seq_axis() -> None:
    messages = _history(*({"role": "user", "content": str(n)} for n in range(5)))
    summary = Summary(
        session_id="ses_x",
        number=1,
        text="s",
        from_seq=1,
        to_seq=3,
        author="a",
        summary_tokens=1,
        replaced_tokens=9,
        tokenizer="t",
        created_at=NOW,
        version=1,
    )
    rewinds = [
        Rewind(
            session_id="ses_x",
            number=n,
            to_seq=to,
            count=1,
            mode="hide",
            memory_version=1,
            created_at=NOW,
        )
        for n, to in ((1, 5), (2, 40))
    ]
    entries = timeline(messages, runs={}, summaries=[summary], rewinds=rewinds)
    order = [(e.kind, e.seq) for e in entries]
    assert order.index(("summary", 3)) == order.index(("message", 3)) + 1
    assert order[-1] == ("rewind", 5)  # after the page's last message
    assert ("rewind", 40) not in order  # anchored on another page
