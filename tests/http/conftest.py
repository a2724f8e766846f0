"""Fixtures of the HTTP tests: an app per store (from ``tests/conftest.py`` STORES) with
in-memory API keys for two users and an admin, and a sync test client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from http_support import Api, headers_of

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.base import SessionStore

AppFactory = Callable[..., Api]


@pytest.fixture
def make_api(store: SessionStore) -> Iterator[AppFactory]:
    """Build an :class:`Api` over the parametrised store; settings may be overridden."""
    clients: list[TestClient] = []

    def build(**settings: Any) -> Api:
        manager = SessionManager(store)
        keys = MemoryKeyStore()
        tokens = {
            "alice": keys.create(user_id="alice")[1],
            "bob": keys.create(user_id="bob")[1],
            "admin": keys.create(user_id="root", admin=True)[1],
        }
        app = create_app(manager, Settings(url="memory://", **settings), keys=keys)
        http = TestClient(app, raise_server_exceptions=False)
        clients.append(http)
        return Api(
            http,
            app,
            manager,
            keys,
            headers_of(tokens["alice"]),
            headers_of(tokens["bob"]),
            headers_of(tokens["admin"]),
        )

    yield build
    for c in clients:
        c.close()


@pytest.fixture
def api(make_api: AppFactory) -> Api:
    """The default app over each store."""
    return make_api()
