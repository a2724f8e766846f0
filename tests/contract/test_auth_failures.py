"""Failed-authentication windows in the store: every store that several processes
serve counts them where all of them see the same window (SQL: ``auth_failures``;
Redis: the ``limits`` library's moving windows); memory counts in the process."""

from __future__ import annotations

import time

from agentsession.authfailures import FailureCounter, LimitsCounter
from agentsession.stores.base import SessionStore


def _counters(store: SessionStore) -> tuple[FailureCounter, FailureCounter]:
    """Two counters on the store (two processes), or one in memory twice."""
    made = getattr(store, "auth_failures", None)
    if made is None:
        one = LimitsCounter()
        return one, one
    return made(), made()


def test_a_window_holds_its_limit_across_counters(store: SessionStore) -> None:
    one, two = _counters(store)
    hits = [(one if i % 2 else two).hit("address", "10.1.2.3", 5, 60) for i in range(8)]
    assert hits == [True] * 5 + [False] * 3
    assert one.hit("address", "10.1.2.4", 5, 60) and one.hit("key", "10.1.2.3", 5, 60)
    assert 55 < two.reset_at("address", "10.1.2.3", 5, 60) - time.time() <= 60.5


def test_a_window_has_room_again_once_it_moved_on(store: SessionStore) -> None:
    one, two = _counters(store)
    assert [one.hit("key", "key_x", 2, 1) for _ in range(3)] == [True, True, False]
    time.sleep(1.1)
    assert two.hit("key", "key_x", 2, 1)
