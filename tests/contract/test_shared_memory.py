"""Shared memory: documents per agent (``app``) and per user and agent (``user``),
written alone or in the transaction of a session write, isolated between users and
agents, never losing a concurrent update, and erased with their user."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import ADMIN, OTHER, USER, audit_of, run_threads, snapshot, user_msg

from agentsession import (
    Forbidden,
    IdempotencyKeyReused,
    PatchConflict,
    PayloadTooLarge,
    SessionManager,
    SharedMemory,
    ValidationError,
    VersionConflict,
)

independent = pytest.mark.store_independent


def _add(path: str, value: Any) -> list[dict[str, Any]]:
    return [{"op": "add", "path": path, "value": value}]


def _user_doc(m: SessionManager, user: str = USER, agent: str = "coding") -> SharedMemory:
    return m.get_shared_memory(scope="user", agent=agent, user_id=user)


def _app_doc(m: SessionManager, agent: str = "coding") -> SharedMemory:
    return m.get_shared_memory(scope="app", agent=agent, user_id=ADMIN, admin=True)


def test_unwritten_reads_empty_then_versions_count_writes(manager: SessionManager) -> None:
    """Version 0 and ``{}`` before the first write; each write one step; null stored."""
    assert _user_doc(manager) == SharedMemory(scope="user", agent="coding", user_id=USER)
    first = manager.update_shared_memory(
        scope="user", agent="coding", user_id=USER, ops=_add("/flag", None)
    )
    assert (first.version, first.data, first.user_id) == (1, {"flag": None}, USER)
    second = manager.update_shared_memory(
        scope="user", agent="coding", user_id=USER, data={"profile": {"a": 1}}, expected_version=1
    )
    assert _user_doc(manager) == second and second.version == 2
    assert second.updated_at is not None
    with pytest.raises(VersionConflict):
        manager.update_shared_memory(
            scope="user", agent="coding", user_id=USER, data={}, expected_version=1
        )
    app = manager.update_shared_memory(
        scope="app", agent="coding", user_id=ADMIN, ops=_add("/k", [1]), admin=True
    )
    assert (app.scope, app.user_id, app.version) == ("app", None, 1)
    assert _app_doc(manager).data == {"k": [1]}


@independent
def test_app_scope_needs_admin(manager: SessionManager) -> None:
    """The app scope crosses users: reading, writing, and ops on an append need admin."""
    with pytest.raises(Forbidden):
        manager.get_shared_memory(scope="app", agent="coding", user_id=USER)
    with pytest.raises(Forbidden):
        manager.update_shared_memory(scope="app", agent="coding", user_id=USER, data={})
    sid = manager.create_session(user_id=USER, agent="coding").session_id
    with pytest.raises(Forbidden):
        manager.append_message(
            session_id=sid,
            user_id=USER,
            message=user_msg("x"),
            shared_memory_ops={"app": _add("/a", 1)},
        )
    with pytest.raises(Forbidden):
        manager.delete_shared_memory(scope="user", agent="coding", user_id=USER)
    assert _app_doc(manager).version == 0
    assert manager.get_session(session_id=sid, user_id=USER).version == 1


@independent
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"scope": "team", "agent": "coding", "data": {}}, "scope"),
        ({"scope": "user", "agent": "bad agent", "data": {}}, "agent"),
        ({"scope": "user", "agent": "coding"}, "ops"),
        ({"scope": "user", "agent": "coding", "data": [1]}, "data"),
        ({"scope": "user", "agent": "coding", "ops": [{"op": "x", "path": ""}]}, "ops[0].op"),
    ],
)
def test_bad_arguments(manager: SessionManager, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        manager.update_shared_memory(user_id=USER, **kwargs)
    assert caught.value.field == field


def test_isolation_between_users_and_agents(manager: SessionManager) -> None:
    """A user document belongs to one user and agent; the app document to one agent."""
    manager.update_shared_memory(scope="user", agent="coding", user_id=USER, data={"u": 1})
    manager.update_shared_memory(scope="user", agent="coding", user_id=OTHER, data={"u": 2})
    manager.update_shared_memory(scope="user", agent="other", user_id=USER, data={"u": 3})
    manager.update_shared_memory(
        scope="app", agent="coding", user_id=ADMIN, data={"a": 1}, admin=True
    )
    assert _user_doc(manager).data == {"u": 1}
    assert _user_doc(manager, OTHER).data == {"u": 2}
    assert _user_doc(manager, USER, "other").data == {"u": 3}
    assert _app_doc(manager).data == {"a": 1} and _app_doc(manager, "other").version == 0


def test_session_writes_change_shared_memory_in_their_transaction(manager: SessionManager) -> None:
    """create_session, append_messages and update_working_memory apply the ops to the
    session's agent and owner; the audit event names the scopes, not the values."""
    s = manager.create_session(
        user_id=USER, agent="coding", shared_memory_ops={"user": _add("/lang", "en")}
    )
    kw: dict[str, Any] = {"session_id": s.session_id, "user_id": USER}
    manager.append_messages(
        **kw,
        messages=[user_msg("hi")],
        admin=True,
        shared_memory_ops={"app": _add("/model", {"v": 2}), "user": _add("/lang", None)},
    )
    manager.update_working_memory(
        **kw, ops=_add("/n", 1), shared_memory_ops={"user": _add("/seen", True)}
    )
    assert _user_doc(manager).data == {"lang": None, "seen": True}
    assert _user_doc(manager).version == 3
    assert _app_doc(manager).data == {"model": {"v": 2}}
    assert _user_doc(manager, OTHER).version == 0
    events = audit_of(manager, s.session_id)
    assert [e.details.get("shared") for e in events] == [["user"], ["app", "user"], ["user"]]
    assert "model" not in repr(events)


