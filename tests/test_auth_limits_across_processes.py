"""The failed-authentication limit across real processes: ``serve --workers 2`` on one
PostgreSQL database, and two ``serve`` instances on it, answer 401 exactly the
configured number of times from one address, then 429, not a multiple of it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

import servers
from service import running_service

pytestmark = pytest.mark.slow

LIMIT = 6
BAD = {"Authorization": "Bearer key_aaaaaaaaaaaaaaaaaaaaaaaaaa.wrong"}


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if not servers.server_stores_enabled():
        pytest.skip(f"server stores left out ({servers.SERVER_STORES_ENV}=0)")
    yield request.getfixturevalue("postgres_url")


@pytest.mark.parametrize("topology", ["two_workers", "two_instances"])
def test_the_limit_holds_at_its_number(tmp_path: Path, pg_url: str, topology: str) -> None:
    settings = {"AGENTSESSION_AUTH_FAILURES_PER_ADDRESS": str(LIMIT)}
    with ExitStack() as stack:
        if topology == "two_workers":
            one = stack.enter_context(
                running_service(tmp_path, url=pg_url, workers=2, settings=settings)
            )
            urls = [one.url]
        else:
            urls = [
                stack.enter_context(
                    running_service(tmp_path, url=pg_url, name=name, settings=settings)
                ).url
                for name in ("a", "b")
            ]
        # A new connection per request: the kernel hands each to either worker.
        statuses = [
            httpx.get(f"{urls[i % len(urls)]}/v1/sessions", headers=BAD, timeout=10).status_code
            for i in range(3 * LIMIT)
        ]
    assert statuses == [401] * LIMIT + [429] * (2 * LIMIT)
