"""Erasure: the audit log holds no free text, tombstones hold nothing of the user, and
the store's disk step (``scrub``) runs after every committed erasure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from contract_support import ADMIN, USER, Ctx, dump, every

from agentsession import SessionManager, ValidationError
from agentsession.errors import SessionNotFound, StoreError
from agentsession.service import Policy, request_id_context
from agentsession.service.erasure import OPERATOR_STEPS, tombstone_id
from agentsession.stores.base import FeedRead, ScrubReport, SessionStore, StoreTransaction
from canaries import write_canaries

#: Every action the service audits, but the TTL expiry (no caller text in it).
AUDITED_ACTIONS = {
    "session.created",
    "session.updated",
    "message.appended",
    "memory.updated",
    "records.put",
    "summary.added",
    "tool_call.recorded",
    "run.started",
    "run.step_added",
    "run.finished",
    "session.rewound",
    "session.closed",
    "session.expired",
    "session.restored",
    "session.deleted",
    "session.forked",
    "message.popped",
    "message.truncated",
    "records.deleted",
}


def _audit(m: SessionManager, sid: str) -> list[Any]:
    return every(m.get_audit_log, session_id=sid, user_id=ADMIN, admin=True)


def _text(events: list[Any]) -> str:
    return json.dumps([dump(e) for e in events], ensure_ascii=False)


def test_audit_log_holds_no_free_text_of_any_action(manager: SessionManager) -> None:
    """Titles, reasons, errors, step names, content...: none in any audit event."""
    c = write_canaries(manager)
    live = [e for sid in c.session_ids for e in _audit(manager, sid)]
    closed = next(e for e in live if e.action == "session.closed")
    expired = next(e for e in live if e.action == "session.expired")
    assert closed.details["reason_given"] is True
    assert expired.details["reason"] == "request" and expired.details["reason_given"] is True
    manager.erase_user(user_id=c.user)
    tombs = [e for sid in c.session_ids for e in _audit(manager, sid)]
    assert {e.action for e in live + tombs} == AUDITED_ACTIONS
    assert c.found_in(_text(live), c.free_text()) == []
    assert c.found_in(_text(tombs)) == []


def test_close_without_a_reason_is_audited_as_none_given(manager: SessionManager) -> None:
    ctx = Ctx(manager, running=False)
    manager.close_session(session_id=ctx.sid, user_id=USER)
    [closed] = [e for e in _audit(manager, ctx.sid) if e.action == "session.closed"]
    assert closed.details == {"reason_given": False, "cancelled_runs": []}


def test_tombstone_names_the_owner_by_keyed_hash_only(manager: SessionManager) -> None:
    """The owner deleting: owner and actor are the same hash; an admin: the admin's id."""
    mine, theirs = Ctx(manager, running=False), Ctx(manager, running=False)
    manager.delete_session(session_id=mine.sid, user_id=USER)
    manager.delete_session(session_id=theirs.sid, user_id=ADMIN, admin=True)
    [own] = _audit(manager, mine.sid)
    [by_admin] = _audit(manager, theirs.sid)
    assert own.user_id.startswith("hmac-sha256:") and own.actor == own.user_id
    assert by_admin.user_id == own.user_id and by_admin.actor == ADMIN
    assert own.details == {"message_count": 2, "run_count": 1, "tool_call_count": 1}
    assert USER not in _text([own, by_admin]) and "default" not in _text([own, by_admin])


def test_tombstone_keeps_no_request_id(manager: SessionManager) -> None:
    """The deleting request's id is the client's to choose (it could carry the user's
    name): the tombstone does not keep it."""
    ctx = Ctx(manager, running=False)
    with request_id_context("req-for-alice@example.com"):
        manager.delete_session(session_id=ctx.sid, user_id=USER)
    [tomb] = _audit(manager, ctx.sid)
    assert tomb.action == "session.deleted" and tomb.request_id is None


@pytest.mark.store_independent
def test_tombstone_key_links_tombstones_only_when_set(store: SessionStore) -> None:
    """With Policy.tombstone_key, the hash is reproducible (HMAC-SHA256 of the user id);
    without one, two managers give unrelated hashes."""
    key = b"k" * 32
    keyed = SessionManager(store, policy=Policy(tombstone_key=key))
    ctx = Ctx(keyed, running=False)
    keyed.delete_session(session_id=ctx.sid, user_id=USER)
    assert _audit(keyed, ctx.sid)[0].user_id == tombstone_id(key, USER)
    first, second = SessionManager(store), SessionManager(store)
    a, b = Ctx(first, running=False), Ctx(second, running=False)
    first.delete_session(session_id=a.sid, user_id=USER)
    second.delete_session(session_id=b.sid, user_id=USER)
    assert _audit(first, a.sid)[0].user_id != _audit(first, b.sid)[0].user_id
    assert "k" * 32 not in repr(keyed.policy)


@pytest.mark.store_independent
def test_short_tombstone_key_is_refused(store: SessionStore) -> None:
    with pytest.raises(ValidationError, match="tombstone_key"):
        SessionManager(store, policy=Policy(tombstone_key=b"short"))


