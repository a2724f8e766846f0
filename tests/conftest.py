"""Shared fixtures: the registry of stores every contract test runs against.

``STORES`` maps a backend name to a factory ``(tmp_path) -> (store, cleanup)``. A backend
whose server or driver is missing is skipped with its reason printed by ``-ra``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentsession import SessionManager
from agentsession.stores.base import SessionStore
from agentsession.stores.memory import MemoryStore


def _memory(tmp_path: Path) -> SessionStore:
    return MemoryStore()


def _sqlite(tmp_path: Path) -> SessionStore:
    from agentsession.stores.sql import SQLStore

    return SQLStore(f"sqlite:///{tmp_path / 'sessions.db'}", auto_migrate=True)


#: Every store the contract suite runs against. New stores add themselves here.
STORES: dict[str, Callable[[Path], SessionStore]] = {
    "memory": _memory,
    "sqlite": _sqlite,
}


class FrozenClock:
    """A clock for tests: returns the same aware UTC instant until advanced."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        self.now += timedelta(seconds=seconds)


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh, empty store of each registered kind."""
    s = STORES[request.param](tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def clock() -> FrozenClock:
    """A frozen clock shared with the ``manager`` fixture."""
    return FrozenClock()


@pytest.fixture
def manager(store: SessionStore) -> SessionManager:
    """A SessionManager over each store, on the real clock."""
    return SessionManager(store)


@pytest.fixture
def frozen_manager(store: SessionStore, clock: FrozenClock) -> SessionManager:
    """A SessionManager over each store whose clock only moves when the test says so."""
    return SessionManager(store, clock=clock)
