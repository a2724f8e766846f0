"""Bounded listings: every list read is a Page with a default size, an opaque cursor and
``has_more``; restore returns bounded windows with cursors; every write answer carries
the session's new version."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from contract_support import USER, as_read, every, seqs, user_msg

from agentsession import (
    Limits,
    Message,
    Page,
    Policy,
    Role,
    RunStatus,
    SessionManager,
    ValidationError,
)
from agentsession.stores.base import SessionStore, StoreTransaction


def _small(store: SessionStore, **policy: Any) -> SessionManager:
    """A manager over the same store with a default page of 3 (cheap to page through)."""
    return SessionManager(store, limits=Limits(default_page_size=3), policy=Policy(**policy))


def _groups(m: SessionManager, sid: str, rounds: int) -> None:
    """``rounds`` x (user, assistant with 1-3 parallel calls, their results, reply)."""
    msgs: list[dict[str, Any]] = []
    for r in range(rounds):
        ids = [f"r{r}c{i}" for i in range(1 + r % 3)]
        msgs += [
            user_msg(f"q{r}"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for c in ids
                ],
            },
            *({"role": "tool", "tool_call_id": c, "content": "ok"} for c in ids),
            {"role": "assistant", "content": f"done {r}"},
        ]
    m.append_messages(session_id=sid, user_id=USER, messages=msgs)


def _whole_groups(window: list[Message]) -> bool:
    calls = {c["id"] for x in window if x.role == Role.ASSISTANT for c in (x.tool_calls or [])}
    results = {x.tool_call_id for x in window if x.role == Role.TOOL}
    return calls == results


def _walk(m: SessionManager, sid: str, first: Page[Message], **kw: Any) -> list[list[Message]]:
    pages = [first]
    while pages[-1].next_cursor is not None:
        page = m.get_messages(session_id=sid, user_id=USER, cursor=pages[-1].next_cursor, **kw)
        assert page.items, "a cursor led to an empty page"
        pages.append(page)
    return [p.items for p in pages]


# ----------------------------------------------------------------- default page size


def test_default_page_is_100_and_says_more_exist(manager: SessionManager, sid: str) -> None:
    """101 messages: a plain read gives the newest 100 with has_more; the cursor the 101st."""
    manager.append_messages(
        session_id=sid, user_id=USER, messages=[user_msg(f"m{i}") for i in range(1, 102)]
    )
    page = manager.get_messages(session_id=sid, user_id=USER)
    assert (seqs(page.items), page.has_more) == (list(range(2, 102)), True)
    rest = manager.get_messages(session_id=sid, user_id=USER, cursor=page.next_cursor)
    assert (seqs(rest.items), rest.has_more, rest.next_cursor) == ([1], False, None)
    for n in range(101):
        manager.record_tool_call(session_id=sid, user_id=USER, tool="t", arguments={"n": n})
    calls = manager.get_tool_history(session_id=sid, user_id=USER)
    assert ([c.seq for c in calls.items], calls.has_more) == (list(range(1, 101)), True)
    last = manager.get_tool_history(session_id=sid, user_id=USER, cursor=calls.next_cursor)
    assert ([c.seq for c in last.items], last.has_more) == ([101], False)
    audit = manager.get_audit_log(session_id=sid, user_id=USER)
    assert (len(audit.items), audit.has_more) == (100, True)


def test_every_listing_pages_once_through_everything(store: SessionStore) -> None:
    """Tool calls (all, one tool), runs (all, one status), audit, sessions: following the
    cursors of pages of 3 visits every item once; a page that leaves items out says so."""
    m = _small(store)
    sid = m.create_session(user_id=USER).session_id
    for n in range(8):
        m.record_tool_call(session_id=sid, user_id=USER, tool="a" if n % 2 else "b")
    for n in range(7):
        run = m.start_run(session_id=sid, user_id=USER)
        status = "FAILED" if n % 3 == 0 else "SUCCEEDED"
        m.finish_run(session_id=sid, user_id=USER, run_id=run.run_id, status=status)
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    assert [c.seq for c in every(m.get_tool_history, **kw)] == list(range(1, 9))
    assert [c.seq for c in every(m.get_tool_history, tool="a", **kw)] == [2, 4, 6, 8]
    assert [r.seq for r in every(m.list_runs, **kw)] == list(range(1, 8))
    assert [r.seq for r in every(m.list_runs, status="FAILED", **kw)] == [1, 4, 7]
    assert [r.seq for r in every(m.list_runs, status="SUCCEEDED", after=2, **kw)] == [3, 5, 6]
    assert len(every(m.get_audit_log, **kw)) == 1 + 8 + 14
    for page in (m.get_tool_history(**kw), m.list_runs(**kw), m.get_audit_log(**kw)):
        assert (len(page.items), page.has_more) == (3, True)
    exact = m.list_runs(**kw, status="FAILED", after=1, limit=2)
    assert ([r.seq for r in exact.items], exact.has_more) == ([4, 7], False)
    for _ in range(3):
        m.create_session(user_id=USER)
    listed = m.list_sessions(user_id=USER)
    assert (len(listed.items), listed.has_more) == (3, True)
    assert len(m.list_sessions(user_id=USER, cursor=listed.next_cursor).items) == 1


def test_limit_zero_is_an_empty_page_without_cursor(manager: SessionManager, sid: str) -> None:
    """limit=0 asks for nothing: an empty page that promises nothing."""
    manager.append_message(session_id=sid, user_id=USER, message=user_msg("x"))
    manager.record_tool_call(session_id=sid, user_id=USER, tool="t")
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER, "limit": 0}
    for listing in (
        manager.get_messages,
        manager.get_tool_history,
        manager.list_runs,
        manager.get_audit_log,
    ):
        page = listing(**kw)
        assert (page.items, page.next_cursor, page.has_more) == ([], None, False)


@pytest.mark.store_independent
def test_limit_above_the_maximum_is_refused(manager: SessionManager, sid: str) -> None:
    """No listing gives more than Limits.max_page_size at once, messages included."""
    too_many = Limits().max_page_size + 1
    for listing in (
        manager.get_messages,
        manager.get_tool_history,
        manager.list_runs,
        manager.get_audit_log,
    ):
        with pytest.raises(ValidationError):
            listing(session_id=sid, user_id=USER, limit=too_many)
    with pytest.raises(ValidationError):
        manager.list_sessions(user_id=USER, limit=too_many)


# --------------------------------------------------------------- message cursors


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_message_cursors_visit_each_seq_once_both_ways(
    manager: SessionManager, sid: str, size: int
) -> None:
    """On a history of tool-call groups, aligned pages followed by their cursors, back
    from the newest and forward from the first, see every seq exactly once, each page
    holding whole groups; unaligned pages too."""
    _groups(manager, sid, 9)
    total = manager.get_session(session_id=sid, user_id=USER).message_count
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER, "limit": size}
    back = _walk(manager, sid, manager.get_messages(**kw), limit=size)
    fwd = _walk(manager, sid, manager.get_messages(**kw, after=0), limit=size)
    for pages in (back, fwd):
        assert all(_whole_groups(p) for p in pages)
    assert [s for p in reversed(back) for s in seqs(p)] == list(range(1, total + 1))
    assert [s for p in fwd for s in seqs(p)] == list(range(1, total + 1))
    plain = manager.get_messages(**kw, after=0, align_tool_calls=False)
    walked = _walk(manager, sid, plain, limit=size, align_tool_calls=False)
    assert [s for p in walked for s in seqs(p)] == list(range(1, total + 1))
    assert all(len(p) == size for p in walked[:-1])


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_message_cursors_visit_each_seq_once_around_a_late_tool_result(
    manager: SessionManager, sid: str, size: int
) -> None:
    """A tool result that does not follow its call (a user message came between): the
    aligned pages still see every seq exactly once, both ways."""
    manager.append_messages(
        session_id=sid,
        user_id=USER,
        messages=[
            user_msg("q"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            user_msg("still there?"),
            {"role": "tool", "tool_call_id": "c1", "content": "late"},
            {"role": "assistant", "content": "done"},
            user_msg("next"),
        ],
    )
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER, "limit": size}
    back = _walk(manager, sid, manager.get_messages(**kw), limit=size)
    fwd = _walk(manager, sid, manager.get_messages(**kw, after=0), limit=size)
    assert [s for p in reversed(back) for s in seqs(p)] == [1, 2, 3, 4, 5, 6]
    assert [s for p in fwd for s in seqs(p)] == [1, 2, 3, 4, 5, 6]


def test_message_cursor_from_a_seq_bound(manager: SessionManager, sid: str) -> None:
    """before= and after= start a walk; its cursors go on in the same direction."""
    manager.append_messages(
        session_id=sid, user_id=USER, messages=[user_msg(str(i)) for i in range(10)]
    )
    back = manager.get_messages(session_id=sid, user_id=USER, before=6, limit=2)
    older = manager.get_messages(session_id=sid, user_id=USER, cursor=back.next_cursor, limit=2)
    assert (seqs(back.items), seqs(older.items)) == ([4, 5], [2, 3])
    fwd = manager.get_messages(session_id=sid, user_id=USER, after=6, limit=2)
    newer = manager.get_messages(session_id=sid, user_id=USER, cursor=fwd.next_cursor, limit=2)
    assert (seqs(fwd.items), seqs(newer.items), newer.has_more) == ([7, 8], [9, 10], False)


@pytest.mark.store_independent
def test_foreign_or_malformed_cursors_are_validation_errors(manager: SessionManager) -> None:
    """A cursor is only good for the listing that issued it: same session, same list,
    same filter; with a seq bound, or tampered with, it is refused."""
    a = manager.create_session(user_id=USER).session_id
    b = manager.create_session(user_id=USER).session_id
    for sid in (a, b):
        manager.append_messages(
            session_id=sid, user_id=USER, messages=[user_msg(str(i)) for i in range(4)]
        )
        for tool in ("x", "y", "x", "y"):
            manager.record_tool_call(session_id=sid, user_id=USER, tool=tool)
    kw: dict[str, Any] = {"session_id": a, "user_id": USER, "limit": 1}
    messages = manager.get_messages(**kw).next_cursor
    calls = manager.get_tool_history(**kw).next_cursor
    x_calls = manager.get_tool_history(**kw, tool="x").next_cursor
    audit = manager.get_audit_log(**kw).next_cursor
    sessions = manager.list_sessions(user_id=USER, limit=1).next_cursor
    assert None not in (messages, calls, x_calls, audit, sessions)
    bad: list[Any] = [
        lambda: manager.get_messages(session_id=b, user_id=USER, cursor=messages),
        lambda: manager.get_messages(**kw, cursor=messages, align_tool_calls=False),
        lambda: manager.get_messages(**kw, cursor=messages, before=3),
        lambda: manager.get_messages(**kw, cursor=calls),
        lambda: manager.get_tool_history(**kw, cursor=messages),
        lambda: manager.get_tool_history(**kw, cursor=x_calls),
        lambda: manager.get_tool_history(**kw, cursor=calls, tool="y"),
        lambda: manager.get_tool_history(**kw, cursor=calls, after=1),
        lambda: manager.list_runs(**kw, cursor=calls),
        lambda: manager.get_audit_log(**kw, cursor=sessions),
        lambda: manager.list_sessions(user_id=USER, cursor=audit),
    ]
    bad += [
        lambda c=c: manager.get_messages(**kw, cursor=c)
        for c in ("", "garbage", "a" * 500, messages[:-2], 5, "eyJ4IjoxfQ")
    ]
    for call in bad:
        with pytest.raises(ValidationError):
            call()
    assert manager.get_tool_history(**kw, tool="x", cursor=x_calls).items[0].tool == "x"


# ------------------------------------------------------------------------- restore


class _Recorder:
    """A store wrapper that records the ``limit`` of every tool-call and run listing."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner, self.url = inner, inner.url
        self.limits: list[tuple[str, int | None]] = []

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[StoreTransaction]:
        with self.inner.transaction(write=write) as tx:
            yield _RecordingTx(self, tx)  # type: ignore[misc]

    def close(self) -> None:
        """The wrapped store belongs to the fixture."""


