"""API keys in the session store, shared by every instance: two ``serve`` instances on
one PostgreSQL database (and on one Redis), each started in its own folder with no key
file, accept a key made with ``agentsession keys create`` and refuse it once ``keys
revoke`` ran, within ``AGENTSESSION_KEYS_CACHE_SECONDS``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import servers
from service import agentsession, running_service

pytestmark = pytest.mark.slow

CACHE_SECONDS = 1.0


@pytest.fixture(params=["postgres", "redis"])
def shared_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database on the throwaway PostgreSQL, or the emptied Redis."""
    if not servers.server_stores_enabled():
        pytest.skip(f"server stores left out ({servers.SERVER_STORES_ENV}=0)")
    yield request.getfixturevalue(f"{request.param}_url")


def _status(base: str, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{base}/v1/sessions", headers=headers, timeout=10).status_code


def test_a_key_made_by_the_cli_works_on_every_instance_until_revoked(
    tmp_path: Path, shared_url: str
) -> None:
    settings = {"AGENTSESSION_KEYS_CACHE_SECONDS": str(CACHE_SECONDS)}
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
    with (
        running_service(folders[0], url=shared_url, keys="store", settings=settings) as a,
        running_service(folders[1], url=shared_url, keys="store", settings=settings) as b,
    ):
        env = {**a.env}
        made = agentsession("keys", "create", "--user", "carol", "--name", "ops", env=env)
        token = made.strip().splitlines()[0]
        key_id = token.split(".", 1)[0]
        assert [_status(s.url, token) for s in (a, b) for _ in range(3)] == [200] * 6
        listed = agentsession("keys", "list", env=env)
        line = next(row for row in listed.splitlines() if row.startswith(key_id))
        assert line.split("\t")[1:3] == ["carol", "user"] and token not in listed
        assert line.split("\t")[7] != "-"  # last used: stamped
        assert [path for f in folders for path in f.glob("*.json")] == []  # no key file
        assert agentsession("keys", "revoke", key_id, env=env).strip() == f"revoked {key_id}"
        revoked = time.monotonic()
        refused: dict[str, float] = {}
        while len(refused) < 2 and time.monotonic() - revoked < CACHE_SECONDS + 5:
            for service in (a, b):
                if service.url not in refused and _status(service.url, token) == 401:
                    refused[service.url] = time.monotonic() - revoked
            time.sleep(0.05)
        assert sorted(refused) == sorted([a.url, b.url])
        assert max(refused.values()) <= CACHE_SECONDS + 1.0, refused
        assert _status(a.url, a.token) == 200 and _status(b.url, b.token) == 200
