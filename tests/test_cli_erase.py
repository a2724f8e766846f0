"""``agentsession erase --user USER``: erases, asks first, prints what the store did and
what the operator must still do; the settings of erasure (tombstone key, Redis AOF)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.service.erasure import OPERATOR_STEPS, tombstone_id
from agentsession.settings import Settings

runner = CliRunner()


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A SQLite store with two sessions of alice (one with an idempotency key) and one of bob."""
    url = f"sqlite:///{tmp_path / 'erase.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        s = sm.create_session(user_id="alice", idempotency_key="k1")
        sm.append_message(
            session_id=s.session_id, user_id="alice", message={"role": "user", "content": "hi"}
        )
        sm.create_session(user_id="alice")
        sm.create_session(user_id="bob")
    return url


def _count(url: str, user: str) -> int:
    with SessionManager.from_url(url) as sm:
        return len(sm.list_sessions(user_id=user).items)


def test_erase_prints_what_was_done_and_what_is_left(url: str) -> None:
    result = runner.invoke(build_app(), ["--url", url, "erase", "--user", "alice", "--yes"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # rich wraps long lines
    assert "erased alice: 2 sessions deleted, 0 idempotency keys purged" in out
    assert "WAL checkpoint (TRUNCATE)" in out and "secure_delete" in out
    assert "still to do by the operator:" in out and "backups" in out and "replicas" in out
    assert "after an HTTP erasure, and in other key files, revoke them" in out
    assert (_count(url, "alice"), _count(url, "bob")) == (0, 1)


def test_erase_json_lists_the_store_report_and_the_operator_steps(url: str) -> None:
    result = runner.invoke(
        build_app(), ["erase", "--url", url, "--user", "alice", "--yes", "--json", "--compact"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["user_id"] == "alice" and data["sessions_deleted"] == 2
    assert data["store"]["url"].endswith("erase.db") and data["store"]["pending"] == []
    assert any(step.startswith("VACUUM") for step in data["store"]["done"])
    assert data["operator_steps"] == list(OPERATOR_STEPS)


def test_erase_asks_first_and_a_no_erases_nothing(url: str) -> None:
    """A no exits 1 (no answer at all: test_cli's confirmation test)."""
    result = runner.invoke(build_app(), ["erase", "--url", url, "--user", "alice"], input="n\n")
    assert result.exit_code == 1
    assert "erase every session of alice, for good?" in result.output
    assert "not confirmed (pass --yes)" in result.output
    assert _count(url, "alice") == 2
    result = runner.invoke(build_app(), ["erase", "--url", url, "--user", "alice"], input="y\n")
    assert result.exit_code == 0 and _count(url, "alice") == 0


def test_erase_has_no_admin_option(url: str) -> None:
    result = runner.invoke(build_app(), ["erase", "--help"])
    assert result.exit_code == 0 and "--admin" not in result.output


def test_erase_removes_the_users_api_keys_from_the_serve_key_file(url: str) -> None:
    """The key file next to the --url database (where `serve --url` reads it)."""
    for user in ("alice", "alice", "bob"):
        assert (
            runner.invoke(build_app(), ["--url", url, "keys", "create", "--user", user]).exit_code
            == 0
        )
    keys_file = Path(url.removeprefix("sqlite:///") + ".keys.json")
    result = runner.invoke(build_app(), ["--url", url, "erase", "--user", "alice", "--yes"])
    assert result.exit_code == 0, result.output
    assert "2 API keys of alice removed from" in " ".join(result.output.split())
    text = keys_file.read_text()
    assert "alice" not in text and "bob" in text


def test_erase_json_counts_keys_in_the_given_key_file(url: str, tmp_path: Path) -> None:
    keys_file = tmp_path / "elsewhere.json"
    runner.invoke(build_app(), ["keys", "create", "--user", "alice", "--keys-file", str(keys_file)])
    result = runner.invoke(
        build_app(),
        [
            "erase",
            "--url",
            url,
            "--user",
            "alice",
            "--yes",
            "--json",
            "--keys-file",
            str(keys_file),
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["api_keys_removed"] == {
        "count": 1,
        "keys_file": str(keys_file),
    }
    assert "alice" not in keys_file.read_text()


def test_erase_needs_a_user(url: str) -> None:
    result = runner.invoke(build_app(), ["erase", "--url", url, "--yes"])
    assert result.exit_code == 2 and "--user is required" in result.output
    assert _count(url, "alice") == 2


def test_tombstone_key_setting_reaches_the_manager(url: str) -> None:
    key = "a-tombstone-key-of-32-characters"
    with SessionManager.from_url(url) as sm:
        sid = sm.list_sessions(user_id="bob").items[0].session_id
    opts = Settings(url=url, tombstone_key=key).manager_options()
    assert key not in repr(opts)
    with SessionManager.from_url(url, **opts) as sm:
        sm.delete_session(session_id=sid, user_id="bob")
        [tomb] = sm.get_audit_log(session_id=sid, user_id="root", admin=True).items
    assert tomb.user_id == tombstone_id(key.encode(), "bob")


def test_redis_rewrite_setting_is_a_redis_store_option() -> None:
    on = Settings(url="redis://h/0", redis_rewrite_aof=True).manager_options()
    assert on["rewrite_aof_after_erasure"] is True
    assert "rewrite_aof_after_erasure" not in Settings(url="sqlite:///x.db").manager_options()


def test_erase_removes_an_admins_keyed_write_for_the_user_from_the_files(
    url: str, tmp_path: Path
) -> None:
    """An admin's keyed write to alice's shared memory is in the admin's idempotency
    record: ``erase --user alice`` purges it, and the SQLite files no longer hold it."""
    secret = f"CANARY-cli-{secrets.token_hex(6)}".encode()
    with SessionManager.from_url(url) as sm:
        admin = {"user_id": "root", "admin": True, "idempotency_key": "admin-k"}
        note = {"note": secret.decode()}
        sm.update_shared_memory(scope="user", agent="a", target_user_id="alice", data=note, **admin)
    files = [tmp_path / f"erase.db{suffix}" for suffix in ("", "-wal", "-shm")]
    assert any(secret in p.read_bytes() for p in files if p.exists())
    result = runner.invoke(build_app(), ["erase", "--url", url, "--user", "alice", "--yes"])
    assert result.exit_code == 0, result.output
    assert "1 idempotency key purged" in " ".join(result.output.split())
    assert not any(secret in p.read_bytes() for p in files if p.exists())
