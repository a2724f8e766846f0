"""The failed-authentication limit, shared by every process on the store: two apps on
one SQLite file (two processes of ``serve --workers 2``) answer 429 once the limit is
reached between them, not twice the limit; with one worker each process counts its own."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings

BAD = {"Authorization": "Bearer key_aaaaaaaaaaaaaaaaaaaaaaaaaa.wrong"}


def _statuses(tmp_path: Path, workers: int) -> list[int]:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    settings = Settings(url=url, workers=workers, auth_failures_per_address=4)
    managers = [SessionManager.from_url(url) for _ in range(2)]
    clients = [TestClient(create_app(m, settings, keys=MemoryKeyStore())) for m in managers]
    try:
        return [clients[i % 2].get("/v1/sessions", headers=BAD).status_code for i in range(10)]
    finally:
        for client, manager in zip(clients, managers, strict=True):
            client.close()
            manager.close()


def test_two_processes_share_the_limit(tmp_path: Path) -> None:
    assert _statuses(tmp_path, workers=2) == [401] * 4 + [429] * 6


def test_one_worker_counts_in_its_memory(tmp_path: Path) -> None:
    """One process serves the file: each app counts its own (in memory)."""
    assert _statuses(tmp_path, workers=1) == [401] * 8 + [429] * 2
