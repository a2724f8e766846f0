"""A path that names the wrong file: an SQLite URL or a key file pointing at a text
file, an empty file, a damaged key file. Refused with one ``error:`` line (exit 2)
before anything changes it (mode, size, no ``-wal``/``-shm``/``.lock`` left); a key
file damaged while the service runs keeps the last good keys (issue #25)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.errors import StoreError
from agentsession.http.app import create_app
from agentsession.http.keys import FileKeyStore, KeyFileInvalid
from agentsession.settings import Settings
from test_cli import READS_AND_CHANGES

runner = CliRunner()

NOT_KEY_FILES = {
    "text": b"# notes\n",
    "list": b"[1, 2]",
    "truncated": b'{"version": 1, "keys": [{"key_id": "key_a", "user_id"',
    "wrong-type": b'{"version": 1, "keys": [{"key_id": 1}]}',
    "deep": b"[" * 100_000,
}


def _snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mode & 0o777, p.read_bytes()) for p in directory.iterdir()}


def _planted(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    os.chmod(path, 0o644)
    return path


@pytest.mark.parametrize("args", [*READS_AND_CHANGES, ["db", "upgrade"]], ids=" ".join)
def test_a_file_that_is_not_a_database_is_refused_untouched(
    tmp_path: Path, args: list[str]
) -> None:
    """Every command, auto-migrate on or off: exit 2, one line naming the file, and
    the file keeps its mode and bytes; nothing appears beside it."""
    qs = _planted(tmp_path, "qs.py", b"print('quick start')\n")
    url = f"sqlite:///{qs}"
    before = _snapshot(tmp_path)
    for auto in ("0", "1"):
        result = runner.invoke(
            build_app(),
            ["--url", url, "--user", "alice", *args],
            input="",
            env={"AGENTSESSION_URL": None, "AGENTSESSION_AUTO_MIGRATE": auto},
        )
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            f"error: {qs} is not an SQLite database (the store URL {url}); check --url or "
            "AGENTSESSION_URL: nothing was changed\n"
        )
        assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("args", READS_AND_CHANGES, ids=" ".join)
def test_an_empty_file_is_refused_like_a_missing_database(tmp_path: Path, args: list[str]) -> None:
    """A read (or a change to what exists) on an empty file: refused as a missing
    database is, and the file stays empty, its mode unchanged."""
    db = _planted(tmp_path, "empty.db", b"")
    url = f"sqlite:///{db}"
    result = runner.invoke(
        build_app(),
        ["--url", url, "--user", "alice", *args],
        input="",
        env={"AGENTSESSION_URL": None, "AGENTSESSION_AUTO_MIGRATE": "0"},
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: an empty file, no database, at {db} ")
    assert result.stderr.endswith("db upgrade\n")
    assert _snapshot(tmp_path) == {"empty.db": (0o644, b"")}


def test_the_library_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    """``SessionManager.from_url`` checks the header before it makes the file private."""
    qs = _planted(tmp_path, "qs.py", b"x = 1\n")
    with pytest.raises(StoreError, match="is not an SQLite database"):
        SessionManager.from_url(f"sqlite:///{qs}", auto_migrate=True)
    assert _snapshot(tmp_path) == {"qs.py": (0o644, b"x = 1\n")}


@pytest.mark.parametrize("content", NOT_KEY_FILES.values(), ids=NOT_KEY_FILES.keys())
@pytest.mark.parametrize(
    "args", [["create", "--user", "alice"], ["list"], ["revoke", "key_x"]], ids=" ".join
)
def test_a_file_that_is_not_a_key_file_is_refused_untouched(
    tmp_path: Path, args: list[str], content: bytes
) -> None:
    """One line naming the file, exit 2; no traceback, no mode change, no lock."""
    notes = _planted(tmp_path, "notes.md", content)
    result = runner.invoke(build_app(), ["keys", *args, "--keys-file", str(notes)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {notes} is not a valid key file (")
    assert len(result.stderr.splitlines()) == 1
    assert _snapshot(tmp_path) == {"notes.md": (0o644, content)}


def test_serve_refuses_to_start_on_a_damaged_key_file(tmp_path: Path, monkeypatch) -> None:
    import uvicorn

    started: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(app))
    url = f"sqlite:///{tmp_path / 'served.db'}"
    assert runner.invoke(build_app(), ["db", "upgrade", "--url", url]).exit_code == 0
    keys = tmp_path / "served.db.keys.json"
    keys.write_bytes(NOT_KEY_FILES["truncated"])
    keys.chmod(0o600)
    result = runner.invoke(
        build_app(), ["serve"], env={"AGENTSESSION_URL": url, "AGENTSESSION_KEYS_FILE": None}
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {keys} is not a valid key file (Invalid JSON")
    assert started == []


def test_an_empty_key_file_holds_no_keys(tmp_path: Path) -> None:
    """Our writes are atomic, so an empty file was emptied on purpose: no keys."""
    path = tmp_path / "keys.json"
    path.touch(mode=0o600)
    store = FileKeyStore(path)
    assert store.list() == []
    store.create(user_id="alice")
    assert [k.user_id for k in store.list()] == ["alice"]


def test_a_key_file_damaged_while_serving_keeps_the_last_good_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Truncated under a running service: requests keep their answers (never a 500),
    a warning names the file once; a repaired file is read again."""
    path = tmp_path / "keys.json"
    store = FileKeyStore(path, reload_interval=0)
    _key, token = store.create(user_id="alice")
    good = path.read_bytes()
    with SessionManager.from_url("memory://") as sm:
        app = create_app(sm, Settings(url="memory://"), keys=store)
        http = TestClient(app, raise_server_exceptions=False)
        auth = {"Authorization": f"Bearer {token}"}
        assert http.get("/v1/sessions", headers=auth).status_code == 200
        path.write_bytes(good[: len(good) // 2])
        with caplog.at_level(logging.WARNING, logger="agentsession.http.keys"):
            answers = [http.get("/v1/sessions", headers=auth).status_code for _ in range(3)]
        assert answers == [200, 200, 200]
        assert http.get("/v1/sessions", headers={"Authorization": "Bearer x"}).status_code == 401
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and f"{path} is not a valid key file" in warnings[0]
        path.write_bytes(b'{"version": 1, "keys": []}')
        assert http.get("/v1/sessions", headers=auth).status_code == 401
    with pytest.raises(KeyFileInvalid):
        path.write_bytes(b"{")
        FileKeyStore(path)