def test_a_failing_session_write_leaves_shared_memory_unchanged(manager: SessionManager) -> None:
    """One transaction: a conflict in any part (working memory, the other scope, the
    session version) keeps every shared document and the session as they were."""
    sid = manager.create_session(user_id=USER, agent="coding").session_id
    manager.update_shared_memory(scope="user", agent="coding", user_id=USER, data={"n": 1})
    before = (snapshot(manager, sid), _user_doc(manager), _app_doc(manager))
    kw: dict[str, Any] = {
        "session_id": sid,
        "user_id": USER,
        "admin": True,
        "messages": [user_msg("lost")],
    }
    with pytest.raises(PatchConflict):
        manager.append_messages(
            **kw,
            working_memory_ops=[{"op": "remove", "path": "/x"}],
            shared_memory_ops={"app": _add("/a", 1), "user": _add("/n", 2)},
        )
    with pytest.raises(PatchConflict):
        manager.append_messages(
            **kw,
            shared_memory_ops={
                "app": _add("/a", 1),
                "user": [{"op": "test", "path": "/n", "value": 2}],
            },
        )
    with pytest.raises(VersionConflict):
        manager.append_messages(**kw, expected_version=7, shared_memory_ops={"user": _add("/n", 3)})
    assert (snapshot(manager, sid), _user_doc(manager), _app_doc(manager)) == before


@independent
def test_idempotent_update_replays(manager: SessionManager) -> None:
    kw: dict[str, Any] = {"scope": "user", "agent": "coding", "user_id": USER}
    first = manager.update_shared_memory(**kw, ops=_add("/a", 1), idempotency_key="k")
    assert manager.update_shared_memory(**kw, ops=_add("/a", 1), idempotency_key="k") == first
    with pytest.raises(IdempotencyKeyReused):
        manager.update_shared_memory(**kw, ops=_add("/a", 2), idempotency_key="k")
    assert _user_doc(manager).version == 1


@independent
def test_ops_are_bounded_after_every_op(manager: SessionManager) -> None:
    """The op that doubles the document past the size limit is refused by index."""
    manager.update_shared_memory(scope="user", agent="coding", user_id=USER, data={"k": "x" * 1000})
    doubling = [{"op": "copy", "from": "", "path": f"/c{i}"} for i in range(12)]
    with pytest.raises(PayloadTooLarge) as too_large:
        manager.update_shared_memory(scope="user", agent="coding", user_id=USER, ops=doubling)
    assert too_large.value.field == "ops[10]"
    assert _user_doc(manager).version == 1


