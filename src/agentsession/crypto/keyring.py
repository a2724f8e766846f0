"""The keyring: key-encryption keys in a private file, wrapping users' data keys.

A keyring file (``agentsession keyring create``; mode 0600, checked like the API key
file: :mod:`agentsession.privatefiles`) holds the store id and the key-encryption keys
(KEKs, 256 bits each). Each user's content is sealed with the user's own data key
(AES-256-GCM, :mod:`.envelope`); data keys are kept wrapped by the active KEK in a
:class:`~.keystore.KeyStore`, by default ``<keyring>.datakeys`` next to the keyring,
never in the session database. Destroying a user's data keys (erasure) leaves every
copy of that user's content, in the database, its logs, backups and replicas,
unreadable (docs/security.md, "Encryption at rest").

Rotation: :meth:`Keyring.rotate` adds a KEK and re-wraps every data key with it; a
user's data key rotates lazily (:meth:`Keyring.rotate_data_key`: new writes use the
new key, reads still open values of the old ones).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError

from ..errors import KeyringError, StoreError
from ..jsonvalues import dumps
from ..privatefiles import check_directory, check_secret_file, locked_rewrite, open_private
from .envelope import KEY_END, KEY_ID_BYTES, Place, is_envelope, key_id_of, open_envelope, seal
from .keystore import FileKeyStore, KeyStore, WrappedKey
from .marker import marker_path, read_marker

__all__ = ["Keyring", "KeyringStatus"]

_FORMAT = "agentsession-keyring"
#: Seconds between checks of the pass marker (another process declares or ends a pass).
_MARKER_INTERVAL = 1.0


class _KeyringFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str
    version: int
    store_id: str
    active: str
    keks: dict[str, str]  # id (hex) -> key (hex)


@dataclass(frozen=True, slots=True)
class KeyringStatus:
    """What ``agentsession keyring status`` shows: no key material.

    Attributes:
        store_id: the store the keyring belongs to.
        active_kek: the id of the KEK new data keys are wrapped with.
        keks: how many KEKs the file holds (more than one: a rotation is unfinished).
        users: users holding data keys.
        data_keys: data keys in all; more than ``users``: old keys await a re-encryption.
        wrapped_by_old_kek: data keys not yet re-wrapped by the active KEK.
        sealing_pass: the kind of sealing pass declared and not complete (``encrypt``,
            ``reencrypt``), or None.
    """

    store_id: str
    active_kek: str
    keks: int
    users: int
    data_keys: int
    wrapped_by_old_kek: int
    sealing_pass: str | None = None


def default_key_store(path: Path) -> FileKeyStore:
    """The file key store of the keyring file ``path``: ``<path>.datakeys``."""
    return FileKeyStore(path.with_name(path.name + ".datakeys"))


class Keyring:
    """Seals and opens content with per-user data keys (see the module docstring).

    Build one with :meth:`create` or :meth:`open`; share it between threads.
    """

    def __init__(self, path: Path, file: _KeyringFile, key_store: KeyStore) -> None:
        self.path = path
        self._file = file
        self._stamp = _stamp(path)
        self._store = key_store
        self._lock = threading.Lock()
        self._keks = _keks(file)
        # (user, data key id) -> (its wrapped form, the unwrapped key)
        self._deks: dict[tuple[str, bytes], tuple[str, AESGCM]] = {}
        # user -> (the key store's tuple of their keys, data key id -> key): while the
        # key store answers with the very same tuple, nothing of the user's keys changed
        # (tuples and WrappedKey are immutable; an erasure or reload gives another one),
        # so a read finds its key in one lookup instead of a search and a comparison.
        self._opening: dict[str, tuple[tuple[WrappedKey, ...], dict[bytes, AESGCM]]] = {}
        # user -> (the key store's tuple of their keys, the newest's id, the key): the
        # same rule, for writes
        self._sealing: dict[str, tuple[tuple[WrappedKey, ...], bytes, AESGCM]] = {}
        self._marker_checked = float("-inf")
        self._encrypting = False
        key_store.bind(file.store_id)

    @property
    def store_id(self) -> str:
        """The id of the store this keyring belongs to (random, made at creation)."""
        return self._file.store_id

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, key_store: KeyStore | None = None) -> Keyring:
        """Create a keyring file (mode 0600) with a new store id and a new KEK.

        Args:
            path: the file to create; it must not exist.
            key_store: where data keys live; default ``<path>.datakeys``.

        Raises:
            KeyringError: the file exists (a keyring is never overwritten: its loss
                makes the store unreadable).
            StoreError: the directory could be written by another user.
        """
        where = Path(path)
        kek_id = secrets.token_hex(KEY_ID_BYTES)
        file = _KeyringFile(
            format=_FORMAT,
            version=1,
            store_id=secrets.token_hex(16),
            active=kek_id,
            keks={kek_id: AESGCM.generate_key(bit_length=256).hex()},
        )
        where.parent.mkdir(parents=True, exist_ok=True)
        check_directory(where.parent, (where,))
        try:
            fd = open_private(where, os.O_WRONLY | os.O_EXCL)
        except FileExistsError:
            raise KeyringError(f"{where} exists: a keyring is never overwritten") from None
        with os.fdopen(fd, "wb") as out:
            out.write(file.model_dump_json(indent=1).encode())
            out.flush()
            os.fsync(out.fileno())
        return cls(where, file, key_store or default_key_store(where))

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, key_store: KeyStore | None = None) -> Keyring:
        """Open the keyring file ``path``.

        Raises:
            KeyringError: no file there, not a keyring file, or its key store belongs
                to another store.
            StoreError: the file or its directory could have been written by another
                user (checked like the API key file).
        """
        where = Path(path)
        file = _read(where)
        return cls(where, file, key_store or default_key_store(where))

    # -- sealing -------------------------------------------------------------------
    def encrypt(self, data: bytes, place: Place) -> bytes:
        """Seal ``data`` for ``place`` with the newest data key of ``place.user_id``
        (made on the user's first write).

        Returns:
            The envelope (:mod:`.envelope`).

        Raises:
            KeyringError: the user's key cannot be unwrapped with this keyring.
        """
        user_id = place.user_id
        keys = self._store.get(user_id)
        sealing = self._sealing.get(user_id)
        if sealing is None or sealing[0] is not keys:
            keys = keys or self._new_data_key(user_id, if_none=True)
            key_id = bytes.fromhex(keys[-1].key_id)
            sealing = self._sealing[user_id] = (keys, key_id, self._dek(place, key_id, keys[-1]))
        return seal(sealing[2], sealing[1], data, self._aad(place))

    def decrypt(self, envelope: bytes, place: Place) -> bytes:
        """Open an envelope sealed for ``place``.

        Raises:
            KeyringError: not an envelope, its data key is gone (erased user, or a
                value of another store), or it does not verify (changed, or moved from
                another place).
        """
        user_id = place.user_id
        keys = self._store.get(user_id)
        known = self._opening.get(user_id)
        key = None
        if known is not None and known[0] is keys and is_envelope(envelope):
            key = known[1].get(envelope[1:KEY_END])
        if key is None:
            key = self._opening_key(envelope, place)
        return open_envelope(key, envelope, place.associated_data(self._file.store_id), place)

    def known_keys(self, user_id: str) -> Mapping[bytes, AESGCM]:
        """The data keys of ``user_id`` that opened values here, by id (the envelope's
        ``[1:KEY_END]``), as long as the key store holds exactly the keys it held then;
        else none (a key destroyed, added or re-wrapped since: :meth:`decrypt` finds
        them again). For a read of many values: it looks the keys up once, as the
        first value's :meth:`decrypt` would, then one lookup per value."""
        known = self._opening.get(user_id)
        if known is not None and known[0] is self._store.get(user_id):
            return known[1]
        return {}

    def _opening_key(self, envelope: bytes, place: Place) -> AESGCM:
        """The data key that opens ``envelope``, searched in the key store (and kept
        for :meth:`decrypt`'s lookup).

        Raises:
            KeyringError: see :meth:`decrypt`.
        """
        key_id = key_id_of(envelope, place)
        hexid = key_id.hex()
        user_id = place.user_id
        # A key not found may be one another process just made: looked up again, fresh.
        for fresh in (False, True):
            keys = self._store.get(user_id, fresh=fresh)
            for wrapped in keys:
                if wrapped.key_id == hexid:
                    key = self._dek(place, key_id, wrapped)
                    with self._lock:
                        known = self._opening.get(user_id)
                        if known is None or known[0] is not keys:
                            known = self._opening[user_id] = (keys, {})
                        known[1][key_id] = key
                    return key
        raise KeyringError(
            f"no data key of the user opens the value at {place.describe()}: their keys "
            "were destroyed (erasure), or the value was sealed for another user or store"
        )

    def accepts_plaintext(self) -> bool:
        """Whether an ``agentsession encrypt`` pass is declared for this store (its
        marker, :mod:`.marker`, is next to the keyring file): then reads let a value
        not sealed yet through. Checked on the file at most once a second."""
        now = time.monotonic()
        if now - self._marker_checked >= _MARKER_INTERVAL:
            marker = read_marker(marker_path(self.path))
            self._encrypting = marker is not None and marker.kind == "encrypt"
            self._marker_checked = now
        return self._encrypting

    def refresh_pass_marker(self) -> None:
        """Read the pass marker again at the next :meth:`accepts_plaintext` (a pass
        this process just declared or completed)."""
        self._marker_checked = float("-inf")

    def retire_data_keys(self, before: str) -> int:
        """Drop each user's data keys older than the newest one made before ``before``
        (ISO 8601 UTC): what a completed ``reencrypt`` pass started at ``before`` left
        unused. Returns how many users' keys changed."""

        def retired(user_id: str, keys: tuple[WrappedKey, ...]) -> tuple[WrappedKey, ...]:
            older = [k.created_at for k in keys if k.created_at <= before]
            if not older:
                return keys
            return tuple(k for k in keys if k.created_at >= max(older))

        return self._store.update(retired)

    def destroy_user(self, user_id: str) -> bool:
        """Destroy every data key of ``user_id`` (crypto-shredding): each copy of the
        user's content anywhere becomes unreadable. Returns whether there were any."""
        with self._lock:
            for cached in [k for k in self._deks if k[0] == user_id]:
                del self._deks[cached]
            self._opening.pop(user_id, None)
            self._sealing.pop(user_id, None)
        return self._store.destroy(user_id)

    # -- rotation ------------------------------------------------------------------
    def rotate_data_key(self, user_id: str) -> str:
        """Give ``user_id`` a new data key: new writes use it, values sealed with the
        older ones still open (until a re-encryption retires them).

        Returns:
            The new data key's id (hex).
        """
        return self._new_data_key(user_id, if_none=False)[-1].key_id

    def rotate_data_keys(self) -> int:
        """:meth:`rotate_data_key` for every user holding keys.

        Returns:
            How many users got a new data key.
        """
        users = self._store.users()
        for user_id in users:
            self.rotate_data_key(user_id)
        return len(users)

    def rotate(self) -> str:
        """Add a new KEK, make it active, re-wrap every data key with it, then drop
        the KEKs no data key needs. Safe to re-run after an interruption.

        Returns:
            The new active KEK's id.
        """
        kek_id = secrets.token_hex(KEY_ID_BYTES)
        with locked_rewrite(self.path) as write:
            file = _read(self.path)
            file.keks[kek_id] = AESGCM.generate_key(bit_length=256).hex()
            file.active = kek_id
            write(file.model_dump_json(indent=1).encode())
        self._reload()
        self._store.update(self._rewrapped)
        with locked_rewrite(self.path) as write:
            file = _read(self.path)
            used = {k.kek_id for u in self._store.users() for k in self._store.get(u)}
            file.keks = {i: k for i, k in file.keks.items() if i == file.active or i in used}
            write(file.model_dump_json(indent=1).encode())
        self._reload()
        return kek_id

    def status(self) -> KeyringStatus:
        """Counts of keys, for ``agentsession keyring status`` (no key material)."""
        self._reload()
        keys = [k for u in self._store.users() for k in self._store.get(u)]
        marker = read_marker(marker_path(self.path))
        return KeyringStatus(
            store_id=self.store_id,
            active_kek=self._file.active,
            keks=len(self._file.keks),
            users=len(self._store.users()),
            data_keys=len(keys),
            wrapped_by_old_kek=sum(k.kek_id != self._file.active for k in keys),
            sealing_pass=None if marker is None else marker.kind,
        )

    # -- internals -----------------------------------------------------------------
    def _aad(self, place: Place) -> bytes:
        return place.associated_data(self._file.store_id)

    def _wrap_aad(self, user_id: str, key_id: str) -> bytes:
        return dumps(["agentsession-datakey", self._file.store_id, user_id, key_id]).encode()

    def _new_data_key(self, user_id: str, *, if_none: bool) -> tuple[WrappedKey, ...]:
        key_id = secrets.token_hex(KEY_ID_BYTES)
        wrapped = self._wrap(user_id, key_id, AESGCM.generate_key(bit_length=256))
        return self._store.add(user_id, wrapped, if_none=if_none)

    def _wrap(self, user_id: str, key_id: str, dek: bytes) -> WrappedKey:
        kek_id = self._file.active
        envelope = seal(
            self._keks[kek_id], bytes.fromhex(kek_id), dek, self._wrap_aad(user_id, key_id)
        )
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        return WrappedKey(key_id=key_id, kek_id=kek_id, wrapped=envelope.hex(), created_at=now)

    def _unwrap(self, user_id: str, wrapped: WrappedKey) -> bytes:
        place = Place(user_id, "", "data key", wrapped.key_id)
        kek = self._keks.get(wrapped.kek_id)
        if kek is None:
            self._reload()  # another process may have rotated the KEK
            kek = self._keks.get(wrapped.kek_id)
        if kek is None:
            raise KeyringError(
                f"the data key of user {user_id!r} is wrapped by a KEK this keyring does "
                "not hold: use the keyring file of this store"
            )
        envelope = bytes.fromhex(wrapped.wrapped)
        return open_envelope(kek, envelope, self._wrap_aad(user_id, wrapped.key_id), place)

    def _rewrapped(self, user_id: str, keys: tuple[WrappedKey, ...]) -> tuple[WrappedKey, ...]:
        active = self._file.active
        return tuple(
            k
            if k.kek_id == active
            else WrappedKey(
                key_id=k.key_id,
                kek_id=active,
                wrapped=self._wrap(user_id, k.key_id, self._unwrap(user_id, k)).wrapped,
                created_at=k.created_at,
            )
            for k in keys
        )

    def _dek(self, place: Place, key_id: bytes, wrapped: WrappedKey) -> AESGCM:
        slot = (place.user_id, key_id)
        cached = self._deks.get(slot)
        if cached is not None and cached[0] == wrapped.wrapped:
            return cached[1]
        key = AESGCM(self._unwrap(place.user_id, wrapped))
        with self._lock:
            self._deks[slot] = (wrapped.wrapped, key)
        return key

    def _reload(self) -> None:
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return
        file = _read(self.path)
        if file.store_id != self._file.store_id:
            raise KeyringError(f"{self.path} was replaced by the keyring of another store")
        with self._lock:
            self._file, self._keks, self._stamp = file, _keks(file), stamp


def _keks(file: _KeyringFile) -> dict[str, AESGCM]:
    return {kid: AESGCM(bytes.fromhex(key)) for kid, key in file.keks.items()}


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _read(path: Path) -> _KeyringFile:
    """The keyring file at ``path``, after checking nobody else could have written it.

    Raises:
        KeyringError: absent, or not a keyring file; StoreError: see :meth:`Keyring.open`.
    """
    try:
        check_directory(path.parent, (path,))
        check_secret_file(path)
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KeyringError(
            f"no keyring at {path}: create one with `agentsession keyring create`, or "
            "point AGENTSESSION_KEYRING_FILE at this store's keyring"
        ) from None
    except OSError as exc:
        raise StoreError(f"cannot read the keyring {path}: {exc}") from exc
    try:
        file = _KeyringFile.model_validate_json(raw)
        ok = file.format == _FORMAT and file.version == 1 and file.active in file.keks
        ok = ok and all(len(bytes.fromhex(k)) == 32 for k in file.keks.values())
    except (PydanticError, ValueError):
        ok = False
    if not ok:
        raise KeyringError(f"{path} is not a keyring file of version 1")
    return file
