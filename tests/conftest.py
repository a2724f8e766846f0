"""Shared fixtures: the registry of stores every contract test runs against.

``STORES`` maps a backend name to a factory returning a fresh, empty store; the
``store`` fixture closes it afterwards. A factory's parameters are fixture names, filled
in like a fixture's (``tmp_path``, or a server fixture of ``tests/servers.py`` such as
``postgres_url``). A backend whose server or driver is missing is skipped with its
reason printed by ``-ra`` and in the "server stores" summary at the end.

The server stores (``postgres``, ``mysql``, ``redis``) are registered unless the environment
variable ``AGENTSESSION_TEST_SERVERS=0`` asks for a quick local run (see
``tests/contract/README.md``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import servers
from agentsession import SessionManager
from agentsession.stores.base import SessionStore
from agentsession.stores.memory import MemoryStore
from frozen_clock import FrozenClock


def pytest_configure(config: pytest.Config) -> None:
    """Load the throwaway servers' fixtures (``postgres_url``, ``mysql_url``,
    ``redis_url``...) and their "server stores" summary at the end of the run."""
    config.pluginmanager.register(servers, "agentsession_test_servers")


def _memory(tmp_path: Path) -> SessionStore:
    return MemoryStore()


def _sqlite(tmp_path: Path) -> SessionStore:
    from agentsession.stores.sql import SQLStore

    return SQLStore(f"sqlite:///{tmp_path / 'sessions.db'}", auto_migrate=True)


def _postgres(postgres_url: str) -> SessionStore:
    from agentsession.stores.sql import SQLStore

    return SQLStore(postgres_url, auto_migrate=True)


def _mysql(mysql_url: str) -> SessionStore:
    from agentsession.stores.sql import SQLStore

    return SQLStore(mysql_url, auto_migrate=True)


def _redis(redis_url: str) -> SessionStore:
    pytest.importorskip("redis", reason="redis-py not installed: pip install -e '.[dev]'")
    from agentsession.stores.redis_store import RedisStore

    return RedisStore(redis_url)


#: Every store the contract suite runs against. New stores add themselves here.
STORES: dict[str, Callable[..., SessionStore]] = {
    "memory": _memory,
    "sqlite": _sqlite,
}
if servers.server_stores_enabled():
    STORES.update(postgres=_postgres, mysql=_mysql, redis=_redis)


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest) -> Iterator[SessionStore]:
    """A fresh, empty store of each registered kind."""
    factory = STORES[request.param]
    fixtures = {
        name: request.getfixturevalue(name) for name in inspect.signature(factory).parameters
    }
    s = factory(**fixtures)
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
