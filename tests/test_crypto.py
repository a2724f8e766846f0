"""The keyring (agentsession.crypto): private files, per-user data keys in the key
store, AES-256-GCM bound to each value's place, fail-closed reads, crypto-shredding,
KEK and data-key rotation, and one typed error for every failure."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsession import SessionManager
from agentsession.crypto import ContentCipher, Keyring, MemoryKeyStore, Place, WrappedKey
from agentsession.crypto.envelope import to_text
from agentsession.errors import KeyringError, StoreError, StoreUnavailable
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sql.store import SQLStore

HERE = Place("u1", "ses_1", "message", 3)


@pytest.fixture
def wide_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def ring(tmp_path: Path) -> Keyring:
    return Keyring.create(tmp_path / "store.keyring")


@pytest.mark.usefixtures("wide_umask")
def test_keyring_and_data_key_files_are_0600(tmp_path: Path) -> None:
    ring = Keyring.create(tmp_path / "k")
    ring.encrypt(b"x", HERE)
    for name in ("k", "k.datakeys", "k.datakeys.lock"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name


def test_data_keys_are_per_user_wrapped_and_not_in_the_keyring_file(ring: Keyring) -> None:
    ring.encrypt(b"a", Place("u1", "s", "k"))
    ring.encrypt(b"b", Place("u2", "s", "k"))
    datakeys = json.loads(ring.path.with_name(ring.path.name + ".datakeys").read_text())
    assert sorted(datakeys["users"]) == ["u1", "u2"]
    keyring_file = json.loads(ring.path.read_text())
    assert "users" not in keyring_file and len(keyring_file["keks"]) == 1
    kek = next(iter(keyring_file["keks"].values()))
    # Wrapped: the stored form is an envelope of 1 + 16 + 12 + 32 + 16 bytes, no raw key.
    for (wrapped,) in [[k["wrapped"] for k in keys] for keys in datakeys["users"].values()]:
        assert len(bytes.fromhex(wrapped)) == 77 and kek not in wrapped


def test_a_value_round_trips_and_reopens_with_a_fresh_keyring(ring: Keyring) -> None:
    sealed = ring.encrypt(b"canary-1", HERE)
    assert b"canary-1" not in sealed
    assert Keyring.open(ring.path).decrypt(sealed, HERE) == b"canary-1"


@pytest.mark.parametrize(
    "moved",
    [
        Place("u1", "ses_1", "message", 4),  # another row
        Place("u1", "ses_2", "message", 3),  # another session
        Place("u1", "ses_1", "memory", 3),  # another kind
        Place("u2", "ses_1", "message", 3),  # another user
    ],
    ids=["row", "session", "kind", "user"],
)
def test_a_ciphertext_moved_to_another_place_does_not_open(ring: Keyring, moved: Place) -> None:
    ring.encrypt(b"other", moved)  # the other user has a key of their own
    sealed = ring.encrypt(b"secret", HERE)
    with pytest.raises(KeyringError):
        ring.decrypt(sealed, moved)


def test_a_changed_byte_does_not_open(ring: Keyring) -> None:
    sealed = bytearray(ring.encrypt(b"secret", HERE))
    for index in (0, 5, 20, len(sealed) - 1):
        broken = bytearray(sealed)
        broken[index] ^= 1
        with pytest.raises(KeyringError):
            ring.decrypt(bytes(broken), HERE)
    with pytest.raises(KeyringError):
        ring.decrypt(b"short", HERE)


def test_a_value_of_another_store_does_not_open(tmp_path: Path, ring: Keyring) -> None:
    other = Keyring.create(tmp_path / "other.keyring")
    with pytest.raises(KeyringError, match="another user or store"):
        ring.decrypt(other.encrypt(b"x", HERE), HERE)


def test_the_key_store_of_another_store_is_refused(tmp_path: Path, ring: Keyring) -> None:
    keys = MemoryKeyStore()
    Keyring.create(tmp_path / "a", key_store=keys)
    with pytest.raises(KeyringError, match="another store"):
        Keyring.create(tmp_path / "b", key_store=keys)


def test_a_missing_or_invalid_keyring_is_a_keyring_error(tmp_path: Path) -> None:
    with pytest.raises(KeyringError, match="no keyring"):
        Keyring.open(tmp_path / "absent")
    bad = tmp_path / "bad"
    bad.write_text('{"format": "something else"}')
    bad.chmod(0o600)
    with pytest.raises(KeyringError, match="not a keyring file"):
        Keyring.open(bad)
    # One typed error, and a StoreUnavailable (HTTP 503) for callers catching that.
    assert issubclass(KeyringError, StoreUnavailable)


def test_create_never_overwrites_a_keyring(ring: Keyring) -> None:
    before = ring.path.read_bytes()
    with pytest.raises(KeyringError, match="never overwritten"):
        Keyring.create(ring.path)
    assert ring.path.read_bytes() == before


def test_a_keyring_others_may_write_is_refused(ring: Keyring) -> None:
    ring.path.chmod(0o622)
    with pytest.raises(StoreError, match="writable by other users"):
        Keyring.open(ring.path)


def test_a_symlinked_keyring_is_refused(tmp_path: Path, ring: Keyring) -> None:
    link = tmp_path / "link"
    link.symlink_to(ring.path)
    with pytest.raises(StoreError, match="symbolic link"):
        Keyring.open(link)


def test_destroying_a_user_key_makes_every_copy_unreadable(ring: Keyring) -> None:
    mine = ring.encrypt(b"mine", HERE)
    theirs_at = Place("u2", "ses_9", "message", 1)
    theirs = ring.encrypt(b"theirs", theirs_at)
    assert ring.destroy_user("u1")
    for reader in (ring, Keyring.open(ring.path)):
        with pytest.raises(KeyringError, match="destroyed"):
            reader.decrypt(mine, HERE)
        assert reader.decrypt(theirs, theirs_at) == b"theirs"
    # A later write of the same user id gets a new key; the old copy stays unreadable.
    assert ring.decrypt(ring.encrypt(b"new", HERE), HERE) == b"new"
    with pytest.raises(KeyringError):
        ring.decrypt(mine, HERE)


def test_an_erasure_in_another_process_reaches_this_one(ring: Keyring) -> None:
    sealed = ring.encrypt(b"x", HERE)
    other = Keyring.open(ring.path)
    assert other.decrypt(sealed, HERE) == b"x"
    ring.destroy_user("u1")
    other._store._checked = float("-inf")  # type: ignore[attr-defined]  # past the interval
    with pytest.raises(KeyringError, match="destroyed"):
        other.decrypt(sealed, HERE)


def test_a_key_another_process_just_made_opens_at_once(ring: Keyring) -> None:
    """A worker whose data key file was read less than its reload interval ago opens a
    value sealed with a user key another worker made meanwhile (before: 'no data key'
    for up to a second)."""
    other = Keyring.open(ring.path)
    other._store._interval = 3600  # type: ignore[attr-defined]  # no timed reload
    other._store.get("u1")  # type: ignore[attr-defined]
    sealed = ring.encrypt(b"new user", HERE)
    assert other.decrypt(sealed, HERE) == b"new user"


def test_kek_rotation_rewraps_every_data_key_and_keeps_values_readable(ring: Keyring) -> None:
    sealed = {u: ring.encrypt(u.encode(), Place(u, "s", "k")) for u in ("u1", "u2", "u3")}
    old = json.loads(ring.path.read_text())["active"]
    other = Keyring.open(ring.path)  # another worker, holding the old KEK
    new = ring.rotate()
    assert new != old
    status = ring.status()
    assert (status.keks, status.users, status.wrapped_by_old_kek) == (1, 3, 0)
    assert old not in ring.path.read_text()
    other._store._checked = float("-inf")  # type: ignore[attr-defined]
    for reader in (ring, Keyring.open(ring.path), other):
        for user, value in sealed.items():
            assert reader.decrypt(value, Place(user, "s", "k")) == user.encode()


def test_lazy_data_key_rotation_seals_new_values_with_the_new_key(ring: Keyring) -> None:
    before = ring.encrypt(b"old", HERE)
    new_id = ring.rotate_data_key("u1")
    after = ring.encrypt(b"new", HERE)
    assert after[1:17].hex() == new_id != before[1:17].hex()
    assert ring.decrypt(before, HERE) == b"old" and ring.decrypt(after, HERE) == b"new"
    assert ring.status().data_keys == 2


def test_the_content_cipher_fails_closed_on_plaintext(ring: Keyring) -> None:
    cipher = ContentCipher(ring)
    value = {"content": "canary-json", "n": [1, 2]}
    stored = cipher.seal_json(value, HERE)
    assert "canary-json" not in str(stored) and cipher.open_json(stored, HERE) == value
    text = cipher.seal_text("canary-text", HERE)
    assert text is not None and cipher.open_text(text, HERE) == "canary-text"
    assert cipher.seal_text(None, HERE) is None
    data = cipher.seal_bytes(b"canary-bytes", HERE)
    assert b"canary" not in data and cipher.open_bytes(data, HERE) == b"canary-bytes"
    for read, plain in (
        (cipher.open_json, value),
        (cipher.open_text, "plain"),
        (cipher.open_bytes, b"plain"),
    ):
        with pytest.raises(KeyringError, match="plaintext"):
            read(plain, HERE)  # type: ignore[operator]
    migrating = ContentCipher(ring, accept_plaintext=True)
    assert migrating.open_json(value, HERE) == value
    assert migrating.open_json(stored, HERE) == value


def test_a_corrupted_text_form_is_a_keyring_error(ring: Keyring) -> None:
    cipher = ContentCipher(ring)
    with pytest.raises(KeyringError, match="corrupted"):
        cipher.open_json({"$as1": "$as1$not base64!"}, HERE)


def test_every_store_port_method_is_sealed_or_declared_content_free() -> None:
    """A store-port method the sealed store does not define would reach the store with
    its content in clear; each must be sealed or named content-free."""
    from agentsession.stores import base, sealed

    port = {n for n, v in vars(base.StoreTransaction).items() if callable(v) and n[0] != "_"}
    defined = {n for n in vars(sealed._SealedTransaction) if n[0] != "_"}
    assert port - defined == set(sealed._CONTENT_FREE)


class _CountingKeyStore(MemoryKeyStore):
    """A memory key store counting the lookups of users' keys."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    def get(self, user_id: str, *, fresh: bool = False) -> tuple[WrappedKey, ...]:
        self.gets += 1
        return super().get(user_id, fresh=fresh)


