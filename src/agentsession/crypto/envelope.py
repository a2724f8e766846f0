"""The ciphertext envelope: AES-256-GCM with associated data binding a value to its place.

An envelope is ``b"\\x01" | key id (16 bytes) | nonce (12 bytes) | ciphertext and tag``:
the version byte, the id of the data key that sealed it, a random nonce (never reused:
96 random bits per value, far under GCM's 2**32 values per key), and the AES-GCM output.
Its text form, for JSON and text columns, is ``"$as1$"`` followed by the envelope in
standard base64.

The associated data is ``agentsession/1`` and the store id, user id, session id, kind
and position (:class:`Place`), each as its length and text (``len:text``, so no two
places encode alike): authenticated, not stored. A value copied to another
row, session, user or store fails its tag check, as does any changed byte.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
from collections.abc import Mapping
from typing import NamedTuple, TypeGuard

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import KeyringError

__all__ = [
    "KEY_END",
    "KEY_ID_BYTES",
    "TEXT_PREFIX",
    "Place",
    "aad_head",
    "from_text",
    "is_envelope",
    "is_sealed_text",
    "key_id_of",
    "open_envelope",
    "open_known",
    "seal",
    "to_text",
]

VERSION = 1
KEY_ID_BYTES = 16
NONCE_BYTES = 12
#: Where the key id ends (and the nonce starts) in an envelope.
KEY_END = 1 + KEY_ID_BYTES
_HEADER = KEY_END + NONCE_BYTES
_SHORTEST = _HEADER + 16  # the tag
#: The text form's prefix: a value starting with it is a sealed one.
TEXT_PREFIX = "$as1$"
_PREFIX_LENGTH = len(TEXT_PREFIX)


class Place(NamedTuple):
    """Where a value is stored: bound into its ciphertext as associated data.

    Attributes:
        user_id: the owner of the content (whose data key seals it).
        session_id: its session ("" for content outside sessions: shared memory).
        kind: what it is, e.g. ``"message"``, ``"memory"``, ``"run.input"``.
        position: where within the session: a seq, a version, an id, a key.
    """

    user_id: str
    session_id: str
    kind: str
    position: str | int = ""

    def associated_data(self, store_id: str) -> bytes:
        """The AEAD associated data of this place in store ``store_id`` (UTF-8; see the
        module docstring)."""
        return _aad_at(aad_head(store_id, self.user_id, self.session_id, self.kind), self.position)

    def describe(self) -> str:
        """The place for an error message: ids and kind, never content."""
        return f"user {self.user_id!r}, session {self.session_id!r}, {self.kind} {self.position}"


@functools.lru_cache(maxsize=4096)
def aad_head(store_id: str, u: str, s: str, k: str) -> bytes:
    """The associated data up to the position, of user ``u``'s session ``s`` and kind
    ``k`` in store ``store_id``: the same for every row of a kind in a session (a read
    of many rows encodes it once)."""
    return (
        f"agentsession/1|{len(store_id)}:{store_id}|{len(u)}:{u}|{len(s)}:{s}|{len(k)}:{k}|"
    ).encode()


def _aad_at(head: bytes, position: str | int) -> bytes:
    """The associated data of ``position`` under an :func:`aad_head`."""
    p = str(position)
    return head + f"{len(p)}:{p}|".encode()


def seal(key: AESGCM, key_id: bytes, data: bytes, associated: bytes) -> bytes:
    """Encrypt ``data`` under ``key`` (data key ``key_id``), bound to ``associated``.

    Returns:
        The envelope bytes (see the module docstring).
    """
    nonce = os.urandom(NONCE_BYTES)
    return bytes((VERSION,)) + key_id + nonce + key.encrypt(nonce, data, associated)


def is_envelope(data: bytes) -> bool:
    """Whether ``data`` has an envelope's shape in a version this code reads (long
    enough, the version byte): its key id (``data[1:KEY_END]``) may be read."""
    return len(data) >= _SHORTEST and data[0] == VERSION


def key_id_of(envelope: bytes, place: Place) -> bytes:
    """The data key id an envelope names.

    Raises:
        KeyringError: not an envelope of a version this code reads (too short, or an
            unknown version byte).
    """
    if not is_envelope(envelope):
        raise KeyringError(f"the stored value at {place.describe()} is not a ciphertext")
    return envelope[1:KEY_END]


def open_envelope(key: AESGCM, envelope: bytes, associated: bytes, place: Place) -> bytes:
    """Decrypt an envelope whose key :func:`key_id_of` named.

    Raises:
        KeyringError: the tag does not verify: a changed byte, a value moved from
            another place, or another store's key.
    """
    nonce = envelope[KEY_END:_HEADER]
    try:
        return key.decrypt(nonce, envelope[_HEADER:], associated)
    except InvalidTag:
        raise KeyringError(
            f"the ciphertext at {place.describe()} does not open: it was changed, moved "
            "from another place, or sealed by another store's keyring"
        ) from None


def open_known(
    keys: Mapping[bytes, AESGCM], text: str, head: bytes, position: str | int
) -> bytes | None:
    """The plaintext of the text form ``text`` if one of ``keys`` (data keys by id)
    opens it at ``position`` under the associated data ``head`` (:func:`aad_head`);
    None otherwise: not base64, not an envelope, no such key, or it does not verify
    (the caller's general path then decides, and names the error)."""
    try:
        envelope = binascii.a2b_base64(text[_PREFIX_LENGTH:], strict_mode=True)
        key = keys.get(envelope[1:KEY_END])
        if key is None or envelope[0] != VERSION:
            return None
        return key.decrypt(envelope[KEY_END:_HEADER], envelope[_HEADER:], _aad_at(head, position))
    except (ValueError, InvalidTag):  # not base64 (binascii.Error), too short for a nonce
        return None


def to_text(envelope: bytes) -> str:
    """The text form of an envelope (``"$as1$"`` + base64)."""
    return TEXT_PREFIX + base64.b64encode(envelope).decode("ascii")


def is_sealed_text(value: object) -> TypeGuard[str]:
    """Whether ``value`` is the text form of an envelope."""
    return isinstance(value, str) and value.startswith(TEXT_PREFIX)


def from_text(text: str, place: Place) -> bytes:
    """The envelope a text form holds.

    Raises:
        KeyringError: the text is not valid base64.
    """
    try:
        return binascii.a2b_base64(text[_PREFIX_LENGTH:], strict_mode=True)
    except (binascii.Error, ValueError):
        raise KeyringError(f"the stored value at {place.describe()} is corrupted") from None
