"""The ``harness`` fixture the adapter tests share: one adapter's test helper over a
SessionManager of each store, and over the HTTP client (``SessionClient``) in front of
such a manager. A test module picks its adapter by defining the fixture
``make_harness``: a factory ``(manager, backend) -> harness``.

The PostgreSQL, MariaDB and Redis variants of every test here are ``slow`` (only
``make test-all``; ``servers_slow`` in ``tests/conftest.py``): the memory and SQLite ones
check the adapter in ``make test``, and the contract suite checks every store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agentsession import SessionManager
from agentsession.client import SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.base import SessionStore
from inprocess import InProcess


@pytest.fixture(params=["manager", "http"])
def harness(
    request: pytest.FixtureRequest,
    store: SessionStore,
    make_harness: Callable[[SessionManager, Any], Any],
) -> Iterator[Any]:
    """``make_harness(manager, backend)`` with backend = the manager itself, or a
    ``SessionClient`` for ``alice`` served by it in-process."""
    manager = SessionManager(store)
    if request.param == "manager":
        yield make_harness(manager, manager)
        return
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))
        yield make_harness(manager, client)
        client.close()