def _sealed_session(
    tmp_path: Path, keys: MemoryKeyStore, count: int
) -> tuple[SessionManager, str, Keyring]:
    """A manager over a sealed SQLite store, and a session of ``count`` messages."""
    ring = Keyring.create(tmp_path / "k", key_store=keys)
    inner = SQLStore(f"sqlite:///{tmp_path / 'm.db'}", auto_migrate=True)
    sm = SessionManager(SealedStore(inner, ContentCipher(ring)))
    sid = sm.create_session(user_id="u1").session_id
    batch = [{"role": "user", "content": f"canary {i}"} for i in range(count)]
    sm.append_messages(session_id=sid, user_id="u1", messages=batch)
    return sm, sid, ring


def test_a_read_of_many_messages_looks_the_user_keys_up_once(tmp_path: Path) -> None:
    """The keys are found once per read, not once per message (the read path's cost,
    docs/performance.md): reading 40 messages asks the key store as often as 2."""
    keys = _CountingKeyStore()
    sm, sid, _ = _sealed_session(tmp_path, keys, 40)
    asked = []
    for limit in (2, 40):
        sm.get_messages(session_id=sid, user_id="u1", limit=limit)  # keys unwrapped
        keys.gets = 0
        page = sm.get_messages(session_id=sid, user_id="u1", limit=limit)
        assert [m.content for m in page.items][-1] == "canary 39"
        asked.append(keys.gets)
    assert asked[0] == asked[1] <= 2
    sm.close()