def test_concurrent_writers_lose_no_update(manager: SessionManager) -> None:
    """Writers racing on one document (alone and through appends of several sessions):
    every write lands, because each is a compare-and-set re-run when it loses."""
    manager.update_shared_memory(scope="user", agent="coding", user_id=USER, data={"log": []})
    sids = [manager.create_session(user_id=USER, agent="coding").session_id for _ in range(2)]

    def write(i: int) -> None:
        for j in range(3):
            item = _add("/log/-", f"{i}.{j}")
            if i % 2:
                manager.append_message(
                    session_id=sids[i // 2 % 2],
                    user_id=USER,
                    message=user_msg("m"),
                    shared_memory_ops={"user": item},
                )
            else:
                manager.update_shared_memory(scope="user", agent="coding", user_id=USER, ops=item)

    results = run_threads(4, write)
    assert [r for r in results if r is not None] == []
    doc = _user_doc(manager)
    assert sorted(doc.data["log"]) == sorted(f"{i}.{j}" for i in range(4) for j in range(3))
    assert doc.version == 13


def test_many_writers_of_one_document_all_land(manager: SessionManager) -> None:
    """12 writers x 20 ops on one app document: none fails (a writer queues for the
    document instead of losing its compare-and-set until its retries run out)."""
    app = {"scope": "app", "agent": "coding", "user_id": ADMIN, "admin": True}
    manager.update_shared_memory(**app, data={"log": []})

    def write(i: int) -> None:
        for j in range(20):
            manager.update_shared_memory(**app, ops=_add("/log/-", [i, j]))

    results = run_threads(12, write)
    assert [r for r in results if r is not None] == []
    doc = _app_doc(manager)
    assert len(doc.data["log"]) == 240 and doc.version == 241


def test_erasure_deletes_the_users_documents_only(manager: SessionManager) -> None:
    for user in (USER, OTHER):
        for agent in ("coding", "other"):
            manager.update_shared_memory(scope="user", agent=agent, user_id=user, data={"x": 1})
    manager.update_shared_memory(
        scope="app", agent="coding", user_id=ADMIN, data={"a": 1}, admin=True
    )
    erasure = manager.erase_user(user_id=ADMIN, target_user_id=USER, admin=True)
    assert erasure.shared_memory_deleted == 2
    assert _user_doc(manager).version == 0 and _user_doc(manager, USER, "other").version == 0
    assert _user_doc(manager, OTHER).data == {"x": 1}
    assert _user_doc(manager, OTHER, "other").data == {"x": 1}
    assert _app_doc(manager).data == {"a": 1}


def test_admin_deletes_one_document(manager: SessionManager) -> None:
    manager.update_shared_memory(scope="user", agent="coding", user_id=OTHER, data={"x": 1})
    manager.update_shared_memory(
        scope="app", agent="coding", user_id=ADMIN, data={"a": 1}, admin=True
    )
    delete = manager.delete_shared_memory
    assert delete(scope="user", agent="coding", user_id=ADMIN, target_user_id=OTHER, admin=True)
    assert not delete(scope="user", agent="coding", user_id=ADMIN, target_user_id=OTHER, admin=True)
    with pytest.raises(ValidationError) as app_of_user:  # not silently the app document
        delete(scope="app", agent="coding", user_id=ADMIN, target_user_id=OTHER, admin=True)
    assert app_of_user.value.field == "target_user_id"
    assert delete(scope="app", agent="coding", user_id=ADMIN, admin=True)
    assert _user_doc(manager, OTHER).version == 0 and _app_doc(manager).version == 0


def test_admin_names_another_users_document(manager: SessionManager) -> None:
    """``target_user_id``: an admin reads and writes another user's document; a
    non-admin may name only itself, and is refused alike whether the document exists."""
    manager.update_shared_memory(scope="user", agent="coding", user_id=OTHER, data={"x": 1})
    doc = manager.update_shared_memory(
        scope="user",
        agent="coding",
        user_id=ADMIN,
        target_user_id=OTHER,
        ops=_add("/y", 2),
        expected_version=1,
        admin=True,
    )
    assert (doc.user_id, doc.version, doc.data) == (OTHER, 2, {"x": 1, "y": 2})
    read = manager.get_shared_memory(
        scope="user", agent="coding", user_id=ADMIN, target_user_id=OTHER, admin=True
    )
    assert read == doc == _user_doc(manager, OTHER)
    own = manager.get_shared_memory(scope="user", agent="coding", user_id=USER, target_user_id=USER)
    assert own.user_id == USER and own.version == 0
    refusals = []
    for agent in ("coding", "never-written"):  # an existing document and a missing one
        with pytest.raises(Forbidden) as read_other:
            manager.get_shared_memory(scope="user", agent=agent, user_id=USER, target_user_id=OTHER)
        with pytest.raises(Forbidden) as write_other:
            manager.update_shared_memory(
                scope="user", agent=agent, user_id=USER, target_user_id=OTHER, data={}
            )
        refusals += [str(read_other.value), str(write_other.value)]
    assert len(set(refusals)) == 1
    assert _user_doc(manager, OTHER).version == 2 and _user_doc(manager).version == 0


@independent
def test_target_user_with_app_scope_is_refused(manager: SessionManager) -> None:
    """The app document belongs to no user: naming one is a ValidationError, never
    silently the app document."""
    calls = [
        lambda: manager.get_shared_memory(
            scope="app", agent="coding", user_id=ADMIN, target_user_id=OTHER, admin=True
        ),
        lambda: manager.update_shared_memory(
            scope="app",
            agent="coding",
            user_id=ADMIN,
            target_user_id=OTHER,
            data={"a": 1},
            admin=True,
        ),
    ]
    for call in calls:
        with pytest.raises(ValidationError) as caught:
            call()
        assert caught.value.field == "target_user_id" and "no user" in str(caught.value)
    assert _app_doc(manager).version == 0
    with pytest.raises(ValidationError) as bad:
        manager.get_shared_memory(
            scope="user", agent="coding", user_id=ADMIN, target_user_id="bad user", admin=True
        )
    assert bad.value.field == "target_user_id"


def test_delete_checks_the_version_and_leaves_an_audit_event(manager: SessionManager) -> None:
    """``expected_version`` guards a delete; a deletion leaves one content-free audit
    event under the document's audit id (the owner hashed), a missing document none."""
    for _ in range(2):
        manager.update_shared_memory(scope="user", agent="coding", user_id=OTHER, ops=_add("/n", 1))
    delete = manager.delete_shared_memory
    with pytest.raises(VersionConflict) as stale:
        delete(
            scope="user",
            agent="coding",
            user_id=ADMIN,
            target_user_id=OTHER,
            expected_version=1,
            admin=True,
        )
    assert stale.value.current_version == 2 and _user_doc(manager, OTHER).version == 2
    assert delete(
        scope="user",
        agent="coding",
        user_id=ADMIN,
        target_user_id=OTHER,
        expected_version=2,
        admin=True,
    )
    assert not delete(
        scope="user",
        agent="coding",
        user_id=ADMIN,
        target_user_id=OTHER,
        expected_version=0,
        admin=True,
    )
    audit_id = manager.shared_memory_audit_id(
        scope="user", agent="coding", user_id=ADMIN, target_user_id=OTHER
    )
    others = {
        manager.shared_memory_audit_id(scope="user", agent="other", user_id=OTHER),
        manager.shared_memory_audit_id(scope="user", agent="coding", user_id=USER),
        manager.shared_memory_audit_id(scope="app", agent="coding", user_id=OTHER),
    }
    assert audit_id.startswith("shm_") and audit_id not in others and len(others) == 3
    assert audit_id == manager.shared_memory_audit_id(
        scope="user", agent="coding", user_id=OTHER
    )  # the owner's own names the same
    [event] = audit_of(manager, audit_id)
    assert (event.action, event.actor, event.version_before, event.details) == (
        "shared_memory.deleted",
        ADMIN,
        2,
        {"scope": "user"},
    )
    assert OTHER not in event.model_dump_json()
    manager.update_shared_memory(scope="app", agent="coding", user_id=ADMIN, data={}, admin=True)
    assert delete(scope="app", agent="coding", user_id=ADMIN, admin=True)
    app_id = manager.shared_memory_audit_id(scope="app", agent="coding", user_id=ADMIN)
    assert [e.details for e in audit_of(manager, app_id)] == [{"scope": "app"}]
    with pytest.raises(ValidationError):  # a shared document's audit is for admins
        manager.get_audit_log(session_id=audit_id, user_id=OTHER)
