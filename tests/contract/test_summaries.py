"""Compaction on every store: ``add_summary`` / ``list_summaries`` (numbering, fields,
supersedes, validation, one version step and audit event without text, idempotent
replay, gone with the session) and how ``build_context`` uses a summary. Ownership,
stale ``expected_version`` and closed sessions are covered by the operation tables of
contract_support."""

from __future__ import annotations

import pytest
from contract_support import USER, audit_of, new_session, user_msg

from agentsession import SessionManager, ValidationError
from agentsession.tokens import DEFAULT_TOKENIZER, message_tokens, text_tokens


def _session(m: SessionManager, n: int) -> str:
    sid = new_session(m).session_id
    msgs = []
    for i in range(n // 2):
        msgs += [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    m.append_messages(session_id=sid, user_id=USER, messages=msgs)
    return sid


def test_summaries_are_numbered_listed_and_audited_without_text(manager: SessionManager) -> None:
    """Each summary gets the next number, the caller's id as author by default, token
    counts by the default tokenizer, one version step and an audit event naming its
    range but never its text; a superseded summary stays readable."""
    sid = _session(manager, 6)
    v = manager.get_session(session_id=sid, user_id=USER).version
    first = manager.add_summary(
        session_id=sid, user_id=USER, text="secret gist", from_seq=1, to_seq=2
    )
    msgs = manager.get_messages(session_id=sid, user_id=USER).items
    assert (first.number, first.author, first.session_version) == (1, USER, v + 1)
    assert first.summary_tokens == text_tokens(DEFAULT_TOKENIZER, "secret gist")
    assert first.replaced_tokens == sum(message_tokens(DEFAULT_TOKENIZER, m) for m in msgs[:2])
    assert first.tokenizer == "bytes/4"
    second = manager.add_summary(
        session_id=sid,
        user_id=USER,
        text="newer gist",
        from_seq=1,
        to_seq=4,
        author="engine",
        model="m-1",
        summary_tokens=3,
        replaced_tokens=40,
        supersedes=1,
    )
    assert (second.number, second.supersedes, second.model) == (2, 1, "m-1")
    assert (second.summary_tokens, second.replaced_tokens) == (3, 40)
    listed = manager.list_summaries(session_id=sid, user_id=USER)
    assert [s.number for s in listed] == [1, 2]
    assert listed[0].text == "secret gist" and listed[0].session_version is None
    assert manager.list_summaries(session_id=sid, user_id=USER, after=1, limit=5) == listed[1:]
    events = [e for e in audit_of(manager, sid) if e.action == "summary.added"]
    assert [e.details for e in events] == [
        {"number": 1, "from_seq": 1, "to_seq": 2, "supersedes": None},
        {"number": 2, "from_seq": 1, "to_seq": 4, "supersedes": 1},
    ]
    assert "secret" not in repr(audit_of(manager, sid))
    assert len(manager.get_messages(session_id=sid, user_id=USER).items) == 6


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"from_seq": 1, "to_seq": 5}, "to_seq"),
        ({"from_seq": 3, "to_seq": 2}, "from_seq"),
        ({"from_seq": 0, "to_seq": 2}, "from_seq"),
        ({"from_seq": 1, "to_seq": 2, "supersedes": 1}, "supersedes"),
        ({"from_seq": 1, "to_seq": 2, "text": ""}, "text"),
        ({"from_seq": 1, "to_seq": 2, "author": "a\nb"}, "author"),
        ({"from_seq": 1, "to_seq": 2, "summary_tokens": -1}, "summary_tokens"),
    ],
)
def test_add_summary_refuses_bad_input_and_writes_nothing(
    manager: SessionManager, kwargs: dict[str, object], field: str
) -> None:
    sid = _session(manager, 4)
    v = manager.get_session(session_id=sid, user_id=USER).version
    with pytest.raises(ValidationError) as err:
        manager.add_summary(session_id=sid, user_id=USER, **{"text": "gist", **kwargs})
    assert err.value.field == field
    assert manager.get_session(session_id=sid, user_id=USER).version == v
    assert manager.list_summaries(session_id=sid, user_id=USER) == []