class _RecordingTx:
    def __init__(self, recorder: _Recorder, tx: StoreTransaction) -> None:
        self._recorder, self._tx = recorder, tx

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._tx, name)
        if name not in ("list_tool_calls", "list_runs", "get_messages"):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("status") is None:  # the take-over's RUNNING lookup is not a window
                self._recorder.limits.append((name, kwargs.get("limit")))
            return target(*args, **kwargs)

        return call


@pytest.mark.store_independent
def test_session_list_cursor_is_tied_to_its_filters_and_user(manager: SessionManager) -> None:
    """A list_sessions cursor only pages the listing that issued it: with another status,
    agent or user it is refused, never an empty page hiding sessions that exist."""
    for _ in range(3):
        manager.create_session(user_id=USER, agent="a")
    closed = manager.create_session(user_id=USER, agent="a").session_id
    manager.close_session(session_id=closed, user_id=USER)
    first = manager.list_sessions(user_id=USER, status="ACTIVE", limit=1)
    assert first.next_cursor is not None
    more = manager.list_sessions(user_id=USER, status="ACTIVE", limit=1, cursor=first.next_cursor)
    assert more.items and more.items[0].session_id != first.items[0].session_id
    for other in (
        {"user_id": USER, "status": "CLOSED"},
        {"user_id": USER, "agent": "b"},
        {"user_id": USER},
        {"user_id": "mallory", "status": "ACTIVE"},
    ):
        with pytest.raises(ValidationError, match="another listing"):
            manager.list_sessions(**other, limit=1, cursor=first.next_cursor)


