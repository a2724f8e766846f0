"""External keys: a caller-chosen name per session, unique per (owner, agent) among the
sessions that exist, compared exactly, looked up by an index, and safe to race on."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import OTHER, USER, run_threads, user_msg

from agentsession import (
    IdempotencyKeyReused,
    SessionExists,
    SessionManager,
    SessionNotFound,
    SessionStatus,
    ValidationError,
)

AGENT = "coding"
#: Strings frameworks use as session ids: quotes, SQL, spaces, 4-byte UTF-8, and keys
#: that only a case fold, a trailing-space pad or a trim would confuse.
ODD_KEYS = [
    "conversation_123",
    'O\'Brien "quoted" `ticks`',
    "'; DROP TABLE sessions; --",
    "key",
    "Key",
    "KEY",
    "key ",
    " key",
    "ключ-会话-🔑",
    "a/b\\c?d=e&f#g%20",
    "🔑" * 256,  # 256 characters, 1024 bytes of UTF-8: both limits exactly
]


def _open(m: SessionManager, key: str, user: str = USER, agent: str = AGENT) -> Any:
    return m.open_session(user_id=user, agent=agent, external_key=key)


def test_create_with_key_round_trips_and_is_looked_up_exactly(manager: SessionManager) -> None:
    """Each key is stored and returned exactly, and finds only its own session."""
    ids = {}
    for key in ODD_KEYS:
        s = manager.create_session(user_id=USER, agent=AGENT, external_key=key)
        assert s.external_key == key
        ids[key] = s.session_id
    assert len(set(ids.values())) == len(ODD_KEYS)
    for key, sid in ids.items():
        found = manager.get_session_by_key(user_id=USER, agent=AGENT, external_key=key)
        assert (found.session_id, found.external_key) == (sid, key)
        assert manager.get_session(session_id=sid, user_id=USER).external_key == key
    listed = manager.list_sessions(user_id=USER, limit=100).items
    assert {s.session_id: s.external_key for s in listed} == {v: k for k, v in ids.items()}


def test_session_without_key_has_none(manager: SessionManager) -> None:
    """A session created without a key has none, and two such sessions never collide."""
    a = manager.create_session(user_id=USER, agent=AGENT)
    b = manager.create_session(user_id=USER, agent=AGENT)
    assert a.external_key is None and b.external_key is None
    assert a.session_id != b.session_id


def test_duplicate_key_raises_session_exists_with_the_existing_id(manager: SessionManager) -> None:
    """A second create with a key in use is SessionExists naming the first session;
    nothing is created."""
    first = manager.create_session(user_id=USER, agent=AGENT, external_key="thread-1")
    with pytest.raises(SessionExists) as exc_info:
        manager.create_session(user_id=USER, agent=AGENT, external_key="thread-1", title="x")
    assert exc_info.value.session_id == first.session_id
    assert exc_info.value.http_status == 409
    assert len(manager.list_sessions(user_id=USER).items) == 1


def test_idempotent_replay_of_a_keyed_create_replays(manager: SessionManager) -> None:
    """The same create with the same idempotency key answers the first session, not
    SessionExists; another create with that key and another external key is a reuse."""
    first = manager.create_session(
        user_id=USER, agent=AGENT, external_key="k", idempotency_key="idem-1"
    )
    again = manager.create_session(
        user_id=USER, agent=AGENT, external_key="k", idempotency_key="idem-1"
    )
    assert again == first
    with pytest.raises(SessionExists):
        manager.create_session(user_id=USER, agent=AGENT, external_key="k")


def test_same_key_under_two_users_and_two_agents_is_four_sessions(manager: SessionManager) -> None:
    """Keys are scoped per (owner, agent); another user's key is not found for you."""
    sessions = {
        (user, agent): manager.create_session(user_id=user, agent=agent, external_key="same")
        for user in (USER, OTHER)
        for agent in ("one", "two")
    }
    assert len({s.session_id for s in sessions.values()}) == 4
    for (user, agent), s in sessions.items():
        found = manager.get_session_by_key(user_id=user, agent=agent, external_key="same")
        assert found.session_id == s.session_id
    with pytest.raises(SessionNotFound):
        manager.get_session_by_key(user_id=USER, agent="three", external_key="same")


