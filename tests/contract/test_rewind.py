"""Rewind: the session moves back to a message seq, hiding or removing the messages
above it, the working memory back as it stood there; rewinds are numbered and their
hidden messages readable (docs/semantics.md, "Rewind"). Ownership and stale
``expected_version`` are covered by the operation tables of contract_support."""

from __future__ import annotations

import json
from typing import Any

import pytest
from contract_support import USER, audit_of, dump, every, snapshot, user_msg, utcnow

from agentsession import (
    IdempotencyKeyReused,
    RewindNotFound,
    SessionManager,
    SessionNotActive,
    ValidationError,
    VersionConflict,
)
from agentsession.errors import SessionNotFound
from agentsession.models import Rewind
from agentsession.stores.base import SessionStore


def _append(m: SessionManager, sid: str, n: int, prefix: str = "m", **kw: Any) -> None:
    first = m.get_session(session_id=sid, user_id=USER).message_count + 1
    msgs = [user_msg(f"{prefix}{i}") for i in range(first, first + n)]
    m.append_messages(session_id=sid, user_id=USER, messages=msgs, **kw)


def _contents(m: SessionManager, sid: str) -> list[tuple[int, Any]]:
    messages = every(m.get_messages, session_id=sid, user_id=USER, after=0)
    return [(x.seq, x.content) for x in messages]


def _memory(m: SessionManager, sid: str) -> dict[str, Any]:
    return m.get_working_memory(session_id=sid, user_id=USER).data


def _rewind(m: SessionManager, sid: str, to: int, **kw: Any) -> Any:
    return m.rewind_session(session_id=sid, user_id=USER, to_seq=to, **kw)


@pytest.fixture
def turns(manager: SessionManager) -> str:
    """A session created with memory {"step": 0}; three turns of two messages, each
    patching the memory: seqs 1-6, the memory as of 2, 4, 6 is step 1, 2, 3."""
    sid = manager.create_session(user_id=USER, working_memory={"step": 0}).session_id
    for step in (1, 2, 3):
        _append(manager, sid, 2, working_memory_patch={"step": step})
    return sid


def test_hide_keeps_the_messages_readable_by_number(manager: SessionManager, turns: str) -> None:
    """A hiding rewind takes seqs 5-6 out of the history, keeps them under rewind 1,
    puts the memory back as of 4, and the next append gets seq 5."""
    v = manager.get_session(session_id=turns, user_id=USER).version
    result = _rewind(manager, turns, 4)
    assert (result.number, result.to_seq, result.count, result.mode) == (1, 4, 2, "hide")
    assert result.session_version == result.memory_version == v + 1
    assert _contents(manager, turns) == [(n, f"m{n}") for n in range(1, 5)]
    assert _memory(manager, turns) == {"step": 2}
    hidden = manager.get_rewound_messages(session_id=turns, user_id=USER, number=1)
    assert [(x.seq, x.content) for x in hidden.items] == [(5, "m5"), (6, "m6")]
    context = manager.build_context(session_id=turns, user_id=USER, budget_tokens=4000)
    assert [x.seq for x in context.messages] == [1, 2, 3, 4]
    restored = manager.restore_session(session_id=turns, user_id=USER)
    assert [x.seq for x in restored.messages] == [1, 2, 3, 4]
    _append(manager, turns, 1, prefix="new")
    assert _contents(manager, turns)[-1] == (5, "new5")
    rewinds = manager.list_rewinds(session_id=turns, user_id=USER).items
    assert [(r.number, r.to_seq, r.count, r.mode, r.memory_version) for r in rewinds] == [
        (1, 4, 2, "hide", v + 1)
    ]


def test_remove_deletes_the_messages(manager: SessionManager, turns: str) -> None:
    """remove=True deletes the messages; the rewind is still recorded, its page empty."""
    result = _rewind(manager, turns, 2, remove=True)
    assert (result.number, result.count, result.mode) == (1, 4, "remove")
    assert _contents(manager, turns) == [(1, "m1"), (2, "m2")]
    assert _memory(manager, turns) == {"step": 1}
    page = manager.get_rewound_messages(session_id=turns, user_id=USER, number=1)
    assert page.items == []
    assert manager.list_rewinds(session_id=turns, user_id=USER).items[0].mode == "remove"


def test_memory_is_the_memory_as_of_the_point(manager: SessionManager, turns: str) -> None:
    """Each rewind writes the memory as of its seq as a new version, in effect there:
    a later rewind to the same seq finds it again."""
    manager.update_working_memory(session_id=turns, user_id=USER, patch={"extra": 1})
    _rewind(manager, turns, 3)  # inside the second turn: as of 3 is step 1
    assert _memory(manager, turns) == {"step": 1}
    assert manager.get_working_memory(session_id=turns, user_id=USER, at_seq=3).data == {"step": 1}
    _append(manager, turns, 2, working_memory_patch={"step": 9})
    _rewind(manager, turns, 3)
    assert _memory(manager, turns) == {"step": 1}


