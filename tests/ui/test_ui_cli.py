"""``agentsession ui``: a local inspector on 127.0.0.1 whose first stdout line is a URL
with a one-time ticket; ``--url`` of a service or a missing database is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from agentsession import SessionManager


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentsession", *args]


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        s = sm.create_session(user_id="carol", agent="bot", title="carol's session")
        sm.append_message(
            session_id=s.session_id, user_id="carol", message={"role": "user", "content": "hi"}
        )
    return url


@pytest.fixture
def running(database: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        _command("ui", "--url", database, "--no-browser"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "BROWSER": "false"},
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    try:
        yield proc, first
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_first_line_is_a_one_time_url_on_loopback(
    running: tuple[subprocess.Popen[str], str],
) -> None:
    _, url = running
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.hostname == "127.0.0.1"
    assert parts.path == "/ui/login" and parts.query.startswith("ticket=")
    with httpx.Client(timeout=10) as browser:
        for _ in range(100):  # the server starts right after printing the URL
            try:
                page = browser.get(url, follow_redirects=True)
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        assert page.status_code == 200 and "carol&#39;s session" in page.text
    with httpx.Client(timeout=10) as stranger:
        again = stranger.get(url, follow_redirects=True)
        assert 'name="api_key"' in again.text and "carol" not in again.text


def test_a_service_url_and_a_missing_database_are_refused(tmp_path: Path) -> None:
    service = subprocess.run(
        _command("ui", "--url", "https://sessions.example", "--no-browser"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert service.returncode == 2 and "https://sessions.example/ui/" in service.stderr
    missing = subprocess.run(
        _command("ui", "--url", f"sqlite:///{tmp_path / 'nope.db'}", "--no-browser"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "no SQLite database" in missing.stderr
    assert not (tmp_path / "nope.db").exists()


def test_session_opens_that_session_after_login(database: str) -> None:
    """``agentsession --url URL ui --session ID`` (the command the demo prints) opens
    that session's page; a ticket naming no session id opens the Sessions view."""
    with SessionManager.from_url(database) as sm:
        sid = sm.list_sessions(user_id="carol").items[0].session_id
    proc = subprocess.Popen(
        _command("--url", database, "ui", "--no-browser", "--session", sid),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.endswith(f"&session={sid}")
        with httpx.Client(timeout=10) as browser:
            for _ in range(100):
                try:
                    page = browser.get(url, follow_redirects=True)
                    break
                except httpx.ConnectError:
                    time.sleep(0.1)
            assert page.status_code == 200 and str(page.url).endswith(f"/ui/sessions/{sid}")
            assert "<h1>carol&#39;s session</h1>" in page.text
    finally:
        proc.terminate()
        proc.wait(10)
