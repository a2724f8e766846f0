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