def test_restore_returns_bounded_windows_with_cursors(store: SessionStore) -> None:
    """Restore gives the newest N messages, tool calls and runs (the RUNNING one, now
    INTERRUPTED, among them), asks the store only for bounded windows, and its cursors
    page back over the rest exactly once."""
    recorder = _Recorder(store)
    policy = {"restore_message_limit": 4, "restore_tool_call_limit": 3, "restore_run_limit": 2}
    m = _small(recorder, **policy)  # type: ignore[arg-type]
    sid = m.create_session(user_id=USER).session_id
    _groups(m, sid, 4)
    for n in range(7):
        m.record_tool_call(session_id=sid, user_id=USER, tool="t", arguments={"n": n})
    for _ in range(4):
        run = m.start_run(session_id=sid, user_id=USER)
        m.finish_run(session_id=sid, user_id=USER, run_id=run.run_id, status="SUCCEEDED")
    running = m.start_run(session_id=sid, user_id=USER)  # its worker dies: restore takes over
    recorder.limits.clear()
    r = m.restore_session(session_id=sid, user_id=USER)
    assert recorder.limits and all(limit is not None for _, limit in recorder.limits)
    assert r.interrupted_run_ids == [running.run_id]
    assert [x.seq for x in r.runs] == [4, 5] and r.runs[-1].status == RunStatus.INTERRUPTED
    assert [x.seq for x in r.tool_calls] == [5, 6, 7]
    assert _whole_groups(r.messages) and r.messages[-1].seq == r.session.message_count
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    older_messages = every(m.get_messages, cursor=r.messages_next_cursor, **kw)
    assert seqs(older_messages + r.messages) == list(range(1, r.session.message_count + 1))
    older_calls = every(m.get_tool_history, cursor=r.tool_calls_next_cursor, **kw)
    assert [c.seq for c in older_calls] == [1, 2, 3, 4]
    older_runs = every(m.list_runs, cursor=r.runs_next_cursor, **kw)
    assert [x.seq for x in older_runs] == [1, 2, 3]


