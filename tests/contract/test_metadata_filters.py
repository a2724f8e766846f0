"""Metadata filters of list_sessions and count_sessions: exact values, an AND of keys,
the owner's sessions only, and exact after metadata updates, deletion and erasure."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from contract_support import ADMIN, OTHER, USER

from agentsession import SessionManager, ValidationError
from agentsession.metafilter import MAX_FILTER_KEYS, MAX_VALUE_CHARS
from agentsession.stores.base import SessionStore


def _listed(m: SessionManager, **filters: Any) -> set[str]:
    """The ids over every page of list_sessions, two per page."""
    found: list[str] = []
    cursor = None
    while True:
        page = m.list_sessions(**filters, limit=2, cursor=cursor)
        found += [s.session_id for s in page.items]
        if (cursor := page.next_cursor) is None:
            assert len(found) == len(set(found)), "a page repeated a session"
            return set(found)


def _check(m: SessionManager, expected: set[str], **filters: Any) -> None:
    assert _listed(m, **filters) == expected, filters
    assert m.count_sessions(**filters) == len(expected), filters


def _fill(m: SessionManager, clock: Any) -> dict[str, str]:
    ids: dict[str, str] = {}

    def new(name: str, meta: dict[str, Any], user: str = USER, **kw: Any) -> None:
        ids[name] = m.create_session(user_id=user, metadata=meta, **kw).session_id

    new("a", {"team": "x", "env": "prod"}, agent="coding")
    new("b", {"team": "x", "env": "dev"}, agent="coding", ttl_seconds=60)
    new("c", {"team": "x"}, agent="other")
    new("d", {"team": "y", "env": "prod"}, agent="coding")
    new("e", {"team": "X", "env": "prod "})  # case and trailing space count
    new("f", {})
    m.close_session(session_id=ids["c"], user_id=USER)
    fork = m.fork_session(session_id=ids["a"], user_id=USER, metadata={"team": "x", "env": "prod"})
    ids["fork"] = fork.session_id
    new("o", {"team": "x", "env": "prod"}, OTHER, agent="coding")
    clock.advance(120)  # b is due: EXPIRED to a read, not yet swept
    return ids


def test_metadata_filters_count_what_every_page_lists(
    store: SessionStore, frozen_manager: SessionManager, clock: Any
) -> None:
    """Every filter, alone and with status, agent and parent, for the owner, another
    user and an admin over all users: the listing's pages and the count are exactly the
    sessions whose metadata has every key with that value (case and spaces kept)."""
    m = frozen_manager
    ids = _fill(m, clock)
    meta = {
        "a": {"team": "x", "env": "prod"},
        "b": {"team": "x", "env": "dev"},
        "c": {"team": "x"},
        "d": {"team": "y", "env": "prod"},
        "e": {"team": "X", "env": "prod "},
        "f": {},
        "fork": {"team": "x", "env": "prod"},
        "o": {"team": "x", "env": "prod"},
    }
    status = {"b": "EXPIRED", "c": "CLOSED"}
    agent = {"a": "coding", "b": "coding", "c": "other", "d": "coding", "fork": "coding"}
    agent["o"] = "coding"
    owner = dict.fromkeys(meta, USER) | {"o": OTHER}
    filters = [{"team": "x"}, {"env": "prod"}, {"team": "x", "env": "prod"}, {"team": "z"}]
    filters += [{"team": "X"}, {"env": "prod "}]
    callers = [{"user_id": USER}, {"user_id": OTHER}, {"user_id": ADMIN, "all_users": True}]
    for want, caller, st, ag, parent in itertools.product(
        filters, callers, [None, "ACTIVE", "EXPIRED", "CLOSED"], [None, "coding"], [None, "a"]
    ):
        expected = {
            ids[n]
            for n, md in meta.items()
            if all(md.get(k) == v for k, v in want.items())
            and (caller.get("all_users") or owner[n] == caller["user_id"])
            and (st is None or status.get(n, "ACTIVE") == st)
            and (ag is None or agent.get(n) == ag)
            and (parent is None or n == "fork")
        }
        admin = {"admin": True} if caller.get("all_users") else {}
        filters_now = {"metadata": want, "status": st, "agent": ag}
        if parent is not None:
            filters_now["parent_session_id"] = ids[parent]
        _check(m, expected, **caller, **admin, **filters_now)


def test_metadata_numbers_and_booleans_match_their_text(manager: SessionManager) -> None:
    """A filter value "3" matches a stored 3, 3.0 and "3"; "true" matches true and
    "true"; a typed filter (3, True) the same; null, arrays and objects match nothing."""
    m = manager
    stored = [3, 3.0, "3", True, "true", None, [3], {"n": 3}, 3.5]
    ids = [m.create_session(user_id=USER, metadata={"n": v}).session_id for v in stored]
    _check(m, set(ids[:3]), user_id=USER, metadata={"n": "3"})
    _check(m, set(ids[:3]), user_id=USER, metadata={"n": 3})
    _check(m, set(ids[:3]), user_id=USER, metadata={"n": 3.0})
    _check(m, {ids[3], ids[4]}, user_id=USER, metadata={"n": "true"})
    _check(m, {ids[3], ids[4]}, user_id=USER, metadata={"n": True})
    _check(m, {ids[8]}, user_id=USER, metadata={"n": 3.5})
    _check(m, set(), user_id=USER, metadata={"n": "null"})
    _check(m, set(), user_id=USER, metadata={"n": "[3]"})


def test_metadata_filters_stay_exact_after_updates_deletion_and_erasure(
    manager: SessionManager,
) -> None:
    """Updating a session's metadata moves it between filters at once (a key dropped,
    a value changed); deleting a session and erasing a user take theirs out; another
    user's sessions with the same metadata are never counted."""
    m = manager
    a = m.create_session(user_id=USER, metadata={"team": "x", "env": "prod"}).session_id
    b = m.create_session(user_id=USER, metadata={"team": "x"}).session_id
    o = m.create_session(user_id=OTHER, metadata={"team": "x"}).session_id
    _check(m, {a, b}, user_id=USER, metadata={"team": "x"})
    m.update_session(session_id=a, user_id=USER, metadata={"team": "y", "env": "prod"})
    _check(m, {b}, user_id=USER, metadata={"team": "x"})
    _check(m, {a}, user_id=USER, metadata={"team": "y", "env": "prod"})
    m.update_session(session_id=a, user_id=USER, metadata={"team": "y"})
    _check(m, set(), user_id=USER, metadata={"env": "prod"})
    m.append_messages(session_id=b, user_id=USER, messages=[{"role": "user", "content": "hi"}])
    _check(m, {b}, user_id=USER, metadata={"team": "x"})
    m.delete_session(session_id=b, user_id=USER)
    _check(m, set(), user_id=USER, metadata={"team": "x"})
    _check(m, {o}, user_id=OTHER, metadata={"team": "x"})
    m.erase_user(user_id=OTHER)
    _check(m, set(), user_id=OTHER, metadata={"team": "x"})
    _check(m, {a}, user_id=ADMIN, admin=True, all_users=True, metadata={"team": "y"})
    _check(m, set(), user_id=ADMIN, admin=True, all_users=True, metadata={"team": "x"})


