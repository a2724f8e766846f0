"""The audit chain: ``verify_audit`` passes on an intact store (after deletion and
erasure too) and names the first broken link when an audit event was changed, removed
or reordered behind the service's back (the store's rows edited directly)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from contract_support import ADMIN, OTHER, USER, raw_store, user_msg

from agentsession import SessionManager
from agentsession.auditchain import event_hash
from agentsession.models import AuditEvent
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.redis.codec import enc, prefix
from agentsession.stores.sql.schema import audit_events
from agentsession.stores.sql.store import SQLStore

Edit = Callable[[list[AuditEvent]], list[AuditEvent]]


def _session(manager: SessionManager, user: str = USER, appends: int = 3) -> str:
    sid = manager.create_session(user_id=user).session_id
    for i in range(appends):
        manager.append_messages(session_id=sid, user_id=user, messages=[user_msg(f"m{i}")])
    return sid


def _verify(manager: SessionManager, session_id: str | None = None) -> Any:
    return manager.verify_audit(user_id=ADMIN, admin=True, session_id=session_id)


def _rewrite(manager: SessionManager, session_id: str, edit: Edit) -> None:
    """Replace the live session's stored audit events by ``edit`` of them (in seq order),
    each kept at the seq it carries: what someone with write access to the database
    could do."""
    store = raw_store(manager.store)
    events = manager.get_audit_log(session_id=session_id, user_id=ADMIN, admin=True).items
    new = edit([e.model_copy(deep=True) for e in events])
    if isinstance(store, MemoryStore):
        store._sessions[session_id].audit[:] = sorted(new, key=lambda e: e.seq)
    elif isinstance(store, SQLStore):
        with store.engine.begin() as conn:
            conn.execute(sa.delete(audit_events).where(audit_events.c.session_id == session_id))
            conn.execute(sa.insert(audit_events), [dict(e.__dict__) for e in new])
    else:
        client: Any = store.client  # type: ignore[attr-defined]
        key = prefix(session_id) + "audit"
        client.delete(key)
        client.zadd(key, {enc(e): e.seq for e in new})


def test_intact_store_verifies_after_delete_and_erase(manager: SessionManager) -> None:
    """Writes, a deletion and an erasure leave every chain intact; the tombstone names
    the deleted chain's last hash and version."""
    kept = _session(manager)
    gone = _session(manager)
    head = manager.get_session(session_id=gone, user_id=USER).audit_head
    _session(manager, OTHER)
    manager.delete_session(session_id=gone, user_id=USER)
    manager.erase_user(user_id=ADMIN, target_user_id=OTHER, admin=True)
    report = _verify(manager)
    assert report.broken is None
    assert report.sessions >= 3
    tomb = manager.get_audit_log(session_id=gone, user_id=ADMIN, admin=True).items[-1]
    assert (tomb.action, tomb.prev_hash, tomb.version_before) == ("session.deleted", head, 4)
    events = manager.get_audit_log(session_id=kept, user_id=USER).items
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
    assert events[0].prev_hash is None
    assert manager.get_session(session_id=kept, user_id=USER).audit_head == events[-1].hash
    assert all(e.hash == event_hash(e, e.prev_hash) for e in events)


def test_changed_event_is_named(manager: SessionManager) -> None:
    """A changed detail of one event breaks the chain at that event: changed."""
    sid = _session(manager)
    _session(manager)

    def change(events: list[AuditEvent]) -> list[AuditEvent]:
        events[2] = events[2].model_copy(update={"actor": "mallory"})
        return events

    _rewrite(manager, sid, change)
    broken = _verify(manager).broken
    assert (broken.session_id, broken.version, broken.problem) == (sid, 3, "changed")
    assert _verify(manager, sid).broken == broken


def test_removed_event_is_named(manager: SessionManager) -> None:
    """A removed event in the middle, or the newest one: removed."""
    sid = _session(manager)
    _rewrite(manager, sid, lambda events: events[:1] + events[2:])
    broken = _verify(manager).broken
    assert (broken.session_id, broken.version, broken.problem) == (sid, 3, "removed")
    last = _session(manager)
    _rewrite(manager, last, lambda events: events[:-1])
    broken = _verify(manager, last).broken
    assert (broken.session_id, broken.version, broken.problem) == (last, None, "removed")


def test_reordered_events_are_named(manager: SessionManager) -> None:
    """Two events swapped (their seqs exchanged): reordered."""
    sid = _session(manager)

    def swap(events: list[AuditEvent]) -> list[AuditEvent]:
        a, b = events[1], events[2]
        return [
            events[0],
            a.model_copy(update={"seq": b.seq}),
            b.model_copy(update={"seq": a.seq}),
            *events[3:],
        ]

    _rewrite(manager, sid, swap)
    broken = _verify(manager).broken
    assert (broken.session_id, broken.problem) == (sid, "reordered")