class _ScrubRecorder:
    """Wraps a store: records each scrub and whether the erased session was gone then."""

    def __init__(self, inner: SessionStore, fail: bool = False) -> None:
        self.inner, self.url, self.fail = inner, inner.url, fail
        self.scrubs: list[tuple[bool, list[str]]] = []

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[StoreTransaction]:
        with self.inner.transaction(write=write) as tx:
            yield tx

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        with self.inner.transaction(write=False) as tx:
            self.scrubs.append((compact, tx.list_user_session_ids(USER)))
        if self.fail:
            raise StoreError("disk on fire")
        return self.inner.scrub(compact=compact)

    def read_changes(self, **query: Any) -> FeedRead:
        return self.inner.read_changes(**query)

    def change_tail(self) -> str | None:
        return self.inner.change_tail()

    def close(self) -> None:
        """The wrapped store belongs to the fixture."""


def test_scrub_runs_after_each_erasure_has_committed(store: SessionStore) -> None:
    recorder = _ScrubRecorder(store)
    m = SessionManager(recorder)
    one, two = Ctx(m, running=False), Ctx(m, running=False)
    m.delete_session(session_id=one.sid, user_id=USER)
    assert recorder.scrubs == [(False, [two.sid])]
    erasure = m.erase_user(user_id=USER, compact=False)
    assert recorder.scrubs[1] == (False, [])
    assert erasure.sessions_deleted == 1 and (erasure.store.done or erasure.store.pending)
    assert erasure.operator_steps == OPERATOR_STEPS


def test_erasure_purges_every_keyed_record_of_the_user_whoever_wrote_it(
    manager: SessionManager, store: SessionStore
) -> None:
    """The user's own keyed writes and an admin's keyed writes into the user's data
    (every keyed write an admin may make for a user: session writes, a fork, the user's
    shared-memory document) leave no idempotency record after the user's erasure."""
    c = write_canaries(manager, admin=ADMIN)
    callers = {caller for caller, _, _ in c.keyed}
    scopes = {scope for _, scope, _ in c.keyed}
    assert callers == {c.user, ADMIN} and {"fork_session", "update_shared_memory"} <= scopes

    def records() -> list[Any]:
        with store.transaction(write=False) as tx:
            return [r for r in (tx.get_idempotency(*k) for k in c.keyed) if r is not None]

    assert len(records()) == len(c.keyed)
    erasure = manager.erase_user(user_id=ADMIN, target_user_id=c.user, admin=True)
    assert erasure.sessions_deleted == len(c.session_ids) == 3
    assert erasure.idempotency_keys_purged == 1  # the shared-memory write; the rest went
    assert records() == []  # with their sessions


def test_replay_after_erasure_returns_no_erased_content(manager: SessionManager) -> None:
    """The same keyed admin request again after the erasure finds no record: a
    shared-memory write runs again (a new document, version 1, nothing of the erased
    one), a session write or fork finds no session."""
    c = write_canaries(manager, admin=ADMIN)
    agent = c.values["agent"]
    [shared_key] = [k for _, scope, k in c.keyed if scope == "update_shared_memory"]
    [fork_key] = [k for _, scope, k in c.keyed if scope == "fork_session"]
    ops = [{"op": "add", "path": "/admin", "value": c.values["admin_shared_memory"]}]
    again: dict[str, Any] = {
        "scope": "user",
        "agent": agent,
        "user_id": ADMIN,
        "target_user_id": c.user,
        "admin": True,
        "ops": ops,
        "idempotency_key": shared_key,
    }
    before = manager.update_shared_memory(**again)
    assert before.version > 1 and "created" in before.data  # a replay of the first answer
    manager.erase_user(user_id=c.user)
    after = manager.update_shared_memory(**again)
    assert after.version == 1 and after.data == {"admin": c.values["admin_shared_memory"]}
    others = {k: v for k, v in c.values.items() if k not in ("admin_shared_memory", "agent")}
    assert c.found_in(json.dumps(dump(after)), others) == ["user_id"]  # its new owner
    with pytest.raises(SessionNotFound):
        manager.fork_session(
            session_id=c.session_ids[1],
            user_id=ADMIN,
            admin=True,
            title=c.values["admin_fork_title"],
            idempotency_key=fork_key,
        )


def test_erase_user_counts_sessions_and_purged_keys(manager: SessionManager) -> None:
    manager.create_session(user_id=USER, idempotency_key="k-1")
    Ctx(manager, running=False)
    erasure = manager.erase_user(user_id=ADMIN, target_user_id=USER, admin=True)
    assert (erasure.sessions_deleted, erasure.idempotency_keys_purged) == (2, 0)
    assert manager.erase_user(user_id=USER).sessions_deleted == 0


@pytest.mark.store_independent
def test_a_failed_scrub_is_reported_and_the_erasure_stays(store: SessionStore) -> None:
    m = SessionManager(_ScrubRecorder(store, fail=True))
    ctx = Ctx(m, running=False)
    erasure = m.erase_user(user_id=USER)
    assert erasure.sessions_deleted == 1 and erasure.store.done == ()
    assert "disk on fire" in erasure.store.pending[0]
    with pytest.raises(SessionNotFound):
        m.get_session(session_id=ctx.sid, user_id=USER)
