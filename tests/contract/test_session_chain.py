"""The session chain (``agentsession.sessionchain``): ``verify_audit`` passes on an
intact store, after forks, deletions, erasures and racing creations, and names the
session when one was removed by hand with every audit event it had and no tombstone,
when a tombstone was removed, or when a link of the chain was changed."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from contract_support import ADMIN, OTHER, USER, raw_store, run_threads, user_msg

from agentsession import SessionManager
from agentsession.errors import SessionNotFound
from agentsession.ids import new_id
from agentsession.sessionchain import HEAD, parse_head
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.redis.codec import prefix
from agentsession.stores.redis.index import ALL_SESSIONS
from agentsession.stores.sql.schema import audit_events, session_chain, sessions, store_meta
from agentsession.stores.sql.store import SQLStore


def _verify(manager: SessionManager) -> Any:
    return manager.verify_audit(user_id=ADMIN, admin=True)


def _verify_one(manager: SessionManager, session_id: str) -> Any:
    return manager.verify_audit(user_id=ADMIN, admin=True, session_id=session_id)


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


def _remove_links(manager: SessionManager, seqs: list[int], *, head: bool = False) -> None:
    """Delete the session-chain links ``seqs`` (and, with ``head``, the chain's head)
    from the store's own tables or keys, as someone with write access could."""
    store = raw_store(manager.store)
    if isinstance(store, MemoryStore):
        store._chain[:] = [k for k in store._chain if k.seq not in seqs]
        if head:
            store._meta.pop(HEAD, None)
    elif isinstance(store, SQLStore):
        with store.engine.begin() as conn:
            conn.execute(sa.delete(session_chain).where(session_chain.c.seq.in_(seqs)))
            if head:
                conn.execute(sa.delete(store_meta).where(store_meta.c.name == HEAD))
    else:
        client: Any = store.client  # type: ignore[attr-defined]
        for seq in seqs:
            client.zremrangebyscore("as:chain", seq, seq)
        if head:
            client.delete(f"as:meta:{HEAD}")


def test_f2_verify_of_one_session_removed_by_hand_names_it(manager: SessionManager) -> None:
    """``session_id`` of a session removed with every event and no tombstone: broken,
    naming it; of a deleted session: intact; of an id never seen: SessionNotFound."""
    sid, gone = _session(manager), _session(manager)
    manager.delete_session(session_id=gone, user_id=USER)
    _remove_by_hand(manager, sid, tombstone=False)
    broken = _verify_one(manager, sid).broken
    assert broken is not None
    assert (broken.session_id, broken.problem) == (sid, "removed")
    assert _verify_one(manager, gone).broken is None
    with pytest.raises(SessionNotFound):
        _verify_one(manager, new_id("ses"))


def test_f3_a_missing_head_with_the_newest_link_is_broken(manager: SessionManager) -> None:
    """The chain's head removed with the newest link, session and events: broken."""
    _session(manager)
    sid = _session(manager)
    _remove_by_hand(manager, sid, tombstone=False)
    _remove_links(manager, [2], head=True)
    broken = _verify(manager).broken
    assert broken is not None
    assert broken.problem == "removed" and "head" in broken.detail


def test_f3_a_missing_link_names_its_session(manager: SessionManager) -> None:
    """Link 1 removed, or the last link alone: the session of that link is named."""
    first, second, third = _session(manager), _session(manager), _session(manager)
    _remove_links(manager, [3])
    broken = _verify(manager).broken
    assert broken is not None
    assert (broken.session_id, broken.link, broken.problem) == (third, 3, "removed")
    _remove_links(manager, [1])
    broken = _verify(manager).broken
    assert broken is not None
    assert (broken.session_id, broken.link, broken.problem) == (first, 1, "removed")
    assert second
