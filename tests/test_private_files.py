"""Files only their owner can read: the SQLite database, its -wal and -shm, the API keys
file and its lock are 0600 under a permissive umask; wider files are tightened; an
unsafe directory is refused (agentsession.privatefiles)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsession import SessionManager
from agentsession.errors import StoreError
from agentsession.http.keys import FileKeyStore
from agentsession.stores.sql.store import SQLStore


@pytest.fixture
def wide_umask() -> Iterator[None]:
    """Run the test under umask 022 (the usual one: new files 0644 unless made private)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.usefixtures("wide_umask")
def test_sqlite_db_wal_and_shm_are_created_0600(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager(SQLStore(f"sqlite:///{db}", auto_migrate=True)) as sm:
        sm.create_session(user_id="u")
        wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
        assert wal.exists() and shm.exists()
        assert {p.name: _mode(p) for p in (db, wal, shm)} == {
            "s.db": 0o600,
            "s.db-wal": 0o600,
            "s.db-shm": 0o600,
        }
        sm.store.close()


@pytest.mark.usefixtures("wide_umask")
def test_sqlite_files_wider_than_0600_are_tightened_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    SQLStore(f"sqlite:///{db}", auto_migrate=True).close()
    wal = Path(f"{db}-wal")
    wal.touch()
    os.chmod(db, 0o644)
    os.chmod(wal, 0o666)
    with caplog.at_level(logging.WARNING, logger="agentsession.privatefiles"):
        SQLStore(f"sqlite:///{db}").close()
    assert _mode(db) == 0o600
    assert not wal.exists() or _mode(wal) == 0o600
    assert "changed to 0600" in caplog.text


def test_sqlite_in_a_directory_every_user_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(StoreError, match="writable by every user"):
        SQLStore(f"sqlite:///{shared / 's.db'}", auto_migrate=True)
    assert not (shared / "s.db").exists()


def test_sqlite_in_a_sticky_shared_directory_is_accepted(tmp_path: Path) -> None:
    shared = tmp_path / "sticky"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    SQLStore(f"sqlite:///{shared / 's.db'}", auto_migrate=True).close()
    assert _mode(shared / "s.db") == 0o600


def test_sqlite_in_a_group_writable_directory_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    group = tmp_path / "group"
    group.mkdir()
    os.chmod(group, 0o770)
    with caplog.at_level(logging.WARNING, logger="agentsession.privatefiles"):
        SQLStore(f"sqlite:///{group / 's.db'}", auto_migrate=True).close()
    assert "writable by its group" in caplog.text


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file needs root")
def test_sqlite_wal_planted_by_another_user_is_refused(tmp_path: Path) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    planted = sticky / "s.db-wal"
    planted.touch()
    os.chown(planted, 65534, 65534)
    with pytest.raises(StoreError, match="belongs to another user"):
        SQLStore(f"sqlite:///{sticky / 's.db'}", auto_migrate=True)


@pytest.mark.usefixtures("wide_umask")
def test_keys_file_and_its_lock_are_0600(tmp_path: Path) -> None:
    keys = FileKeyStore(tmp_path / "keys.json")
    keys.create(user_id="u")
    assert _mode(tmp_path / "keys.json") == 0o600
    assert _mode(tmp_path / "keys.json.lock") == 0o600


@pytest.mark.usefixtures("wide_umask")
def test_a_wide_keys_lock_is_tightened(tmp_path: Path) -> None:
    lock = tmp_path / "keys.json.lock"
    lock.touch()
    os.chmod(lock, 0o644)
    FileKeyStore(tmp_path / "keys.json").create(user_id="u")
    assert _mode(lock) == 0o600


# -- the API key file: trusted only if nobody else could have written it ----------------


def _planted_admin_key(path: Path, mode: int) -> str:
    """A key file with an admin key whose token the planter knows; return the token."""
    store = FileKeyStore(path)
    _key, token = store.create(user_id="mallory", admin=True)
    os.chmod(path, mode)
    return token


def test_a_keys_file_others_may_write_is_refused_not_tightened(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    _planted_admin_key(path, 0o666)
    with pytest.raises(StoreError, match=r"writable by other users.*chmod 600"):
        FileKeyStore(path)
    assert _mode(path) == 0o666  # not silently tightened and trusted


def test_keys_create_does_not_copy_keys_from_a_planted_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentsession.cli.app import build_app

    path = tmp_path / "keys.json"
    _planted_admin_key(path, 0o666)
    before = path.read_text()
    for args in (["create", "--user", "alice"], ["list"], ["revoke", "key_x"]):
        result = CliRunner().invoke(build_app(), ["keys", *args, "--keys-file", str(path)])
        assert result.exit_code == 2 and "writable by other users" in result.output
    assert path.read_text() == before


def test_a_keys_file_made_writable_later_accepts_no_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Checked at every reload: the running service fails closed and logs why."""
    path = tmp_path / "keys.json"
    store = FileKeyStore(path, reload_interval=0)
    _key, token = store.create(user_id="alice")
    assert store.authenticate(token) is not None
    os.chmod(path, 0o646)
    with caplog.at_level(logging.ERROR):
        assert store.authenticate(token) is None
    assert "writable by other users" in caplog.text


@pytest.mark.usefixtures("wide_umask")
def test_a_keys_file_only_readable_by_others_is_tightened_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.json"
    token = _planted_admin_key(path, 0o644)
    with caplog.at_level(logging.WARNING):
        assert FileKeyStore(path).authenticate(token) is not None
    assert _mode(path) == 0o600 and "changed to 0600" in caplog.text


def test_keys_in_a_directory_every_user_may_write_are_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(StoreError, match="writable by every user"):
        FileKeyStore(shared / "keys.json")


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file needs root")
@pytest.mark.parametrize("planted", ["keys.json", "keys.json.lock"])
def test_a_keys_file_or_lock_of_another_user_is_refused(tmp_path: Path, planted: str) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    _planted_admin_key(sticky / "keys.json", 0o600)
    os.chown(sticky / planted, 65534, 65534)
    with pytest.raises(StoreError, match="belongs to another user"):
        FileKeyStore(sticky / "keys.json")


@pytest.mark.parametrize("target", ["real.json", "missing.json"])
def test_a_symlink_in_place_of_the_keys_file_is_refused(tmp_path: Path, target: str) -> None:
    """A link (dangling too) could point at another user's file; never followed."""
    if target == "real.json":
        _planted_admin_key(tmp_path / target, 0o600)
    (tmp_path / "keys.json").symlink_to(tmp_path / target)
    with pytest.raises(StoreError, match="symbolic link"):
        FileKeyStore(tmp_path / "keys.json")


@pytest.mark.parametrize("name", ["s.db", "s.db-wal", "s.db-shm"])
def test_a_symlink_in_place_of_a_database_file_is_refused(tmp_path: Path, name: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / name).symlink_to(elsewhere)  # dangling: not created through it either
    with pytest.raises(StoreError, match="symbolic link"):
        SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    assert not elsewhere.exists()
