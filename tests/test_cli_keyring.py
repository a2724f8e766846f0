"""``agentsession keyring create|rotate|status`` and ``AGENTSESSION_KEYRING_FILE``: the
CLI creates a private keyring, never overwrites one, rotates its key-encryption key
keeping sealed content readable, and a manager built from the settings seals content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.settings import Settings

runner = CliRunner()


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(build_app(), list(args))
    return result.exit_code, result.output


def test_create_status_rotate(tmp_path: Path) -> None:
    ring = tmp_path / "store.keyring"
    code, out = _cli("keyring", "create", "--file", str(ring))
    assert code == 0 and "created keyring" in out
    assert ring.stat().st_mode & 0o777 == 0o600
    code, out = _cli("keyring", "create", "--file", str(ring))
    assert code == 2 and "never overwritten" in out
    with SessionManager.from_url("memory://", keyring=ring) as sm:
        sid = sm.create_session(user_id="u", title="sealed title").session_id
        old = json.loads(ring.read_text())["active"]
        code, out = _cli("keyring", "rotate", "--file", str(ring))
        assert code == 0 and "1 data keys re-wrapped" in out
        assert sm.get_session(session_id=sid, user_id="u").title == "sealed title"
    code, out = _cli("keyring", "status", "--file", str(ring))
    assert code == 0 and "users with data keys\t1" in out and old not in out


def test_rotate_data_keys_keeps_what_is_stored_readable(tmp_path: Path) -> None:
    ring = tmp_path / "store.keyring"
    _cli("keyring", "create", "--file", str(ring))
    with SessionManager.from_url("memory://", keyring=ring) as sm:
        sid = sm.create_session(user_id="u", title="before").session_id
        code, out = _cli("keyring", "rotate", "--data-keys", "--file", str(ring))
        assert code == 0 and "1 users got a new data key" in out
        sm.store.keyring._store._checked = float("-inf")  # type: ignore[attr-defined]
        sm.update_session(session_id=sid, user_id="u", title="after")
        assert sm.get_session(session_id=sid, user_id="u").title == "after"
        other = sm.create_session(user_id="u", title="new").session_id
        assert sm.get_session(session_id=other, user_id="u").title == "new"
    code, out = _cli("keyring", "status", "--file", str(ring))
    assert "data keys\t2" in out


def test_a_missing_keyring_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTSESSION_KEYRING_FILE", raising=False)
    code, out = _cli("keyring", "status")
    assert code == 2 and "AGENTSESSION_KEYRING_FILE" in out
    code, out = _cli("keyring", "status", "--file", str(tmp_path / "absent"))
    assert code == 2 and "no keyring" in out


def test_the_setting_seals_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ring = tmp_path / "store.keyring"
    _cli("keyring", "create", "--file", str(ring))
    db = tmp_path / "s.db"
    monkeypatch.setenv("AGENTSESSION_KEYRING_FILE", str(ring))
    monkeypatch.setenv("AGENTSESSION_URL", f"sqlite:///{db}")
    settings = Settings()
    options = {**settings.manager_options(), "auto_migrate": True}
    with SessionManager.from_url(settings.url, **options) as sm:
        sm.create_session(user_id="u", title="CANARY-setting")
    files = [db, tmp_path / "s.db-wal"]
    assert all(b"CANARY-setting" not in f.read_bytes() for f in files if f.exists())
