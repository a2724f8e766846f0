"""Conversation history and tool history: order, windows, paging, round-trip fidelity,
provider tool-call ids (C07, C08, C09, C18, C20, C27, C29, C36)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from contract_support import (
    OTHER,
    USER,
    as_read,
    assistant_msg,
    every,
    same_payload,
    seqs,
    user_msg,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsession import Message, Role, RunNotFound, SessionManager, ToolCallStatus, ValidationError


def _fill(m: SessionManager, sid: str, n: int, batch: int = 1000) -> None:
    for start in range(0, n, batch):
        m.append_messages(
            session_id=sid,
            user_id=USER,
            messages=[user_msg(f"m{i}") for i in range(start + 1, min(n, start + batch) + 1)],
        )


# --------------------------------------------------------------------- ordering


def test_c07_equal_timestamps_keep_insert_order(frozen_manager: SessionManager) -> None:
    """C07: 50 messages at one instant (with tool pairs) read back in insertion order, always."""
    m = frozen_manager
    sid = m.create_session(user_id=USER).session_id
    sent: list[str] = []
    for i in range(10):
        group = [
            user_msg(f"u{i}"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"},
            assistant_msg(f"a{i}"),
            user_msg(f"z{i}"),
        ]
        for msg in group:
            m.append_message(session_id=sid, user_id=USER, message=msg)
            sent.append(msg)
    assert len(sent) == 50
    full = m.get_messages(session_id=sid, user_id=USER).items
    assert len({x.created_at for x in full}) == 1
    for _ in range(60):
        got = m.get_messages(session_id=sid, user_id=USER).items
        assert all(same_payload(x.payload(), y) for x, y in zip(got, sent, strict=True))
        assert seqs(got) == list(range(1, 51))
    for k in (1, 2, 5, 13):
        for start in range(1, 51, 3):
            fwd = m.get_messages(
                session_id=sid, user_id=USER, after=start - 1, limit=k, align_tool_calls=False
            ).items
            assert seqs(fwd) == list(range(start, min(start + k, 51)))
            assert all(
                same_payload(x.payload(), y) for x, y in zip(fwd, sent[start - 1 :], strict=False)
            )
            back = m.get_messages(
                session_id=sid, user_id=USER, before=start + 1, limit=k, align_tool_calls=False
            ).items
            assert seqs(back) == list(range(max(1, start - k + 1), start + 1))


def test_c08_list_order_updated_desc_with_unique_tiebreak(
    frozen_manager: SessionManager, clock: Any
) -> None:
    """C08: list is updated_at DESC then session_id DESC; limit=1 returns the last touched."""
    m = frozen_manager
    a = m.create_session(user_id=USER).session_id
    clock.advance(1)
    b = m.create_session(user_id=USER).session_id
    clock.advance(1)
    c = m.create_session(user_id=USER).session_id
    clock.advance(1)
    m.append_message(session_id=a, user_id=USER, message=user_msg("touch"))
    assert [s.session_id for s in m.list_sessions(user_id=USER).items] == [a, c, b]
    assert [s.session_id for s in m.list_sessions(user_id=USER, limit=1).items] == [a]
    clock.advance(1)
    d = m.create_session(user_id=USER).session_id
    e = m.create_session(user_id=USER).session_id
    f = m.create_session(user_id=USER).session_id
    tied = sorted([d, e, f], reverse=True)
    expected = [*tied, a, c, b]
    for _ in range(5):
        assert [s.session_id for s in m.list_sessions(user_id=USER).items] == expected
    paged, cursor = [], None
    while True:
        page = m.list_sessions(user_id=USER, limit=1, cursor=cursor)
        paged += [s.session_id for s in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert paged == expected
    page2 = m.list_sessions(user_id=USER, limit=2)
    rest = m.list_sessions(user_id=USER, limit=10, cursor=page2.next_cursor)
    assert [s.session_id for s in page2.items + rest.items] == expected


def test_c09_limit_means_newest_k_oldest_first(manager: SessionManager, sid: str) -> None:
    """C09: m1..m10 with limit=3 gives [m8, m9, m10]; limit=20 gives all ten."""
    _fill(manager, sid, 10)
    got = manager.get_messages(session_id=sid, user_id=USER, limit=3).items
    assert [x.content for x in got] == ["m8", "m9", "m10"]
    page = manager.get_messages(session_id=sid, user_id=USER, limit=20)
    assert [x.content for x in page.items] == [f"m{i}" for i in range(1, 11)]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(0, []), (None, [1, 2, 3, 4, 5]), (1, [5]), (5, [1, 2, 3, 4, 5]), (6, [1, 2, 3, 4, 5])],
)
def test_c20_limit_edge_values(
    manager: SessionManager, sid: str, limit: int | None, expected: list[int]
) -> None:
    """C20: limit 0 -> empty; absent -> all; k -> newest k."""
    _fill(manager, sid, 5)
    kwargs = {} if limit is None else {"limit": limit}
    assert seqs(manager.get_messages(session_id=sid, user_id=USER, **kwargs).items) == expected


@pytest.mark.store_independent
@pytest.mark.parametrize("bad", [-1, -100, 1.5, "3", True])
def test_c20_bad_limits_are_validation_errors(
    manager: SessionManager, sid: str, bad: object
) -> None:
    """C20: limit -1 (or not an int) is a ValidationError on every listing."""
    _fill(manager, sid, 5)
    for call in (
        lambda: manager.get_messages(session_id=sid, user_id=USER, limit=bad).items,
        lambda: manager.list_sessions(user_id=USER, limit=bad),
        lambda: manager.get_tool_history(session_id=sid, user_id=USER, limit=bad).items,
        lambda: manager.list_runs(session_id=sid, user_id=USER, limit=bad).items,
        lambda: manager.get_audit_log(session_id=sid, user_id=USER, limit=bad).items,
    ):
        with pytest.raises(ValidationError):
            call()
    assert manager.list_sessions(user_id=USER, limit=0).items == []


@pytest.mark.store_independent
def test_cursor_validation(manager: SessionManager, sid: str) -> None:
    """Both cursors at once, negative cursors and foreign list cursors are ValidationErrors."""
    _fill(manager, sid, 3)
    for kwargs in ({"before": 2, "after": 1}, {"before": -1}, {"after": "1"}):
        with pytest.raises(ValidationError):
            manager.get_messages(session_id=sid, user_id=USER, **kwargs)
    for cursor in ("garbage", "", "a" * 500, "eyJ4IjoxfQ"):
        with pytest.raises(ValidationError):
            manager.list_sessions(user_id=USER, cursor=cursor)


# ------------------------------------------------------------------ long history


def _page_backwards(m: SessionManager, sid: str, size: int, start: int | None = None) -> list[int]:
    """Seqs seen following ``next_cursor`` back from ``before=start`` (None: the newest)."""
    out: list[int] = []
    page = m.get_messages(session_id=sid, user_id=USER, limit=size, before=start)
    while True:
        assert seqs(page.items) == sorted(seqs(page.items))
        out = seqs(page.items) + out
        assert page.has_more == (bool(page.items) and page.items[0].seq > 1)
        if page.next_cursor is None:
            return out
        page = m.get_messages(session_id=sid, user_id=USER, limit=size, cursor=page.next_cursor)


def _page_forwards(
    m: SessionManager, sid: str, size: int, stop: threading.Event | None = None
) -> list[int]:
    """Seqs seen following ``next_cursor`` forwards from the first message; with ``stop``,
    pages on (from the last seq seen) until it is set and the end is reached."""
    out: list[int] = []
    page = m.get_messages(session_id=sid, user_id=USER, limit=size, after=0)
    while True:
        out += seqs(page.items)
        if page.next_cursor is not None:
            page = m.get_messages(session_id=sid, user_id=USER, limit=size, cursor=page.next_cursor)
            continue
        if stop is None or stop.is_set():
            return out
        page = m.get_messages(session_id=sid, user_id=USER, limit=size, after=out[-1] if out else 0)


@pytest.mark.parametrize("n", [10, 1000, pytest.param(10_000, marks=pytest.mark.servers_slow)])
def test_c18_long_history(manager: SessionManager, sid: str, n: int) -> None:
    """C18: get_session and the last 50 are right at every size; paging visits each message once."""
    _fill(manager, sid, n)
    s = manager.get_session(session_id=sid, user_id=USER)
    assert (s.message_count, s.version) == (n, 1 + -(-n // 1000))
    last = manager.get_messages(session_id=sid, user_id=USER, limit=50).items
    assert [x.content for x in last] == [f"m{i}" for i in range(max(1, n - 49), n + 1)]
    size = 7 if n <= 1000 else 500
    assert _page_backwards(manager, sid, size) == list(range(1, n + 1))
    assert _page_forwards(manager, sid, size) == list(range(1, n + 1))


def test_c18_paging_while_appends_go_on(manager: SessionManager, sid: str) -> None:
    """C18: paging backwards and forwards during appends visits each message exactly once."""
    _fill(manager, sid, 1000)
    stop = threading.Event()
    errors: list[BaseException] = []

    def appender() -> None:
        try:
            i = 0
            while not stop.is_set() and i < 400:
                manager.append_messages(
                    session_id=sid,
                    user_id=USER,
                    messages=[user_msg(f"late{i}-{j}") for j in range(5)],
                )
                i += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=appender)
    t.start()
    try:
        back = _page_backwards(manager, sid, 37, start=1001)
        fwd = _page_forwards(manager, sid, 37)
    finally:
        stop.set()
        t.join()
    assert not errors
    assert back == list(range(1, 1001))
    assert fwd == list(range(1, len(fwd) + 1)) and len(fwd) >= 1000
    total = manager.get_session(session_id=sid, user_id=USER).message_count
    assert seqs(every(manager.get_messages, session_id=sid, user_id=USER)) == list(
        range(1, total + 1)
    )


# ---------------------------------------------------------------- tool pairs, C27


def _rounds(m: SessionManager, sid: str, rounds: int) -> None:
    msgs: list[dict[str, Any]] = []
    for r in range(rounds):
        c1, c2 = f"r{r}c1", f"r{r}c2"
        msgs += [
            user_msg(f"q{r}"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": c1, "type": "function", "function": {"name": "a", "arguments": "{}"}},
                    {"id": c2, "type": "function", "function": {"name": "b", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": c1, "content": "1"},
            {"role": "tool", "tool_call_id": c2, "content": "2"},
            assistant_msg(f"done {r}"),
        ]
    m.append_messages(session_id=sid, user_id=USER, messages=msgs)


def _check_window(window: list[Message]) -> None:
    assert seqs(window) == list(range(window[0].seq, window[0].seq + len(window)))
    calls = {c["id"] for x in window if x.role == Role.ASSISTANT for c in (x.tool_calls or [])}
    results = {x.tool_call_id for x in window if x.role == Role.TOOL}
    assert results <= calls, f"window {seqs(window)} starts inside a tool group"
    assert calls <= results, f"window {seqs(window)} ends inside a parallel tool group"


def test_c27_windows_never_split_tool_pairs(manager: SessionManager, sid: str) -> None:
    """C27: 50 rounds; windows of every size 1..250 never split a call from its results."""
    _rounds(manager, sid, 50)
    for k in range(1, 251):
        window = manager.get_messages(session_id=sid, user_id=USER, limit=k).items
        assert window[-1].seq == 250 and len(window) >= k
        _check_window(window)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 6])
def test_c27_aligned_paging_visits_each_message_once(
    manager: SessionManager, sid: str, size: int
) -> None:
    """C27: paging with aligned windows backwards and forwards still visits each message once."""
    _rounds(manager, sid, 10)
    out: list[int] = []
    before = None
    while True:
        page = manager.get_messages(session_id=sid, user_id=USER, limit=size, before=before).items
        if not page:
            break
        _check_window(page)
        out = seqs(page) + out
        before = page[0].seq
    assert out == list(range(1, 51))
    out, after = [], 0
    while True:
        page = manager.get_messages(session_id=sid, user_id=USER, limit=size, after=after).items
        if not page:
            break
        _check_window(page)
        out += seqs(page)
        after = page[-1].seq
    assert out == list(range(1, 51))


# ------------------------------------------------------------------ fidelity, C29

C29_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "zeta", "arguments": '{"z":1,"a":2}'},
            },
            {
                "type": "function",
                "id": "call_a",
                "function": {"arguments": "{}", "name": "alpha"},
                "x_provider": {"b": 1, "a": 2},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_b", "name": "zeta", "content": "ok"},
    {"role": "tool", "tool_call_id": "call_a", "content": ""},
    {"role": "assistant", "refusal": "I can't help with that."},
    {
        "role": "assistant",
        "content": "",
        "audio": {"id": "au_1", "expires_at": 1},
        "reasoning_content": "thinking",
        "annotations": [],
        "x_nested": {"z": [3, {"y": None}]},
    },
    {"role": "user", "content": "hi", "name": "alice_2", "metadata": {"b": 2, "a": 1}},
]


def test_c29_round_trip_is_lossless(manager: SessionManager, sid: str) -> None:
    """C29: tool_calls, tool_call_id, name, refusal, extra fields, ''/null/missing round-trip."""
    stored = manager.append_messages(session_id=sid, user_id=USER, messages=C29_MESSAGES)
    got = manager.get_messages(session_id=sid, user_id=USER).items
    for sent, ret, back in zip(C29_MESSAGES, stored, got, strict=True):
        assert same_payload(ret.payload(), sent)
        assert same_payload(back.payload(), sent), (back.payload(), sent)
    assert "content" not in got[5].payload()
    assert got[2].payload()["content"] is None
    assert got[6].payload()["content"] == ""
    assert got[4].payload()["content"] == ""


_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
)
_json = st.recursive(
    _json_leaf,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
    optional={
        "content": st.none()
        | st.text(max_size=50)
        | st.lists(st.dictionaries(st.text(max_size=6), _json, max_size=3), max_size=3),
        "name": st.none() | st.text(min_size=1, max_size=10),
        "tool_call_id": st.text(min_size=1, max_size=10),
        "x_extra": _json,
        "refusal": st.none() | st.text(max_size=10),
        "tool_calls": st.lists(st.dictionaries(st.text(max_size=6), _json, max_size=3), max_size=3),
    },
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(_message, min_size=1, max_size=4))
def test_random_messages_round_trip(manager: SessionManager, batch: list[dict[str, Any]]) -> None:
    """Any JSON message payload comes back field for field, in nested order, on every store."""
    sid = manager.create_session(user_id=USER).session_id
    manager.append_messages(session_id=sid, user_id=USER, messages=batch)
    got = manager.get_messages(session_id=sid, user_id=USER).items
    assert len(got) == len(batch)
    assert all(same_payload(x.payload(), y) for x, y in zip(got, batch, strict=True))


@pytest.mark.store_independent
@pytest.mark.parametrize(
    "field", ["message_id", "session_id", "seq", "created_at", "session_version"]
)
def test_store_assigned_fields_cannot_be_sent(
    manager: SessionManager, sid: str, field: str
) -> None:
    """A message carrying a store-assigned field is rejected, nothing written."""
    with pytest.raises(ValidationError):
        manager.append_message(
            session_id=sid, user_id=USER, message={"role": "user", "content": "x", field: 1}
        )
    assert manager.get_messages(session_id=sid, user_id=USER).items == []


def test_batch_is_atomic(manager: SessionManager, sid: str) -> None:
    """A batch with one bad message stores none of them."""
    with pytest.raises(ValidationError):
        manager.append_messages(
            session_id=sid,
            user_id=USER,
            messages=[user_msg("ok"), {"role": "robot", "content": "x"}],
        )
    with pytest.raises(RunNotFound):
        manager.append_messages(
            session_id=sid,
            user_id=USER,
            messages=[user_msg("ok"), user_msg("x", run_id="run_aaaaaaaaaaaaaaaaaaaaaaaaaa")],
        )
    assert manager.get_messages(session_id=sid, user_id=USER).items == []
    assert manager.get_session(session_id=sid, user_id=USER).version == 1


def test_batch_is_one_version_step_with_consecutive_seqs(manager: SessionManager, sid: str) -> None:
    """append_messages gives consecutive seqs and bumps the version once."""
    manager.append_message(session_id=sid, user_id=USER, message=user_msg("first"))
    out = manager.append_messages(
        session_id=sid, user_id=USER, messages=[user_msg(str(i)) for i in range(5)]
    )
    assert seqs(out) == [2, 3, 4, 5, 6]
    assert manager.get_session(session_id=sid, user_id=USER).version == 3


# ------------------------------------------------------------------ tool history


def test_tool_history_record_list_filter(manager: SessionManager, sid: str) -> None:
    """Tool calls are listed oldest first, filterable by tool, after a seq, with a limit."""
    made = [
        manager.record_tool_call(
            session_id=sid, user_id=USER, tool=t, arguments={"i": i}, result={"out": i}
        )
        for i, t in enumerate(["grep", "read_file", "grep", "run_tests", "grep"])
    ]
    assert [c.seq for c in made] == [1, 2, 3, 4, 5]
    hist = manager.get_tool_history(session_id=sid, user_id=USER).items
    assert [(c.call_id, c.tool, c.arguments, c.result) for c in hist] == [
        (c.call_id, c.tool, c.arguments, c.result) for c in made
    ]
    assert [
        c.seq for c in manager.get_tool_history(session_id=sid, user_id=USER, tool="grep").items
    ] == [1, 3, 5]
    assert [
        c.seq
        for c in manager.get_tool_history(session_id=sid, user_id=USER, after=2, limit=2).items
    ] == [3, 4]
    assert manager.get_session(session_id=sid, user_id=USER).tool_call_count == 5


def test_tool_call_fields(manager: SessionManager, sid: str) -> None:
    """A failed call keeps status, error, timestamps and duration; a given call_id is kept."""
    from datetime import UTC, datetime, timedelta

    start = datetime.now(UTC) - timedelta(seconds=2)
    end = start + timedelta(milliseconds=1500)
    run = manager.start_run(session_id=sid, user_id=USER)
    call = manager.record_tool_call(
        session_id=sid,
        user_id=USER,
        tool="run_tests",
        arguments={"path": "tests"},
        result=None,
        status="error",
        error="exit 1",
        started_at=start,
        ended_at=end,
        run_id=run.run_id,
        call_id="call_abc",
    )
    [got] = manager.get_tool_history(session_id=sid, user_id=USER).items
    assert got == as_read(call) and call.session_version == 3
    assert (got.status, got.error, got.call_id, got.run_id) == (
        ToolCallStatus.ERROR,
        "exit 1",
        "call_abc",
        run.run_id,
    )
    assert (got.started_at, got.ended_at, got.duration_ms) == (start, end, 1500.0)
    with pytest.raises(ValidationError):
        manager.record_tool_call(
            session_id=sid, user_id=USER, tool="t", started_at=end, ended_at=start
        )
    with pytest.raises(RunNotFound):
        manager.record_tool_call(
            session_id=sid, user_id=USER, tool="t", run_id="run_aaaaaaaaaaaaaaaaaaaaaaaaaa"
        )
    assert manager.get_session(session_id=sid, user_id=USER).tool_call_count == 1


def test_find_tool_call_ignores_key_order(manager: SessionManager, sid: str) -> None:
    """find_tool_call matches tool + arguments regardless of key order, newest first."""
    args = {"path": "src/app.py", "opts": {"a": 1, "b": [1, {"y": 2, "x": 1}]}}
    first = manager.record_tool_call(
        session_id=sid, user_id=USER, tool="read_file", arguments=args, result="v1"
    )
    reordered = {"opts": {"b": [1, {"x": 1, "y": 2}], "a": 1}, "path": "src/app.py"}
    found = manager.find_tool_call(
        session_id=sid, user_id=USER, tool="read_file", arguments=reordered
    )
    assert found is not None and found.call_id == first.call_id
    second = manager.record_tool_call(
        session_id=sid, user_id=USER, tool="read_file", arguments=reordered, result="v2"
    )
    found = manager.find_tool_call(session_id=sid, user_id=USER, tool="read_file", arguments=args)
    assert found is not None and (found.call_id, found.result) == (second.call_id, "v2")
    for tool, a in [
        ("grep", args),
        ("read_file", {"path": "src/app.py"}),
        ("read_file", {**args, "opts": {"a": 1, "b": [{"x": 1, "y": 2}, 1]}}),
    ]:
        assert manager.find_tool_call(session_id=sid, user_id=USER, tool=tool, arguments=a) is None
    manager.record_tool_call(session_id=sid, user_id=USER, tool="ls")
    assert manager.find_tool_call(session_id=sid, user_id=USER, tool="ls") is not None
    assert manager.find_tool_call(session_id=sid, user_id=USER, tool="ls", arguments={}) is not None


def test_tool_history_is_per_session(manager: SessionManager, sid: str) -> None:
    """Another session's tool calls are never found or listed."""
    other = manager.create_session(user_id=OTHER).session_id
    manager.record_tool_call(session_id=other, user_id=OTHER, tool="grep", arguments={"q": 1})
    assert manager.get_tool_history(session_id=sid, user_id=USER).items == []
    assert (
        manager.find_tool_call(session_id=sid, user_id=USER, tool="grep", arguments={"q": 1})
        is None
    )


