"""``agentsession keys`` on keys kept in the session store: create with a scope
and an expiry, list, revoke, import a key file (hashes only, nothing twice), erase."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from agentsession.apikeys import key_table
from agentsession.cli.app import build_app
from agentsession.http.keys import FileKeyStore
from agentsession.service import SessionManager

runner = CliRunner()


def _keys(url: str, *args: str, store: bool = True) -> object:
    env = {"AGENTSESSION_KEYS_FILE": None, "AGENTSESSION_KEYS": "store" if store else None}
    return runner.invoke(build_app(), ["keys", *args, "--url", url], env=env)


def _migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    assert runner.invoke(build_app(), ["db", "upgrade", "--url", url]).exit_code == 0
    return url


def test_keys_in_the_store_create_list_revoke(tmp_path: Path) -> None:
    url = _migrated(tmp_path)
    later = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    made = _keys(
        url,
        "create",
        "--user",
        "dana",
        "--scope",
        "read",
        "--name",
        "dashboard",
        "--expires-at",
        later,
    )
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    key_id = token.split(".", 1)[0]
    assert "(user, read) stored in the store sqlite" in made.stderr
    with SessionManager.from_url(url) as sm:
        stored = key_table(sm.store).get_by_id(key_id)
    assert stored is not None and stored.scope == "read"
    assert stored.name == "dashboard" and stored.expires_at is not None
    assert not list(tmp_path.glob("*.json"))  # no key file
    listed = _keys(url, "list")
    fields = listed.stdout.strip().split("\t")
    assert fields[:3] == [key_id, "dana", "user"]
    assert fields[4:7] == ["active", "read", "dashboard"]
    assert token not in listed.stdout
    assert _keys(url, "revoke", key_id).stdout == f"revoked {key_id}\n"
    again = _keys(url, "revoke", key_id)
    assert again.exit_code == 1 and "no active key" in again.stderr
    assert _keys(url, "list").stdout.split("\t")[4].startswith("revoked ")


def test_c31_a_key_limited_to_agents_keeps_them_in_the_store_and_the_file(tmp_path: Path) -> None:
    url = _migrated(tmp_path)
    made = _keys(url, "create", "--user", "dana", "--agent", "support", "--agent", "billing")
    assert made.exit_code == 0, made.output
    assert "(user, write, agents billing,support)" in made.stderr
    key_id = made.stdout.strip().split(".", 1)[0]
    with SessionManager.from_url(url) as sm:
        stored = key_table(sm.store).get_by_id(key_id)
    assert stored is not None and stored.agents == ("billing", "support")
    assert stored.principal().agents == frozenset({"billing", "support"})
    assert _keys(url, "list").stdout.strip().split("\t")[8] == "billing,support"
    path = tmp_path / "keys.json"
    FileKeyStore(path).create(user_id="erin", agents=["support"])
    FileKeyStore(path).create(user_id="erin")
    assert [k.agents for k in FileKeyStore(path).list()] == [("support",), None]
    assert _keys(url, "import", str(path)).exit_code == 0
    with SessionManager.from_url(url) as sm:
        imported = [k for k in key_table(sm.store).list() if k.user_id == "erin"]
    assert sorted(k.agents or () for k in imported) == [(), ("support",)]


def test_bad_key_options_exit_2_and_store_nothing(tmp_path: Path) -> None:
    url = _migrated(tmp_path)
    for args in (
        ["--agent", "no spaces"],
        ["--scope", "admin"],
        ["--name", "tab\there"],
        ["--expires-at", "2001-01-01T00:00:00+00:00"],
    ):
        refused = _keys(url, "create", "--user", "dana", *args)
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.startswith("error: "), refused.stderr
    assert _keys(url, "list").stderr.startswith("no keys in the store ")


def test_import_moves_a_key_file_in_once(tmp_path: Path) -> None:
    url = _migrated(tmp_path)
    old = FileKeyStore(tmp_path / "old.json")
    kept = old.create(user_id="erin", admin=True, name="laptop")[0]
    gone = old.create(user_id="erin")[0]
    assert old.revoke(gone.key_id)
    imported = _keys(url, "import", str(tmp_path / "old.json"))
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("imported 2 keys into the store ")
    assert _keys(url, "import", str(tmp_path / "old.json")).stdout.startswith("imported 0 keys")
    with SessionManager.from_url(url) as sm:
        table = key_table(sm.store)
        assert {k.key_id: k.revoked_at is not None for k in table.list()} == {
            kept.key_id: False,
            gone.key_id: True,
        }
        found = table.get(kept.token_sha256)
    assert found is not None and found.admin and found.name == "laptop"
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    bad.chmod(0o600)
    refused = _keys(url, "import", str(bad))
    assert refused.exit_code == 2 and "not a valid key file" in refused.stderr


def test_erase_removes_the_users_keys_from_the_store(tmp_path: Path) -> None:
    url = _migrated(tmp_path)
    assert _keys(url, "create", "--user", "fay").exit_code == 0
    assert _keys(url, "create", "--user", "gus").exit_code == 0
    env = {"AGENTSESSION_KEYS_FILE": None, "AGENTSESSION_KEYS": "store"}
    erased = runner.invoke(
        build_app(), ["erase", "--user", "fay", "--yes", "--url", url, "--json"], env=env
    )
    assert erased.exit_code == 0, erased.output
    removed = json.loads(erased.stdout)["api_keys_removed"]
    assert removed["count"] == 1 and removed["keys_file"].startswith("the store sqlite")
    assert [row.split("\t")[1] for row in _keys(url, "list").stdout.splitlines()] == ["gus"]