def test_metadata_filter_cursor_belongs_to_its_filter(manager: SessionManager) -> None:
    """A cursor of a filtered listing is refused by the same listing with another
    filter, and by the unfiltered one."""
    m = manager
    for _ in range(3):
        m.create_session(user_id=USER, metadata={"team": "x"})
    page = m.list_sessions(user_id=USER, metadata={"team": "x"}, limit=1)
    assert page.next_cursor is not None
    for other in ({"team": "y"}, None):
        with pytest.raises(ValidationError):
            m.list_sessions(user_id=USER, metadata=other, cursor=page.next_cursor)


@pytest.mark.store_independent
@pytest.mark.parametrize(
    "bad",
    [
        {f"k{i}": "v" for i in range(MAX_FILTER_KEYS + 1)},
        {"bad key": "v"},
        {"": "v"},
        {"k" * 65: "v"},
        {"team": "v" * (MAX_VALUE_CHARS + 1)},
        {"team": ""},
        {"team": "a\x00b"},
        {"team": None},
        {"team": ["x"]},
        {"team": float("nan")},
    ],
    ids=["keys", "space", "empty-key", "long-key", "long", "empty", "nul", "null", "list", "nan"],
)
def test_bad_metadata_filter_is_a_validation_error(manager: SessionManager, bad: Any) -> None:
    """Too many keys, a bad key name, an over-long, empty or non-scalar value: a
    ValidationError naming the filter, from the listing and the count alike."""
    for call in (manager.list_sessions, manager.count_sessions):
        with pytest.raises(ValidationError) as raised:
            call(user_id=USER, metadata=bad)
        assert (raised.value.field or "").startswith("metadata")
