"""Windows of history over the three message formats (C32): chat completions, Anthropic
content blocks and OpenAI Responses items; a window never holds a tool result without
its call nor a call without its result."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import USER, same_payload, seqs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_formats import (
    FORMATS,
    answer,
    bounded_page_problem,
    calls,
    histories,
    reasoning,
    reasoning_split,
    results,
    user,
    window_problem,
)

from agentsession import Message, Role, SessionManager, ValidationError


def _history(fmt: str) -> list[dict[str, Any]]:
    """user; a call (t1); its result; an assistant answer."""
    return [
        user(fmt, "fix the app"),
        *calls(fmt, ["t1"]),
        *results(fmt, ["t1"]),
        answer(fmt, "fixed"),
    ]


def _windows(m: SessionManager, sid: str, n: int) -> list[tuple[dict[str, Any], list[int]]]:
    """Every (query, unaligned seqs) of windows of 1..n messages: newest, before, after."""
    out = []
    for k in range(1, n + 1):
        out.append(({"limit": k}, list(range(max(1, n - k + 1), n + 1))))
        for b in range(2, n + 2):
            out.append(({"limit": k, "before": b}, list(range(max(1, b - k), b))))
        for a in range(n):
            out.append(({"limit": k, "after": a}, list(range(a + 1, min(n, a + k) + 1))))
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_c32_tool_use_in_content_blocks(manager: SessionManager, sid: str, fmt: str) -> None:
    """C32: user; assistant making call t1 (tool_calls, a tool_use content block, or a
    function_call item); its result; an assistant answer. The newest window of every
    size and restore's messages never split t1 from its result; a window of every size
    before or after every seq is aligned on the side away from its bound and never
    crosses the bound (docs/semantics.md, "Window alignment")."""
    history = _history(fmt)
    manager.append_messages(session_id=sid, user_id=USER, messages=history)
    n = len(history)
    for query, unaligned in _windows(manager, sid, n):
        window = manager.get_messages(session_id=sid, user_id=USER, **query).items
        problem = _problem(window, query, history)
        assert problem is None, (fmt, query, problem)
        assert set(unaligned) <= set(seqs(window)), (query, seqs(window))
    for k in range(1, n + 1):
        restored = manager.restore_session(session_id=sid, user_id=USER, message_limit=k)
        assert _problem(restored.messages, {}, history) is None, (fmt, k)
        assert seqs(restored.messages)[-1] == n


def test_c32_split_windows_without_alignment(manager: SessionManager, sid: str) -> None:
    """C32: the history really has windows that split a call from its result when not
    aligned (so the check above can fail), in every format."""
    for fmt in FORMATS:
        manager.append_messages(session_id=sid, user_id=USER, messages=_history(fmt))
    last = manager.get_session(session_id=sid, user_id=USER).message_count
    problems = [
        window_problem(
            manager.get_messages(
                session_id=sid, user_id=USER, limit=1, before=b, align_tool_calls=False
            ).items
        )
        for b in range(2, last + 2)
    ]
    assert sum(p is not None for p in problems) >= len(FORMATS) * 2


def test_developer_messages_are_kept_and_end_a_window(manager: SessionManager, sid: str) -> None:
    """OpenAI's ``developer`` role (system instructions to newer models) is stored as
    sent, and a window that starts at a result is widened to its call, not past the
    developer message before the exchange."""
    developer = {"role": "developer", "content": "be brief"}
    manager.append_messages(
        session_id=sid,
        user_id=USER,
        messages=[developer, user("chat", "go"), *calls("chat", ["c1"]), *results("chat", ["c1"])],
    )
    got = manager.get_messages(session_id=sid, user_id=USER).items
    assert got[0].role == Role.DEVELOPER and same_payload(got[0].payload(), developer)
    window = manager.get_messages(session_id=sid, user_id=USER, limit=1).items
    assert [m.seq for m in window] == [3, 4] and window_problem(window) is None


def test_responses_items_are_stored_as_sent(manager: SessionManager, sid: str) -> None:
    """Responses items come without a role: stored and given back exactly as sent (no
    role added); ``role`` reads as assistant for calls and reasoning, tool for outputs."""
    items = [
        user("responses", "hi"),
        *calls("responses", ["c1", "c2"]),
        *results("responses", ["c2", "c1"]),
        answer("responses", "done"),
        {"type": "custom_tool_call", "call_id": "c3", "name": "sh", "input": "ls"},
        {"type": "custom_tool_call_output", "call_id": "c3", "output": "a.txt"},
    ]
    stored = manager.append_messages(session_id=sid, user_id=USER, messages=items)
    got = manager.get_messages(session_id=sid, user_id=USER).items
    for sent, ret, back in zip(items, stored, got, strict=True):
        assert same_payload(ret.payload(), sent)
        assert same_payload(back.payload(), sent), (back.payload(), sent)
    assert [x.role for x in got] == [
        Role.USER,
        Role.ASSISTANT,
        Role.ASSISTANT,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
        Role.ASSISTANT,
        Role.TOOL,
    ]
    assert "role" not in got[2].payload() and "role" not in got[4].payload()
    assert window_problem(manager.get_messages(session_id=sid, user_id=USER, limit=1).items) is None


def test_pages_and_restores_keep_a_reasoning_item_with_its_successor(
    manager: SessionManager, sid: str
) -> None:
    """#13: OpenAI refuses a reasoning item sent without the item after it, and that item
    without its reasoning item. On ``[user, reasoning, function_call, output, reasoning,
    message]`` the newest page of every limit and every restore window, followed by
    their cursors, never end with a reasoning item whose successor exists nor start with
    a successor without its reasoning item, and visit every message once."""
    history = [
        user("responses", "go"),
        *calls("responses", ["c1"]),
        *results("responses", ["c1"]),
        reasoning("rs_a"),
        answer("responses", "done"),
    ]
    manager.append_messages(session_id=sid, user_id=USER, messages=history)
    n = len(history)
    for k in range(1, n + 1):
        newest = manager.get_messages(session_id=sid, user_id=USER, limit=k)
        restored = manager.restore_session(session_id=sid, user_id=USER, message_limit=k)
        for items, cursor in (
            (newest.items, newest.next_cursor),
            (restored.messages, restored.messages_next_cursor),
        ):
            pages = [items]
            while cursor is not None:
                page = manager.get_messages(session_id=sid, user_id=USER, limit=k, cursor=cursor)
                pages.append(page.items)
                cursor = page.next_cursor
            for page in pages:
                assert reasoning_split(page, history) is None, (k, reasoning_split(page, history))
            assert sorted(s for page in pages for s in seqs(page)) == list(range(1, n + 1))


@pytest.mark.store_independent
@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "call_id"),
        ({"type": "function_call_output", "call_id": "", "output": "x"}, "call_id"),
        ({"type": "function_call_output", "call_id": 7, "output": "x"}, "call_id"),
        ({"type": "function_call", "role": "user", "call_id": "c", "name": "f"}, "role"),
        ({"type": "web_search_call", "id": "ws_1"}, "role"),
        ({"type": "function_call", "role": None, "call_id": "c", "name": "f"}, "role"),
    ],
)
def test_malformed_responses_items_are_refused(
    manager: SessionManager, sid: str, item: dict[str, Any], field: str
) -> None:
    """A call or output item needs a call_id; a role, if sent, must match the item's;
    an item type with no derived role needs a role. Nothing is written."""
    with pytest.raises(ValidationError) as err:
        manager.append_message(session_id=sid, user_id=USER, message=item)
    assert err.value.context["field"] == f"messages[0].{field}"
    assert manager.get_session(session_id=sid, user_id=USER).message_count == 0


def _problem(
    window: list[Message], query: dict[str, Any], history: list[dict[str, Any]]
) -> str | None:
    """:func:`window_problem` of a window read without a seq bound (the newest page);
    :func:`bounded_page_problem` of one read with ``before=`` or ``after=``; and
    :func:`reasoning_split` at the edges aligned (both without a bound, the start of a
    page before one, the end of a page after one). ``history``: the payloads appended."""
    bound = {k: v for k, v in query.items() if k in ("before", "after")}
    calls_problem = bounded_page_problem(window, **bound) if bound else window_problem(window)
    return calls_problem or reasoning_split(
        window, history, start="after" not in bound, end="before" not in bound
    )


def _paged(
    m: SessionManager, sid: str, size: int, backwards: bool, history: list[dict[str, Any]]
) -> list[int]:
    """The seqs visited by paging through ``history`` (the payloads appended) with
    aligned windows of ``size``, each page's seq bound the previous page's edge
    (``before=page[0].seq`` backwards, ``after=page[-1].seq`` forwards). Following
    the pages, no page splits a reasoning item from its successor at either edge: the
    page next to a bound widened over it already."""
    out: list[int] = []
    bound: dict[str, int] = {} if backwards else {"after": 0}
    while True:
        page = m.get_messages(session_id=sid, user_id=USER, limit=size, **bound).items
        if not page:
            return out
        problem = _problem(page, bound, history) or reasoning_split(page, history)
        assert problem is None, (bound, problem)
        out = seqs(page) + out if backwards else out + seqs(page)
        bound = {"before": page[0].seq} if backwards else {"after": page[-1].seq}


@pytest.mark.store_independent
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories(), data=st.data())
def test_c32_random_histories_never_split_calls(
    manager: SessionManager, history: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Property: over random histories mixing the three formats, the newest window of
    any limit holds each call with all its results (and each Responses reasoning item
    with its successor), a window before or after any seq is aligned on the side away
    from its bound and never crosses it, and paging with aligned windows visits every
    message exactly once, both ways, never splitting a reasoning item from its
    successor."""
    sid = manager.create_session(user_id=USER).session_id
    manager.append_messages(session_id=sid, user_id=USER, messages=history)
    n = len(history)
    limit = data.draw(st.integers(1, n), label="limit")
    cursor = data.draw(st.sampled_from(["none", "before", "after"]), label="cursor")
    query: dict[str, int] = {"limit": limit}
    if cursor == "before":
        query["before"] = data.draw(st.integers(2, n + 1), label="before")
    elif cursor == "after":
        query["after"] = data.draw(st.integers(0, n - 1), label="after")
    window = manager.get_messages(session_id=sid, user_id=USER, **query).items
    assert _problem(window, query, history) is None, (query, _problem(window, query, history))
    size = data.draw(st.integers(1, 5), label="page size")
    assert _paged(manager, sid, size, True, history) == list(range(1, n + 1))
    assert _paged(manager, sid, size, False, history) == list(range(1, n + 1))