def test_a_read_after_an_erasure_opens_nothing(tmp_path: Path) -> None:
    """Keys a read used are not used by the next read once destroyed, in this process
    or (after the key store's reload interval) in another one."""
    sm, sid, store_ring = _sealed_session(tmp_path, MemoryKeyStore(), 3)
    assert len(sm.get_messages(session_id=sid, user_id="u1").items) == 3
    store_ring.destroy_user("u1")
    with pytest.raises(KeyringError, match="destroyed"):
        sm.get_messages(session_id=sid, user_id="u1")
    sm.close()
    ring = Keyring.create(tmp_path / "file.keyring")
    other = Keyring.open(ring.path)
    sealed = ContentCipher(ring).seal_text("canary", HERE)
    assert sealed is not None
    open_ = ContentCipher(other).text_opener(HERE.user_id, HERE.session_id, HERE.kind)
    assert open_(sealed, HERE.position) == "canary"
    ring.destroy_user(HERE.user_id)
    other._store._checked = float("-inf")  # type: ignore[attr-defined]  # past the interval
    next_read = ContentCipher(other).text_opener(HERE.user_id, HERE.session_id, HERE.kind)
    with pytest.raises(KeyringError, match="destroyed"):
        next_read(sealed, HERE.position)


def test_a_reader_follows_data_key_and_kek_rotation(ring: Keyring) -> None:
    cipher = ContentCipher(ring)
    old = cipher.seal_text("old", HERE)
    assert old is not None and cipher.open_text(old, HERE) == "old"  # its key now known
    ring.rotate_data_key(HERE.user_id)
    new = cipher.seal_text("new", HERE)
    assert new is not None and new[:30] != old[:30]  # another key id
    ring.rotate()
    open_ = cipher.text_opener(HERE.user_id, HERE.session_id, HERE.kind)
    assert [open_(v, HERE.position) for v in (old, new, old)] == ["old", "new", "old"]


def test_a_broken_value_read_in_a_batch_is_one_keyring_error(ring: Keyring) -> None:
    """A value the batch reader cannot open takes the general path, which names what
    is wrong: never a ValueError of the cipher, never a value opened elsewhere."""
    cipher = ContentCipher(ring)
    good = ring.encrypt(b"canary", HERE)
    open_ = cipher.text_opener(HERE.user_id, HERE.session_id, HERE.kind)
    assert open_(to_text(good), HERE.position) == "canary"
    changed = good[:-1] + bytes([good[-1] ^ 1])
    broken = {
        "not a ciphertext": [to_text(good[:20]), to_text(b"\x02" + good[1:])],
        "does not open": [to_text(changed), to_text(ring.encrypt(b"x", HERE._replace(position=4)))],
        "corrupted": ["$as1$not base64!"],
    }
    for error, values in broken.items():
        for value in values:
            with pytest.raises(KeyringError, match=error):
                open_(value, HERE.position)