def test_deleting_a_session_frees_its_key(manager: SessionManager) -> None:
    """After delete_session the key is unknown and can name a new session."""
    old = manager.create_session(user_id=USER, agent=AGENT, external_key="reused")
    manager.delete_session(session_id=old.session_id, user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.get_session_by_key(user_id=USER, agent=AGENT, external_key="reused")
    new = manager.create_session(user_id=USER, agent=AGENT, external_key="reused")
    assert new.session_id != old.session_id
    found = manager.get_session_by_key(user_id=USER, agent=AGENT, external_key="reused")
    assert found.session_id == new.session_id


def test_erasing_a_user_frees_their_keys(manager: SessionManager) -> None:
    """delete_user_data removes every session of the user with its key; open_session
    then creates afresh."""
    old = manager.create_session(user_id=USER, agent=AGENT, external_key="mine")
    manager.delete_user_data(user_id=USER)
    s, created = _open(manager, "mine")
    assert created and s.session_id != old.session_id


def test_open_session_creates_once_then_finds(manager: SessionManager) -> None:
    """The first open creates (with its title, metadata and memory), the next ones find
    the same session and ignore those arguments."""
    s, created = manager.open_session(
        user_id=USER,
        agent=AGENT,
        external_key="t-1",
        title="first",
        metadata={"a": 1},
        ttl_seconds=3600,
        working_memory={"goal": "g"},
    )
    assert created
    assert (s.title, s.metadata, s.ttl_seconds, s.version) == ("first", {"a": 1}, 3600, 2)
    assert s.external_key == "t-1"
    again, created_again = manager.open_session(
        user_id=USER, agent=AGENT, external_key="t-1", title="second"
    )
    assert not created_again
    assert again == manager.get_session(session_id=s.session_id, user_id=USER)
    assert again.title == "first"


def test_open_session_retried_with_its_idempotency_key_reports_created(
    manager: SessionManager,
) -> None:
    """A retry of the call that created the session, with its idempotency key, answers
    ``(first session, True)`` again; other calls find it (``False``); the key with other
    arguments is refused."""
    kw: dict[str, Any] = {"user_id": USER, "agent": AGENT, "external_key": "t-1"}
    first = manager.open_session(**kw, title="t", idempotency_key="open-1")
    assert first[1]
    assert manager.open_session(**kw, title="t", idempotency_key="open-1") == first
    assert manager.open_session(**kw) == (first[0], False)
    assert manager.open_session(**kw, idempotency_key="open-2") == (first[0], False)
    assert manager.open_session(**kw, idempotency_key="open-2") == (first[0], False)
    with pytest.raises(IdempotencyKeyReused):
        manager.open_session(**kw, title="other", idempotency_key="open-1")


def test_get_by_key_finds_and_reads_in_one_transaction(
    manager: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key's lookup and the session's read share one read transaction, so a key
    deleted and re-created between them cannot make the lookup a 404."""
    s = manager.create_session(user_id=USER, agent=AGENT, external_key="k")
    store = manager.store
    opened: list[bool] = []
    transaction = store.transaction

    def counted(*, write: bool) -> Any:
        opened.append(write)
        return transaction(write=write)

    monkeypatch.setattr(store, "transaction", counted)
    assert manager.get_session_by_key(user_id=USER, agent=AGENT, external_key="k") == s
    assert opened == [False]


def test_open_session_returns_a_closed_session_as_it_is(manager: SessionManager) -> None:
    """A CLOSED session is returned CLOSED: open_session never restores."""
    s, _ = _open(manager, "closed")
    manager.append_message(session_id=s.session_id, user_id=USER, message=user_msg("hi"))
    closed = manager.close_session(session_id=s.session_id, user_id=USER)
    found, created = _open(manager, "closed")
    assert not created
    assert found.status == SessionStatus.CLOSED
    assert found.version == closed.version


def test_concurrent_open_session_creates_exactly_one(manager: SessionManager) -> None:
    """8 threads open one key at once: one session, exactly one created=True."""
    results = run_threads(8, lambda i: _open(manager, "raced"))
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    assert len({s.session_id for s, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert len(manager.list_sessions(user_id=USER).items) == 1


def test_concurrent_creates_of_one_key_store_one(manager: SessionManager) -> None:
    """8 threads create one key at once: one succeeds, the others get SessionExists
    naming it."""
    results = run_threads(
        8, lambda i: manager.create_session(user_id=USER, agent=AGENT, external_key="once")
    )
    made = [r for r in results if not isinstance(r, BaseException)]
    assert len(made) == 1, results
    others = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(e, SessionExists) for e in others), others
    assert {e.session_id for e in others} == {made[0].session_id}


@pytest.mark.store_independent
@pytest.mark.parametrize(
    "key",
    [
        "",
        "a" * 257,
        "🔑" * 256 + "a",  # 257 characters
        "tab\there",
        "new\nline",
        "nul\x00",
        "del\x7f",
        "c1\x85",
        "lone \ud800 surrogate",
        42,
        b"bytes",
    ],
)
def test_malformed_keys_are_rejected_before_anything_is_written(
    manager: SessionManager, key: Any
) -> None:
    """Every call taking a key names the field in its ValidationError and stores nothing."""
    calls = [
        lambda: manager.create_session(user_id=USER, agent=AGENT, external_key=key),
        lambda: _open(manager, key),
        lambda: manager.get_session_by_key(user_id=USER, agent=AGENT, external_key=key),
    ]
    for call in calls:
        with pytest.raises(ValidationError) as exc_info:
            call()
        assert exc_info.value.context["field"] == "external_key"
    assert manager.list_sessions(user_id=USER).items == []


@pytest.mark.store_independent
def test_open_session_requires_a_key_and_valid_names(manager: SessionManager) -> None:
    """None is no key for open_session; user ids and agents keep their name rule."""
    with pytest.raises(ValidationError):
        manager.open_session(user_id=USER, agent=AGENT, external_key=None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as exc_info:
        manager.open_session(user_id=USER, agent="bad agent", external_key="k")
    assert exc_info.value.context["field"] == "agent"
