"""Search with a keyring, turned on knowingly (``SealedStore(search=True)``,
``AGENTSESSION_SEARCH_WITH_KEYRING``), on every store: titles, messages and tool calls
are found by their plaintext; a fork finds what it copied; a removed message, a deleted
session and an erased user's terms are found no more, and no row of the store's index
holds the erased user's canaries. A store with a keyring and search off indexes no
ciphertext. Redis keeps no index: SearchNotSupported."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from contract_support import ADMIN, OTHER, USER, raw_store, user_msg

from agentsession import SearchNotSupported, SessionManager
from agentsession.crypto import ContentCipher, Keyring, MemoryKeyStore
from agentsession.stores.base import SessionStore
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sql.schema import search_texts
from agentsession.stores.sql.store import SQLStore


def _sealed(store: SessionStore, tmp_path: Path, *, search: bool) -> SessionManager:
    ring = Keyring.create(tmp_path / f"search-{search}.keyring", key_store=MemoryKeyStore())
    return SessionManager(SealedStore(raw_store(store), ContentCipher(ring), search=search))


def _indexed(store: SessionStore) -> list[str]:
    """Every text the store's own search index holds (SQL: ``search_texts``; memory:
    the plaintext texts kept beside the rows)."""
    raw = raw_store(store)
    if isinstance(raw, SQLStore):
        with raw.engine.connect() as conn:
            return list(conn.scalars(sa.select(search_texts.c.text)))
    assert isinstance(raw, MemoryStore)
    return [text for d in raw._sessions.values() for _, text in d.search_texts.values()]


def _found(m: SessionManager, query: str) -> list[tuple[str, str]]:
    page = m.search(user_id=ADMIN, query=query, all_users=True, admin=True)
    return [(h.session_id, h.kind) for h in page.items]


def _write(m: SessionManager, user: str, canary: str) -> str:
    sid = m.create_session(user_id=user, title=f"{canary}-title").session_id
    msgs = [user_msg(f"{canary}-first"), user_msg(f"{canary}-second")]
    m.append_messages(session_id=sid, user_id=user, messages=msgs)
    m.record_tool_call(session_id=sid, user_id=user, tool="grep", arguments={"q": f"{canary}-args"})
    return sid


def test_search_with_keyring_finds_plaintext_and_erasure_removes_the_terms(
    store: SessionStore, tmp_path: Path
) -> None:
    m = _sealed(store, tmp_path, search=True)
    if isinstance(raw_store(store), SQLStore | MemoryStore) is False:
        with pytest.raises(SearchNotSupported, match="redis"):
            m.search(user_id=USER, query="anything")
        pytest.skip("Redis keeps no search index: SearchNotSupported checked")
    sid = _write(m, USER, "CANARYALICE")
    kept = _write(m, OTHER, "CANARYBOB")
    assert sorted(_found(m, "canaryalice")) == sorted(
        [(sid, "title"), (sid, "message"), (sid, "message"), (sid, "tool_call")]
    )
    fork = m.fork_session(session_id=sid, user_id=USER, at_seq=1).session_id
    assert (fork, "message") in _found(m, "CANARYALICE-first")
    m.truncate_messages(session_id=sid, user_id=USER, after_seq=1)
    assert _found(m, "CANARYALICE-second") == []
    m.update_session(session_id=sid, user_id=USER, title="renamed")
    assert (sid, "title") not in _found(m, "CANARYALICE")
    assert any("CANARYALICE" in text for text in _indexed(store))  # in clear: knowingly
    m.erase_user(user_id=ADMIN, target_user_id=USER, admin=True)
    assert _found(m, "CANARYALICE") == []
    assert not any("CANARYALICE" in text for text in _indexed(store))
    assert (kept, "message") in _found(m, "CANARYBOB")  # another user's terms stay


def test_search_off_indexes_no_ciphertext(store: SessionStore, tmp_path: Path) -> None:
    m = _sealed(store, tmp_path, search=False)
    _write(m, USER, "CANARYOFF")
    with pytest.raises(SearchNotSupported):
        m.search(user_id=USER, query="CANARYOFF")
    if isinstance(raw_store(store), SQLStore | MemoryStore):
        assert _indexed(store) == []
