"""The session chain (``agentsession.sessionchain``): ``verify_audit`` passes on an
intact store, after forks, deletions, erasures and racing creations, and names the
session when one was removed by hand with every audit event it had and no tombstone,
when a tombstone was removed, or when a link of the chain was changed."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from contract_support import ADMIN, OTHER, USER, raw_store, run_threads, user_msg

from agentsession import SessionManager
from agentsession.sessionchain import HEAD, parse_head
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.redis.codec import prefix
from agentsession.stores.redis.index import ALL_SESSIONS
from agentsession.stores.sql.schema import audit_events, session_chain, sessions
from agentsession.stores.sql.store import SQLStore


def _verify(manager: SessionManager) -> Any:
    return manager.verify_audit(user_id=ADMIN, admin=True)


def _session(manager: SessionManager, user: str = USER) -> str:
    sid = manager.create_session(user_id=user).session_id
    manager.append_messages(session_id=sid, user_id=user, messages=[user_msg("hi")])
    return sid


def _remove_by_hand(manager: SessionManager, session_id: str, *, tombstone: bool) -> None:
    """Delete the session's row and every audit event of it (``tombstone``: a deleted
    session's tombstone only) from the store's own tables or keys, as someone with
    write access to the database could: no tombstone is left."""
    store = raw_store(manager.store)
    if isinstance(store, MemoryStore):
        store._sessions.pop(session_id, None)
        store._tombstones[:] = [e for e in store._tombstones if e.session_id != session_id]
    elif isinstance(store, SQLStore):
        with store.engine.begin() as conn:
            conn.execute(sa.delete(audit_events).where(audit_events.c.session_id == session_id))
            conn.execute(sa.delete(sessions).where(sessions.c.session_id == session_id))
    else:
        client: Any = store.client  # type: ignore[attr-defined]
        if tombstone:
            client.hdel("as:tombstones", session_id)
        else:
            client.delete(*client.keys(prefix(session_id) + "*"))
            client.zrem(ALL_SESSIONS, session_id)


def test_intact_store_verifies_after_fork_delete_and_erase(manager: SessionManager) -> None:
    """Creations, a fork, a deletion and an erasure: each a link, the chain intact."""
    kept = _session(manager)
    manager.fork_session(session_id=kept, user_id=USER)
    gone = _session(manager)
    _session(manager, OTHER)
    manager.delete_session(session_id=gone, user_id=USER)
    manager.erase_user(user_id=ADMIN, target_user_id=OTHER, admin=True)
    assert _verify(manager).broken is None
    with manager.store.transaction(write=False) as tx:
        links = tx.list_chain_links(after_seq=0, limit=100)
        head = tx.get_store_meta(HEAD)
    assert [(k.seq, k.kind) for k in links] == [
        (1, "created"),
        (2, "created"),
        (3, "created"),
        (4, "created"),
        (5, "deleted"),
        (6, "deleted"),
    ]
    assert links[4].session_id == gone
    assert parse_head(head) == (6, links[-1].hash)
    assert [k.prev_hash for k in links[1:]] == [k.hash for k in links[:-1]]


def test_session_removed_by_hand_is_named(manager: SessionManager) -> None:
    """A session deleted with every audit event of it and no tombstone: removed."""
    _session(manager)
    sid = _session(manager)
    _session(manager)
    _remove_by_hand(manager, sid, tombstone=False)
    broken = _verify(manager).broken
    assert broken is not None
    assert (broken.session_id, broken.problem) == (sid, "removed")


def test_removed_tombstone_is_named(manager: SessionManager) -> None:
    """A deleted session whose tombstone was then removed by hand: removed."""
    sid = _session(manager)
    _session(manager)
    manager.delete_session(session_id=sid, user_id=USER)
    _remove_by_hand(manager, sid, tombstone=True)
    broken = _verify(manager).broken
    assert broken is not None
    assert (broken.session_id, broken.problem) == (sid, "removed")


def test_changed_link_is_named(manager: SessionManager) -> None:
    """A link of the chain rewritten to name another session: changed."""
    first = _session(manager)
    _session(manager)
    store = raw_store(manager.store)
    if isinstance(store, MemoryStore):
        link = store._chain[0]
        store._chain[0] = type(link)(1, "ses_x", link.kind, link.event_hash, None, link.hash)
    elif isinstance(store, SQLStore):
        with store.engine.begin() as conn:
            conn.execute(
                sa.update(session_chain).where(session_chain.c.seq == 1).values(session_id="ses_x")
            )
    else:
        client: Any = store.client  # type: ignore[attr-defined]
        (member,) = client.zrangebyscore("as:chain", 1, 1)
        client.zrem("as:chain", member)
        client.zadd("as:chain", {str(member).replace(first, "ses_x"): 1})
    broken = _verify(manager).broken
    assert broken is not None
    assert (broken.session_id, broken.problem) == ("ses_x", "changed")


def test_racing_creations_keep_one_chain(manager: SessionManager) -> None:
    """Sessions created and deleted from 6 threads at once: every link follows the one
    before it (the head is taken in turn), none lost."""

    def work(i: int) -> str:
        sid = _session(manager, f"user{i}")
        if i % 2:
            manager.delete_session(session_id=sid, user_id=f"user{i}")
        return sid

    out = run_threads(6, work)
    assert all(isinstance(sid, str) for sid in out), out
    assert _verify(manager).broken is None
    with manager.store.transaction(write=False) as tx:
        links = tx.list_chain_links(after_seq=0, limit=100)
    assert [k.seq for k in links] == list(range(1, 10))