def test_add_summary_replays_an_idempotency_key(manager: SessionManager) -> None:
    sid = _session(manager, 4)
    kw = {"session_id": sid, "user_id": USER, "text": "g", "from_seq": 1, "to_seq": 2}
    first = manager.add_summary(**kw, idempotency_key="k1")
    assert manager.add_summary(**kw, idempotency_key="k1") == first
    assert len(manager.list_summaries(session_id=sid, user_id=USER)) == 1


def test_summaries_go_with_their_session(manager: SessionManager) -> None:
    sid = _session(manager, 4)
    manager.add_summary(session_id=sid, user_id=USER, text="g", from_seq=1, to_seq=2)
    manager.delete_session(session_id=sid, user_id=USER)
    with manager.store.transaction(write=False) as tx:
        assert tx.list_summaries(sid) == []


def test_context_sends_the_summary_in_place_of_what_it_covers(manager: SessionManager) -> None:
    """Messages up to the summary's end are left out; a newer summary that covers the
    newest user message is passed over for the newest one below it."""
    sid = _session(manager, 8)
    kw = {"session_id": sid, "user_id": USER}
    manager.add_summary(**kw, text="first four", from_seq=1, to_seq=4)
    ctx = manager.build_context(**kw, budget_tokens=10_000)
    assert ctx.summary is not None and ctx.summary.number == 1
    assert [m.seq for m in ctx.messages] == [5, 6, 7, 8]
    assert ctx.summary_tokens == text_tokens(DEFAULT_TOKENIZER, "first four")
    assert ctx.total_tokens == ctx.system_tokens + ctx.summary_tokens + ctx.message_tokens
    manager.add_summary(**kw, text="everything", from_seq=1, to_seq=8)
    again = manager.build_context(**kw, budget_tokens=10_000)
    assert again.summary is not None and again.summary.number == 1
    assert [m.seq for m in again.messages] == [5, 6, 7, 8]
    manager.append_message(**kw, message={"role": "user", "content": "next"})
    latest = manager.build_context(**kw, budget_tokens=10_000)
    assert latest.summary is not None and latest.summary.number == 2
    assert [m.seq for m in latest.messages] == [9]


def test_a_summary_of_a_middle_range_is_not_used_in_a_context(manager: SessionManager) -> None:
    """A summary that does not start at seq 1 says nothing of the messages before it:
    a context never uses it in their place (they would be dropped unseen)."""
    sid = _session(manager, 20)
    kw = {"session_id": sid, "user_id": USER}
    manager.add_summary(**kw, text="the middle", from_seq=10, to_seq=14)
    ctx = manager.build_context(**kw, budget_tokens=100_000)
    assert ctx.summary is None
    assert [m.seq for m in ctx.messages] == list(range(1, 21)) and ctx.omitted_messages == 0
    manager.add_summary(**kw, text="the start", from_seq=1, to_seq=6)
    ctx = manager.build_context(**kw, budget_tokens=100_000)
    assert ctx.summary is not None and ctx.summary.text == "the start"
    assert [m.seq for m in ctx.messages] == list(range(7, 21))


def _ranges(m: SessionManager, sid: str) -> list[tuple[int, int, int]]:
    listed = m.list_summaries(session_id=sid, user_id=USER)
    return [(s.number, s.from_seq, s.to_seq) for s in listed]


def test_truncate_and_pop_drop_the_summaries_reaching_past_the_end(manager: SessionManager) -> None:
    """A removal takes exactly the summaries whose ``to_seq`` lies beyond the new end,
    whatever their numbers, counts them in its audit event and keeps the others (and
    their numbers); a removal that reaches no summary takes none."""
    sid = _session(manager, 10)
    kw = {"session_id": sid, "user_id": USER}
    for first, last in ((1, 8), (1, 4), (5, 6), (1, 10)):
        manager.add_summary(**kw, text=f"{first}-{last}", from_seq=first, to_seq=last)
    manager.truncate_messages(**kw, after_seq=9)
    assert _ranges(manager, sid) == [(1, 1, 8), (2, 1, 4), (3, 5, 6)]
    manager.truncate_messages(**kw, after_seq=7)
    assert _ranges(manager, sid) == [(2, 1, 4), (3, 5, 6)]
    manager.pop_message(**kw)
    assert _ranges(manager, sid) == [(2, 1, 4), (3, 5, 6)]
    manager.pop_message(**kw)
    assert _ranges(manager, sid) == [(2, 1, 4)]
    assert manager.list_summaries(**kw, after=1, limit=1)[0].number == 2
    events = [e for e in audit_of(manager, sid) if e.action.startswith("message.")]
    assert [e.details.get("summaries_removed") for e in events[-4:]] == [1, 1, None, 1]
    with manager.store.transaction(write=False) as tx:
        assert [s.number for s in tx.list_summaries(sid, before_number=3, limit=1)] == [2]
        assert [s.number for s in tx.list_summaries(sid, limit=1, newest=True)] == [2]


