"""Fixtures of the inspector's tests: a seeded in-memory store behind the service's app,
API keys for alice, bob and an admin, a test client, and (for the browser tests) the
app served by uvicorn on a free loopback port in a thread (a fresh one per module), and
chromium for the browser tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from ui_support import Inspector, Live, build

from service import free_port


@pytest.fixture
def inspector() -> Iterator[Inspector]:
    """A seeded app (function scope: each test may log in, fail, be rate limited)."""
    built = build()
    yield built
    built.manager.close()


@pytest.fixture
def client(inspector: Inspector) -> Iterator[TestClient]:
    """A test client of the seeded app (cookies kept between its requests)."""
    with TestClient(inspector.app, base_url="http://127.0.0.1") as c:
        yield c


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    """The seeded app served by uvicorn in a thread, for the browser."""
    built = build()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(built.app, host="127.0.0.1", port=port, log_level="warning", ws="none")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the inspector's server did not start")
        time.sleep(0.05)
    try:
        yield Live(f"http://127.0.0.1:{port}", built)
    finally:
        server.should_exit = True
        thread.join(10)
        built.manager.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright, one per module (browser tests only; the
    import is here so the other tests need no Playwright)."""
    from browser_support import launch

    yield from launch()
