"""``AGENTSESSION_SEARCH_WITH_KEYRING``: search on a store with a keyring, turned on
knowingly. The setting reaches ``SessionManager.from_url``; the SQLite files then hold
the plaintext search text of titles, messages and tool calls (what turning it on
exposes), and after erasing the user none of the user's canaries (tests/canaries.py) is
left in the database, -wal or -shm, while another user's terms are still found."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsession import SessionManager
from agentsession.crypto import Keyring
from agentsession.settings import Settings
from agentsession.stores.sealed import SealedStore
from canaries import write_canaries


def _bytes_of(paths: list[Path]) -> bytes:
    return b"".join(p.read_bytes() for p in paths if p.is_file())


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    ring = tmp_path / "store.keyring"
    Keyring.create(ring)
    monkeypatch.setenv("AGENTSESSION_KEYRING_FILE", str(ring))
    monkeypatch.setenv("AGENTSESSION_URL", f"sqlite:///{tmp_path / 'c.db'}")
    monkeypatch.setenv("AGENTSESSION_AUTO_MIGRATE", "1")
    monkeypatch.setenv("AGENTSESSION_SEARCH_WITH_KEYRING", "1")
    return Settings()


def test_the_setting_turns_search_on(settings: Settings) -> None:
    assert settings.manager_options()["search_with_keyring"] is True
    with SessionManager.from_url(settings.url, **settings.manager_options()) as sm:
        assert isinstance(sm.store, SealedStore) and sm.store.search
        sid = sm.create_session(user_id="u", title="quarterly report").session_id
        hits = sm.search(user_id="u", query="QUARTERLY").items
        assert [(h.session_id, h.kind, h.snippet) for h in hits] == [
            (sid, "title", "quarterly report")
        ]
    off = settings.model_copy(update={"search_with_keyring": False})
    assert off.manager_options()["search_with_keyring"] is False
    assert "search_with_keyring" not in Settings(keyring_file=None).manager_options()


def test_erasure_removes_the_users_terms_from_the_files(settings: Settings, tmp_path: Path) -> None:
    files = [tmp_path / "c.db", tmp_path / "c.db-wal", tmp_path / "c.db-shm"]
    with SessionManager.from_url(settings.url, **settings.manager_options()) as sm:
        c = write_canaries(sm)
        other = sm.create_session(user_id="bob", title="bob keeps this title").session_id
        found = c.found_in(_bytes_of(files), c.free_text())
        assert {"title", "message_content", "tool_arguments"} <= set(found)  # in clear
        assert sm.search(
            user_id="u", query=c.values["message_content"], all_users=True, admin=True
        ).items
        erasure = sm.erase_user(user_id=c.user)
        assert erasure.store.pending == ()
        assert c.found_in(_bytes_of(files)) == []
        assert (
            sm.search(user_id="u", query=c.values["title"], all_users=True, admin=True).items == []
        )
        hits = sm.search(user_id="bob", query="keeps this").items
        assert [h.session_id for h in hits] == [other]
    assert c.found_in(_bytes_of(files)) == []
