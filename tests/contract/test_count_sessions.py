"""count_sessions counts what list_sessions lists: the same filters, owners and statuses."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from contract_support import ADMIN, OTHER, USER

from agentsession import (
    AsyncSessionManager,
    Forbidden,
    SessionManager,
    SessionStatus,
    ValidationError,
)
from agentsession.stores.base import SessionStore

STATUSES = [None, "ACTIVE", "CLOSED", "EXPIRED"]
AGENTS = [None, "coding", "other", "absent"]


def _fill(m: SessionManager, clock: Any) -> dict[str, str]:
    """Sessions of two users in every status, with and without a TTL, some of them forks;
    then the clock passes the 60 s TTLs, so three of USER's and two of OTHER's
    ACTIVE sessions are due (EXPIRED to a read) but not swept. Returns ids by name."""

    def new(name: str, user: str = USER, **kw: Any) -> None:
        ids[name] = m.create_session(user_id=user, **kw).session_id

    ids: dict[str, str] = {}
    new("a", agent="coding")
    new("b", agent="coding", ttl_seconds=60)
    new("c", agent="coding", ttl_seconds=3600)
    new("d", agent="coding")
    m.close_session(session_id=ids["d"], user_id=USER)
    new("e", agent="coding")
    m.expire_session(session_id=ids["e"], user_id=USER, reason="by hand")
    new("f", agent="other", ttl_seconds=60)
    new("g", agent="other")
    m.close_session(session_id=ids["g"], user_id=USER)
    for name, ttl in (("fork1", None), ("fork2", None), ("fork3", 60.0)):
        ids[name] = m.fork_session(session_id=ids["a"], user_id=USER, ttl_seconds=ttl).session_id
    m.close_session(session_id=ids["fork2"], user_id=USER)
    new("h", OTHER, agent="coding", ttl_seconds=60)
    new("i", OTHER, agent="coding")
    ids["fork_h"] = m.fork_session(session_id=ids["h"], user_id=OTHER).session_id
    clock.advance(120)
    return ids


def _listed(m: SessionManager, **filters: Any) -> int:
    """How many sessions every page of list_sessions holds, three per page."""
    total, cursor = 0, None
    while True:
        page = m.list_sessions(**filters, limit=3, cursor=cursor)
        total += len(page.items)
        if (cursor := page.next_cursor) is None:
            return total


def _callers() -> list[dict[str, Any]]:
    return [
        {"user_id": USER},
        {"user_id": OTHER},
        {"user_id": USER, "admin": True},
        {"user_id": ADMIN, "admin": True, "all_users": True},
    ]


def test_count_is_every_page_of_the_listing_for_every_filter(
    store: SessionStore, frozen_manager: SessionManager, clock: Any
) -> None:
    """For each caller (an owner, another user, an admin alone and over all users) and
    every combination of status (due sessions count as EXPIRED, never ACTIVE), agent and
    parent: count_sessions equals the number of items over all pages of list_sessions;
    counting writes nothing, and the counts stay the same once the sweep has expired
    the due sessions for real."""
    m = frozen_manager
    ids = _fill(m, clock)
    combos = list(itertools.product(_callers(), STATUSES, AGENTS, [None, ids["a"], ids["h"]]))

    def counts() -> list[int]:
        out = []
        for caller, status, agent, parent in combos:
            filters = {**caller, "status": status, "agent": agent, "parent_session_id": parent}
            count = m.count_sessions(**filters)
            assert count == _listed(m, **filters), filters
            out.append(count)
        return out

    before = counts()
    assert m.count_sessions(user_id=USER) == 10
    by_status = {s: m.count_sessions(user_id=USER, status=s) for s in STATUSES[1:]}
    assert by_status == {"ACTIVE": 3, "CLOSED": 3, "EXPIRED": 4}
    assert m.count_sessions(user_id=USER, status="EXPIRED", agent="coding") == 3  # b, e, fork3
    assert m.count_sessions(user_id=USER, status="ACTIVE", parent_session_id=ids["a"]) == 1
    assert m.count_sessions(user_id=OTHER, parent_session_id=ids["a"]) == 0
    assert m.count_sessions(user_id=ADMIN, admin=True, all_users=True) == 13
    assert m.count_sessions(user_id=ADMIN, admin=True, all_users=True, status="EXPIRED") == 6
    with store.transaction(write=False) as tx:  # counting expired nothing
        stored = tx.get_session(ids["b"])
    assert stored is not None and stored.status == SessionStatus.ACTIVE

    assert len(m.sweep_expired().expired_session_ids) == 5
    assert counts() == before


def test_count_keeps_the_listings_ownership_rules(manager: SessionManager) -> None:
    """Another user's sessions never count; all_users needs admin, with the listing's
    error; an admin without all_users counts their own."""
    manager.create_session(user_id=USER)
    manager.create_session(user_id=OTHER)
    assert manager.count_sessions(user_id=USER) == 1
    assert manager.count_sessions(user_id=USER, admin=True) == 1
    assert manager.count_sessions(user_id=ADMIN, admin=True) == 0
    assert manager.count_sessions(user_id=ADMIN, admin=True, all_users=True) == 2
    with pytest.raises(Forbidden):
        manager.list_sessions(user_id=USER, all_users=True)
    with pytest.raises(Forbidden, match="counting every user's sessions needs an admin caller"):
        manager.count_sessions(user_id=USER, all_users=True)


@pytest.mark.store_independent
@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("status", "RUNNING"),
        ("agent", "no spaces"),
        ("parent_session_id", "ses_nope"),
        ("user_id", ""),
    ],
)
def test_count_refuses_what_the_listing_refuses(
    manager: SessionManager, field: str, bad: str
) -> None:
    """A bad status, agent, parent id or user id is a ValidationError naming the field,
    as it is for list_sessions."""
    filters: dict[str, Any] = {"user_id": USER, field: bad}
    with pytest.raises(ValidationError) as listed:
        manager.list_sessions(**filters)
    with pytest.raises(ValidationError) as counted:
        manager.count_sessions(**filters)
    assert counted.value.field == listed.value.field == field


@pytest.mark.store_independent
def test_the_async_manager_counts_too(manager: SessionManager) -> None:
    """AsyncSessionManager.count_sessions runs the manager's count in a worker thread."""
    manager.create_session(user_id=USER, agent="coding")
    aio = AsyncSessionManager(manager)
    try:
        assert asyncio.run(aio.count_sessions(user_id=USER, agent="coding")) == 1
    finally:
        aio.stop_threads()