def test_c25_replace_audits_the_summaries_it_removed(manager: SessionManager) -> None:
    """``replace_messages`` counts the summaries its removal took in its audit event,
    as truncate_messages and pop_message do, and says nothing when it took none."""
    sid = _session(manager, 10)
    kw = {"session_id": sid, "user_id": USER}
    for first, last in ((1, 4), (1, 8), (5, 9)):
        manager.add_summary(**kw, text=f"{first}-{last}", from_seq=first, to_seq=last)
    manager.replace_messages(**kw, after_seq=6, messages=[user_msg("new")])
    assert _ranges(manager, sid) == [(1, 1, 4)]
    manager.replace_messages(**kw, after_seq=5, messages=[user_msg("again")])
    events = [e for e in audit_of(manager, sid) if e.action == "message.replaced"]
    assert [e.details.get("summaries_removed") for e in events] == [2, None]
    assert events[0].details["removed"] == 4


def test_a_regrown_history_is_not_replaced_by_a_stale_summary(manager: SessionManager) -> None:
    """After a truncation and new messages at the same seqs, ``build_context`` sends
    the new messages, not the summary of the removed ones."""
    sid = _session(manager, 10)
    kw = {"session_id": sid, "user_id": USER}
    manager.add_summary(**kw, text="of the removed talk", from_seq=1, to_seq=8)
    manager.truncate_messages(**kw, after_seq=0)
    manager.append_messages(
        **kw,
        messages=[
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"new {i}"}
            for i in range(10)
        ],
    )
    ctx = manager.build_context(**kw, budget_tokens=100_000)
    assert ctx.summary is None
    assert [m.seq for m in ctx.messages] == list(range(1, 11))


def test_numbers_after_a_removal_stay_above_every_remaining_one(manager: SessionManager) -> None:
    """The next summary is numbered the newest remaining + 1: a removed newest number
    is given again, a gap below the newest stays."""
    sid = _session(manager, 6)
    kw = {"session_id": sid, "user_id": USER}
    for first, last in ((1, 6), (1, 2), (3, 6)):
        manager.add_summary(**kw, text="g", from_seq=first, to_seq=last)
    manager.truncate_messages(**kw, after_seq=4)
    assert _ranges(manager, sid) == [(2, 1, 2)]
    again = manager.add_summary(**kw, text="h", from_seq=1, to_seq=4, supersedes=2)
    assert (again.number, again.supersedes) == (3, 2)
    manager.pop_message(**kw)
    assert _ranges(manager, sid) == [(2, 1, 2)]
    assert manager.add_summary(**kw, text="i", from_seq=3, to_seq=3).number == 3
    assert _ranges(manager, sid) == [(2, 1, 2), (3, 3, 3)]


def test_a_transaction_sees_its_own_summary_deletions(manager: SessionManager) -> None:
    """Within one write transaction a deleted summary is gone from reads and its
    number may be inserted again; a summary inserted there is deleted too."""
    sid = _session(manager, 6)
    kw = {"session_id": sid, "user_id": USER}
    manager.add_summary(**kw, text="a", from_seq=1, to_seq=2)
    b = manager.add_summary(**kw, text="b", from_seq=1, to_seq=6)
    with manager.store.transaction(write=True) as tx:
        assert tx.delete_summaries(sid, after_seq=4) == 1
        assert [s.number for s in tx.list_summaries(sid, limit=5, newest=True)] == [1]
        tx.insert_summary(b.model_copy(update={"text": "b2", "to_seq": 5}))
        tx.insert_summary(b.model_copy(update={"number": 3, "to_seq": 3}))
        assert tx.delete_summaries(sid, after_seq=4) == 1
        assert tx.delete_summaries(sid, after_seq=4) == 0
    assert _ranges(manager, sid) == [(1, 1, 2), (3, 1, 3)]