def test_duplicate_call_id_is_a_conflict_and_writes_nothing(
    manager: SessionManager, sid: str
) -> None:
    """Recording a second call with the same call_id is a Conflict, promptly; nothing written."""
    from contract_support import snapshot

    from agentsession import Conflict

    manager.record_tool_call(session_id=sid, user_id=USER, tool="t", call_id="c1")
    before = snapshot(manager, sid)
    with pytest.raises(Conflict):
        manager.record_tool_call(session_id=sid, user_id=USER, tool="t", call_id="c1", result=2)
    assert snapshot(manager, sid) == before


def test_c36_provider_reuses_call_ids(manager: SessionManager, sid: str) -> None:
    """C36: a model provider answers ``call_0`` twice in one session (different
    arguments): both calls are recorded under ids of ours; lookup by provider id gives
    the newest; our own call ids stay unique (a chosen one repeated is still a conflict)."""
    from agentsession import ToolCallExists

    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    first = manager.record_tool_call(
        **kw, tool="grep", arguments={"q": "a"}, provider_call_id="call_0", result=1
    )
    manager.record_tool_call(**kw, tool="grep", arguments={"q": "x"}, provider_call_id="call_1")
    second = manager.record_tool_call(
        **kw, tool="grep", arguments={"q": "b"}, provider_call_id="call_0", result=2
    )
    assert first.call_id != second.call_id and first.call_id.startswith("call_")
    assert (first.provider_call_id, second.provider_call_id) == ("call_0", "call_0")
    found = manager.find_tool_call(**kw, provider_call_id="call_0")
    assert found == as_read(second) and found.seq == 3 and found.result == 2
    assert manager.find_tool_call(**kw, provider_call_id="call_9") is None
    older = manager.find_tool_call(**kw, tool="grep", arguments={"q": "a"})
    assert older == as_read(first)
    history = manager.get_tool_history(**kw).items
    assert [c.provider_call_id for c in history] == ["call_0", "call_1", "call_0"]
    grep_after_1 = manager.get_tool_history(**kw, tool="grep", after=1).items
    assert [c.provider_call_id for c in grep_after_1] == ["call_1", "call_0"]
    other = manager.create_session(user_id=USER).session_id
    assert manager.find_tool_call(session_id=other, user_id=USER, provider_call_id="call_0") is None
    manager.record_tool_call(**kw, tool="t", call_id="mine", provider_call_id="call_0")
    with pytest.raises(ToolCallExists):
        manager.record_tool_call(**kw, tool="t", call_id="mine", provider_call_id="call_0")
    assert manager.find_tool_call(**kw, provider_call_id="call_0").call_id == "mine"
