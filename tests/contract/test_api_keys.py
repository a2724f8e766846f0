"""API keys in the session store: every store's key table keeps hashes only, revokes
and stamps the last use field by field, and a cached reader sees a revocation made
elsewhere within its cache time."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agentsession.apikeys import StoreKeyStore, hash_token, key_table, new_key
from agentsession.errors import ValidationError
from agentsession.stores.base import SessionStore


def test_key_table_round_trip(store: SessionStore) -> None:
    """Every field comes back as written; an id or hash stored already is refused; a
    revocation and a last-use stamp write their own field only."""
    table = key_table(store)
    later = datetime.now(UTC) + timedelta(days=3)
    key, token = new_key("alice", name="ci runner", scope="read", expires_at=later)
    assert table.insert(key)
    assert not table.insert(key)
    assert table.get(hash_token(token)) == key
    assert table.get_by_id(key.key_id) == key
    assert token not in repr(table.list())
    table.touch(key.key_id, "2027-01-01T00:00:00+00:00")
    assert table.revoke(key.key_id, "2027-01-02T00:00:00+00:00")
    assert not table.revoke(key.key_id, "2027-01-03T00:00:00+00:00")
    table.touch(key.key_id, "2027-01-04T00:00:00+00:00")
    found = table.get_by_id(key.key_id)
    assert found is not None
    assert datetime.fromisoformat(found.revoked_at or "") == datetime(2027, 1, 2, tzinfo=UTC)
    assert datetime.fromisoformat(found.last_used_at or "") == datetime(2027, 1, 4, tzinfo=UTC)
    assert (found.scope, found.name, found.admin) == ("read", "ci runner", False)
    assert datetime.fromisoformat(found.expires_at or "") == later
    assert table.get("0" * 64) is None and table.get_by_id("key_nope") is None
    assert not table.revoke("key_nope", "2027-01-01T00:00:00+00:00")


def test_c31_a_key_table_keeps_the_agents_of_a_key(store: SessionStore) -> None:
    table = key_table(store)
    limited, token = new_key("alice", agents=["support", "billing", "support"])
    assert limited.agents == ("billing", "support")
    unlimited = new_key("alice")[0]
    assert table.insert(limited) and table.insert(unlimited)
    assert table.get(hash_token(token)) == limited
    assert table.get_by_id(unlimited.key_id) == unlimited and unlimited.agents is None
    found = StoreKeyStore(table).authenticate(token)
    assert found is not None and found.agents == frozenset({"billing", "support"})


def test_key_table_lists_oldest_first_and_erases_a_user(store: SessionStore) -> None:
    table = key_table(store)
    made = [new_key(user)[0] for user in ("bob", "alice", "bob")]
    for key in made:
        assert table.insert(key)
    assert [k.key_id for k in table.list()] == [k.key_id for k in made]
    assert table.remove_user("bob") == 2
    assert [k.user_id for k in table.list()] == ["alice"]
    assert table.get(made[0].token_sha256) is None


def test_a_revocation_elsewhere_is_seen_within_the_cache_time(store: SessionStore) -> None:
    """Two readers of one table (two instances): a key revoked through one is refused by
    the other once its cache time has passed, not before; the last use is written once
    per touch interval, not per request."""
    now = [0.0]
    one = StoreKeyStore(key_table(store), cache_seconds=5, clock=lambda: now[0])
    other = StoreKeyStore(key_table(store), cache_seconds=5, clock=lambda: now[0])
    key, token = one.create(user_id="alice", scope="read")
    principal = other.authenticate(token)
    assert principal is not None
    assert (principal.user_id, principal.scope, principal.admin) == ("alice", "read", False)
    stamped = key_table(store).get_by_id(key.key_id)
    assert stamped is not None and stamped.last_used_at is not None
    assert one.revoke(key.key_id)
    assert one.authenticate(token) is None  # the revoker forgets at once
    now[0] = 4.9
    assert other.cached(token)[0] and other.authenticate(token) is not None
    now[0] = 5.0
    assert other.cached(token) == (False, None)
    assert other.authenticate(token) is None
    assert other.find(key.key_id) is None


def test_an_expired_key_is_refused(store: SessionStore) -> None:
    keys = StoreKeyStore(key_table(store), cache_seconds=0)
    key, token = keys.create(user_id="alice")
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    gone = replace(key, key_id="key_" + "A" * 26, token_sha256=hash_token("other"), expires_at=past)
    assert key_table(store).insert(gone)
    assert keys.authenticate(token) is not None
    assert keys.authenticate("other") is None


@pytest.mark.store_independent
@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"scope": "admin"}, "scope"),
        ({"name": "x" * 201}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"expires_at": datetime(2020, 1, 1, tzinfo=UTC)}, "expires_at"),
        ({"expires_at": datetime(2099, 1, 1)}, "expires_at"),
        ({"agents": []}, "agents"),
        ({"agents": ["ok", "not ok"]}, "agents"),
    ],
)
def test_bad_key_options_are_refused(store: SessionStore, options: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        StoreKeyStore(key_table(store)).create(user_id="alice", **options)
    assert caught.value.field == field
    assert key_table(store).list() == []