def test_creation_state_survives_every_rewind(manager: SessionManager, turns: str) -> None:
    """A rewind to 0 gives back the memory given to create_session, also after several
    rewinds and memory writes."""
    _rewind(manager, turns, 4)
    manager.update_working_memory(session_id=turns, user_id=USER, data={"other": True})
    _append(manager, turns, 3, working_memory_patch={"step": 7})
    _rewind(manager, turns, 2, remove=True)
    _append(manager, turns, 1, working_memory_patch={"step": 8})
    assert _rewind(manager, turns, 0).number == 3
    assert _memory(manager, turns) == {"step": 0}
    assert _contents(manager, turns) == []
    _append(manager, turns, 2, working_memory_patch={"step": 5})
    _rewind(manager, turns, 0)
    assert _memory(manager, turns) == {"step": 0}


def test_idempotency_key_replays_the_first_result(manager: SessionManager, turns: str) -> None:
    kw: dict[str, Any] = {"idempotency_key": "back"}
    first = _rewind(manager, turns, 4, **kw)
    _append(manager, turns, 3)
    assert _rewind(manager, turns, 4, **kw) == first
    assert len(_contents(manager, turns)) == 7  # nothing rewound again
    with pytest.raises(IdempotencyKeyReused):
        _rewind(manager, turns, 2, **kw)


def test_rewind_to_the_end_changes_nothing(manager: SessionManager, turns: str) -> None:
    """to_seq == message_count: Unchanged; no version step, audit event or rewind."""
    before = snapshot(manager, turns)
    result = _rewind(manager, turns, 6)
    assert (result.number, result.count) == (None, 0)
    assert result.session_version == manager.get_session(session_id=turns, user_id=USER).version
    assert snapshot(manager, turns) == before
    assert manager.list_rewinds(session_id=turns, user_id=USER).items == []


def test_stale_version_conflicts_and_writes_nothing(manager: SessionManager, turns: str) -> None:
    v = manager.get_session(session_id=turns, user_id=USER).version
    before = snapshot(manager, turns)
    with pytest.raises(VersionConflict):
        _rewind(manager, turns, 2, expected_version=v - 1)
    assert snapshot(manager, turns) == before
    assert _rewind(manager, turns, 2, expected_version=v).session_version == v + 1


def test_a_closed_session_is_refused(manager: SessionManager, turns: str) -> None:
    manager.close_session(session_id=turns, user_id=USER)
    with pytest.raises(SessionNotActive):
        _rewind(manager, turns, 2)
    assert len(_contents(manager, turns)) == 6


def test_summaries_past_the_point_go(manager: SessionManager, turns: str) -> None:
    """Summaries with to_seq above the point are removed (and counted in the audit)."""
    for end in (2, 5):
        manager.add_summary(
            session_id=turns, user_id=USER, text=f"to {end}", from_seq=1, to_seq=end
        )
    _rewind(manager, turns, 3)
    assert [s.to_seq for s in manager.list_summaries(session_id=turns, user_id=USER)] == [2]
    event = audit_of(manager, turns)[-1]
    assert event.action == "session.rewound"
    assert event.details == {
        "to_seq": 3,
        "count": 3,
        "mode": "hide",
        "summaries_removed": 1,
        "memory_version": event.version_after,
    }
    no_ids = {k: v for k, v in dump(event).items() if k != "session_id"}  # random: "…m4…"
    assert "m4" not in json.dumps(no_ids)


def test_bad_to_seq_is_refused(manager: SessionManager, turns: str) -> None:
    for bad in (-1, 7, None, "1", 1.0, True):
        with pytest.raises(ValidationError) as err:
            _rewind(manager, turns, bad)
        assert err.value.field == "to_seq"


def test_unknown_rewind_number_is_not_found(manager: SessionManager, turns: str) -> None:
    _rewind(manager, turns, 5)
    with pytest.raises(RewindNotFound) as err:
        manager.get_rewound_messages(session_id=turns, user_id=USER, number=2)
    assert err.value.number == 2
    with pytest.raises(ValidationError):
        manager.get_rewound_messages(session_id=turns, user_id=USER, number=0)


def test_pages_of_rewinds_and_hidden_messages(manager: SessionManager, turns: str) -> None:
    """Both listings page oldest first with cursors."""
    _rewind(manager, turns, 1)
    for _ in range(2):
        _append(manager, turns, 1)
        _rewind(manager, turns, 1)
    numbers = [
        r.number for r in every(manager.list_rewinds, session_id=turns, user_id=USER, limit=2)
    ]
    assert numbers == [1, 2, 3]
    hidden = every(manager.get_rewound_messages, session_id=turns, user_id=USER, number=1, limit=2)
    assert [x.seq for x in hidden] == [2, 3, 4, 5, 6]


def test_delete_removes_rewinds_and_hidden_messages(manager: SessionManager, turns: str) -> None:
    _rewind(manager, turns, 2)
    manager.delete_session(session_id=turns, user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.list_rewinds(session_id=turns, user_id=USER)
    with manager.store.transaction(write=False) as tx:
        assert tx.list_rewinds(turns) == []
        assert tx.get_rewound_messages(turns, 1) == []


def test_hide_messages_returns_how_many_it_hid(store: SessionStore, turns: str) -> None:
    """The store's ``hide_messages`` answers the count it copied on every backend
    (PostgreSQL answers -1 for an ``INSERT ... SELECT`` unless the row count is kept)."""
    with store.transaction(write=True) as tx:
        tx.insert_rewind(
            Rewind(
                session_id=turns,
                number=1,
                to_seq=2,
                count=4,
                mode="hide",
                memory_version=1,
                created_at=utcnow(),
            )
        )
        assert tx.hide_messages(turns, after_seq=2, number=1) == 4
