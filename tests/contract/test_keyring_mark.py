"""The keyring mark (``agentsession.stores.keyringmark``) on every store: an unmarked
store opens without a keyring; the first keyring marks it with its store id (never key
material); from then on opening it without a keyring, or with another keyring, is a
KeyringMismatch, and with its own keyring it opens; a process opened without a keyring
refuses its calls once the store is marked later (MarkWatch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from contract_support import raw_store

from agentsession import KeyringError, KeyringMismatch
from agentsession.crypto import Keyring, MemoryKeyStore
from agentsession.stores import keyringmark
from agentsession.stores.base import SessionStore
from agentsession.stores.keyringmark import MARK, MarkWatch, check_keyring_mark


def _ring(path: Path) -> Keyring:
    return Keyring.create(path, key_store=MemoryKeyStore())


def test_a_marked_store_refuses_no_keyring_and_another_keyring(
    store: SessionStore, tmp_path: Path
) -> None:
    raw = raw_store(store)
    check_keyring_mark(raw, None)  # unmarked: opens as it is
    ring = _ring(tmp_path / "a.keyring")
    check_keyring_mark(raw, ring)
    with raw.transaction(write=False) as tx:
        assert tx.get_store_meta(MARK) == ring.store_id
    check_keyring_mark(raw, ring)  # its own keyring, again
    with pytest.raises(KeyringMismatch, match=ring.store_id) as refused:
        check_keyring_mark(raw, None)
    assert isinstance(refused.value, KeyringError)
    other = _ring(tmp_path / "b.keyring")
    with pytest.raises(KeyringMismatch, match=other.store_id):
        check_keyring_mark(raw, other)
    with raw.transaction(write=False) as tx:
        assert tx.get_store_meta(MARK) == ring.store_id  # a refusal changes nothing


def test_a_watch_refuses_within_the_interval_once_the_store_is_marked(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [50.0]
    monkeypatch.setattr(keyringmark, "monotonic", lambda: now[0])
    raw = raw_store(store)
    check_keyring_mark(raw, None)
    watch = MarkWatch(raw)
    watch()
    ring = _ring(tmp_path / "a.keyring")
    check_keyring_mark(raw, ring)  # another process marks it
    now[0] += keyringmark.RECHECK_SECONDS / 2
    watch()  # the mark is read at most once per interval
    now[0] += keyringmark.RECHECK_SECONDS / 2
    with pytest.raises(KeyringMismatch, match=ring.store_id):
        watch()
    with pytest.raises(KeyringMismatch):
        watch()  # from then on, without reading it again
