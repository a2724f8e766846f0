"""An encrypted store opened without its keyring is refused at every entry point:
``SessionManager.from_url`` raises KeyringMismatch, a CLI command exits 1 with one
``error:`` line, ``serve`` refuses to start and the HTTP app's start-up fails; another
keyring is refused the same way. Nothing of the store is changed by a refusal."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agentsession import KeyringMismatch, SessionManager
from agentsession.cli.app import build_app
from agentsession.crypto import Keyring
from agentsession.http.app import create_app
from agentsession.settings import Settings
from agentsession.stores import keyringmark
from agentsession.stores.registry import open_store


@pytest.fixture
def marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """An SQLite store with one sealed session, marked with its keyring; no keyring
    in the environment."""
    monkeypatch.delenv("AGENTSESSION_KEYRING_FILE", raising=False)
    url = f"sqlite:///{tmp_path / 's.db'}"
    ring = tmp_path / "store.keyring"
    Keyring.create(ring)
    with SessionManager.from_url(url, auto_migrate=True, keyring=ring) as sm:
        sm.create_session(user_id="u", title="sealed")
    return url, ring


def test_from_url_without_the_keyring_is_refused(marked: tuple[str, Path], tmp_path: Path) -> None:
    url, ring = marked
    with pytest.raises(KeyringMismatch, match="open it with that keyring"):
        SessionManager.from_url(url)
    other = tmp_path / "other.keyring"
    Keyring.create(other)
    with pytest.raises(KeyringMismatch, match="not with the keyring given"):
        SessionManager.from_url(url, keyring=other)
    with SessionManager.from_url(url, keyring=ring) as sm:
        (found,) = sm.list_sessions(user_id="u").items
        assert found.title == "sealed"


def test_the_cli_exits_1_with_one_line(marked: tuple[str, Path]) -> None:
    url, _ = marked
    result = CliRunner().invoke(build_app(), ["--url", url, "sessions", "list", "--user", "u"])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the store ")
    assert "$as1" not in result.output


def _started(*args: object, **kwargs: object) -> None:
    raise AssertionError("serve started on a store it must refuse")


def test_serve_refuses_to_start(marked: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = marked
    monkeypatch.setenv(
        "AGENTSESSION_KEYS_FILE", str(Path(url.removeprefix("sqlite:///")).with_name("keys"))
    )
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    monkeypatch.setattr(uvicorn, "run", _started)  # a regression fails, never hangs
    result = CliRunner().invoke(build_app(), ["serve", "--url", url, "--port", port])
    assert result.exit_code == 1, result.output
    assert "encrypted with the keyring" in result.output


def test_the_http_app_does_not_start(marked: tuple[str, Path]) -> None:
    url, _ = marked
    app = create_app(settings=Settings(url=url, keys="file"))
    with pytest.raises(KeyringMismatch), TestClient(app):
        pass


class _Clock:
    """A monotonic clock the test moves (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_process_running_without_a_keyring_refuses_once_another_marks_the_store(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Manager A, opened without a keyring on an unmarked store, keeps working; B opens
    the store with a keyring (marking it) and writes a sealed title. Within
    RECHECK_SECONDS (and not before: no store read per call) every read and write of A
    raises KeyringMismatch, never showing the ciphertext nor writing plaintext."""
    monkeypatch.delenv("AGENTSESSION_KEYRING_FILE", raising=False)
    clock = _Clock()
    monkeypatch.setattr(keyringmark, "monotonic", clock)
    url = (
        f"sqlite:///{tmp_path / 's.db'}"
        if kind == "sqlite"
        else request.getfixturevalue("redis_url")
    )
    ring = tmp_path / "store.keyring"
    Keyring.create(ring)
    with SessionManager.from_url(url, auto_migrate=True) as a:
        sid = a.create_session(user_id="u", title="plain").session_id
        with SessionManager.from_url(url, keyring=ring) as b:
            b.create_session(user_id="u", title="sealed")
        clock.now += keyringmark.RECHECK_SECONDS / 2  # the mark is not read per call
        assert len(a.list_sessions(user_id="u").items) == 2
        clock.now += keyringmark.RECHECK_SECONDS / 2
        calls = {
            "list": lambda: a.list_sessions(user_id="u"),
            "get": lambda: a.get_session(session_id=sid, user_id="u"),
            "append": lambda: a.append_message(
                session_id=sid, user_id="u", message={"role": "user", "content": "clear"}
            ),
            "create": lambda: a.create_session(user_id="u", title="clear"),
            "changes": lambda: a.changes(user_id="u"),
        }
        for name, call in calls.items():
            with pytest.raises(KeyringMismatch, match="open it with that keyring"):
                call()
                pytest.fail(f"{name} ran on a store marked since")
    store = open_store(url)  # below the mark: nothing written by A
    try:
        raw = SessionManager(store)
        titles = sorted(s.title or "" for s in raw.list_sessions(user_id="u").items)
        assert titles[0].startswith("$as1$") and titles[1] == "plain"
        assert raw.get_messages(session_id=sid, user_id="u").items == []
    finally:
        store.close()