def test_restore_of_a_small_session_has_no_cursors(manager: SessionManager, sid: str) -> None:
    """Windows that hold everything say so: every cursor is None."""
    manager.append_message(session_id=sid, user_id=USER, message=user_msg("hi"))
    manager.record_tool_call(session_id=sid, user_id=USER, tool="t")
    manager.start_run(session_id=sid, user_id=USER)
    r = manager.restore_session(session_id=sid, user_id=USER)
    assert (len(r.messages), len(r.tool_calls), len(r.runs)) == (1, 1, 1)
    assert (r.messages_next_cursor, r.tool_calls_next_cursor, r.runs_next_cursor) == (
        None,
        None,
        None,
    )


def test_restore_without_messages_still_points_at_the_history(
    manager: SessionManager, sid: str
) -> None:
    """message_limit=0: no messages, and a cursor that reads the history from the newest."""
    manager.append_messages(
        session_id=sid, user_id=USER, messages=[user_msg(str(i)) for i in range(3)]
    )
    r = manager.restore_session(session_id=sid, user_id=USER, message_limit=0)
    assert r.messages == [] and r.messages_next_cursor is not None
    page = manager.get_messages(session_id=sid, user_id=USER, cursor=r.messages_next_cursor)
    assert (seqs(page.items), page.has_more) == ([1, 2, 3], False)


# ------------------------------------------------------------------ session_version


def test_write_answers_chain_on_their_session_version(manager: SessionManager, sid: str) -> None:
    """Each write answer's session_version is the session's new version: five writes
    chained on it alone never conflict, and it equals a fresh read of the session."""
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    version = manager.get_session(**kw).version
    writes = [
        lambda v: manager.append_message(**kw, message=user_msg("a"), expected_version=v),
        lambda v: manager.record_tool_call(**kw, tool="t", expected_version=v),
        lambda v: manager.start_run(**kw, expected_version=v),
        lambda v: manager.add_run_step(**kw, run_id=run_id, kind="model", expected_version=v),
        lambda v: manager.finish_run(**kw, run_id=run_id, status="SUCCEEDED", expected_version=v),
        lambda v: manager.append_messages(**kw, messages=[user_msg("b")], expected_version=v)[0],
    ]
    run_id = ""
    for write in writes:
        answer = write(version)
        run_id = getattr(answer, "run_id", None) or run_id
        assert answer.session_version == version + 1
        version = answer.session_version
        assert manager.get_session(**kw).version == version
    assert manager.get_messages(**kw).items[0].session_version is None
    assert manager.get_tool_history(**kw).items[0].session_version is None
    assert manager.get_run(**kw, run_id=run_id).session_version is None


def test_replays_answer_the_first_session_version(manager: SessionManager, sid: str) -> None:
    """A retried write answers the first answer's session_version, not the current one."""
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    first = manager.append_message(**kw, message=user_msg("x"), idempotency_key="k1")
    manager.append_message(**kw, message=user_msg("later"))
    again = manager.append_message(**kw, message=user_msg("x"), idempotency_key="k1")
    assert again == first and again.session_version == 2
    call = manager.record_tool_call(**kw, tool="t", idempotency_key="k2")
    assert manager.record_tool_call(**kw, tool="t", idempotency_key="k2") == call
    assert as_read(call) == manager.get_tool_history(**kw).items[0]
